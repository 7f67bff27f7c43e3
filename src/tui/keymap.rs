//! Keys → actions, with descriptions: the help overlay is generated from this table.

use crate::tui::action::Action;
use crate::tui::state::{AppState, Input, Tab};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// One binding: the keys as shown in help, what it does, and the action.
pub struct Binding {
    pub keys: &'static str,
    pub help: &'static str,
    pub matches: fn(&KeyEvent) -> bool,
    pub action: fn() -> Action,
}

fn ch(e: &KeyEvent, c: char) -> bool {
    e.code == KeyCode::Char(c) && !e.modifiers.contains(KeyModifiers::CONTROL)
}

/// The bindings in normal mode, in help order.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "j ↓ / k ↑",
        help: "move down / up",
        matches: |e| ch(e, 'j') || e.code == KeyCode::Down,
        action: || Action::Down,
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| ch(e, 'k') || e.code == KeyCode::Up,
        action: || Action::Up,
    },
    Binding {
        keys: "PgDn PgUp",
        help: "page down / up",
        matches: |e| {
            e.code == KeyCode::PageDown
                || (e.code == KeyCode::Char('d') && e.modifiers.contains(KeyModifiers::CONTROL))
        },
        action: || Action::PageDown,
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| {
            e.code == KeyCode::PageUp
                || (e.code == KeyCode::Char('u') && e.modifiers.contains(KeyModifiers::CONTROL))
        },
        action: || Action::PageUp,
    },
    Binding {
        keys: "Home End",
        help: "first / last",
        matches: |e| e.code == KeyCode::Home,
        action: || Action::Top,
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| e.code == KeyCode::End || ch(e, 'G'),
        action: || Action::Bottom,
    },
    Binding {
        keys: "Enter l →",
        help: "expand group / open letter",
        matches: |e| e.code == KeyCode::Enter || ch(e, 'l') || e.code == KeyCode::Right,
        action: || Action::Open,
    },
    Binding {
        keys: "h ←",
        help: "collapse group / back",
        matches: |e| ch(e, 'h') || e.code == KeyCode::Left,
        action: || Action::Close,
    },
    Binding {
        keys: "Tab S-Tab",
        help: "next / previous pane",
        matches: |e| e.code == KeyCode::Tab,
        action: || Action::FocusNext,
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| e.code == KeyCode::BackTab,
        action: || Action::FocusPrev,
    },
    Binding {
        keys: "/",
        help: "fuzzy filter (id, key, reason, masked preview)",
        matches: |e| ch(e, '/'),
        action: || Action::StartFuzzy,
    },
    Binding {
        keys: "f",
        help: "filter expression (reason=… age>1h …)",
        matches: |e| ch(e, 'f'),
        action: || Action::StartExpr,
    },
    Binding {
        keys: "Esc",
        help: "cancel input / clear filter / close help",
        matches: |e| e.code == KeyCode::Esc,
        action: || Action::Cancel,
    },
    Binding {
        keys: ":",
        help: "command: group DIMS, filter EXPR, clear, sort oldest, tab payload, help, quit",
        matches: |e| ch(e, ':'),
        action: || Action::StartCommand,
    },
    Binding {
        keys: "g",
        help: "change grouping",
        matches: |e| ch(e, 'g'),
        action: || Action::CycleGrouping,
    },
    Binding {
        keys: "s",
        help: "sort letters newest / oldest first",
        matches: |e| ch(e, 's'),
        action: || Action::ToggleSort,
    },
    Binding {
        keys: "space",
        help: "mark letter (diff compares with the mark)",
        matches: |e| ch(e, ' '),
        action: || Action::ToggleMark,
    },
    Binding {
        keys: "1-5 ]",
        help: "detail tab: failure, headers, payload, diff, history / next",
        matches: |e| ch(e, ']'),
        action: || Action::NextTab,
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| ch(e, '1'),
        action: || Action::SetTab(Tab::Failure),
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| ch(e, '2'),
        action: || Action::SetTab(Tab::Headers),
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| ch(e, '3'),
        action: || Action::SetTab(Tab::Payload),
    },
    Binding {
        keys: "",
        help: "",
        matches: |e| ch(e, '4'),
        action: || Action::SetTab(Tab::Diff),
    },
    Binding {
        keys: "D",
        help: "diff selected letter against the marked one",
        matches: |e| ch(e, 'D'),
        action: || Action::Diff,
    },
    Binding {
        keys: "y",
        help: "copy the masked payload (OSC 52: works over SSH/tmux)",
        matches: |e| ch(e, 'y'),
        action: || Action::Copy,
    },
    Binding {
        keys: "d",
        help: "discard the marked letters (or the selected one), with a reason",
        matches: |e| ch(e, 'd'),
        action: || Action::StartDiscard,
    },
    Binding {
        keys: "u",
        help: "see the selected letter unmasked (privileged; reason; audited)",
        matches: |e| ch(e, 'u'),
        action: || Action::StartUnmask,
    },
    Binding {
        keys: "e",
        help: "edit a masked-payload revision in $EDITOR (reason; ledgered)",
        matches: |e| ch(e, 'e'),
        action: || Action::StartEdit,
    },
    Binding {
        keys: "r",
        help: "replay (not in this build yet)",
        matches: |e| ch(e, 'r'),
        action: || Action::NotYet("replay"),
    },
    Binding {
        keys: "?",
        help: "this help",
        matches: |e| ch(e, '?'),
        action: || Action::ToggleHelp,
    },
    Binding {
        keys: "q Ctrl-C",
        help: "quit (the broker is left as it was)",
        matches: |e| {
            ch(e, 'q')
                || (e.code == KeyCode::Char('c') && e.modifiers.contains(KeyModifiers::CONTROL))
        },
        action: || Action::Quit,
    },
];

