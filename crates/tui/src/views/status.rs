//! The title line, the browse-effect/progress line and the footer.

use super::fit;
use crate::state::{AppState, Input, Level};
use crate::theme::StyleName;
use crate::theme::Theme;
use dlq_core::sanitize;
use dlq_core::store::NO_TIME;
use dlq_core::timefmt::format_age_ms;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn title(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let total = s.browse.catalog.store.len();
    let (inflow, oldest) = inflow_and_oldest(s);
    // Segments in display order with how long each is kept as the width shrinks: the
    // role, read-only and the filter last (they change what every key does), the source
    // label first (it is shortened before it goes).
    let text = |s: String, st: StyleName, keep: u8| (s, t.get(st), keep);
    let mut parts = vec![
        text(" dlq-triage".into(), StyleName::UiTitle, 1),
        text(
            format!(" · {}", sanitize::line(&s.info.label, 80)),
            StyleName::UiHeader,
            2,
        ),
        text(
            format!(
                " · {}",
                dlq_core::words::letters_since(total, s.since_ms, s.now_ms)
            ),
            StyleName::UiCount,
            7,
        ),
    ];
    if !s.letters.marks().is_empty() {
        parts.push(text(
            format!(" · {} marked", s.letters.marks().len()),
            StyleName::UiWarn,
            8,
        ));
    }
    if !s.handled.is_empty() {
        parts.push(text(
            format!(" · {} handled this session", s.handled.len()),
            StyleName::UiText,
            6,
        ));
    }
    parts.push(text(format!(" · +{inflow:.1}/min"), StyleName::UiText, 5));
    let held = dlq_core::awaiting::total(&s.scan.awaiting);
    if held > 0 {
        parts.push(text(
            format!(" · {held} held upstream"),
            StyleName::UiWarn,
            9,
        ));
    }
    parts.push(text(
        format!(
            " · oldest {}",
            oldest.map_or("-".into(), |o| format_age_ms(s.now_ms - o))
        ),
        StyleName::UiText,
        4,
    ));
    parts.push(text(format!(" · {}", s.role), StyleName::UiDim, 10));
    if s.read_only {
        parts.push(text(" · read-only".into(), StyleName::UiWarn, 10));
    }
    if !s.browse.filter().is_empty() {
        parts.push(text(
            format!(
                " · {} match · filter: {}",
                s.browse.index().total(),
                sanitize::line(s.browse.filter().source(), 60)
            ),
            StyleName::UiWarn,
            9,
        ));
    }
    let parts = fit_segments(parts, usize::from(area.width));
    f.render_widget(
        Paragraph::new(Line::from(parts)).style(t.get(StyleName::UiStatus)),
        area,
    );
}

/// Letters a minute over the last hour, and the oldest letter's time, over every group.
fn inflow_and_oldest(s: &AppState) -> (f64, Option<i64>) {
    let top = || s.groups.nodes().iter().filter(|n| n.depth == 0);
    // Summed as counts: a float sum of no groups is -0.0, shown "+-0.0/min".
    let inflow = top().map(|n| n.last_hour).sum::<u64>() as f64 / 60.0;
    let oldest = top()
        .filter(|n| n.oldest_ms != NO_TIME)
        .map(|n| n.oldest_ms)
        .min();
    (inflow, oldest)
}

/// The hint beside a typed count: what the last answer was told (letters arrived since),
/// else how to answer.
fn count_hint(s: &AppState, default: &str) -> String {
    match &s.message {
        Some((m, _)) => format!("  {}", sanitize::line(m, 200)),
        None => default.to_string(),
    }
}

