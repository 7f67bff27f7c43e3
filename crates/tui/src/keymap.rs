//! Keys → actions: one entry per binding, from which the help overlay, the footer and
//! the palette hint are generated, so none of them can name a key that is not bound.
//! Each entry says what it changes (nothing, the ledger, the broker) and the permission
//! it needs; keys the user cannot use are shown disabled, not silently refused.

use crate::action::Action;
use crate::action::{Act, Nav, ReplayKey, Typing, ViewKey};
use crate::tab::Tab;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dlq_app::config::{KeyEntry, KeyList};
use dlq_core::access::{check, Permission, Role};
use std::collections::BTreeMap;

mod bindings;
mod modes;
pub(crate) use bindings::BINDINGS;
pub use modes::Mode;

/// A key as the table holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Code(KeyCode),
}

impl Key {
    pub fn matches(self, e: &KeyEvent) -> bool {
        let ctrl = e.modifiers.contains(KeyModifiers::CONTROL);
        match self {
            Key::Char(c) => e.code == KeyCode::Char(c) && !ctrl,
            Key::Ctrl(c) => e.code == KeyCode::Char(c) && ctrl,
            Key::Code(k) => e.code == k,
        }
    }

    /// How help and the footer write it.
    pub fn label(self) -> String {
        match self {
            Key::Char(' ') => "space".into(),
            Key::Char(c) => c.to_string(),
            Key::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            Key::Code(KeyCode::Up) => "↑".into(),
            Key::Code(KeyCode::Down) => "↓".into(),
            Key::Code(KeyCode::Left) => "←".into(),
            Key::Code(KeyCode::Right) => "→".into(),
            Key::Code(KeyCode::Enter) => "Enter".into(),
            Key::Code(KeyCode::Esc) => "Esc".into(),
            Key::Code(KeyCode::Tab) => "Tab".into(),
            Key::Code(KeyCode::BackTab) => "S-Tab".into(),
            Key::Code(KeyCode::PageUp) => "PgUp".into(),
            Key::Code(KeyCode::PageDown) => "PgDn".into(),
            Key::Code(KeyCode::Home) => "Home".into(),
            Key::Code(KeyCode::End) => "End".into(),
            Key::Code(other) => format!("{other:?}"),
        }
    }

    /// A key as the help overlay writes it (`x`, `space`, `Ctrl-D`, `Enter`, `PgDn`, `↑`
    /// or `Up`, `F5`): what `[keys]` in the config takes.
    pub fn parse(text: &str) -> Result<Key, String> {
        let named = |name: &str| -> Option<KeyCode> {
            Some(match name.to_ascii_lowercase().as_str() {
                "up" | "↑" => KeyCode::Up,
                "down" | "↓" => KeyCode::Down,
                "left" | "←" => KeyCode::Left,
                "right" | "→" => KeyCode::Right,
                "enter" | "return" => KeyCode::Enter,
                "esc" | "escape" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "s-tab" | "backtab" => KeyCode::BackTab,
                "pgup" | "pageup" => KeyCode::PageUp,
                "pgdn" | "pagedown" => KeyCode::PageDown,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "backspace" => KeyCode::Backspace,
                "delete" | "del" => KeyCode::Delete,
                f if f.len() > 1 && f.starts_with('f') => KeyCode::F(f[1..].parse().ok()?),
                _ => return None,
            })
        };
        if let Some(code) = named(text) {
            return Ok(Key::Code(code));
        }
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if !c.is_control() => return Ok(Key::Char(c)),
            _ if text == "space" => return Ok(Key::Char(' ')),
            _ => {}
        }
        let ctrl = ["Ctrl-", "ctrl-", "C-"]
            .iter()
            .find_map(|p| text.strip_prefix(p));
        if let Some(rest) = ctrl {
            let mut cs = rest.chars();
            if let (Some(c), None) = (cs.next(), cs.next()) {
                if c.is_ascii_alphabetic() {
                    return Ok(Key::Ctrl(c.to_ascii_lowercase()));
                }
            }
        }
        Err(format!(
                "`{}` is not a key (a character, space, Ctrl-X, Enter, Esc, Tab, S-Tab, Up, Down, Left, Right, PgUp, PgDn, Home, End, Backspace, Delete, F1…F12)",
                dlq_core::sanitize::line(text, 40)
        ))
    }

    /// A key event that this key matches (tests drive the table with it).
    pub fn event(self) -> KeyEvent {
        match self {
            Key::Char(c) => KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE),
            Key::Ctrl(c) => KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL),
            Key::Code(k) => KeyEvent::new(k, KeyModifiers::NONE),
        }
    }
}

