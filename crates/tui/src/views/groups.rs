//! The group tree: reason › version › age by default, with counts, oldest age and a
//! one-hour inflow sparkline.

use super::{fit, pane};
use crate::paging::list_offset;
use crate::state::{AppState, Pane};
use crate::theme::StyleName;
use crate::theme::Theme;
use dlq_core::grouping::{sparkline, TreeNode};
use dlq_core::sanitize;
use dlq_core::store::NO_TIME;
use dlq_core::timefmt::format_age_ms;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let focused = s.focus == Pane::Groups;
    let dims: Vec<&str> = s.dims().iter().map(|d| d.name()).collect();
    let block = pane(
        Line::from(format!(" Groups  {} ", dims.join(" › "))),
        focused,
        t,
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let h = usize::from(inner.height);
    let w = usize::from(inner.width);
    if s.groups.visible_len() == 0 {
        let msg = if s.scan.complete {
            "(no letters)"
        } else {
            "(loading…)"
        };
        f.render_widget(
            Paragraph::new(Span::styled(msg, t.get(StyleName::UiDim))),
            inner,
        );
        return;
    }
    // Labels first: on narrow terminals the oldest age and the sparkline give way.
    let show_spark = w >= 56;
    let show_oldest = w >= 40;
    // The broker's deletion clock, where a retention is known and there is room; at
    // narrower widths a group due soon shows its count in red (the letters pane's title
    // says when).
    let show_expiry = w >= 64 && s.browse.expires();
    let stats_w = 7
        + if show_oldest { 7 } else { 0 }
        + if show_spark { 13 } else { 0 }
        + if show_expiry { 7 } else { 0 };
    let label_w = w.saturating_sub(stats_w);
    let offset = list_offset(s.groups.cursor(), h);
    let mut lines = Vec::with_capacity(h);
    let cols = Cols {
        label_w,
        show_oldest,
        show_spark,
        show_expiry,
    };
    let drawn: Vec<(usize, &TreeNode)> = s
        .groups
        .visible()
        .enumerate()
        .skip(offset)
        .take(h)
        .collect();
    // What each drawn label shares with a drawn sibling (same parent): that part is
    // what gets cut when the label does not fit, so siblings never read the same.
    let shared: Vec<usize> = drawn
        .iter()
        .map(|&(_, n)| {
            drawn
                .iter()
                .map(|&(_, m)| m)
                .filter(|m| {
                    m.depth == n.depth && m.path[..m.depth] == n.path[..n.depth] && m.path != n.path
                })
                .map(|m| common_prefix(&n.label, &m.label))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (&(pos, n), shared) in drawn.iter().zip(shared) {
        let style = Selection {
            selected: pos == s.groups.cursor(),
            focused,
        };
        lines.push(node_line(s, n, style, &cols, shared, t));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Column layout of the group rows.
struct Cols {
    label_w: usize,
    show_oldest: bool,
    show_spark: bool,
    show_expiry: bool,
}

#[derive(Clone, Copy)]
struct Selection {
    selected: bool,
    focused: bool,
}

/// One row of the tree: label, count, oldest age, sparkline.
fn node_line<'a>(
    s: &AppState,
    n: &dlq_core::grouping::TreeNode,
    sel: Selection,
    cols: &Cols,
    shared: usize,
    t: &Theme,
) -> Line<'a> {
    let label_w = cols.label_w;
    let text = node_label(s, n, label_w, shared);
    let oldest = if n.oldest_ms == NO_TIME {
        "-".into()
    } else {
        format_age_ms(s.now_ms - n.oldest_ms)
    };
    let base = match (sel.selected, sel.focused) {
        (true, true) => t.get(StyleName::UiSelection),
        (true, false) => t.get(StyleName::UiSelectionUnfocused),
        _ if n.depth == 0 => t.get(StyleName::UiHeader),
        _ => t.get(StyleName::UiText),
    };
    let or_base = |st: StyleName| if sel.selected { base } else { t.get(st) };
    let left = (n.expires_ms != NO_TIME).then(|| n.expires_ms - s.now_ms);
    let soon = left.is_some_and(|l| l < s.expiry_warn_ms);
    let mut spans = vec![
        Span::styled(format!("{text:<label_w$}"), base),
        Span::styled(
            format!("{:>7}", n.count),
            or_base(if soon && !cols.show_expiry {
                StyleName::UiError
            } else {
                StyleName::UiCount
            }),
        ),
    ];
    if cols.show_expiry {
        let text = match left {
            None => "-".to_string(),
            Some(l) if l <= 0 => "due".to_string(),
            Some(l) => format_age_ms(l),
        };
        spans.push(Span::styled(
            format!("{text:>7}"),
            or_base(if soon {
                StyleName::UiError
            } else {
                StyleName::UiDim
            }),
        ));
    }
    if cols.show_oldest {
        spans.push(Span::styled(
            format!("{oldest:>7}"),
            or_base(StyleName::UiDim),
        ));
    }
    if cols.show_spark {
        spans.push(Span::styled(
            format!(" {}", sparkline(&n.spark)),
            or_base(StyleName::UiSpark),
        ));
    }
    Line::from(spans)
}

/// A node's label: indented, its expand marker, shortened to the column (the part it
/// shares with the row above cut first), with its owner.
fn node_label(
    s: &AppState,
    n: &dlq_core::grouping::TreeNode,
    label_w: usize,
    shared: usize,
) -> String {
    let leaf = n.depth + 1 == s.dims().len();
    let marker = if leaf {
        "  "
    } else if s.groups.is_expanded(&n.path) {
        "▾ "
    } else {
        "▸ "
    };
    let indent = 2 * n.depth + 2;
    let mut label = if n.label.is_empty() {
        "(none)".to_string()
    } else {
        shorten(&n.label, label_w.saturating_sub(indent), shared)
    };
    if let Some(owner) = s.groups.owner(&n.path) {
        label = format!("{label} · {}", sanitize::line(owner, 60));
    }
    fit(&format!("{}{marker}{label}", "  ".repeat(n.depth)), label_w)
}

/// Characters `a` and `b` begin with alike.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// A label cut to `width` characters (sanitized). When it shares its first `shared`
/// characters with a sibling, the cut is made there — a few leading characters, `…`,
/// then what tells it apart — instead of at its end, where siblings would all read
/// `SyntaxError: Unexpect…`.
fn shorten(label: &str, width: usize, shared: usize) -> String {
    let clean = sanitize::line(label, 200);
    let chars: Vec<char> = clean.chars().collect();
    if chars.len() <= width || width < 12 || shared < 6 || shared >= chars.len() {
        return clean;
    }
    // Back to the start of the word the labels part in (`token` in `… Unexpected token`).
    let mut at = shared.min(chars.len());
    while at > 0 && !chars[at - 1].is_whitespace() && chars[at - 1] != ':' {
        at -= 1;
    }
    let head = (width / 3).clamp(4, 8);
    if at <= head {
        return clean;
    }
    let rest: String = chars[at..].iter().collect();
    let head: String = chars[..head].iter().collect();
    fit(&format!("{}…{}", head.trim_end(), rest.trim_start()), width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_sharing_a_long_start_are_cut_where_they_differ() {
        let a = "SyntaxError: Unexpected token , in JSON at position <n>";
        let b = "SyntaxError: Unexpected end of JSON input";
        let shared = common_prefix(a, b);
        let (sa, sb) = (shorten(a, 22, shared), shorten(b, 22, shared));
        assert_ne!(sa, sb);
        assert!(sa.starts_with("Syntax") && sa.contains("token"), "{sa}");
        assert!(sb.contains("end of"), "{sb}");
        assert!(sa.chars().count() <= 22 && sb.chars().count() <= 22);
        // Nothing shared, or room enough: the label as it is, cut at its end by the row.
        assert_eq!(
            shorten("customer_tax_profile_missing", 22, 0),
            "customer_tax_profile_missing"
        );
        assert_eq!(shorten(b, 80, shared), b);
    }
}
