//! The replay screens: the dry-run (choices over the plan) and the progress pane.

use crate::keymap::{Keymap, Mode};
use crate::replaying::{field_value, DryRun, RunView, FIELDS};
use crate::theme::{StyleName, Theme};
use crate::views::fit;
use dlq_core::journal::ReplayState;
use dlq_core::replay::Phase;
use dlq_core::sanitize;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

/// The dry-run screen, over the panes: the choices, then the plan as the CLI prints it.
pub(crate) fn dry_run(f: &mut Frame, area: Rect, d: &DryRun, keys: &Keymap, t: &Theme) {
    let w = area.width.min(110);
    let h = area.height.saturating_sub(2).max(area.height.min(3));
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, popup);
    let width = usize::from(w.saturating_sub(3));
    let mut rows = choices(d, keys, width, t);
    if let Some(e) = &d.error {
        rows.push(Line::from(Span::styled(
            sanitize::line(&format!("! {e}"), width),
            t.get(StyleName::UiWarn),
        )));
    }
    rows.push(Line::from(""));
    let title = format!(
        " Replay {} — dry run ",
        sanitize::line(&d.what, usize::from(w / 2))
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_style(t.get(StyleName::UiTitle))
        .border_style(t.get(StyleName::UiBorderFocus));
    let inner = block.inner(popup);
    f.render_widget(block, popup);
    let top_h = (rows.len() as u16).min(inner.height);
    f.render_widget(
        Paragraph::new(rows),
        Rect::new(inner.x, inner.y, inner.width, top_h),
    );
    // The plan below the choices: wrapped (a narrow terminal loses no warning), scrolled
    // with PgDn/PgUp.
    if let Some(p) = &d.plan {
        let lines: Vec<Line> = p
            .lines
            .iter()
            .map(|l| {
                let style = if l.trim_start().starts_with('!') {
                    t.get(StyleName::UiWarn)
                } else {
                    t.get(StyleName::UiText)
                };
                Line::from(Span::styled(sanitize::line(l, 4 * width), style))
            })
            .collect();
        f.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .scroll((d.scroll, 0)),
            Rect::new(inner.x, inner.y + top_h, inner.width, inner.height - top_h),
        );
    }
}

/// The dry-run's choices, one per line (the one being changed selected), and what
/// Enter does now.
fn choices(d: &DryRun, keys: &Keymap, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let mut rows: Vec<Line<'static>> = Vec::new();
    for (i, name) in FIELDS.iter().enumerate() {
        let here = i == d.field;
        let style = if here {
            t.get(StyleName::UiSelection)
        } else {
            t.get(StyleName::UiText)
        };
        let text = format!(
            "{} {:<13} {}",
            if here { "›" } else { " " },
            name,
            field_value(&d.opts, i)
        );
        rows.push(Line::from(Span::styled(fit(&text, width), style)));
    }
    // The keys in force (`[keys.dry-run]`), as the defaults read: ↑↓ choose · ←→ change.
    let key = |name: &str| keys.mode_key(Mode::DryRun, name);
    let moves = format!(
        "{}{} choose · {}{} change",
        key("previous-choice"),
        key("next-choice"),
        key("less"),
        key("more")
    );
    let (hint, hint_style) = match &d.plan {
        None => ("planning…".to_string(), t.get(StyleName::UiDim)),
        Some(p) if p.planned == 0 => (
            "nothing to replay · Esc closes".to_string(),
            t.get(StyleName::UiWarn),
        ),
        Some(p) if p.planned > d.confirm_above => (
            format!(
                "{}: type {} to start · {moves} · {} cancel (nothing sent yet)",
                key("start"),
                p.planned,
                key("close")
            ),
            t.get(StyleName::UiFooter),
        ),
        Some(_) => (
            format!(
                "{} starts · {moves} · {}/{} plan · {} cancel (nothing sent yet)",
                key("start"),
                key("plan-down"),
                key("plan-up"),
                key("close")
            ),
            t.get(StyleName::UiFooter),
        ),
    };
    rows.push(Line::from(Span::styled(fit(&hint, width), hint_style)));
    rows
}

/// The progress pane: counts, rate, ETA, sparklines of rate and failures, the state,
/// and the kill key.
pub(crate) fn progress(f: &mut Frame, area: Rect, r: &RunView, t: &Theme) {
    f.render_widget(Clear, area);
    let width = usize::from(area.width.saturating_sub(2));
    let p = r.progress.as_ref();
    let phase = match (&r.ended, p) {
        (Some((state, _)), _) => state.map_or("not started", ReplayState::as_str).into(),
        (None, Some(p)) if r.killed_at.is_some() && p.phase != Phase::Done => {
            "stopping (killed)".into()
        }
        (None, Some(p)) if r.control.paused() => {
            format!("{} — PAUSED, nothing sent (p resumes)", p.phase.as_str())
        }
        (None, Some(p)) => p.phase.as_str().to_string(),
        (None, None) => "starting".into(),
    };
    let spark_w = width.saturating_sub(9);
    let lines = vec![
        counts_line(r, t),
        pace_line(p, width, t),
        Line::from(vec![
            Span::styled("rate     ", t.get(StyleName::UiDim)),
            Span::styled(spark(&r.rate, spark_w), t.get(StyleName::UiSpark)),
        ]),
        Line::from(vec![
            Span::styled("failures ", t.get(StyleName::UiDim)),
            Span::styled(
                spark(&r.failed, spark_w),
                t.get(StyleName::StateFailedAgain),
            ),
        ]),
        last_line(r, width, t),
    ];
    let title = format!(" Replay {} · {} ", sanitize::line(&r.id, 40), phase);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(title)
                .title_style(t.get(StyleName::UiTitle))
                .border_style(if r.ended.is_none() {
                    t.get(StyleName::UiBorderFocus)
                } else {
                    t.get(StyleName::UiBorder)
                }),
        ),
        area,
    );
}

