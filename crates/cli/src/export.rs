//! `dlq-triage export`: masked NDJSON in the dump format, readable back as a file source.
//! Streams: letters are masked and written as they are scanned, never all held.

use super::context::{Launch, Scan};
use super::ExportArgs;
use anyhow::Context as _;
use dlq_core::dump::to_line;
use dlq_core::masking::{Layout, Masker};
use dlq_core::model::{BodyKind, DeadLetter, Header, HeaderValue, RawLetter};
use std::io::{BufWriter, Write};

/// A masked copy of a letter: payload, key, header values and properties. A payload a
/// schema decoded is exported decoded and masked (by name and by the schema's PII
/// tags), with its schema named in `x-dlq-schema-*` headers.
pub(crate) fn masked_raw(masker: &Masker, dl: &DeadLetter) -> RawLetter {
    let raw = &dl.raw;
    let masker = &*masker.with_fields(dl.pii_fields());
    let readable = dl.readable_payload();
    let undecoded = dl.schema.as_ref().is_some_and(|s| s.decoded().is_none());
    let payload = match dl.body {
        _ if undecoded => masker.mask_opaque(readable),
        BodyKind::Json => masker
            .mask_json(readable, Layout::Compact, usize::MAX)
            .map(|(t, _)| t.into_bytes())
            .unwrap_or_else(|_| masker.mask_binary(readable)),
        BodyKind::BrokenJson | BodyKind::Text => masker
            .mask_payload(readable, Layout::Compact, usize::MAX)
            .0
            .into_bytes(),
        BodyKind::Binary | BodyKind::Empty => masker.mask_binary(readable),
    };
    let schema_headers = dl.decoded().map(|d| {
        let s = &d.schema;
        let mut h = vec![Header::new(
            "x-dlq-schema-format",
            HeaderValue::text(s.format.as_str()),
        )];
        if let Some(id) = s.id {
            h.push(Header::new(
                "x-dlq-schema-id",
                HeaderValue::text(&id.to_string()),
            ));
        }
        h.push(Header::new(
            "x-dlq-schema-name",
            HeaderValue::text(&masker.mask_text(&s.name)),
        ));
        h
    });
    RawLetter {
        coords: raw.coords.clone(),
        key: raw.key.as_ref().map(|k| match std::str::from_utf8(k) {
            Ok(t) => masker.mask_text(t).into_bytes(),
            Err(_) => masker.mask_binary(k),
        }),
        headers: raw
            .headers
            .iter()
            .map(|h| {
                Header::new(
                    masker.mask_text(&h.name),
                    masker.mask_header_value(&h.name, &h.value),
                )
            })
            .chain(schema_headers.into_iter().flatten())
            .collect(),
        properties: raw
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), masker.mask_text(v)))
            .collect(),
        payload,
        timestamp: raw.timestamp,
    }
}

pub fn run(ctx: &Launch, a: &ExportArgs) -> anyhow::Result<()> {
    ctx.require(dlq_core::access::Permission::ViewPayload, &a.source)?;
    let mut filter = ctx.parse_filter(a.filter.as_deref())?;
    let now = ctx.now_ms();
    // Write to a temporary file next to the target and rename at the end, so an
    // interrupted export never leaves a truncated file that looks complete.
    let (mut sink, tmp): (
        Box<dyn Write>,
        Option<(std::path::PathBuf, std::path::PathBuf)>,
    ) = match &a.out {
        Some(path) => {
            let tmp = path.with_extension("ndjson.partial");
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            (Box::new(BufWriter::new(f)), Some((tmp, path.clone())))
        }
        None => (Box::new(BufWriter::new(std::io::stdout().lock())), None),
    };
    let mut written = 0u64;
    let loaded = ctx.scan_visit(&a.source, |cat, row, dl| {
        let matches = match cat.store.row(row) {
            Some(r) => {
                filter.note_letter(r, &dl, cat.masker());
                filter.matches(&cat.store, r, now)
            }
            None => false,
        };
        if matches {
            let line = to_line(&masked_raw(cat.masker(), &dl), true);
            writeln!(sink, "{}", super::output::json_safe(&line))?;
            written += 1;
        }
        Ok(())
    })?;
    sink.flush()?;
    drop(sink);
    super::context::note_unmatched(&filter, written as usize);
    if let Some((tmp, path)) = tmp {
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("moving {} to {}", tmp.display(), path.display()))?;
        eprintln!(
            "exported {written} masked letter(s) of {} to {}",
            loaded.catalog.store.len(),
            dlq_core::sanitize::clean(&path.display().to_string())
        );
    }
    super::context::report_problems(&loaded.catalog);
    Ok(())
}
