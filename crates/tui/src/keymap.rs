//! Keys → actions: one entry per binding, from which the help overlay, the footer and
//! the palette hint are generated, so none of them can name a key that is not bound.
//! Each entry says what it changes (nothing, the ledger, the broker) and the permission
//! it needs; keys the user cannot use are shown disabled, not silently refused.

use crate::action::Action;
use crate::action::{Act, Nav, ReplayKey, Typing, ViewKey};
use crate::state::{AppState, Input, Tab};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dlq_core::access::{check, Permission, Role};

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
    pub fn matches(&self, e: &KeyEvent) -> bool {
        self.keys.iter().any(|k| k.matches(e))
    }

    /// The keys as help writes them.
    pub(crate) fn keys_label(&self) -> String {
        self.keys
            .iter()
            .map(|k| k.label())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Why this user cannot use it here, if they cannot.
    pub(crate) fn disabled(&self, role: Role, read_only: bool) -> Option<String> {
        if read_only && self.effect != Effect::View {
            return Some("--read-only".into());
        }
        let p = self.needs?;
        check(role, p).err().map(|_| format!("needs {}", p.needs()))
    }
}

const fn b(
    keys: &'static [Key],
    help: &'static str,
    footer: Option<&'static str>,
    action: fn() -> Action,
) -> Binding {
    Binding {
        keys,
        help,
        footer,
        effect: Effect::View,
        needs: None,
        action,
    }
}

use Key::{Char as C, Code, Ctrl};