/// The action for a key in the current state (input mode captures typing).
pub fn action_for(state: &AppState, e: &KeyEvent) -> Option<Action> {
    if e.code == KeyCode::Char('c') && e.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(Action::Quit);
    }
    if state.input != Input::None {
        return match e.code {
            KeyCode::Enter => Some(Action::InputSubmit),
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Backspace => Some(Action::InputBackspace),
            KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => {
                Some(Action::InputChar(c))
            }
            _ => None,
        };
    }
    if state.show_help || state.overlay.is_some() {
        return match e.code {
            KeyCode::Char('q') => Some(Action::Quit),
            _ => Some(Action::Cancel),
        };
    }
    BINDINGS
        .iter()
        .find(|b| (b.matches)(e))
        .map(|b| (b.action)())
}

/// The one-line hint shown at the bottom.
pub const FOOTER: &str =
    " ? help  / fuzzy  f filter  : command  g group  s sort  space mark  D diff  y copy  Tab pane  q quit";

#[cfg(test)]
mod tests {
    use super::*;

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
        let probes = probes();
        for (i, b) in BINDINGS.iter().enumerate() {
            let reachable = probes
                .iter()
                .any(|e| BINDINGS.iter().position(|x| (x.matches)(e)) == Some(i));
            assert!(
                reachable,
                "binding {i} ({:?} {:?}) can never fire",
                b.keys, b.help
            );
        }
    }

    #[test]
    fn working_actions_are_not_described_as_missing() {
        let fire = |c| {
            BINDINGS
                .iter()
                .find(|b| (b.matches)(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
                .map(|b| (b.action)())
        };
        assert!(matches!(fire('e'), Some(Action::StartEdit)));
        assert!(matches!(fire('u'), Some(Action::StartUnmask)));
        assert!(matches!(fire('r'), Some(Action::NotYet("replay"))));
        for b in BINDINGS
            .iter()
            .filter(|b| b.help.contains("not in this build"))
        {
            assert_eq!(b.keys, "r", "only replay is missing: {:?}", b.help);
        }
        assert!(BINDINGS
            .iter()
            .any(|b| b.keys == "e" && b.help.contains("$EDITOR")));
    }
}
