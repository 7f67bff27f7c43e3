//! The help overlay, generated from the keymap.

use crate::tui::keymap::BINDINGS;
use crate::tui::theme::Theme;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, t: &Theme) {
    let rows: Vec<Line> = BINDINGS
        .iter()
        .filter(|b| !b.keys.is_empty())
        .map(|b| {
            Line::from(vec![
                Span::styled(format!(" {:<12}", b.keys), t.get("ui.title")),
                Span::styled(b.help, t.get("ui.text")),
            ])
        })
        .collect();
    let w = area.width.min(78);
    let h = (rows.len() as u16 + 4).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, popup);
    let mut lines = rows;
    lines.push(Line::from(Span::styled(
        " any key closes this help",
        t.get("ui.dim"),
    )));
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" Keys ")
                .border_style(t.get("ui.border_focus")),
        ),
        popup,
    );
}

/// A titled list over the panes (`:problems`, `:notes`). Every line is untrusted (record
/// locations, broker messages): sanitized and cut to the popup.
pub fn render_list(f: &mut Frame, area: Rect, title: &str, lines: &[String], t: &Theme) {
    let w = area.width.min(100);
    let h = (lines.len() as u16 + 3).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, popup);
    let width = usize::from(w.saturating_sub(3));
    let mut rows: Vec<Line> = lines
        .iter()
        .take(usize::from(h.saturating_sub(3)))
        .map(|l| {
            Line::from(Span::styled(
                format!(" {}", crate::core::sanitize::line(l, width)),
                t.get("ui.text"),
            ))
        })
        .collect();
    rows.push(Line::from(Span::styled(
        " any key closes this",
        t.get("ui.dim"),
    )));
    f.render_widget(
        Paragraph::new(rows).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {} ", crate::core::sanitize::clean(title)))
                .border_style(t.get("ui.border_focus")),
        ),
        popup,
    );
}
