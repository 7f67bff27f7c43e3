//! A key event → the action it asks for in the current state: a line being typed takes
//! the keys first, then the kill switch, then the screen on top (the replay dry-run,
//! help, an overlay), then normal mode's keymap.

use crate::action::{Action, ReplayKey, Typing, ViewKey};
use crate::state::{AppState, Input};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

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
    if state.keymap.named("kill").iter().any(|k| k.matches(e)) {
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
    state.keymap.action(e)
}