/// Drop the segments kept least until the line fits `width`; the source label (kept 2)
/// is first shortened, down to 24 characters, before it goes.
fn fit_segments(
    mut parts: Vec<(String, ratatui::style::Style, u8)>,
    width: usize,
) -> Vec<Span<'static>> {
    let len = |p: &[(String, ratatui::style::Style, u8)]| {
        p.iter().map(|(s, _, _)| s.chars().count()).sum::<usize>()
    };
    while len(&parts) > width {
        let Some(i) = (0..parts.len()).min_by_key(|&i| parts[i].2) else {
            break;
        };
        let over = len(&parts) - width;
        let chars = parts[i].0.chars().count();
        if parts[i].2 == 2 && chars > 24 {
            let keep = chars.saturating_sub(over).max(24);
            parts[i].0 = fit(&parts[i].0, keep);
            // Shortened as far as it goes: it is dropped next if still too wide.
            parts[i].2 = 3;
        } else {
            parts.remove(i);
        }
    }
    // The name gone, the line starts at the next segment, not at its separator.
    if let Some(first) = parts.first_mut() {
        if let Some(rest) = first.0.strip_prefix(" · ") {
            first.0 = format!(" {rest}");
        }
    }
    parts
        .into_iter()
        .map(|(s, st, _)| Span::styled(s, st))
        .collect()
}

pub(crate) fn effect(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let progress = if let Some(alert) = &s.ledger_alert {
        Span::styled(
            sanitize::line(&alert.line(), 300),
            t.get(StyleName::UiError),
        )
    } else if let Some(e) = &s.scan.error {
        Span::styled(
            format!(
                "scan failed: {} · R retries",
                super::fit(&sanitize::clean(e), 60)
            ),
            t.get(StyleName::UiError),
        )
    } else if s.scan.lost.is_some() {
        Span::styled(
            "browse closed by the broker · R browses again",
            t.get(StyleName::UiError),
        )
    } else if s.scan.complete {
        let problems = match s.scan.problem_count {
            0 => String::new(),
            n => format!(" · {n} unreadable (:problems)"),
        };
        let (browsed, total) = s
            .scan
            .partial
            .iter()
            .fold((0, 0), |(b, t), c| (b + c.browsed, t + c.total));
        let problems = if total > 0 {
            format!(" · browsed {browsed} of {total}{problems}")
        } else {
            problems
        };
        Span::styled(
            format!("scan complete · +{} live{problems}", s.scan.live),
            if s.scan.problem_count > 0 || total > 0 {
                t.get(StyleName::UiWarn)
            } else {
                t.get(StyleName::UiInfo)
            },
        )
    } else {
        let pct = s
            .scan
            .total
            .filter(|t| *t > 0)
            .map(|tot| (s.scan.done * 100 / tot).min(99));
        let bar_len = 10;
        let filled = pct.map_or(0, |p| (p as usize * bar_len) / 100);
        Span::styled(
            format!(
                "scan {}{} {}",
                "█".repeat(filled),
                "░".repeat(bar_len - filled),
                pct.map_or(format!("{} read", s.scan.done), |p| format!("{p}%"))
            ),
            t.get(StyleName::UiWarn),
        )
    };
    let width = usize::from(area.width);
    let right = progress.content.chars().count() + 1;
    let left = fit(
        &format!(" {}", s.info.browse_effect),
        width.saturating_sub(right + 1),
    );
    let pad = width.saturating_sub(left.chars().count() + right);
    let line = Line::from(vec![
        Span::styled(left, t.get(StyleName::UiDim)),
        Span::raw(" ".repeat(pad)),
        progress,
        Span::raw(" "),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

pub(crate) fn footer(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let width = usize::from(area.width);
    let line = match s.prompt.input() {
        Input::None => idle_line(s, width, t),
        input @ (Input::Fuzzy(_) | Input::Expr(_) | Input::Command(_)) => {
            browse_prompt(input, width, t)
        }
        input => decision_prompt(s, input, width, t),
    };
    f.render_widget(Paragraph::new(line), area);
}

/// The footer with nothing typed: the last message (cut to the line, `:notes` keeps it
/// whole), else the keys.
fn idle_line(s: &AppState, width: usize, t: &Theme) -> Line<'static> {
    match &s.message {
        Some((m, level)) => {
            let style = match level {
                Level::Info => t.get(StyleName::UiInfo),
                Level::Warn => t.get(StyleName::UiWarn),
                Level::Error => t.get(StyleName::UiError),
            };
            // Cut to the line, it says where it is whole (update keeps long ones in
            // :notes).
            let text = format!(" {}", sanitize::line(m, 300));
            let text = if text.chars().count() > width && width > 20 {
                format!("{} (:notes)", fit(&text, width - 9))
            } else {
                text
            };
            Line::from(Span::styled(fit(&text, width), style))
        }
        None => footer_keys(s, width, t),
    }
}

/// A line being typed to browse: the fuzzy words, a filter, a command.
fn browse_prompt(input: &Input, width: usize, t: &Theme) -> Line<'static> {
    let title = t.get(StyleName::UiTitle);
    let (label, typed, keys) = match input {
        Input::Fuzzy(w) => (" / ", w, "  Enter apply · Esc cancel".to_string()),
        Input::Expr(e) => (
            " filter: ",
            e,
            "  reason=… version=… event=inv.* age>1h state=open|… · Enter · Esc".to_string(),
        ),
        Input::Command(c) => (" :", c, format!("  {}", crate::keymap::palette_hint())),
        _ => return Line::default(),
    };
    Prompt {
        label,
        style: title,
        typed,
        keys: &keys,
    }
    .line(t, width)
}

/// A line being typed for a decision: a reason, a count, a program.
fn decision_prompt(s: &AppState, input: &Input, width: usize, t: &Theme) -> Line<'static> {
    // What is asked, what was typed, the keys that answer it.
    let (label, typed, hint): (String, &str, String) = match input {
        Input::DiscardReason(r, d) => (
            format!(" discard {} — reason: ", sanitize::line(&d.what, 120)),
            r,
            "  recorded in the ledger, then acked on RabbitMQ · Enter · Esc cancels".into(),
        ),
        Input::DiscardCount(typed, d) => (
            format!(
                " discard {} — type {} to confirm: ",
                dlq_core::words::letters(d.rows.len()),
                d.rows.len()
            ),
            typed,
            count_hint(s, "  Enter · Esc cancels (nothing is discarded)"),
        ),
        Input::EditReason(r, _) => (
            " edit (revision) — reason: ".into(),
            r,
            "  opens $EDITOR on the masked payload · Enter · Esc cancels".into(),
        ),
        Input::UnmaskReason(r, _) => (
            " unmask — reason: ".into(),
            r,
            "  audited; shown for this letter in this session only · Enter · Esc cancels".into(),
        ),
        Input::ReplayCount(typed, n) => (
            format!(
                " replay {} — type {n} to start: ",
                dlq_core::words::letters(*n)
            ),
            typed,
            count_hint(s, "  Enter · Esc cancels (nothing is sent)"),
        ),
        Input::TransformProgram(p, d) => (
            format!(" transform {} — jq: ", sanitize::line(&d.what, 80)),
            p,
            "  e.g. .payload.amount |= (gsub(\",\";\"\") | tonumber) · Enter · Esc cancels".into(),
        ),
        Input::TransformReason(r, _) => (
            " transform — reason: ".into(),
            r,
            "  recorded with every revision · Enter runs the dry-run · Esc cancels".into(),
        ),
        Input::TransformConfirm(typed, n) => (
            format!(
                " record {n} revision{} — type {} to confirm: ",
                if *n == 1 { "" } else { "s" },
                if *n > s.replay.confirm_above() {
                    n.to_string()
                } else {
                    "yes".to_string()
                }
            ),
            typed,
            "  Enter · Esc drops it (nothing recorded)".into(),
        ),
        _ => return Line::default(),
    };
    Prompt {
        label: &label,
        style: t.get(StyleName::UiWarn),
        typed,
        keys: &hint,
    }
    .line(t, width)
}

