//! The letters of the selected group: a virtualised list (only visible rows are built),
//! masked previews, marks.

use super::{fit, pane};
use crate::paging::list_offset;
use crate::state::{AppState, Pane};
use crate::theme::StyleName;
use crate::theme::Theme;
use dlq_core::sanitize;
use dlq_core::store::NO_TIME;
use dlq_core::timefmt::format_age_ms;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let focused = s.focus == Pane::Letters;
    let block = pane(title(s, area, t), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let w = usize::from(inner.width);
    let h = usize::from(inner.height).saturating_sub(1);
    let store = &s.browse.catalog.store;
    let cols = Cols::for_width(w);
    let header = cols.line(["ID", "AGE", "KEY", "#", "STATE", "PREVIEW"]);
    let mut lines = vec![Line::from(Span::styled(
        fit(&format!("  {header}"), w),
        t.get(StyleName::UiDim),
    ))];
    let offset = list_offset(s.letters.cursor(), h.max(1));
    let words = s.browse.filter().fuzzy_words();
    for (pos, row) in s.letters.rows().iter().enumerate().skip(offset).take(h) {
        let Some(r) = store.row(*row) else { continue };
        let selected = pos == s.letters.cursor();
        let style = match (selected, focused) {
            (true, true) => t.get(StyleName::UiSelection),
            (true, false) => t.get(StyleName::UiSelectionUnfocused),
            _ => t.get(StyleName::state(r.state)),
        };
        let mark = if s.letters.marks().contains(row) {
            "● "
        } else {
            "  "
        };
        let mut spans = vec![Span::styled(mark, t.get(StyleName::UiMark))];
        spans.extend(highlighted(
            row_text(s, r, &cols),
            &words,
            style,
            style.patch(t.get(StyleName::UiMatch)),
        ));
        lines.push(Line::from(spans));
    }
    if s.letters.rows().is_empty() {
        lines.push(Line::from(Span::styled(
            "  (select a group)",
            t.get(StyleName::UiDim),
        )));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The pane's title: the group, its count, the broker's deletion clock (red under
/// `[retention] warn_below`), the order and the owner. The count and the clock come
/// first: at 80 columns the end of the title is cut.
fn title(s: &AppState, area: Rect, t: &Theme) -> Line<'static> {
    let node = s
        .selected_node()
        .map(|n| sanitize::line(&n.label, 60))
        .unwrap_or_default();
    let order = if s.letters.newest_first() {
        "newest first"
    } else {
        "oldest first"
    };
    // The owner of the group the node is in (`[[owners]]`), where the tree has no room.
    let owner = s
        .selected_node()
        .and_then(|n| s.groups.owner(&n.path[..n.path.len().min(1)]))
        .map(|o| format!(" · owner {}", sanitize::line(o, 40)))
        .unwrap_or_default();
    let expiry = s
        .selected_node()
        .filter(|n| n.expires_ms != dlq_core::store::NO_TIME)
        .map(|n| {
            let soon = n.expires_ms - s.now_ms < s.expiry_warn_ms;
            // Narrow panes (80 columns) have room for the short form only.
            let label = if area.width >= 70 {
                dlq_core::retention::expires_label(n.expires_ms, s.now_ms)
            } else if n.expires_ms <= s.now_ms {
                "exp due".to_string()
            } else {
                format!("exp {}", format_age_ms(n.expires_ms - s.now_ms))
            };
            let style = if soon {
                StyleName::UiError
            } else {
                StyleName::UiTitle
            };
            Span::styled(label, t.get(style))
        });
    let mut title = Line::from(format!(" Letters  {node} · {} · ", s.letters.rows().len()));
    if let Some(e) = expiry {
        title.spans.push(e);
        title.spans.push(Span::raw(" · "));
    }
    title.spans.push(Span::raw(format!("{order}{owner} ")));
    title
}

/// `text` as spans, the characters the fuzzy words matched in `hit` style.
fn highlighted<'a>(text: String, words: &[&str], base: Style, hit: Style) -> Vec<Span<'a>> {
    let mut marked: Vec<u32> = words
        .iter()
        .filter_map(|w| dlq_core::filter::fuzzy_indices(w, &text))
        .flatten()
        .collect();
    if marked.is_empty() {
        return vec![Span::styled(text, base)];
    }
    marked.sort_unstable();
    marked.dedup();
    let mut spans = Vec::new();
    let mut run = String::new();
    let mut run_hit = false;
    for (i, c) in text.chars().enumerate() {
        let is_hit = marked.binary_search(&(i as u32)).is_ok();
        if is_hit != run_hit && !run.is_empty() {
            spans.push(Span::styled(
                std::mem::take(&mut run),
                if run_hit { hit } else { base },
            ));
        }
        run_hit = is_hit;
        run.push(c);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, if run_hit { hit } else { base }));
    }
    spans
}

/// Column widths of the letter rows.
struct Cols {
    id_w: usize,
    age_w: usize,
    key_w: usize,
    att_w: usize,
    state_w: usize,
    prev_w: usize,
    w: usize,
}

/// One letter's row: id, age, key (masked), attempt, state, masked preview.
fn row_text(s: &AppState, r: &dlq_core::store::Row, c: &Cols) -> String {
    let store = &s.browse.catalog.store;
    let age = if r.at_ms == NO_TIME {
        "-".into()
    } else {
        format_age_ms(s.now_ms - r.at_ms)
    };
    let key = sanitize::line(&s.browse.catalog.masker().mask_text(store.key(r)), 200);
    let attempt = if r.attempt > 0 {
        r.attempt.to_string()
    } else {
        "-".into()
    };
    let preview = if s.role >= dlq_core::access::Role::Operator {
        sanitize::line(store.preview(r), 200)
    } else {
        "(hidden: viewer)".to_string()
    };
    let text = c.line([
        &sanitize::line(store.id(r), 200),
        &age,
        &key,
        &attempt,
        dlq_core::prepared::state_word(
            r.state,
            matches!(
                s.ledger_alert,
                Some(crate::state::LedgerAlert::Unreachable(_))
            ),
        ),
        &preview,
    ]);
    fit(&text, c.w.saturating_sub(2))
}

impl Cols {
    /// Columns by width: the key and the attempt give way first, so that STATE (is it
    /// still failing?) and some of the preview stay at 80 columns.
    fn for_width(w: usize) -> Cols {
        let (id_w, age_w, key_w, att_w, state_w) = (
            if w >= 100 { 30 } else { 18 },
            6,
            if w >= 72 { 12 } else { 0 },
            if w >= 60 { 3 } else { 0 },
            if w >= 100 { 12 } else { 8 },
        );
        let col = |width: usize| if width == 0 { 0 } else { width + 1 };
        let fixed = 2 + col(id_w) + col(age_w) + col(key_w) + col(att_w) + col(state_w);
        Cols {
            id_w,
            age_w,
            key_w,
            att_w,
            state_w,
            prev_w: w.saturating_sub(fixed),
            w,
        }
    }

    /// One row's cells, each cut to its column; a column of width 0 is left out. AGE
    /// and `#` are right-aligned.
    fn line(&self, cells: [&str; 6]) -> String {
        let widths = [
            self.id_w,
            self.age_w,
            self.key_w,
            self.att_w,
            self.state_w,
            self.prev_w,
        ];
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if w == 0 {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            let cell = fit(cell, w);
            if i == 5 {
                out.push_str(&cell);
            } else if i == 1 || i == 3 {
                out.push_str(&format!("{cell:>w$}"));
            } else {
                out.push_str(&format!("{cell:<w$}"));
            }
        }
        out
    }
}
