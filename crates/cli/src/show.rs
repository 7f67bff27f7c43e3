//! `dlq-triage show`: one letter's failure metadata with provenance, masked headers and
//! the masked payload.

use super::context::{Launch, Scan, UsageError};
use super::ShowArgs;
use chrono::{DateTime, SecondsFormat, Utc};
use dlq_core::letter_view::{Fact, LetterFacts};
use dlq_core::masking::Masker;
use dlq_core::model::{DeadLetter, Sourced};
use dlq_core::payload_view::{self, PayloadView, ViewKind};
use dlq_core::sanitize::{self, human_bytes, Mode};
use serde_json::{json, Value};
use std::fmt::Display;
use std::io::Write;

/// Output guard for the payload view.
const MAX_PAYLOAD_OUT: usize = 64 * 1024;

/// Find letters by id or coordinates, keeping full letters only for matches.
pub(crate) fn find_letters(
    ctx: &Launch,
    source: &str,
    ids: &[&str],
) -> anyhow::Result<(Vec<Vec<DeadLetter>>, super::context::Loaded)> {
    // Kafka coordinates address one record: fetch it instead of scanning whole topics.
    if let [id] = ids {
        if let Some(coords) = kafka_coords(id) {
            let source_key = ctx.source_plan(source)?.0.to_string();
            let mut session = dlq_app::session::Session::new(
                ctx.open(source)?,
                ctx.session_settings(&source_key)?,
            )?;
            match session.fetch(&coords) {
                Ok(raw) => {
                    let catalog = dlq_core::catalog::Catalog::new(
                        ctx.masker()?,
                        ctx.config.conventions.clone(),
                    );
                    let dl = session.settings().extract(raw);
                    let info = session.info().clone();
                    let loaded = super::context::Loaded {
                        catalog,
                        session,
                        info,
                        source_key,
                        notes: Vec::new(),
                    };
                    return Ok((vec![vec![dl]], loaded));
                }
                Err(dlq_app::session::SessionError::Source(
                    dlq_core::ports::SourceError::Unsupported(_),
                )) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut found: Vec<Vec<DeadLetter>> = vec![Vec::new(); ids.len()];
    // An id with control characters is listed escaped (`id\x1b[31m…`); the escaped form
    // as the user copies it finds the letter too. Only such ids pay for the escaping.
    let escaped_ids = ids.iter().any(|id| id.contains('\\'));
    let loaded = ctx.scan_visit(source, |_, _, dl| {
        let coords = dl
            .raw
            .coords
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        let shown = escaped_ids.then(|| sanitize::clean(&dl.id.value.0));
        for (i, id) in ids.iter().enumerate() {
            if dl.id.value.0 == *id || coords == *id || shown.as_deref() == Some(*id) {
                found[i].push((*dl).clone());
            }
        }
        Ok(())
    })?;
    for (i, id) in ids.iter().enumerate() {
        if found[i].is_empty() {
            return Err(anyhow::anyhow!(
                "no letter with id or coordinates `{}` in {} (find ids with: dlq-triage list SOURCE --filter 'id=…' or a bare word)",
                sanitize::clean(id),
                sanitize::clean(&loaded.info.label)
            ));
        }
        // Newest first: a failed-again copy shares the message id with older copies.
        found[i].sort_by_key(|d| std::cmp::Reverse(d.dead_lettered_at.as_ref().map(|t| t.value)));
    }
    Ok((found, loaded))
}

/// `topic/partition/offset`, if the id has that shape.
fn kafka_coords(id: &str) -> Option<dlq_core::model::Coords> {
    let mut parts = id.rsplitn(3, '/');
    let offset = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let topic = parts.next().filter(|t| !t.is_empty())?;
    Some(dlq_core::model::Coords::Kafka {
        topic: topic.to_string(),
        partition,
        offset,
    })
}

pub fn run(ctx: &Launch, a: &ShowArgs) -> anyhow::Result<()> {
    let reason = a.reason.as_deref().map(str::trim).unwrap_or("");
    if a.unmask {
        if reason.is_empty() {
            return Err(
                UsageError("--unmask needs --reason saying why (it is audited)".into()).into(),
            );
        }
        ctx.require(dlq_core::access::Permission::Unmask, &a.id)?;
    }
    let (found, loaded) = find_letters(ctx, &a.source, &[a.id.as_str()])?;
    let copies = &found[0];
    let dl = &copies[0];
    let masker = loaded.catalog.masker();
    let may_view = ctx.may_view_payloads();
    let view = if a.unmask {
        // Checked and audited before anything is shown; a failed audit write shows nothing.
        ctx.principal().unmask(
            &loaded.source_key,
            &dl.id.value.0,
            reason,
            dlq_app::revise::UnmaskFor::View,
        )?;
        payload_view::render_letter_unmasked(dl, MAX_PAYLOAD_OUT)
    } else {
        payload_view::render_letter(masker, dl, MAX_PAYLOAD_OUT)
    };
    if a.json {
        let mut doc = letter_json(masker, dl, &view, &loaded.info.label, copies.len());
        let st = loaded.session.letter_state(dl).to_json();
        doc["state"] = st["state"].clone();
        doc["decision"] = st["decision"].clone();
        if a.unmask {
            doc["payload"]["masked"] = serde_json::json!(false);
        }
        if !may_view {
            doc["payload"] =
                serde_json::json!({"hidden": "seeing payloads needs the operator role"});
        }
        return super::output::print_json(&doc);
    }
    let mut out = std::io::stdout().lock();
    let facts = LetterFacts::of(dl, masker, &loaded.session.letter_state(dl), ctx.now_ms());
    print_facts(&mut out, dl, &facts, &loaded.info.label, copies.len())?;
    print_links(&mut out, &ctx.config.links, dl, masker)?;
    print_headers(&mut out, dl, masker)?;
    if !may_view {
        writeln!(
            out,
            "payload · hidden: seeing payloads needs the operator role (you are viewer)"
        )?;
        return Ok(());
    }
    print_payload(&mut out, dl, &view, a.unmask)?;
    Ok(())
}

/// A line shown from untrusted text: sanitized and cut.
fn shown(s: &str) -> String {
    sanitize::line(s, 300)
}

/// The id (with where it came from), identity, failure and event facts.
fn print_facts(
    out: &mut dyn Write,
    dl: &DeadLetter,
    facts: &LetterFacts,
    label: &str,
    copies: usize,
) -> std::io::Result<()> {
    writeln!(
        out,
        "letter {}  ← {}",
        shown(&dl.id.value.0),
        shown(&dl.id.from.to_string())
    )?;
    if copies > 1 {
        writeln!(
            out,
            "  note: {copies} letters share this id (dead-lettered again?); showing the newest"
        )?;
    }
    writeln!(out, "  {:<14} {}", "source", shown(label))?;
    let line = |out: &mut dyn Write, f: &Fact| -> std::io::Result<()> {
        writeln!(
            out,
            "  {:<14} {}{}",
            f.label,
            shown(&f.value),
            f.from
                .as_deref()
                .map(|p| format!("  ← {}", shown(p)))
                .unwrap_or_default()
        )
    };
    // The id is in the heading line.
    for f in facts.identity.iter().skip(1) {
        line(out, f)?;
    }
    writeln!(out, "failure")?;
    for f in &facts.failure {
        line(out, f)?;
    }
    let none = if facts.event.is_empty() {
        " (no event metadata)"
    } else {
        ""
    };
    writeln!(out, "event{none}")?;
    for f in &facts.event {
        line(out, f)?;
    }
    Ok(())
}

/// `[[links]]` filled from the letter: hyperlinks (OSC 8) on a terminal, plain URLs in a
/// pipe.
fn print_links(
    out: &mut dyn Write,
    templates: &[dlq_core::links::LinkTemplate],
    dl: &DeadLetter,
    masker: &Masker,
) -> std::io::Result<()> {
    if templates.is_empty() {
        return Ok(());
    }
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let hyperlink = |url: &str| {
        if tty {
            dlq_core::links::osc8(url)
        } else {
            url.to_string()
        }
    };
    writeln!(out, "links")?;
    for line in dlq_core::links::link_lines(templates, dl, masker, &hyperlink) {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Headers and AMQP properties, names and values masked.
fn print_headers(out: &mut dyn Write, dl: &DeadLetter, masker: &Masker) -> std::io::Result<()> {
    writeln!(out, "headers ({})", dl.raw.headers.len())?;
    let rows = dlq_core::letter_view::header_rows(dl, masker);
    let width = dlq_core::letter_view::name_width(&rows, 40);
    for (name, value) in &rows {
        writeln!(out, "  {name:<width$}  {value}")?;
    }
    Ok(())
}

/// The payload view with its kind, size and whether it is masked.
fn print_payload(
    out: &mut dyn Write,
    dl: &DeadLetter,
    view: &PayloadView,
    unmasked: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "payload · {} · {} · {}{}",
        dl.body.as_str(),
        human_bytes(dl.raw.payload.len() as u64),
        if unmasked {
            "UNMASKED (audited)"
        } else {
            "masked"
        },
        if view.kind == ViewKind::Hex {
            " · hex"
        } else {
            ""
        }
    )?;
    if let Some(err) = &dl.body_error {
        writeln!(out, "  does not parse: {}", shown(err))?;
    }
    if let Some(s) = &dl.schema {
        writeln!(out, "  schema: {}", shown(&s.describe()))?;
    }
    if let Some(s) = &dl.key_schema {
        writeln!(out, "  key schema: {}", shown(&s.describe()))?;
    }
    let body = sanitize::sanitize_str(&view.text, Mode::Block, usize::MAX);
    writeln!(out, "{body}")?;
    if view.truncated {
        writeln!(
            out,
            "… [payload is {}; the rest is hidden — use `export` for all of it]",
            human_bytes(view.total_bytes as u64)
        )?;
    }
    Ok(())
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn sourced<T: Display>(s: &Option<Sourced<T>>, mask: impl Fn(String) -> String) -> Value {
    match s {
        Some(s) => json!({
            "value": mask(s.value.to_string()),
            "convention": s.from.convention.to_string(),
            "location": s.from.location,
        }),
        None => Value::Null,
    }
}

fn sourced_time(s: &Option<Sourced<DateTime<Utc>>>) -> Value {
    match s {
        Some(s) => {
            json!({"value": rfc(s.value), "convention": s.from.convention.to_string(), "location": s.from.location})
        }
        None => Value::Null,
    }
}

/// The `show --json` document.
pub(crate) fn letter_json(
    masker: &Masker,
    dl: &DeadLetter,
    view: &payload_view::PayloadView,
    source: &str,
    copies: usize,
) -> Value {
    let plain = |s: String| s;
    let masked = |s: String| masker.mask_text(&s);
    let f = &dl.failure;
    let e = &dl.event;
    json!({
        "source": source,
        "id": sourced(&Some(dl.id.clone()), plain),
        "copies": copies,
        "coords": dl.raw.coords.as_ref().map(|c| c.to_string()),
        "key": dl.raw.key.as_ref().map(|k| masker.mask_text(&String::from_utf8_lossy(k))),
        "dead_lettered_at": sourced_time(&dl.dead_lettered_at),
        "state": "open",
        "replay_count": dl.replay_count,
        "failure": {
            "reason_code": sourced(&f.reason_code, plain),
            "reason_detail": sourced(&f.reason_detail, masked),
            "exception_type": sourced(&f.exception_type, plain),
            "death_reason": sourced(&f.death_reason, plain),
            "consumer": sourced(&f.consumer, plain),
            "consumer_version": sourced(&f.consumer_version, plain),
            "attempt": sourced(&f.attempt, plain),
            "first_failed_at": sourced_time(&f.first_failed_at),
            "last_failed_at": sourced_time(&f.last_failed_at),
            "origin": sourced(&f.origin, plain),
        },
        "event": {
            "message_id": sourced(&e.message_id, plain),
            "event_type": sourced(&e.event_type, plain),
            "schema_version": sourced(&e.schema_version, plain),
            "correlation_id": sourced(&e.correlation_id, masked),
            "occurred_at": sourced_time(&e.occurred_at),
            "payload_ref": sourced(&e.payload_ref, masked),
        },
        "headers": dl.raw.headers.iter().map(|h| json!({"name": masker.mask_text(&h.name), "value": masker.mask_header(&h.name, &h.value)})).collect::<Vec<_>>(),
        "properties": dl.raw.properties.iter().map(|(k, v)| json!({"name": k, "value": masker.mask_text(v)})).collect::<Vec<_>>(),
        "payload": {
            "schema": dl.schema.as_ref().map(|s| s.to_json()),
            "key_schema": dl.key_schema.as_ref().map(|s| s.to_json()),
            "body": dl.body.as_str(),
            "parse_error": dl.body_error,
            "view": view.kind.as_str(),
            "bytes": view.total_bytes,
            "masked": true,
            "truncated": view.truncated,
            "text": view.text,
        },
    })
}