/// A prompt: what is asked (in `style`), what was typed so far, and the keys that answer
/// it.
struct Prompt<'a> {
    label: &'a str,
    style: ratatui::style::Style,
    typed: &'a str,
    keys: &'a str,
}

/// What is typed always shows at least this many columns (and its end): the label gives
/// way first, then the keys.
const TYPED_AT_LEAST: usize = 24;

/// `s` in at most `w` columns, cut in the middle (`…`): its start and its last words —
/// `— reason: ` — both stay.
fn fit_middle(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    let tail_n = 12.min(w / 2);
    let head_n = w.saturating_sub(tail_n + 1);
    let head: String = s.chars().take(head_n).collect();
    let tail: String = s.chars().skip(n - tail_n).collect();
    format!("{head}…{tail}")
}

impl Prompt<'_> {
    /// The line in `width` columns: the end of what was typed is always seen, with the
    /// cursor after it — a reason going into the ledger is never typed blind. The label
    /// is shortened (a plain `…`) when the two do not fit; the key hint follows only when
    /// there is room; text scrolled out at the left is shown as a leading `…`.
    fn line<'a>(&self, t: &Theme, width: usize) -> Line<'a> {
        let typed = sanitize::clean(self.typed);
        let typed_n = typed.chars().count();
        let label_n = self.label.chars().count();
        // Room for what is typed and the cursor, the label cut first.
        // The label keeps a third of the line (its start and its end — what is asked),
        // more when what is typed is short.
        let want_typed = (typed_n + 1).max(TYPED_AT_LEAST).min(width);
        let label_room = width.saturating_sub(want_typed).max(width / 3).min(label_n);
        let label = fit_middle(self.label, label_room);
        let room = width.saturating_sub(label.chars().count() + 1);
        let shown: String = if typed_n > room {
            let tail: String = typed
                .chars()
                .skip(typed_n - room.saturating_sub(1))
                .collect();
            format!("…{tail}")
        } else {
            typed
        };
        let used = label.chars().count() + shown.chars().count() + 1;
        let keys = if used + self.keys.chars().count() <= width {
            self.keys.to_string()
        } else {
            String::new()
        };
        Line::from(vec![
            Span::styled(label, self.style),
            Span::styled(format!("{shown}▏"), t.get(StyleName::UiText)),
            Span::styled(keys, t.get(StyleName::UiDim)),
        ])
    }
}

