//! Pure render functions: state in, frame out.

mod detail;
mod groups;
mod help;
pub mod layout;
mod letters;
mod replay;
mod status;

use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::theme::S;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;

pub fn render(f: &mut Frame, s: &AppState, t: &Theme) {
    let area = f.area();
    let a = layout::layout(area.width, area.height);
    status::title(f, a.title, s, t);
    status::effect(f, a.effect, s, t);
    groups::render(f, a.groups, s, t);
    letters::render(f, a.letters, s, t);
    match &s.replay.run {
        // The progress pane takes the bottom of the detail pane while a replay is shown.
        Some(run) if a.detail.height >= replay::PANE_HEIGHT + 3 => {
            let h = replay::PANE_HEIGHT;
            let top = Rect::new(a.detail.x, a.detail.y, a.detail.width, a.detail.height - h);
            let bottom = Rect::new(
                a.detail.x,
                a.detail.y + a.detail.height - h,
                a.detail.width,
                h,
            );
            detail::render(f, top, s, t);
            replay::progress(f, bottom, run, t);
        }
        Some(run) => replay::progress(f, a.detail, run, t),
        None => detail::render(f, a.detail, s, t),
    }
    status::footer(f, a.footer, s, t);
    if let Some(d) = &s.replay.dry_run {
        replay::dry_run(
            f,
            Rect::new(0, a.groups.y, area.width, a.groups.height),
            d,
            t,
        );
    } else if s.prompt.show_help {
        help::render(f, area, s, t);
    } else if let Some((title, lines)) = &s.prompt.overlay {
        help::render_list(f, area, title, lines, t);
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
            t.get(S::UiBorderFocus)
        } else {
            t.get(S::UiBorder)
        })
        .title(title)
        .title_style(t.get(S::UiTitle))
        .style(Style::default())
}

/// Truncate to `w` display columns (chars; the sanitizer already made text single-width
/// safe enough for a terminal), with an ellipsis.
pub(crate) fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}
