//! A key event → the action it asks for in the current state: a line being typed takes
//! the keys first, then the kill switch, then the screen on top (the replay dry-run,
//! help, an overlay), then normal mode's — each screen's keys from the keymap in force.

use crate::action::{Act, Action, ReplayKey, Typing, ViewKey};
use crate::keymap::Mode;
use crate::state::AppState;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The action for a key in the current state (input mode captures typing).
pub(crate) fn action_for(state: &AppState, e: &KeyEvent) -> Option<Action> {
    if e.code == KeyCode::Char('c') && e.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(Action::from(ViewKey::Quit));
    }
    let keys = &state.keymap;
    if state.prompt.typing() {
        if let Some(a) = keys.mode_action(Mode::Typing, e) {
            return Some(a);
        }
        return match e.code {
            KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => {
                Some(Action::from(Typing::InputChar(c)))
            }
            _ => None,
        };
    }
    // The kill switch works over every screen but a line being typed.
    if keys.named("kill").iter().any(|k| k.matches(e)) {
        return Some(Action::from(ReplayKey::KillReplay));
    }
    if state.replay.dry_run().is_some() {
        return keys.mode_action(Mode::DryRun, e);
    }
    if state.prompt.help_shown() {
        // Any key help does not bind closes it.
        return keys
            .mode_action(Mode::Help, e)
            .or(Some(Action::from(Typing::Cancel)));
    }
    if state.prompt.overlay().is_some() {
        // `w`'s overlay: the transform key opens its suggested program.
        let transform = keys.named("transform").iter().any(|k| k.matches(e));
        if transform && state.prompt.suggested().is_some() {
            return Some(Action::from(Act::StartTransform));
        }
        return match e.code {
            KeyCode::Char('q') => Some(Action::from(ViewKey::Quit)),
            _ => Some(Action::from(Typing::Cancel)),
        };
    }
    state.keymap.action(e)
}
