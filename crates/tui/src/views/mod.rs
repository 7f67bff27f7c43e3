//! Pure render functions: state in, frame out.

mod detail;
mod groups;
mod help;
pub mod layout;
mod letters;
mod replay;
mod status;

use crate::state::AppState;
use crate::theme::StyleName;
use crate::theme::Theme;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;

pub fn render(f: &mut Frame, s: &AppState, t: &Theme) {
    let area = f.area();
    let a = layout::layout_for(s, area.width, area.height);
    status::title(f, a.title, s, t);
    status::effect(f, a.effect, s, t);
    groups::render(f, a.groups, s, t);
    letters::render(f, a.letters, s, t);
    detail::render(f, a.detail, s, t);
    match s.replay.run() {
        Some(run) if a.progress.height > 0 => replay::progress(f, a.progress, run, t),
        // Too short a terminal for the pane: the second line says where the replay stands.
        Some(run) => replay::progress_line(f, a.effect, run, t),
        None => {}
    }
    status::footer(f, a.footer, s, t);
    if let Some(d) = s.replay.dry_run() {
        replay::dry_run(
            f,
            Rect::new(
                0,
                a.groups.y,
                area.width,
                a.groups.height + a.progress.height,
            ),
            d,
            &s.keymap,
            t,
        );
    } else if s.prompt.help_shown() {
        help::render(f, area, s, t);
    } else if let Some((title, lines)) = s.prompt.overlay() {
        let transform = s.keymap.named("transform").first().map(|k| k.label());
        let footer = match (s.prompt.typing(), s.prompt.suggested(), transform) {
            (true, ..) => "answer in the line below".to_string(),
            (false, Some(_), Some(k)) => {
                format!("{k}: edit and dry-run the suggested fix · any other key closes")
            }
            _ => "any key closes this".to_string(),
        };
        help::render_list(f, area, title, lines, &footer, t);
    }
}

/// A bordered pane block, highlighted when focused.
pub(crate) fn pane<'a>(title: ratatui::text::Line<'a>, focused: bool, t: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(if focused {
            t.get(StyleName::UiBorderFocus)
        } else {
            t.get(StyleName::UiBorder)
        })
        .title(title)
        .title_style(t.get(StyleName::UiTitle))
        .style(Style::default())
}

/// Truncate to `w` display columns (chars; the sanitizer already made text single-width
/// safe enough for a terminal), with an ellipsis.
pub(crate) use dlq_core::sanitize::fit;