/// The bindings in normal mode, in help order.
pub(crate) const BINDINGS: &[Binding] = &[
    b(&[C('j'), Code(KeyCode::Down)], "move down", None, || {
        Action::from(Nav::Down)
    }),
    b(&[C('k'), Code(KeyCode::Up)], "move up", None, || Action::from(Nav::Up)),
    b(
        &[Code(KeyCode::PageDown), Ctrl('d')],
        "page down",
        None,
        || Action::from(Nav::PageDown),
    ),
    b(&[Code(KeyCode::PageUp), Ctrl('u')], "page up", None, || {
        Action::from(Nav::PageUp)
    }),
    // `g`/`G` as vim, less and k9s have them; grouping moved to `b` ("group by").
    b(&[Code(KeyCode::Home), C('g')], "first", None, || Action::from(Nav::Top)),
    b(&[Code(KeyCode::End), C('G')], "last", None, || {
        Action::from(Nav::Bottom)
    }),
    b(
        &[Code(KeyCode::Enter), C('l'), Code(KeyCode::Right)],
        "expand group / open letter",
        None,
        || Action::from(Nav::Open),
    ),
    b(
        &[C('h'), Code(KeyCode::Left)],
        "collapse group / back",
        None,
        || Action::from(Nav::Close),
    ),
    b(&[Code(KeyCode::Tab)], "next pane", Some("pane"), || {
        Action::from(Nav::FocusNext)
    }),
    b(&[Code(KeyCode::BackTab)], "previous pane", None, || {
        Action::from(Nav::FocusPrev)
    }),
    b(
        &[C('/')],
        "fuzzy filter (id, key, reason, masked preview)",
        Some("fuzzy"),
        || Action::from(Typing::StartFuzzy),
    ),
    b(
        &[C('f')],
        "filter expression (reason=… age>1h …)",
        Some("filter"),
        || Action::from(Typing::StartExpr),
    ),
    b(
        &[Code(KeyCode::Esc)],
        "cancel input / clear filter / close help",
        None,
        || Action::from(Typing::Cancel),
    ),
    b(
        &[C(':')],
        "command palette (see below)",
        Some("command"),
        || Action::from(Typing::StartCommand),
    ),
    b(&[C('b')], "change grouping (group by)", Some("group"), || {
        Action::from(ViewKey::CycleGrouping)
    }),
    b(
        &[C('s')],
        "sort letters newest / oldest first",
        Some("sort"),
        || Action::from(ViewKey::ToggleSort),
    ),
    b(
        &[C(' ')],
        "mark letter (diff compares with the mark)",
        Some("mark"),
        || Action::from(Act::ToggleMark),
    ),
    b(
        &[C('A')],
        "mark every letter in view (again: unmark); Esc clears marks",
        None,
        || Action::from(Act::MarkAll),
    ),
    b(&[C(']')], "next detail tab", None, || Action::from(ViewKey::NextTab)),
    b(&[C('1')], "failure tab", None, || {
        Action::from(ViewKey::SetTab(Tab::Failure))
    }),
    b(&[C('2')], "headers tab", None, || {
        Action::from(ViewKey::SetTab(Tab::Headers))
    }),
    b(&[C('3')], "payload tab", None, || {
        Action::from(ViewKey::SetTab(Tab::Payload))
    }),
    b(&[C('4')], "diff tab", None, || Action::from(ViewKey::SetTab(Tab::Diff))),
    b(&[C('5')], "history tab (the ledger)", None, || {
        Action::from(ViewKey::SetTab(Tab::History))
    }),
    b(
        &[C('D')],
        "diff selected letter against the marked one",
        Some("diff"),
        || Action::from(Act::Diff),
    ),
    b(
        &[C('y')],
        "copy the masked payload (OSC 52: works over SSH/tmux)",
        Some("copy"),
        || Action::from(Act::Copy),
    ),
    Binding {
        keys: &[C('d')],
        help: "discard the marked letters in view, else the group or letter under the cursor",
        footer: Some("discard"),
        effect: Effect::Broker,
        needs: Some(Permission::Discard),
        action: || Action::from(Act::StartDiscard),
    },
    Binding {
        keys: &[C('e')],
        help: "edit a masked-payload revision in $EDITOR (reason; ledgered)",
        footer: Some("edit"),
        effect: Effect::Ledger,
        needs: Some(Permission::Edit),
        action: || Action::from(Act::StartEdit),
    },
    Binding {
        keys: &[C('T')],
        help: "transform: one jq program over the marked letters, else the group — revisions (dry-run first)",
        footer: None,
        effect: Effect::Ledger,
        needs: Some(Permission::Edit),
        action: || Action::from(Act::StartTransform),
    },
    Binding {
        keys: &[C('u')],
        help: "see the selected letter unmasked (reason; audited)",
        footer: Some("unmask"),
        effect: Effect::Ledger,
        needs: Some(Permission::Unmask),
        action: || Action::from(Act::StartUnmask),
    },
    Binding {
        keys: &[C('r')],
        help: "replay the marked letters (or the selected group): dry-run first, then canary",
        footer: Some("replay"),
        effect: Effect::Broker,
        needs: Some(Permission::Replay),
        action: || Action::from(ReplayKey::StartReplay),
    },
    b(
        &[C('R')],
        "browse again on a new connection (after the broker closed the browse, or a failed open); what this browse holds goes back to the queue first",
        None,
        || Action::from(Act::Rebrowse),
    ),
    b(
        &[C('x')],
        "close the progress pane of an ended replay (:replays reopens it)",
        None,
        || Action::from(ReplayKey::HidePane),
    ),
    Binding {
        keys: &[C('p')],
        help: "pause the running replay (nothing sent; confirms still collected) · p again resumes",
        footer: None,
        effect: Effect::View,
        needs: None,
        action: || Action::from(ReplayKey::TogglePause),
    },
    Binding {
        keys: &[C('K')],
        help: "kill switch: stop the running replay (no publish starts after it)",
        footer: None,
        effect: Effect::View,
        needs: None,
        action: || Action::from(ReplayKey::KillReplay),
    },
    b(
        &[C('z')],
        "zoom: the focused pane fills the screen (z again restores)",
        None,
        || Action::from(ViewKey::Zoom),
    ),
    b(
        &[Ctrl('z')],
        "not job control: the TUI stays (p pauses a replay, q quits)",
        None,
        || Action::from(ViewKey::Suspend),
    ),
    b(&[C('?')], "this help", Some("help"), || Action::from(ViewKey::ToggleHelp)),
    b(
        &[C('q'), Ctrl('c')],
        "quit (the broker is left as it was)",
        Some("quit"),
        || Action::from(ViewKey::Quit),
    ),
];

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
pub(crate) fn footer_items(role: Role, read_only: bool) -> Vec<(String, &'static str, bool)> {
    // Help first, then the decisions (a narrow terminal keeps them), quit always last.
    let rank = |label: &str| match label {
        "help" => 0,
        "discard" | "replay" => 1,
        "quit" => 3,
        _ => 2,
    };
    let mut items: Vec<_> = BINDINGS
        .iter()
        .filter_map(|b| {
            b.footer.map(|label| {
                let key = b.keys.first().map(|k| k.label()).unwrap_or_default();
                (key, label, b.disabled(role, read_only).is_some())
            })
        })
        .collect();
    items.sort_by_key(|i| rank(i.1));
    items
}