/// What a binding changes outside the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing: navigation and views.
    View,
    /// Writes the ledger (a revision, an audit entry).
    Ledger,
    /// Writes the ledger, then acts on the broker (RabbitMQ ack).
    Broker,
}

/// One binding.
pub(crate) struct Binding {
    /// The action's name in `[keys]` (stable: configs name it).
    pub name: &'static str,
    /// The default keys (`[keys]` may replace them: see [`Keymap`]).
    pub keys: &'static [Key],
    pub help: &'static str,
    /// The short label in the footer, if it has a place there.
    pub footer: Option<&'static str>,
    pub effect: Effect,
    /// The permission it needs, if any (shown disabled without it).
    pub needs: Option<Permission>,
    pub action: fn() -> Action,
}

impl Binding {
    /// Why this user cannot use it here, if they cannot.
    pub(crate) fn disabled(&self, role: Role, read_only: bool) -> Option<String> {
        if read_only && self.effect != Effect::View {
            return Some("--read-only".into());
        }
        let p = self.needs?;
        check(role, p).err().map(|_| format!("needs {}", p.needs()))
    }
}

/// The keys of every mode: each binding's defaults, or what `[keys]` (normal mode) and
/// `[keys.MODE]` in the config give its action instead. Help, the footer, the dry-run
/// screen's hints and the key dispatch all read it, so they never disagree with what a
/// key does.
#[derive(Debug, Clone, PartialEq)]
pub struct Keymap {
    /// Normal mode, per binding (as `BINDINGS` orders them).
    keys: Vec<Vec<Key>>,
    /// Per mode (`Mode::index`), per binding of the mode.
    modes: Vec<Vec<Vec<Key>>>,
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap {
            keys: BINDINGS.iter().map(|b| b.keys.to_vec()).collect(),
            modes: Mode::ALL
                .iter()
                .map(|m| m.bindings().iter().map(|b| b.keys.to_vec()).collect())
                .collect(),
        }
    }
}

/// The keys an entry of `[keys]` names, parsed; at least one.
fn parsed(table: &str, action: &str, list: &KeyList) -> Result<Vec<Key>, String> {
    let keys = list
        .keys()
        .into_iter()
        .map(Key::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{table} {action}: {e}"))?;
    if keys.is_empty() {
        return Err(format!("{table} {action}: give at least one key"));
    }
    Ok(keys)
}

/// Within one screen, a key bound to two actions, or Ctrl-C (which always quits) bound
/// to anything: the first found, named.
fn clashes<'a>(
    table: &str,
    bound: impl Iterator<Item = (&'a str, &'a [Key])>,
) -> Result<(), String> {
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    for (name, keys) in bound {
        for k in keys {
            if *k == Key::Ctrl('c') && name != "quit" {
                return Err(format!(
                    "{table} {name}: Ctrl-C always quits and cannot be bound to another action"
                ));
            }
            if let Some(other) = owner.insert(k.label(), name) {
                if other != name {
                    return Err(format!(
                        "{table}: `{}` is bound to both `{other}` and `{name}`; give one of them another key",
                        k.label()
                    ));
                }
            }
        }
    }
    Ok(())
}

