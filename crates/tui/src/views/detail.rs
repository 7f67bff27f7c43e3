//! The selected letter: failure fields with provenance, headers, the masked payload
//! (JSON coloured), and the diff against the marked letter.

use super::pane;
use crate::state::{AppState, Detail, Pane, Tab};
use crate::theme::StyleName;
use crate::theme::Theme;
use dlq_core::diff::{Diff, LineTag};
use dlq_core::letter_view::{Fact, LetterFacts};
use dlq_core::payload_view::ViewKind;
use dlq_core::sanitize::{self, human_bytes, Mode};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

pub fn render(f: &mut Frame, area: Rect, s: &AppState, t: &Theme) {
    let focused = s.focus == Pane::Detail;
    // Every tab's key stays visible: the labels are cut to fit (`1 Fail 2 Head …`),
    // the selected one kept whole.
    let full: usize = Tab::ALL.iter().map(|t| t.title().len() + 5).sum::<usize>() + 3;
    let short = usize::from(area.width) < full;
    let mut title = vec![Span::raw(" ")];
    for (i, tab) in Tab::ALL.iter().enumerate() {
        let selected = *tab == s.detail.tab();
        let style = if selected {
            t.get(StyleName::UiSelection)
        } else {
            t.get(StyleName::UiDim)
        };
        let label = if short && !selected {
            &tab.title()[..tab.title().len().min(4)]
        } else {
            tab.title()
        };
        title.push(Span::styled(format!(" {} {label} ", i + 1), style));
        if !short {
            title.push(Span::raw(" "));
        }
    }
    let block = pane(Line::from(title), focused, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let lines = match (s.detail.shown(), s.selected_row()) {
        (Some(_), _)
            if matches!(s.detail.tab(), Tab::Payload | Tab::Diff)
                && s.role < dlq_core::access::Role::Operator =>
        {
            vec![Line::from(Span::styled(
                "payloads are hidden: seeing them needs the operator role (you are viewer)",
                t.get(StyleName::UiWarn),
            ))]
        }
        (Some(d), _) => match s.detail.tab() {
            Tab::Failure => failure(d, s, t),
            Tab::Headers => headers(d, s, t),
            Tab::Payload => payload(d, s.detail.is_unmasked(d.row), usize::from(inner.width), t),
            Tab::Diff => diff(d, s, t),
            Tab::History => match s.detail.history(d.row) {
                Some(lines) => lines
                    .iter()
                    .map(|l| Line::from(Span::styled(clean(l), t.get(StyleName::UiText))))
                    .collect(),
                _ => vec![Line::from(Span::styled(
                    "reading the ledger…",
                    t.get(StyleName::UiDim),
                ))],
            },
        },
        (None, Some(_)) if s.detail.fetching() => vec![Line::from(Span::styled(
            "fetching the letter…",
            t.get(StyleName::UiDim),
        ))],
        (None, Some(row)) if s.detail.is_not_kept(row) => not_kept(row, s, t),
        _ => vec![Line::from(Span::styled(
            "no letter selected",
            t.get(StyleName::UiDim),
        ))],
    };
    f.render_widget(
        Paragraph::new(lines)
            .scroll((s.detail.scroll(), 0))
            .wrap(Wrap { trim: false }),
        inner,
    );
}

fn clean(s: &str) -> String {
    sanitize::line(s, 400)
}

/// The ledger state of a row: its decision, if one is bound to this exact letter.
fn row_state(s: &AppState, row: dlq_core::store::RowId) -> dlq_app::session::LetterState {
    if matches!(
        s.ledger_alert,
        Some(crate::state::LedgerAlert::Unreachable(_))
    ) {
        return dlq_app::session::LetterState::unknown();
    }
    let store = &s.browse.catalog.store;
    let decision = store
        .row(row)
        .zip(store.binding(row))
        .and_then(|(r, b)| s.browse.decision(&b).filter(|x| x.letter_id == store.id(r)));
    dlq_app::session::LetterState::of(decision)
}

fn failure<'a>(d: &Detail, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let state = row_state(s, d.row);
    let facts = LetterFacts::of(&d.letter, s.browse.catalog.masker(), &state, s.now_ms);
    let mut lines = fact_lines(&facts, t);
    if !s.links.is_empty() {
        lines.push(Line::from(Span::styled(
            "links (L copies them)",
            t.get(StyleName::UiDim),
        )));
        let plain = |url: &str| url.to_string();
        for l in dlq_core::links::link_lines(&s.links, &d.letter, s.browse.catalog.masker(), &plain)
        {
            lines.push(Line::from(Span::styled(
                format!("  {l}"),
                t.get(StyleName::UiText),
            )));
        }
    }
    lines
}

