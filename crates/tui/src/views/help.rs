//! The help overlay, generated from the keymap.

use crate::keymap::{palette_hint, Effect, Mode, BINDINGS};
use crate::state::AppState;
use crate::theme::StyleName;
use crate::theme::Theme;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let rows = rows(s, t);
    // Two columns when the terminal is wide enough for every line whole; else one
    // column, each line wrapped under itself, scrolled with j/k.
    if area.width >= 160 && rows.len() + 3 > usize::from(area.height) {
        two_columns(f, area, t, rows);
    } else {
        one_column(f, area, s, t, rows);
    }
}

/// A line per binding (its keys in force, what it does, what it writes or why it is
/// off), then the palette.
fn rows(s: &AppState, t: &Theme) -> Vec<Line<'static>> {
    let mut rows: Vec<Line<'static>> = BINDINGS
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut spans = vec![Span::styled(
                format!(" {:<12}", s.keymap.keys_label(i)),
                t.get(StyleName::UiTitle),
            )];
            let effect = match b.effect {
                Effect::View => "",
                Effect::Ledger => "  [ledger]",
                Effect::Broker => "  [ledger, then broker]",
            };
            match b.disabled(s.role, s.read_only) {
                // Said first, so a narrow column still shows it.
                Some(why) => {
                    spans.push(Span::styled(
                        format!("(off: {why}) "),
                        t.get(StyleName::UiWarn),
                    ));
                    spans.push(Span::styled(b.help, t.get(StyleName::UiDim)));
                }
                None => {
                    spans.push(Span::styled(b.help, t.get(StyleName::UiText)));
                    spans.push(Span::styled(effect, t.get(StyleName::UiWarn)));
                }
            }
            Line::from(spans)
        })
        .collect();
    rows.push(Line::from(vec![
        Span::styled(
            " :".to_string() + &" ".repeat(15),
            t.get(StyleName::UiTitle),
        ),
        Span::styled(palette_hint(), t.get(StyleName::UiText)),
    ]));
    // The other screens' keys, as `[keys.MODE]` leaves them.
    for (mode, title) in [
        (Mode::DryRun, "On the replay dry-run screen"),
        (Mode::Typing, "While typing a line (characters type)"),
    ] {
        rows.push(Line::from(Span::styled(
            format!(" {title}"),
            t.get(StyleName::UiHeader),
        )));
        for (keys, help) in s.keymap.mode_lines(mode) {
            rows.push(Line::from(vec![
                Span::styled(format!(" {keys:<12}"), t.get(StyleName::UiTitle)),
                Span::styled(help, t.get(StyleName::UiText)),
            ]));
        }
    }
    rows
}

/// The overlay's title: how to scroll it, with the keys in force (`[keys.help]`).
fn title(s: &AppState) -> String {
    let key = |name: &str| s.keymap.mode_key(Mode::Help, name);
    format!(
        " Keys — {}/{} {}/{} scroll · any other key closes ",
        key("down"),
        key("up"),
        key("page-down"),
        key("page-up")
    )
}

/// One column, each line wrapped under itself, scrolled with j/k (stopping at the last
/// screenful: the wrapped height, counted per line).
fn one_column(f: &mut Frame, area: Rect, s: &AppState, t: &Theme, rows: Vec<Line<'static>>) {
    let w = area.width.min(100);
    let popup = Rect::new(area.x + (area.width - w) / 2, area.y, w, area.height);
    f.render_widget(Clear, popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title(s))
        .border_style(t.get(StyleName::UiBorderFocus));
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let wrapped: usize = rows
        .iter()
        .map(|l| l.width().max(1).div_ceil(inner_w))
        .sum();
    let room = usize::from(area.height.saturating_sub(2));
    let most = u16::try_from(wrapped.saturating_sub(room)).unwrap_or(u16::MAX);
    f.render_widget(
        Paragraph::new(rows)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((s.prompt.help_scroll().min(most), 0))
            .block(block),
        popup,
    );
}

/// Two columns, centred, every line whole.
fn two_columns(f: &mut Frame, area: Rect, t: &Theme, mut rows: Vec<Line<'static>>) {
    let per_col = rows.len().div_ceil(2);
    let w = area.width.min(180);
    let h = (per_col as u16 + 3).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" Keys — any key closes this help ")
        .border_style(t.get(StyleName::UiBorderFocus));
    let inner = block.inner(popup);
    f.render_widget(block, popup);
    let right: Vec<Line> = rows.split_off(per_col);
    let half = inner.width / 2;
    f.render_widget(
        Paragraph::new(rows),
        Rect::new(inner.x, inner.y, half, inner.height),
    );
    f.render_widget(
        Paragraph::new(right),
        Rect::new(inner.x + half, inner.y, inner.width - half, inner.height),
    );
}

/// A titled list over the panes (`:problems`, `:notes`). Every line is untrusted (record
/// locations, broker messages): sanitized and cut to the popup.
/// `footer` says how it closes (any key, or the prompt below it).
/// A line cut into rows of at most `width` characters, at a space where there is one;
/// continuation rows are indented like the line, two more.
fn wrap(line: &str, width: usize) -> Vec<String> {
    let clean = dlq_core::sanitize::line(line, 4_000);
    let indent = clean.chars().take_while(|c| *c == ' ').count() + 2;
    let mut out = Vec::new();
    let mut rest: &str = &clean;
    let mut first = true;
    while !rest.is_empty() {
        let lead = if first { 0 } else { indent.min(width / 2) };
        let room = width.saturating_sub(lead).max(8);
        if rest.chars().count() <= room {
            out.push(format!("{}{rest}", " ".repeat(lead)));
            break;
        }
        let cut = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
        let at = match rest[..cut].rfind(' ') {
            Some(sp) if sp > cut / 3 => sp,
            _ => cut,
        };
        out.push(format!("{}{}", " ".repeat(lead), &rest[..at]));
        rest = rest[at..].trim_start();
        first = false;
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

pub(crate) fn render_list(
    f: &mut Frame,
    area: Rect,
    title: &str,
    lines: &[String],
    footer: &str,
    t: &Theme,
) {
    let w = area.width.min(100);
    // Long lines (a difference, a program) wrap: at 80 columns nothing is cut off.
    let lines: Vec<String> = lines
        .iter()
        .flat_map(|l| wrap(l, usize::from(w.saturating_sub(3))))
        .collect();
    let h = (lines.len().min(usize::from(u16::MAX)) as u16)
        .saturating_add(3)
        .min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, popup);
    let width = usize::from(w.saturating_sub(3));
    let room = usize::from(h.saturating_sub(3));
    // Lines that do not fit are counted, never silently dropped.
    let shown = if lines.len() > room {
        room.saturating_sub(1)
    } else {
        room
    };
    let mut rows: Vec<Line> = lines
        .iter()
        .take(shown)
        .map(|l| {
            Line::from(Span::styled(
                format!(" {}", dlq_core::sanitize::line(l, width)),
                t.get(StyleName::UiText),
            ))
        })
        .collect();
    if lines.len() > shown {
        rows.push(Line::from(Span::styled(
            format!(
                " … {} more lines (a taller terminal shows them)",
                lines.len() - shown
            ),
            t.get(StyleName::UiDim),
        )));
    }
    rows.push(Line::from(Span::styled(
        format!(" {footer}"),
        t.get(StyleName::UiDim),
    )));
    f.render_widget(
        Paragraph::new(rows).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {} ", dlq_core::sanitize::clean(title)))
                .border_style(t.get(StyleName::UiBorderFocus)),
        ),
        popup,
    );
}
