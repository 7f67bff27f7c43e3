//! The TUI on `TestBackend`: a state with nothing browsed yet, keys fed through the
//! keymap, and the screen as text (trailing blanks cut), as a person would see it.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use dlq_core::catalog::Catalog;
use dlq_core::masking::Masker;
use dlq_core::ports::SourceInfo;
use dlq_tui::action::Command;
use dlq_tui::state::AppState;
use dlq_tui::theme::Theme;
use dlq_tui::update::update;
use dlq_tui::{action_for_event, views};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// A TUI state on a source labelled `label`, nothing browsed yet, its clock at `now_ms`
/// and a payload cache of `cache` bytes.
pub fn empty_state(label: &str, masker: Masker, now_ms: i64, cache: usize) -> AppState {
    let info = SourceInfo {
        label: label.into(),
        browse_effect: String::new(),
    };
    AppState::new(info, Catalog::new(masker, Vec::new()), now_ms, cache)
}

pub fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

/// Feed keys through the keymap: "Enter", "Tab", "BackTab", "Esc", "Up", "Down", "Left",
/// "Right", "PageUp", "PageDown", "Backspace", "Ctrl-z", one
/// character, or text typed character by character after a leading ':'. Returns what
/// the updates asked the worker or the terminal to do.
pub fn press(s: &mut AppState, keys: &[&str], size: (u16, u16)) -> Vec<Command> {
    let mut cmds = Vec::new();
    for k in keys {
        let events: Vec<Event> = match *k {
            "Enter" => vec![key(KeyCode::Enter)],
            "Tab" => vec![key(KeyCode::Tab)],
            "BackTab" => vec![key(KeyCode::BackTab)],
            "Esc" => vec![key(KeyCode::Esc)],
            "Down" => vec![key(KeyCode::Down)],
            "PageDown" => vec![key(KeyCode::PageDown)],
            "PageUp" => vec![key(KeyCode::PageUp)],
            "Up" => vec![key(KeyCode::Up)],
            "Left" => vec![key(KeyCode::Left)],
            "Right" => vec![key(KeyCode::Right)],
            "Backspace" => vec![key(KeyCode::Backspace)],
            "Ctrl-z" => vec![Event::Key(KeyEvent::new(
                KeyCode::Char('z'),
                KeyModifiers::CONTROL,
            ))],
            text if text.starts_with(':') => text
                .chars()
                .skip(1)
                .map(|c| key(KeyCode::Char(c)))
                .collect(),
            // One character; a name this helper does not know is a mistake in the test
            // (it once pressed `P` for "PgDn"), not a key.
            one => {
                let mut cs = one.chars();
                match (cs.next(), cs.next()) {
                    (Some(c), None) => vec![key(KeyCode::Char(c))],
                    _ => panic!("press: no key named {one:?}"),
                }
            }
        };
        for e in events {
            if let Some(a) = action_for_event(s, &e) {
                cmds.extend(update(s, a, size));
            }
        }
    }
    cmds
}

/// The screen as text in the `mono` theme, one line per row, trailing blanks cut.
pub fn screen(s: &AppState, size: (u16, u16)) -> String {
    let theme = Theme::load(Some("mono")).expect("theme");
    let mut t = Terminal::new(TestBackend::new(size.0, size.1)).expect("terminal");
    t.draw(|f| views::render(f, s, &theme)).expect("draw");
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
