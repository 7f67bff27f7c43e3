//! The selected letter: failure fields with provenance, headers, the masked payload
//! (JSON coloured), and the diff against the marked letter.

use super::pane;
use crate::core::diff::{Diff, LineTag};
use crate::core::model::{Provenance, Sourced};
use crate::core::payload_view::ViewKind;
use crate::core::sanitize::{self, human_bytes, Mode};
use crate::core::timefmt::format_age_ms;
use crate::tui::state::{AppState, Detail, Pane, Tab};
use crate::tui::theme::Theme;
use crate::tui::theme::S;
use chrono::SecondsFormat;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let focused = s.focus == Pane::Detail;
    let mut title = vec![Span::raw(" ")];
    for (i, tab) in Tab::ALL.iter().enumerate() {
        let style = if *tab == s.detail.tab {
            t.get(S::UiSelection)
        } else {
            t.get(S::UiDim)
        };
        title.push(Span::styled(format!(" {} {} ", i + 1, tab.title()), style));
        title.push(Span::raw(" "));
    }
    let block = pane(Line::from(title), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let lines = match (&s.detail.current, s.selected_row()) {
        (Some(_), _)
            if matches!(s.detail.tab, Tab::Payload | Tab::Diff)
                && s.role < crate::core::access::Role::Operator =>
        {
            vec![Line::from(Span::styled(
                "payloads are hidden: seeing them needs the operator role (you are viewer)",
                t.get(S::UiWarn),
            ))]
        }
        (Some(d), _) => match s.detail.tab {
            Tab::Failure => failure(d, s, t),
            Tab::Headers => headers(d, s, t),
            Tab::Payload => payload(d, s.detail.unmasked.contains(&d.row), t),
            Tab::Diff => diff(d, t),
            Tab::History => match &s.detail.history {
                Some((row, lines)) if *row == d.row => lines
                    .iter()
                    .map(|l| Line::from(Span::styled(clean(l), t.get(S::UiText))))
                    .collect(),
                _ => vec![Line::from(Span::styled(
                    "reading the ledger…",
                    t.get(S::UiDim),
                ))],
            },
        },
        (None, Some(_)) if s.detail.pending_fetch.is_some() => vec![Line::from(Span::styled(
            "fetching the letter…",
            t.get(S::UiDim),
        ))],
        _ => vec![Line::from(Span::styled(
            "no letter selected",
            t.get(S::UiDim),
        ))],
    };
    f.render_widget(
        Paragraph::new(lines)
            .scroll((s.detail.scroll, 0))
            .wrap(Wrap { trim: false }),
        inner,
    );
}

fn clean(s: &str) -> String {
    sanitize::line(s, 400)
}

fn field<'a>(label: &str, value: String, from: Option<&Provenance>, t: &Theme) -> Line<'a> {
    let mut spans = vec![
        Span::styled(format!("{label:<14}"), t.get(S::UiDim)),
        Span::styled(clean(&value), t.get(S::UiText)),
    ];
    if let Some(p) = from {
        spans.push(Span::styled(
            format!("  ← {}", clean(&p.to_string())),
            t.get(S::UiProvenance),
        ));
    }
    Line::from(spans)
}

fn text<'a>(
    label: &str,
    v: &Option<Sourced<String>>,
    masked: Option<&crate::core::masking::Masker>,
    t: &Theme,
) -> Option<Line<'a>> {
    v.as_ref().map(|s| {
        let value = match masked {
            Some(m) => m.mask_text(&s.value),
            None => s.value.clone(),
        };
        field(label, value, Some(&s.from), t)
    })
}