/// A letter whose bytes are gone: says so, then what the index still knows of it.
fn not_kept<'a>(row: dlq_core::store::RowId, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![
        Line::from(Span::styled(
            "payload not kept: this held delivery's bytes left memory (the payload budget) and RabbitMQ cannot hand one message out again; a larger payload_cache_mib in the config keeps more",
            t.get(StyleName::UiWarn),
        )),
        Line::from(""),
    ];
    if let Some(r) = s.browse.catalog.store.row(row) {
        let facts = LetterFacts::of_row(
            &s.browse.catalog.store,
            r,
            s.browse.catalog.masker(),
            &row_state(s, row),
            s.now_ms,
        );
        lines.extend(fact_lines(&facts, t));
    }
    lines
}

/// `label  value  ← provenance`, one line a fact.
fn fact_lines<'a>(facts: &LetterFacts, t: &Theme) -> Vec<Line<'a>> {
    let fact = |f: &Fact| {
        let mut spans = vec![
            Span::styled(format!("{:<14}", f.label), t.get(StyleName::UiDim)),
            Span::styled(clean(&f.value), t.get(StyleName::UiText)),
        ];
        if let Some(p) = &f.from {
            spans.push(Span::styled(
                format!("  ← {}", clean(p)),
                t.get(StyleName::UiProvenance),
            ));
        }
        Line::from(spans)
    };
    facts
        .identity
        .iter()
        .chain(&facts.failure)
        .chain(&facts.event)
        .map(fact)
        .collect()
}

fn headers<'a>(d: &Detail, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let rows = dlq_core::letter_view::header_rows(&d.letter, s.browse.catalog.masker());
    let w = dlq_core::letter_view::name_width(&rows, 32);
    let mut out: Vec<Line> = rows
        .into_iter()
        .map(|(name, value)| {
            Line::from(vec![
                Span::styled(format!("{name:<w$}  "), t.get(StyleName::JsonKey)),
                Span::styled(value, t.get(StyleName::UiText)),
            ])
        })
        .collect();
    if out.is_empty() {
        out.push(Line::from(Span::styled(
            "(no headers)",
            t.get(StyleName::UiDim),
        )));
    }
    out
}

fn payload<'a>(d: &Detail, unmasked: bool, width: usize, t: &Theme) -> Vec<Line<'a>> {
    let v = &d.payload;
    let (label, style) = if unmasked {
        (
            "UNMASKED (audited, this session only)",
            t.get(StyleName::UiError),
        )
    } else {
        ("masked", t.get(StyleName::UiDim))
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
            t.get(StyleName::UiWarn),
        )));
    }
    for (what, s) in [
        ("schema", &d.letter.schema),
        ("key schema", &d.letter.key_schema),
    ] {
        if let Some(s) = s {
            let style = if s.decoded().is_some() {
                StyleName::UiDim
            } else {
                StyleName::UiWarn
            };
            out.push(Line::from(Span::styled(
                format!("{what}: {}", clean(&s.describe())),
                t.get(style),
            )));
        }
    }
    let body = sanitize::sanitize_str(&v.text, Mode::Block, usize::MAX);
    for line in body.lines() {
        if v.kind == ViewKind::Json {
            out.extend(wrap_indented(json_line(line, t), width));
        } else {
            out.push(Line::from(Span::styled(
                line.to_string(),
                t.get(StyleName::UiText),
            )));
        }
    }
    if v.truncated {
        out.push(Line::from(Span::styled(
            format!(
                "… payload is {}; the rest is hidden (use `dlq-triage export`)",
                human_bytes(v.total_bytes as u64)
            ),
            t.get(StyleName::UiWarn),
        )));
    }
    out
}

