//! `dlq-triage diff`: letter against letter, structurally for JSON, by line for text.

use super::context::Launch;
use super::show::find_letters;
use super::DiffArgs;
use dlq_core::diff::{diff_letters, diff_payloads, Diff, LineTag};
use dlq_core::masking::Masker;
use dlq_core::model::DeadLetter;
use dlq_core::sanitize;
use serde_json::{json, Map, Value};
use std::io::Write;

/// Headers as a JSON object (last value per name wins), for a structural diff.
fn headers_doc(dl: &DeadLetter) -> Vec<u8> {
    let mut m = Map::new();
    for h in &dl.raw.headers {
        let v = dlq_core::masking::render_header(&h.value);
        m.insert(h.name.to_string(), Value::String(v));
    }
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
}

fn diff_json(d: &Diff) -> Value {
    match d {
        Diff::Json(changes) => json!({
            "kind": "json",
            "changes": changes.iter().map(|c| json!({"path": c.path, "op": c.kind.as_str(), "old": c.old, "new": c.new})).collect::<Vec<_>>(),
        }),
        Diff::Text(lines) => json!({
            "kind": "text",
            "lines": lines.iter().map(|l| match l.tag {
                LineTag::Skipped(n) => json!({"op": "skip", "count": n}),
                LineTag::Same => json!({"op": "same", "text": l.text}),
                LineTag::Added => json!({"op": "added", "text": l.text}),
                LineTag::Removed => json!({"op": "removed", "text": l.text}),
            }).collect::<Vec<_>>(),
        }),
        Diff::Opaque { equal, note } => json!({"kind": "opaque", "equal": equal, "note": note}),
    }
}

fn print_diff(out: &mut dyn Write, d: &Diff) -> std::io::Result<usize> {
    let clean = |s: &str| sanitize::line(s, 400);
    Ok(match d {
        Diff::Json(changes) => {
            let w = changes
                .iter()
                .map(|c| c.path.chars().count())
                .max()
                .unwrap_or(0)
                .min(60);
            for c in changes {
                let (mark, text) = match (&c.old, &c.new) {
                    (Some(o), Some(n)) => ("~", format!("{} → {}", clean(o), clean(n))),
                    (Some(o), None) => ("-", clean(o)),
                    (None, Some(n)) => ("+", clean(n)),
                    (None, None) => (" ", String::new()),
                };
                let path = if c.path.is_empty() {
                    "(root)".to_string()
                } else {
                    clean(&c.path)
                };
                writeln!(out, "  {mark} {path:<w$}  {text}")?;
            }
            changes.len()
        }
        Diff::Text(lines) => {
            let mut n = 0;
            for l in lines {
                match l.tag {
                    LineTag::Skipped(k) => writeln!(out, "  … {k} unchanged line(s)")?,
                    LineTag::Same => writeln!(out, "    {}", clean(&l.text))?,
                    LineTag::Added => {
                        n += 1;
                        writeln!(out, "  + {}", clean(&l.text))?
                    }
                    LineTag::Removed => {
                        n += 1;
                        writeln!(out, "  - {}", clean(&l.text))?
                    }
                }
            }
            n
        }
        Diff::Opaque { equal, note } => {
            writeln!(out, "  {}", clean(note))?;
            usize::from(!equal)
        }
    })
}

/// Revision `n` of letter `x`, read as the letter is (a schema-encoded revision decoded
/// with it).
fn revision(
    ctx: &Launch,
    loaded: &crate::context::Loaded,
    x: &DeadLetter,
    n: i64,
) -> anyhow::Result<DeadLetter> {
    let payload = ctx
        .ledger()?
        .revision(&loaded.source_key, &x.id.value.0, n)?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no revision {n}",
                dlq_core::sanitize::clean(&x.id.value.0)
            )
        })?;
    let mut raw = x.raw.clone();
    raw.payload = payload;
    Ok(loaded.session.settings().extract(raw))
}

pub fn run(ctx: &Launch, a: &DiffArgs) -> anyhow::Result<()> {
    ctx.require(dlq_core::access::Permission::ViewPayload, &a.source)?;
    let other_id = a.other_id.clone().unwrap_or_default();
    let ids: Vec<&str> = if a.revision.is_some() {
        vec![a.id.as_str()]
    } else {
        vec![a.id.as_str(), other_id.as_str()]
    };
    let (found, loaded) = find_letters(ctx, &a.source, &ids)?;
    let x = &found[0][0];
    let revised;
    let y = match a.revision {
        Some(n) => {
            revised = revision(ctx, &loaded, x, n)?;
            &revised
        }
        None => &found[1][0],
    };
    let masker: &Masker = loaded.catalog.masker();
    // A transform's revision, to a role without the unmask right: what its program
    // computes on the masked original, never the stored revision through the masker.
    let guarded = match a.revision {
        Some(n) if !ctx.principal().may(dlq_core::access::Permission::Unmask) => {
            dlq_app::transform::revision_changes(loaded.session.settings(), x, n)?
        }
        _ => None,
    };
    let guarded_shown = guarded.is_some();
    let payload = match guarded {
        Some(changes) => dlq_core::diff::Diff::Json(changes),
        None => diff_letters(masker, x, y),
    };
    let headers = diff_payloads(masker, &headers_doc(x), &headers_doc(y));
    // A revision's own failure fields are its program's real output too: a role shown
    // the masked-view computation is shown the letter's.
    let y_reason = if guarded_shown {
        x.reason_code()
    } else {
        y.reason_code()
    };
    if a.json {
        let (ia, ca) = label(x);
        let (ib, cb) = label(y);
        return super::output::print_json(&json!({
            "source": loaded.info.label,
            "a": {"id": ia, "coords": ca, "reason_code": x.reason_code()},
            "b": {"id": ib, "coords": cb, "reason_code": y_reason},
            "computed_on": if guarded_shown { "the masked view (the revision itself is not shown to this role)" } else { "the letters, masked" },
            "payload": diff_json(&payload),
            "headers": diff_json(&headers),
        }));
    }
    print_text(
        [("a", x, x.reason_code()), ("b", y, y_reason)],
        guarded_shown,
        &payload,
        &headers,
    )
}

/// A letter's id and coordinates, as the diff names its sides.
fn label(d: &DeadLetter) -> (String, String) {
    let c = d
        .raw
        .coords
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    (d.id.value.0.clone(), c)
}

/// The diff as text: the two sides, then the payload's and the headers' differences.
fn print_text(
    sides: [(&str, &DeadLetter, &str); 2],
    guarded_shown: bool,
    payload: &dlq_core::diff::Diff,
    headers: &dlq_core::diff::Diff,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for (side, d, reason) in sides {
        let (id, coords) = label(d);
        writeln!(
            out,
            "{side}  {} {}  {}",
            sanitize::clean(&id),
            sanitize::clean(&coords),
            sanitize::line(reason, 80)
        )?;
    }
    if guarded_shown {
        writeln!(
            out,
            "payload, as its program computes it on the masked view (the revision itself is not shown to your role)"
        )?;
    } else {
        writeln!(out, "payload (masked)")?;
    }
    if print_diff(&mut out, payload)? == 0 {
        writeln!(out, "  identical")?;
    }
    writeln!(out, "headers (masked)")?;
    if print_diff(&mut out, headers)? == 0 {
        writeln!(out, "  identical")?;
    }
    Ok(())
}