impl Keymap {
    /// The defaults with `user` over them: `[keys]` (and `[keys.normal]`) for normal
    /// mode, `[keys.dry-run]`, `[keys.help]`, `[keys.typing]` for theirs. An unknown mode
    /// or action, a key that does not parse, a key left bound to two actions of one
    /// screen, Ctrl-C given to anything but `quit`, a character as a typing key (it could
    /// no longer be typed), or a kill key another screen uses is an error that names it,
    /// said before the TUI starts.
    pub fn with(user: &BTreeMap<String, KeyEntry>) -> Result<Keymap, String> {
        let mut map = Keymap::default();
        for (name, entry) in user {
            match entry {
                KeyEntry::Keys(list) => map.set_normal(name, list)?,
                KeyEntry::Mode(table) if name == "normal" => {
                    for (action, list) in table {
                        map.set_normal(action, list)?;
                    }
                }
                KeyEntry::Mode(table) => {
                    let Some(mode) = Mode::ALL.iter().find(|m| m.name() == name.as_str()) else {
                        return Err(format!(
                            "[keys.{}]: no such mode; the modes are normal, {}",
                            dlq_core::sanitize::line(name, 40),
                            Mode::ALL.map(Mode::name).join(", ")
                        ));
                    };
                    for (action, list) in table {
                        map.set_mode(*mode, action, list)?;
                    }
                }
            }
        }
        map.check()?;
        Ok(map)
    }