/// The action for a key in the current state (input mode captures typing).
pub(crate) fn action_for(state: &AppState, e: &KeyEvent) -> Option<Action> {
    if e.code == KeyCode::Char('c') && e.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(Action::from(ViewKey::Quit));
    }
    if state.prompt.input != Input::None {
        return match e.code {
            KeyCode::Enter => Some(Action::from(Typing::InputSubmit)),
            KeyCode::Esc => Some(Action::from(Typing::Cancel)),
            KeyCode::Backspace => Some(Action::from(Typing::InputBackspace)),
            KeyCode::Char('u') if e.modifiers.contains(KeyModifiers::CONTROL) => {
                Some(Action::from(Typing::InputClear))
            }
            KeyCode::Char('w') if e.modifiers.contains(KeyModifiers::CONTROL) => {
                Some(Action::from(Typing::InputDeleteWord))
            }
            KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => {
                Some(Action::from(Typing::InputChar(c)))
            }
            _ => None,
        };
    }
    // The kill switch works over every screen but a line being typed.
    if e.code == KeyCode::Char('K') && !e.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(Action::from(ReplayKey::KillReplay));
    }
    if state.replay.dry_run.is_some() {
        return match e.code {
            KeyCode::Char('j') | KeyCode::Down | KeyCode::Tab => {
                Some(Action::from(ReplayKey::ReplayField(1)))
            }
            KeyCode::Char('k') | KeyCode::Up | KeyCode::BackTab => {
                Some(Action::from(ReplayKey::ReplayField(-1)))
            }
            KeyCode::Char('l') | KeyCode::Right | KeyCode::Char('+') | KeyCode::Char(' ') => {
                Some(Action::from(ReplayKey::ReplayValue(1)))
            }
            KeyCode::Char('h') | KeyCode::Left | KeyCode::Char('-') => {
                Some(Action::from(ReplayKey::ReplayValue(-1)))
            }
            KeyCode::Enter => Some(Action::from(ReplayKey::ReplayStart)),
            KeyCode::PageDown => Some(Action::from(ReplayKey::ReplayScroll(1))),
            KeyCode::PageUp => Some(Action::from(ReplayKey::ReplayScroll(-1))),
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::from(ReplayKey::ReplayClose)),
            _ => None,
        };
    }
    if state.prompt.show_help {
        return match e.code {
            KeyCode::Char('j') | KeyCode::Down => Some(Action::from(ViewKey::HelpScroll(1))),
            KeyCode::Char('k') | KeyCode::Up => Some(Action::from(ViewKey::HelpScroll(-1))),
            KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::from(ViewKey::HelpScroll(10))),
            KeyCode::PageUp => Some(Action::from(ViewKey::HelpScroll(-10))),
            KeyCode::Char('q') => Some(Action::from(ViewKey::Quit)),
            _ => Some(Action::from(Typing::Cancel)),
        };
    }
    if state.prompt.overlay.is_some() {
        return match e.code {
            KeyCode::Char('q') => Some(Action::from(ViewKey::Quit)),
            _ => Some(Action::from(Typing::Cancel)),
        };
    }
    BINDINGS.iter().find(|b| b.matches(e)).map(|b| (b.action)())
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

    #[test]
    fn no_binding_is_shadowed_by_an_earlier_one() {
        for (i, b) in BINDINGS.iter().enumerate() {
            for k in b.keys {
                let first = BINDINGS.iter().position(|x| x.matches(&k.event()));
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
        assert!(BINDINGS.iter().all(|b| probes.iter().any(|e| b.matches(e))));
    }

    /// Help, footer and palette are generated from the table: every key they name is
    /// bound to the binding they describe, and every bound key is in help.
    #[test]
    fn help_footer_and_palette_name_only_bound_keys() {
        let help: Vec<String> = BINDINGS.iter().map(|b| b.keys_label()).collect();
        for b in BINDINGS {
            for k in b.keys {
                assert!(
                    help.iter().any(|h| h.split(' ').any(|x| x == k.label())),
                    "{} not in help",
                    k.label()
                );
            }
        }
        for (key, label, _) in footer_items(Role::Operator, false) {
            let b = BINDINGS
                .iter()
                .find(|b| b.footer == Some(label))
                .expect("footer label from a binding");
            let k = b
                .keys
                .iter()
                .find(|k| k.label() == key)
                .expect("footer key is the binding's");
            let fired = BINDINGS
                .iter()
                .find(|x| x.matches(&k.event()))
                .map(|x| x.help);
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
            footer_items(role, ro)
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

    #[test]
    fn working_actions_are_not_described_as_missing() {
        let fire = |c| {
            BINDINGS
                .iter()
                .find(|b| b.matches(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
                .map(|b| (b.action)())
        };
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
