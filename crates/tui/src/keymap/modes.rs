//! The keys of the screens other than normal mode (data): the replay dry-run, the help
//! overlay, a line being typed. `[keys.MODE]` rebinds them as `[keys]` rebinds normal
//! mode.

use super::Key;
use crate::action::{Action, ReplayKey, Typing, ViewKey};
use crossterm::event::KeyCode;
use Key::{Char as C, Code, Ctrl};

/// A screen with keys of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The replay dry-run screen (its choices and its plan).
    DryRun,
    /// The help overlay (any key it does not bind closes it).
    Help,
    /// A line being typed: a filter, a reason, a count, a program (characters type).
    Typing,
}

/// One binding of a mode.
pub(crate) struct ModeBinding {
    /// The action's name in `[keys.MODE]`.
    pub name: &'static str,
    /// The default keys; the first is the one the screen's hints name.
    pub keys: &'static [Key],
    pub help: &'static str,
    pub action: fn() -> Action,
}

const fn m(
    name: &'static str,
    keys: &'static [Key],
    help: &'static str,
    action: fn() -> Action,
) -> ModeBinding {
    ModeBinding {
        name,
        keys,
        help,
        action,
    }
}

const DRY_RUN: &[ModeBinding] = &[
    m(
        "next-choice",
        &[Code(KeyCode::Down), C('j'), Code(KeyCode::Tab)],
        "next choice",
        || Action::from(ReplayKey::ReplayField(1)),
    ),
    m(
        "previous-choice",
        &[Code(KeyCode::Up), C('k'), Code(KeyCode::BackTab)],
        "previous choice",
        || Action::from(ReplayKey::ReplayField(-1)),
    ),
    m(
        "more",
        &[Code(KeyCode::Right), C('l'), C('+'), C(' ')],
        "change the choice up",
        || Action::from(ReplayKey::ReplayValue(1)),
    ),
    m(
        "less",
        &[Code(KeyCode::Left), C('h'), C('-')],
        "change the choice down",
        || Action::from(ReplayKey::ReplayValue(-1)),
    ),
    m(
        "start",
        &[Code(KeyCode::Enter)],
        "start the replay (a count to type above replay.confirm_above)",
        || Action::from(ReplayKey::ReplayStart),
    ),
    m(
        "plan-down",
        &[Code(KeyCode::PageDown)],
        "scroll the plan down",
        || Action::from(ReplayKey::ReplayScroll(1)),
    ),
    m(
        "plan-up",
        &[Code(KeyCode::PageUp)],
        "scroll the plan up",
        || Action::from(ReplayKey::ReplayScroll(-1)),
    ),
    m(
        "close",
        &[Code(KeyCode::Esc), C('q')],
        "close (nothing sent)",
        || Action::from(ReplayKey::ReplayClose),
    ),
];

const HELP: &[ModeBinding] = &[
    m(
        "down",
        &[C('j'), Code(KeyCode::Down)],
        "scroll down",
        || Action::from(ViewKey::HelpScroll(1)),
    ),
    m("up", &[C('k'), Code(KeyCode::Up)], "scroll up", || {
        Action::from(ViewKey::HelpScroll(-1))
    }),
    m(
        "page-down",
        &[Code(KeyCode::PageDown), C(' ')],
        "a page down",
        || Action::from(ViewKey::HelpScroll(10)),
    ),
    m("page-up", &[Code(KeyCode::PageUp)], "a page up", || {
        Action::from(ViewKey::HelpScroll(-10))
    }),
    m("quit", &[C('q')], "quit", || Action::from(ViewKey::Quit)),
];

const TYPING: &[ModeBinding] = &[
    m("submit", &[Code(KeyCode::Enter)], "submit the line", || {
        Action::from(Typing::InputSubmit)
    }),
    m(
        "cancel",
        &[Code(KeyCode::Esc)],
        "cancel (nothing recorded)",
        || Action::from(Typing::Cancel),
    ),
    m(
        "backspace",
        &[Code(KeyCode::Backspace)],
        "delete a character",
        || Action::from(Typing::InputBackspace),
    ),
    m("clear", &[Ctrl('u')], "clear the line", || {
        Action::from(Typing::InputClear)
    }),
    m("delete-word", &[Ctrl('w')], "delete a word", || {
        Action::from(Typing::InputDeleteWord)
    }),
];

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::DryRun, Mode::Help, Mode::Typing];

    /// The mode's name in `[keys.MODE]`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::DryRun => "dry-run",
            Mode::Help => "help",
            Mode::Typing => "typing",
        }
    }

    pub(crate) fn bindings(self) -> &'static [ModeBinding] {
        match self {
            Mode::DryRun => DRY_RUN,
            Mode::Help => HELP,
            Mode::Typing => TYPING,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