/// The footer's key hints, from the keymap; keys this user cannot use are dimmed.
fn footer_keys<'a>(s: &AppState, width: usize, t: &Theme) -> Line<'a> {
    let items = crate::keymap::footer_items(&s.keymap, s.role, s.read_only);
    let text = |(key, label, _): &(String, &str, bool)| format!(" {key} {label} ");
    // The last item (quit) always shows; the middle ones while they fit.
    let last = items.last().map(|i| text(i).chars().count()).unwrap_or(0);
    let mut spans = Vec::new();
    let mut used = last;
    for (i, item) in items.iter().enumerate() {
        let shown = text(item);
        let n = shown.chars().count();
        let is_last = i + 1 == items.len();
        if !is_last && used + n > width {
            continue;
        }
        if !is_last {
            used += n;
        }
        let style = if item.2 {
            t.get(StyleName::UiDim)
        } else {
            t.get(StyleName::UiFooter)
        };
        spans.push(Span::styled(shown, style));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Style;

    fn seg(s: &str, keep: u8) -> (String, Style, u8) {
        (s.to_string(), Style::default(), keep)
    }

    fn text(spans: &[Span<'_>]) -> String {
        spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn the_title_drops_what_matters_least_and_keeps_role_and_filter() {
        let parts = || {
            vec![
                seg(" dlq-triage", 1),
                seg(
                    " · kafka://broker-1.internal:9092/invoices.dlq,payments.dlq",
                    2,
                ),
                seg(" · 1448 letters", 7),
                seg(" · 12 handled this session", 6),
                seg(" · +7.2/min", 5),
                seg(" · oldest 6d17h", 4),
                seg(" · operator", 10),
                seg(" · 301 match · filter: reason=amount_not_a_number", 9),
            ]
        };
        let wide = text(&fit_segments(parts(), 300));
        assert!(wide.starts_with(" dlq-triage · kafka://"), "{wide}");
        let narrow = text(&fit_segments(parts(), 80));
        assert!(narrow.chars().count() <= 80, "{narrow}");
        assert!(narrow.contains("operator"), "{narrow}");
        assert!(
            narrow.contains("filter: reason=amount_not_a_number"),
            "{narrow}"
        );
        assert!(narrow.contains("1448 letters"), "{narrow}");
        assert!(!narrow.contains("dlq-triage"), "dropped first: {narrow}");
        let tiny = text(&fit_segments(parts(), 40));
        assert!(
            tiny.contains("operator") || tiny.is_empty() || tiny.contains("filter"),
            "{tiny}"
        );
        assert!(tiny.chars().count() <= 40, "{tiny}");
    }
}