    fn set_normal(&mut self, action: &str, list: &KeyList) -> Result<(), String> {
        let Some(i) = BINDINGS.iter().position(|b| b.name == action) else {
            return Err(format!(
                "[keys]: no action `{}`; the actions are {} (other screens: [keys.dry-run], [keys.help], [keys.typing])",
                dlq_core::sanitize::line(action, 40),
                BINDINGS
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        self.keys[i] = parsed("[keys]", action, list)?;
        Ok(())
    }

    fn set_mode(&mut self, mode: Mode, action: &str, list: &KeyList) -> Result<(), String> {
        let table = format!("[keys.{}]", mode.name());
        let bindings = mode.bindings();
        let Some(i) = bindings.iter().position(|b| b.name == action) else {
            return Err(format!(
                "{table}: no action `{}`; its actions are {}",
                dlq_core::sanitize::line(action, 40),
                bindings
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let keys = parsed(&table, action, list)?;
        if mode == Mode::Typing {
            if let Some(k) = keys.iter().find(|k| matches!(k, Key::Char(_))) {
                return Err(format!(
                    "{table} {action}: `{}` could no longer be typed; give it a named key (Enter, Esc, Tab, F1…) or Ctrl-X",
                    k.label()
                ));
            }
        }
        self.modes[mode.index()][i] = keys;
        Ok(())
    }

    /// What no single entry shows: clashes within each screen, and the kill switch,
    /// which listens over the dry-run and help screens too, on a key they use (it would
    /// stop a replay where the user meant to move or scroll).
    fn check(&self) -> Result<(), String> {
        clashes(
            "[keys]",
            BINDINGS
                .iter()
                .map(|b| b.name)
                .zip(self.keys.iter().map(Vec::as_slice)),
        )?;
        for mode in Mode::ALL {
            let keys = &self.modes[mode.index()];
            let names = mode.bindings().iter().map(|b| b.name);
            clashes(
                &format!("[keys.{}]", mode.name()),
                names.zip(keys.iter().map(Vec::as_slice)),
            )?;
        }
        for k in self.named("kill") {
            for mode in [Mode::DryRun, Mode::Help] {
                let used = self.modes[mode.index()].iter().flatten().any(|o| o == k);
                if used {
                    return Err(format!(
                        "[keys] kill: `{}` is used on the {} screen, where the kill switch also listens; give it a key of its own",
                        k.label(),
                        mode.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The action of a key on a mode's screen.
    pub(crate) fn mode_action(&self, mode: Mode, e: &KeyEvent) -> Option<Action> {
        self.modes[mode.index()]
            .iter()
            .position(|keys| keys.iter().any(|k| k.matches(e)))
            .and_then(|i| mode.bindings().get(i))
            .map(|b| (b.action)())
    }

    /// The key a screen's hint names for a mode's action: the first in force.
    pub(crate) fn mode_key(&self, mode: Mode, name: &str) -> String {
        mode.bindings()
            .iter()
            .position(|b| b.name == name)
            .and_then(|i| self.modes[mode.index()].get(i)?.first())
            .map(|k| k.label())
            .unwrap_or_default()
    }

    /// Every key of each of a mode's actions, with what it does (for help).
    pub(crate) fn mode_lines(&self, mode: Mode) -> Vec<(String, &'static str)> {
        mode.bindings()
            .iter()
            .zip(&self.modes[mode.index()])
            .map(|(b, keys)| {
                let keys: Vec<String> = keys.iter().map(|k| k.label()).collect();
                (keys.join(" "), b.help)
            })
            .collect()
    }

    /// A binding's keys.
    pub(crate) fn keys(&self, binding: usize) -> &[Key] {
        self.keys.get(binding).map_or(&[], Vec::as_slice)
    }

    /// The keys as help writes them.
    pub(crate) fn keys_label(&self, binding: usize) -> String {
        self.keys(binding)
            .iter()
            .map(|k| k.label())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The keys of the action `name` (the kill switch's, which works over every screen).
    pub(crate) fn named(&self, name: &str) -> &[Key] {
        BINDINGS
            .iter()
            .position(|b| b.name == name)
            .map_or(&[], |i| self.keys(i))
    }

    /// The normal-mode action of a key.
    pub(crate) fn action(&self, e: &KeyEvent) -> Option<Action> {
        self.keys
            .iter()
            .position(|keys| keys.iter().any(|k| k.matches(e)))
            .and_then(|i| BINDINGS.get(i))
            .map(|b| (b.action)())
    }
}

/// A command of the `:` palette: its name, its argument, and what it does.
pub struct PaletteCommand {
    pub name: &'static str,
    pub args: &'static str,
    pub help: &'static str,
}

/// The palette's commands; `update::run_palette` handles exactly these.
pub const PALETTE: &[PaletteCommand] = &[
    PaletteCommand {
        name: "group",
        args: "DIMS",
        help: "group by dimensions (reason,version,age,…)",
    },
    PaletteCommand {
        name: "filter",
        args: "EXPR",
        help: "filter expression",
    },
    PaletteCommand {
        name: "clear",
        args: "",
        help: "clear the filter",
    },
    PaletteCommand {
        name: "sort",
        args: "newest|oldest",
        help: "letter order",
    },
    PaletteCommand {
        name: "tab",
        args: "failure|headers|payload|diff|history",
        help: "detail tab",
    },
    PaletteCommand {
        name: "problems",
        args: "",
        help: "records that could not be read",
    },
    PaletteCommand {
        name: "notes",
        args: "",
        help: "what the session reported (reconciled decisions…)",
    },
    PaletteCommand {
        name: "resume",
        args: "[ID] [--resend-unconfirmed]",
        help: "resume an unfinished replay (dry-run first)",
    },
    PaletteCommand {
        name: "approve",
        args: "ID [--yes [--reject]]",
        help: "a teammate's plan awaiting approval (team ledger): see it; --yes approves",
    },
    PaletteCommand {
        name: "abandon",
        args: "[ID]",
        help: "close an unfinished replay without sending the rest",
    },
    PaletteCommand {
        name: "replays",
        args: "",
        help: "unfinished replays of this source",
    },
    PaletteCommand {
        name: "help",
        args: "",
        help: "the keys",
    },
    PaletteCommand {
        name: "quit",
        args: "",
        help: "quit",
    },
];

/// The palette's one-line hint.
pub(crate) fn palette_hint() -> String {
    PALETTE
        .iter()
        .map(|c| {
            if c.args.is_empty() {
                c.name.to_string()
            } else {
                format!("{} {}", c.name, c.args)
            }
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The footer: `(key, label, disabled?)` for every binding that has a footer label,
/// help first and quit last (a narrow footer drops from the middle).
pub(crate) fn footer_items(
    keymap: &Keymap,
    role: Role,
    read_only: bool,
) -> Vec<(String, &'static str, bool)> {
    // Help first, then the decisions (a narrow terminal keeps them), quit always last.
    let rank = |label: &str| match label {
        "help" => 0,
        "discard" | "replay" => 1,
        "quit" => 3,
        _ => 2,
    };
    let mut items: Vec<_> = BINDINGS
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            b.footer.map(|label| {
                let key = keymap
                    .keys(i)
                    .first()
                    .map(|k| k.label())
                    .unwrap_or_default();
                (key, label, b.disabled(role, read_only).is_some())
            })
        })
        .collect();
    items.sort_by_key(|i| rank(i.1));
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Intent;

    /// Every key a terminal can plausibly send, plain, shifted and with Ctrl.
    fn probes() -> Vec<KeyEvent> {
        let codes = (' '..='~').map(KeyCode::Char).chain([
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::Enter,
            KeyCode::Esc,
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::PageUp,
            KeyCode::PageDown,
            KeyCode::Home,
            KeyCode::End,
            KeyCode::Backspace,
        ]);
        codes
            .flat_map(|c| {
                [
                    KeyModifiers::NONE,
                    KeyModifiers::SHIFT,
                    KeyModifiers::CONTROL,
                ]
                .map(|m| KeyEvent::new(c, m))
            })
            .collect()
    }

    /// The binding a key event fires in normal mode (the first whose keys match).
    fn fired(map: &Keymap, e: &KeyEvent) -> Option<usize> {
        (0..BINDINGS.len()).find(|i| map.keys(*i).iter().any(|k| k.matches(e)))
    }

    #[test]
    fn no_binding_is_shadowed_by_an_earlier_one() {
        let map = Keymap::default();
        for (i, b) in BINDINGS.iter().enumerate() {
            for k in b.keys {
                let first = fired(&map, &k.event());
                assert_eq!(
                    first,
                    Some(i),
                    "{} of {:?} is taken by an earlier binding",
                    k.label(),
                    b.help
                );
            }
        }
        let probes = probes();
        assert!((0..BINDINGS.len()).all(|i| probes.iter().any(|e| fired(&map, e) == Some(i))));
    }

    /// Help, footer and palette are generated from the table: every key they name is
    /// bound to the binding they describe, and every bound key is in help.
    #[test]
    fn help_footer_and_palette_name_only_bound_keys() {
        let map = Keymap::default();
        let help: Vec<String> = (0..BINDINGS.len()).map(|i| map.keys_label(i)).collect();
        for b in BINDINGS {
            for k in b.keys {
                assert!(
                    help.iter().any(|h| h.split(' ').any(|x| x == k.label())),
                    "{} not in help",
                    k.label()
                );
            }
        }
        for (key, label, _) in footer_items(&Keymap::default(), Role::Operator, false) {
            let b = BINDINGS
                .iter()
                .find(|b| b.footer == Some(label))
                .expect("footer label from a binding");
            let k = b
                .keys
                .iter()
                .find(|k| k.label() == key)
                .expect("footer key is the binding's");
            let fired = fired(&map, &k.event()).map(|i| BINDINGS[i].help);
            assert_eq!(
                fired,
                Some(b.help),
                "footer `{key} {label}` fires another binding"
            );
        }
        let hint = palette_hint();
        for c in PALETTE {
            assert!(hint.contains(c.name));
        }
    }

    #[test]
    fn keys_a_user_cannot_use_are_shown_disabled() {
        let off = |role, ro| {
            footer_items(&Keymap::default(), role, ro)
                .into_iter()
                .filter(|x| x.2)
                .map(|x| x.1)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            off(Role::Viewer, false),
            ["discard", "replay", "edit", "unmask"]
        );
        assert_eq!(off(Role::Operator, false), ["unmask"]);
        assert!(off(Role::Privileged, false).is_empty());
        assert_eq!(
            off(Role::Privileged, true),
            ["discard", "replay", "edit", "unmask"]
        );
        let d = BINDINGS
            .iter()
            .find(|b| b.footer == Some("discard"))
            .expect("d");
        assert_eq!(
            d.disabled(Role::Viewer, false).as_deref(),
            Some("needs operator")
        );
    }

    fn user(pairs: &[(&str, &[&str])]) -> BTreeMap<String, KeyEntry> {
        pairs
            .iter()
            .map(|(a, ks)| {
                let keys = KeyList::Many(ks.iter().map(|k| k.to_string()).collect());
                (a.to_string(), KeyEntry::Keys(keys))
            })
            .collect()
    }

    /// `[keys.MODE]` tables.
    fn moded(mode: &str, pairs: &[(&str, &[&str])]) -> BTreeMap<String, KeyEntry> {
        let table = pairs
            .iter()
            .map(|(a, ks)| {
                let keys = KeyList::Many(ks.iter().map(|k| k.to_string()).collect());
                (a.to_string(), keys)
            })
            .collect();
        BTreeMap::from([(mode.to_string(), KeyEntry::Mode(table))])
    }

    /// `[keys]` rebinds an action: its new keys fire it, its old ones no longer do, and
    /// help and the footer say the new keys.
    #[test]
    fn a_rebound_action_fires_on_its_new_keys_and_help_says_so() {
        let map =
            Keymap::with(&user(&[("discard", &["X"]), ("down", &["n", "Down"])])).expect("valid");
        let press = |c| map.action(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        assert!(matches!(
            press('X'),
            Some(Action::Intent(Intent::Act(Act::StartDiscard)))
        ));
        assert!(press('d').is_none(), "d is free now");
        assert!(matches!(
            press('n'),
            Some(Action::Intent(Intent::Nav(Nav::Down)))
        ));
        let d = BINDINGS
            .iter()
            .position(|b| b.name == "discard")
            .expect("d");
        assert_eq!(map.keys_label(d), "X");
        let footer = footer_items(&map, Role::Operator, false);
        assert!(
            footer.iter().any(|(k, l, _)| k == "X" && *l == "discard"),
            "{footer:?}"
        );
    }

    #[test]
    fn a_mistake_in_the_keys_is_said_naming_it() {
        let err = |pairs: &[(&str, &[&str])]| Keymap::with(&user(pairs)).expect_err("refused");
        let e = err(&[("dicsard", &["x"])]);
        assert!(
            e.contains("no action `dicsard`") && e.contains("discard"),
            "{e}"
        );
        let e = err(&[("discard", &["r"])]);
        assert!(
            e.contains("`r` is bound to both `discard` and `replay`"),
            "{e}"
        );
        let e = err(&[("discard", &["Ctrl-C"])]);
        assert!(e.contains("Ctrl-C always quits"), "{e}");
        let e = err(&[("discard", &["Hyper-Q"])]);
        assert!(e.contains("`Hyper-Q` is not a key"), "{e}");
        let e = err(&[("discard", &[])]);
        assert!(e.contains("at least one key"), "{e}");
        // The kill switch listens on every screen: not on a key the others use.
        let e = err(&[("kill", &["j"]), ("down", &["Down", "n"])]);
        assert!(e.contains("kill: `j` is used on the dry-run screen"), "{e}");
        assert!(Keymap::with(&user(&[("kill", &["Ctrl-K"])])).is_ok());
        // Swapping two actions' keys is fine.
        assert!(Keymap::with(&user(&[("discard", &["r"]), ("replay", &["d"])])).is_ok());
    }

    /// docs/configuration.md lists exactly the actions `[keys]` takes.
    #[test]
    fn the_manual_lists_every_action() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/configuration.md"
        ))
        .expect("docs/configuration.md");
        let list = doc
            .split("The actions: ")
            .nth(1)
            .and_then(|rest| rest.split(".\n").next())
            .expect("the list of actions");
        let listed: Vec<&str> = list.split('`').skip(1).step_by(2).collect();
        let names: Vec<&str> = BINDINGS.iter().map(|b| b.name).collect();
        assert_eq!(listed, names);
        for mode in Mode::ALL {
            let list = doc
                .split(&format!("The {} actions: ", mode.name()))
                .nth(1)
                .and_then(|rest| rest.split(".\n").next())
                .unwrap_or_else(|| panic!("the list of {} actions", mode.name()));
            let listed: Vec<&str> = list.split('`').skip(1).step_by(2).collect();
            let names: Vec<&str> = mode.bindings().iter().map(|b| b.name).collect();
            assert_eq!(listed, names, "{}", mode.name());
        }
    }

    /// `[keys.dry-run]` rebinds that screen only: the new key fires there, the old one
    /// no longer does, the screen's hint names it, and normal mode is untouched.
    #[test]
    fn a_mode_table_rebinds_its_screen_only() {
        let mut user = moded("dry-run", &[("start", &["s"]), ("close", &["Esc", "x"])]);
        user.extend(moded("help", &[("down", &["n"])]));
        let map = Keymap::with(&user).expect("valid");
        let ev = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert!(matches!(
            map.mode_action(Mode::DryRun, &ev('s')),
            Some(Action::Intent(Intent::Replay(ReplayKey::ReplayStart)))
        ));
        let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
        assert!(
            map.mode_action(Mode::DryRun, &enter).is_none(),
            "Enter is free there"
        );
        assert!(
            map.mode_action(Mode::DryRun, &ev('q')).is_none(),
            "q no longer closes"
        );
        assert_eq!(map.mode_key(Mode::DryRun, "start"), "s");
        assert!(matches!(
            map.mode_action(Mode::Help, &ev('n')),
            Some(Action::Intent(Intent::View(ViewKey::HelpScroll(1))))
        ));
        // Normal mode's keys are its own: `s` still sorts, Enter still opens.
        assert!(matches!(
            map.action(&ev('s')),
            Some(Action::Intent(Intent::View(ViewKey::ToggleSort)))
        ));
        assert!(map.action(&enter).is_some());
        // `[keys.normal]` is `[keys]`.
        let normal = Keymap::with(&moded("normal", &[("discard", &["X"])])).expect("valid");
        assert!(matches!(
            normal.action(&ev('X')),
            Some(Action::Intent(Intent::Act(Act::StartDiscard)))
        ));
    }

    /// A mode table's mistakes are said naming the table: an unknown mode or action, a
    /// clash on that screen, a character as a typing key, a kill key the screen uses.
    #[test]
    fn a_mistake_in_a_mode_table_is_said_naming_it() {
        let err = |mode: &str, pairs: &[(&str, &[&str])]| {
            Keymap::with(&moded(mode, pairs)).expect_err("refused")
        };
        let e = err("dryrun", &[("start", &["s"])]);
        assert!(
            e.contains("[keys.dryrun]: no such mode") && e.contains("dry-run"),
            "{e}"
        );
        let e = err("dry-run", &[("begin", &["s"])]);
        assert!(
            e.contains("[keys.dry-run]: no action `begin`") && e.contains("start"),
            "{e}"
        );
        let e = err("dry-run", &[("start", &["j"])]);
        assert!(
            e.contains("[keys.dry-run]: `j` is bound to both `next-choice` and `start`"),
            "{e}"
        );
        let e = err("typing", &[("submit", &["x"])]);
        assert!(e.contains("`x` could no longer be typed"), "{e}");
        assert!(Keymap::with(&moded("typing", &[("submit", &["Ctrl-J"])])).is_ok());
        let e = err("dry-run", &[("start", &["Ctrl-C"])]);
        assert!(
            e.contains("[keys.dry-run] start: Ctrl-C always quits"),
            "{e}"
        );
        // The kill key must stay off every screen it listens over.
        let mut user = user(&[("kill", &["Ctrl-K"])]);
        user.extend(moded("dry-run", &[("close", &["Ctrl-K"])]));
        let e = Keymap::with(&user).expect_err("refused");
        assert!(
            e.contains("kill: `Ctrl-K` is used on the dry-run screen"),
            "{e}"
        );
    }

    #[test]
    fn keys_parse_as_help_writes_them() {
        for k in [
            Key::Char('x'),
            Key::Char(' '),
            Key::Ctrl('d'),
            Key::Code(KeyCode::Enter),
            Key::Code(KeyCode::PageDown),
            Key::Code(KeyCode::BackTab),
            Key::Code(KeyCode::Up),
        ] {
            assert_eq!(Key::parse(&k.label()), Ok(k), "{}", k.label());
        }
        assert_eq!(Key::parse("Down"), Ok(Key::Code(KeyCode::Down)));
        assert_eq!(Key::parse("F5"), Ok(Key::Code(KeyCode::F(5))));
    }

    #[test]
    fn working_actions_are_not_described_as_missing() {
        let fire =
            |c| Keymap::default().action(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        assert!(matches!(
            fire('e'),
            Some(Action::Intent(Intent::Act(Act::StartEdit)))
        ));
        assert!(matches!(
            fire('u'),
            Some(Action::Intent(Intent::Act(Act::StartUnmask)))
        ));
        assert!(matches!(
            fire('r'),
            Some(Action::Intent(Intent::Replay(ReplayKey::StartReplay)))
        ));
        assert!(matches!(
            fire('K'),
            Some(Action::Intent(Intent::Replay(ReplayKey::KillReplay)))
        ));
        assert!(
            !BINDINGS
                .iter()
                .any(|b| b.help.contains("not in this build")),
            "every key works"
        );
    }
}