fn failure<'a>(d: &Detail, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let l = &d.letter;
    let m = s.catalog.masker();
    let f = &l.failure;
    let e = &l.event;
    let ts = |x: &chrono::DateTime<chrono::Utc>| x.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut out = vec![field("id", l.id.value.0.clone(), Some(&l.id.from), t)];
    if let Some(c) = &l.raw.coords {
        out.push(field("coords", c.to_string(), None, t));
    }
    if let Some(k) = &l.raw.key {
        out.push(field(
            "key",
            m.mask_text(&String::from_utf8_lossy(k)),
            None,
            t,
        ));
    }
    if let Some(at) = &l.dead_lettered_at {
        let age = format_age_ms(s.now_ms - at.value.timestamp_millis());
        out.push(field(
            "dead-lettered",
            format!("{} ({age} ago)", ts(&at.value)),
            Some(&at.from),
            t,
        ));
    }
    let store = &s.catalog.store;
    let decision = store.row(d.row).and_then(|r| {
        s.decisions
            .get(&store.binding(r))
            .filter(|x| x.letter_id == store.id(r))
    });
    out.push(field(
        "state",
        crate::core::session::LetterState::of(decision).describe(),
        None,
        t,
    ));
    out.extend(text("reason", &f.reason_code, None, t));
    out.extend(text("detail", &f.reason_detail, Some(m), t));
    out.extend(text("exception", &f.exception_type, None, t));
    out.extend(text("death reason", &f.death_reason, None, t));
    out.extend(text("consumer", &f.consumer, None, t));
    out.extend(text("version", &f.consumer_version, None, t));
    if let Some(a) = &f.attempt {
        out.push(field("attempt", a.value.to_string(), Some(&a.from), t));
    }
    for (label, v) in [
        ("first failed", &f.first_failed_at),
        ("last failed", &f.last_failed_at),
    ] {
        if let Some(x) = v {
            out.push(field(label, ts(&x.value), Some(&x.from), t));
        }
    }
    if let Some(o) = &f.origin {
        out.push(field("origin", o.value.to_string(), Some(&o.from), t));
    }
    out.extend(text("event", &e.event_type, None, t));
    out.extend(text("schema", &e.schema_version, None, t));
    out.extend(text("correlation", &e.correlation_id, Some(m), t));
    if l.replay_count > 0 {
        out.push(field(
            "replayed",
            format!("{} time(s) by dlq-triage", l.replay_count),
            None,
            t,
        ));
    }
    out
}

fn headers<'a>(d: &Detail, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let m = s.catalog.masker();
    let w = d
        .letter
        .raw
        .headers
        .iter()
        .map(|h| h.name.chars().count())
        .max()
        .unwrap_or(0)
        .min(32);
    let mut out: Vec<Line> = d
        .letter
        .raw
        .headers
        .iter()
        .map(|h| {
            Line::from(vec![
                Span::styled(
                    format!("{:<w$}  ", clean(&m.mask_text(&h.name))),
                    t.get(S::JsonKey),
                ),
                Span::styled(
                    sanitize::line(&m.mask_header(&h.name, &h.value), 300),
                    t.get(S::UiText),
                ),
            ])
        })
        .collect();
    for (k, v) in &d.letter.raw.properties {
        out.push(Line::from(vec![
            Span::styled(
                format!("{:<w$}  ", clean(&format!("(amqp) {k}"))),
                t.get(S::JsonKey),
            ),
            Span::styled(clean(&m.mask_text(v)), t.get(S::UiText)),
        ]));
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled("(no headers)", t.get(S::UiDim))));
    }
    out
}