/// Planned, sent, confirmed, failed again (marked when any), refused, left.
fn counts_line(r: &RunView, t: &Theme) -> Line<'static> {
    let p = r.progress.as_ref();
    let n = |f: fn(&dlq_core::replay::Progress) -> usize| p.map_or(0, f);
    Line::from(vec![
        Span::styled(
            format!(
                "{} planned · {} sent · {} confirmed · ",
                r.planned,
                n(|p| p.sent),
                n(|p| p.confirmed)
            ),
            t.get(StyleName::UiText),
        ),
        Span::styled(
            format!("{} failed again", n(|p| p.failed_again)),
            if n(|p| p.failed_again) > 0 {
                t.get(StyleName::StateFailedAgain)
            } else {
                t.get(StyleName::UiText)
            },
        ),
        Span::styled(
            format!(
                " · {} refused · {} left",
                n(|p| p.refused),
                n(|p| p.remaining)
            ),
            t.get(StyleName::UiText),
        ),
    ])
}

/// The pace (rate, watch window, ETA, elapsed) — or, once stopped, why.
fn pace_line(p: Option<&dlq_core::replay::Progress>, width: usize, t: &Theme) -> Line<'static> {
    if let Some(why) = p.and_then(|p| p.end.as_ref()).and_then(|e| e.reason()) {
        return Line::from(Span::styled(
            sanitize::line(&format!("stopped: {why}"), width),
            t.get(StyleName::UiWarn),
        ));
    }
    let mut pace = match p {
        Some(p) => format!("{:.1}/s (set {}/s)", p.rate, p.target_rate),
        None => "—".into(),
    };
    if let Some(w) = p.and_then(|p| p.watch_left) {
        pace.push_str(&format!(" · watch {}s left", w.as_secs()));
    }
    if let Some(e) = p.and_then(|p| p.eta) {
        pace.push_str(&format!(" · ETA {}", eta(e.as_secs())));
    }
    if let Some(p) = p {
        pace.push_str(&format!(" · {}s elapsed", p.elapsed.as_secs()));
    }
    Line::from(Span::styled(fit(&pace, width), t.get(StyleName::UiText)))
}

/// How it ended, or the kill key while it runs.
fn last_line(r: &RunView, width: usize, t: &Theme) -> Line<'static> {
    match &r.ended {
        Some((end, summary)) => Line::from(Span::styled(
            sanitize::line(summary, width),
            if *end == Some(ReplayState::Completed) {
                t.get(StyleName::UiInfo)
            } else {
                t.get(StyleName::UiWarn)
            },
        )),
        None => Line::from(vec![
            Span::styled(" K ", t.get(StyleName::UiFooter)),
            Span::styled(
                " kill switch: no publish starts after it; confirms in flight are awaited",
                t.get(StyleName::UiDim),
            ),
        ]),
    }
}

/// One line over the second line of the screen, where the pane does not fit.
pub(crate) fn progress_line(f: &mut Frame, area: Rect, r: &RunView, t: &Theme) {
    let text = match (&r.ended, &r.progress) {
        (Some((_, summary)), _) => summary.clone(),
        (None, Some(p)) => format!("{} · p pauses · K kills", p.line()),
        (None, None) => format!("replay {} starting · K kills", r.id),
    };
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(
            sanitize::line(&text, usize::from(area.width)),
            t.get(StyleName::UiWarn),
        ))),
        area,
    );
}

/// `4m12s`, `38s`, `1h02m`.
fn eta(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The last `w` samples as block characters, scaled to the largest.
pub(crate) fn spark(samples: &[u64], w: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let tail = &samples[samples.len().saturating_sub(w)..];
    let max = tail.iter().copied().max().unwrap_or(0);
    tail.iter()
        .map(|&v| {
            if v == 0 || max == 0 {
                ' '
            } else {
                BARS[((v * 7).div_ceil(max) as usize).min(7)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_the_largest_sample_and_keep_the_latest() {
        assert_eq!(spark(&[0, 1, 2, 4, 8], 10), " ▂▃▅█");
        assert_eq!(spark(&[8, 8, 1], 2), "█▂");
        assert_eq!(spark(&[], 5), "");
        assert_eq!(eta(59), "59s");
        assert_eq!(eta(252), "4m12s");
        assert_eq!(eta(3720), "1h02m");
    }
}