/// Colour one line of pretty-printed (masked, sanitized) JSON.
/// A JSON line longer than `width`, wrapped so its continuation sits under its own
/// indentation plus two (a long value reads as part of its key, not as a line of its
/// own at the left edge). Styles are kept across the cut.
fn wrap_indented(line: Line<'_>, width: usize) -> Vec<Line<'_>> {
    if width < 8 || line.width() <= width {
        return vec![line];
    }
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let indent = (text.chars().take_while(|c| *c == ' ').count() + 2).min(width / 2);
    let mut out: Vec<Line> = Vec::new();
    let mut cur: Vec<Span> = Vec::new();
    let mut room = width;
    for span in line.spans {
        let mut rest: &str = &span.content;
        while !rest.is_empty() {
            if room == 0 {
                out.push(Line::from(std::mem::take(&mut cur)));
                cur.push(Span::raw(" ".repeat(indent)));
                room = width - indent;
            }
            let take = rest
                .char_indices()
                .nth(room)
                .map_or(rest.len(), |(at, _)| at);
            let (head, tail) = rest.split_at(take);
            room -= head.chars().count();
            cur.push(Span::styled(head.to_string(), span.style));
            rest = tail;
        }
    }
    if !cur.is_empty() {
        out.push(Line::from(cur));
    }
    out
}

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
                    t.get(StyleName::JsonKey)
                } else {
                    t.get(StyleName::JsonString)
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
                t.get(StyleName::JsonNumber),
            );
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            push(
                &mut spans,
                chars[start..i].iter().collect(),
                t.get(StyleName::JsonLiteral),
            );
        } else {
            push(
                &mut spans,
                c.to_string(),
                if c.is_whitespace() {
                    Style::default()
                } else {
                    t.get(StyleName::JsonPunct)
                },
            );
            i += 1;
        }
    }
    Line::from(spans)
}

fn diff<'a>(d: &Detail, s: &AppState, t: &Theme) -> Vec<Line<'a>> {
    let Some((other, result)) = &d.diff else {
        return vec![Line::from(Span::styled(
            "mark a letter with space, select another: the diff shows here (masked)",
            t.get(StyleName::UiDim),
        ))];
    };
    // Letters by their ids (the row is an index of this session, not a place anyone
    // knows the letter by).
    let store = &s.browse.catalog.store;
    let name = |row: dlq_core::store::RowId| {
        store
            .row(row)
            .map(|r| clean(&s.browse.catalog.masker().mask_text(store.id(r))))
            .unwrap_or_else(|| "(gone)".into())
    };
    let mut out = vec![Line::from(Span::styled(
        format!(
            "marked {} → selected {} · masked",
            name(*other),
            name(d.row)
        ),
        t.get(StyleName::UiDim),
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
                        t.get(StyleName::UiWarn),
                        format!("{} → {}", clean(o), clean(n)),
                    ),
                    (Some(o), None) => ("-", t.get(StyleName::UiError), clean(o)),
                    (None, Some(n)) => ("+", t.get(StyleName::UiInfo), clean(n)),
                    (None, None) => (" ", t.get(StyleName::UiText), String::new()),
                };
                out.push(Line::from(vec![
                    Span::styled(format!("{mark} {path}  "), style),
                    Span::styled(body, t.get(StyleName::UiText)),
                ]));
            }
        }
        Diff::Text(lines) => {
            for l in lines {
                out.push(match l.tag {
                    LineTag::Skipped(n) => Line::from(Span::styled(
                        format!("  … {n} unchanged"),
                        t.get(StyleName::UiDim),
                    )),
                    LineTag::Same => Line::from(format!("  {}", clean(&l.text))),
                    LineTag::Added => Line::from(Span::styled(
                        format!("+ {}", clean(&l.text)),
                        t.get(StyleName::UiInfo),
                    )),
                    LineTag::Removed => Line::from(Span::styled(
                        format!("- {}", clean(&l.text)),
                        t.get(StyleName::UiError),
                    )),
                });
            }
        }
        Diff::Opaque { note, .. } => out.push(Line::from(clean(note))),
    }
    out
}

#[cfg(test)]
mod wrap_tests {
    use super::*;

    #[test]
    fn a_long_json_value_wraps_under_its_key() {
        let line = Line::from(vec![
            Span::raw("    "),
            Span::raw("\"first_failed_at\": "),
            Span::raw("\"2026-11-29T17:53:54.206Z and a long tail\","),
        ]);
        let lines = wrap_indented(line, 30);
        let texts: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert!(texts.len() > 1, "{texts:?}");
        assert!(texts.iter().all(|t| t.chars().count() <= 30), "{texts:?}");
        for cont in &texts[1..] {
            assert!(cont.starts_with("      "), "{texts:?}");
        }
        let joined: String = texts
            .iter()
            .enumerate()
            .map(|(i, t)| if i == 0 { t.as_str() } else { &t[6..] })
            .collect();
        assert_eq!(
            joined,
            "    \"first_failed_at\": \"2026-11-29T17:53:54.206Z and a long tail\","
        );
    }
}