fn payload<'a>(d: &Detail, unmasked: bool, t: &Theme) -> Vec<Line<'a>> {
    let v = &d.payload;
    let (label, style) = if unmasked {
        ("UNMASKED (audited, this session only)", t.get(S::UiError))
    } else {
        ("masked", t.get(S::UiDim))
    };
    let mut out = vec![Line::from(Span::styled(
        format!(
            "{} · {} · {label}",
            d.letter.body.as_str(),
            human_bytes(v.total_bytes as u64)
        ),
        style,
    ))];
    if let Some(e) = &d.letter.body_error {
        out.push(Line::from(Span::styled(
            format!("does not parse: {}", clean(e)),
            t.get(S::UiWarn),
        )));
    }
    let body = sanitize::sanitize_str(&v.text, Mode::Block, usize::MAX);
    for line in body.lines() {
        out.push(if v.kind == ViewKind::Json {
            json_line(line, t)
        } else {
            Line::from(Span::styled(line.to_string(), t.get(S::UiText)))
        });
    }
    if v.truncated {
        out.push(Line::from(Span::styled(
            format!(
                "… payload is {}; the rest is hidden (use `dlq-triage export`)",
                human_bytes(v.total_bytes as u64)
            ),
            t.get(S::UiWarn),
        )));
    }
    out
}

/// Colour one line of pretty-printed (masked, sanitized) JSON.
fn json_line<'a>(line: &str, t: &Theme) -> Line<'a> {
    let mut spans = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let push = |spans: &mut Vec<Span<'a>>, s: String, st: Style| spans.push(Span::styled(s, st));
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            let s: String = chars[start..i].iter().collect();
            let is_key = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&':');
            push(
                &mut spans,
                s,
                if is_key {
                    t.get(S::JsonKey)
                } else {
                    t.get(S::JsonString)
                },
            );
        } else if c.is_ascii_digit() || c == '-' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '-' | '+'))
            {
                i += 1;
            }
            push(
                &mut spans,
                chars[start..i].iter().collect(),
                t.get(S::JsonNumber),
            );
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            push(
                &mut spans,
                chars[start..i].iter().collect(),
                t.get(S::JsonLiteral),
            );
        } else {
            push(
                &mut spans,
                c.to_string(),
                if c.is_whitespace() {
                    Style::default()
                } else {
                    t.get(S::JsonPunct)
                },
            );
            i += 1;
        }
    }
    Line::from(spans)
}

fn diff<'a>(d: &Detail, t: &Theme) -> Vec<Line<'a>> {
    let Some((other, result)) = &d.diff else {
        return vec![Line::from(Span::styled(
            "mark a letter with space, select another: the diff shows here (masked)",
            t.get(S::UiDim),
        ))];
    };
    let mut out = vec![Line::from(Span::styled(
        format!("marked letter (row {other}) → selected · masked"),
        t.get(S::UiDim),
    ))];
    match result {
        Diff::Json(changes) if changes.is_empty() => out.push(Line::from("identical")),
        Diff::Json(changes) => {
            for c in changes {
                let path = if c.path.is_empty() {
                    "(root)".into()
                } else {
                    clean(&c.path)
                };
                let (mark, style, body) = match (&c.old, &c.new) {
                    (Some(o), Some(n)) => (
                        "~",
                        t.get(S::UiWarn),
                        format!("{} → {}", clean(o), clean(n)),
                    ),
                    (Some(o), None) => ("-", t.get(S::UiError), clean(o)),
                    (None, Some(n)) => ("+", t.get(S::UiInfo), clean(n)),
                    (None, None) => (" ", t.get(S::UiText), String::new()),
                };
                out.push(Line::from(vec![
                    Span::styled(format!("{mark} {path}  "), style),
                    Span::styled(body, t.get(S::UiText)),
                ]));
            }
        }
        Diff::Text(lines) => {
            for l in lines {
                out.push(match l.tag {
                    LineTag::Skipped(n) => {
                        Line::from(Span::styled(format!("  … {n} unchanged"), t.get(S::UiDim)))
                    }
                    LineTag::Same => Line::from(format!("  {}", clean(&l.text))),
                    LineTag::Added => Line::from(Span::styled(
                        format!("+ {}", clean(&l.text)),
                        t.get(S::UiInfo),
                    )),
                    LineTag::Removed => Line::from(Span::styled(
                        format!("- {}", clean(&l.text)),
                        t.get(S::UiError),
                    )),
                });
            }
        }
        Diff::Opaque { note, .. } => out.push(Line::from(clean(note))),
    }
    out
}
