//! A scanned DLQ: the letter store plus what could not be read, fed letter by letter.

use crate::conventions::{extract_decoding, UserMapping};
use crate::masking::{Layout, Masker};
use crate::model::DeadLetter;
use crate::schema::PayloadCodec;
use crate::store::{LetterStore, RowId};
use std::borrow::Cow;
use std::sync::Arc;

/// Length of the masked one-line preview kept per letter, in bytes.
pub const PREVIEW_BYTES: usize = 48;
/// How much of a payload the preview looks at.
const PREVIEW_INPUT: usize = 4096;
/// How many unreadable records are kept for reporting (all are counted).
const MAX_KEPT_PROBLEMS: usize = 100;

/// A record that could not be turned into a letter, with where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub location: String,
    pub message: String,
}

pub struct Catalog {
    pub store: LetterStore,
    masker: Masker,
    /// Compute masked previews while ingesting (lists and fuzzy search need them; a
    /// summary does not, and skipping them saves about a quarter of the ingest cost).
    previews: bool,
    mappings: Vec<UserMapping>,
    problems: Vec<Problem>,
    problem_count: u64,
}

impl Catalog {
    pub fn new(masker: Masker, mappings: Vec<UserMapping>) -> Self {
        Catalog {
            store: LetterStore::new(),
            masker,
            previews: true,
            mappings,
            problems: Vec::new(),
            problem_count: 0,
        }
    }

    /// Whether ingest computes masked previews (default on).
    pub fn with_previews(mut self, on: bool) -> Self {
        self.previews = on;
        self
    }

    pub fn masker(&self) -> &Masker {
        &self.masker
    }

    pub fn mappings(&self) -> &[UserMapping] {
        &self.mappings
    }

    /// Extract, mask a preview, index. Returns the row and the full letter.
    pub fn ingest(&mut self, raw: crate::model::RawLetter) -> (RowId, DeadLetter) {
        let (dl, preview) = self.prepare(raw);
        let id = self.store.push(&dl, &preview);
        (id, dl)
    }

    /// Conventions plus masked preview: the per-letter work that needs no index.
    fn prepare(&self, raw: crate::model::RawLetter) -> (DeadLetter, String) {
        prepare_with(&self.masker, &self.mappings, None, self.previews, raw)
    }

    /// Index a letter prepared elsewhere (a worker thread) with [`prepare_letter`].
    /// Index a prepared letter with its ledger state: the one way both front ends fill
    /// a catalog from a session's letters.
    pub fn push_prepared(&mut self, p: &crate::prepared::Prepared) -> RowId {
        let row = self.store.push_with_fp(&p.letter, &p.preview, p.fp);
        if p.state != crate::model::TriageState::Open {
            self.store.set_state(row, p.state);
        }
        row
    }
}

/// Conventions plus masked preview for one letter; pure, so any thread can run it.
pub fn prepare_letter(
    masker: &Masker,
    mappings: &[UserMapping],
    raw: crate::model::RawLetter,
) -> (DeadLetter, String) {
    prepare_with(masker, mappings, None, true, raw)
}

/// Conventions (with schema-encoded payloads decoded by `codec`) plus the masked preview,
/// or an empty preview when a command shows none: what a catalog and the session's
/// preparing threads both do with a raw letter.
pub fn prepare_with(
    masker: &Masker,
    mappings: &[UserMapping],
    codec: Option<&dyn PayloadCodec>,
    previews: bool,
    raw: crate::model::RawLetter,
) -> (DeadLetter, String) {
    let mut dl = extract_decoding(raw, mappings, codec);
    let preview = mask_and_preview(masker, previews, &mut dl);
    (dl, preview)
}

/// [`prepare_with`], the letter behind the shared pointer the session hands the front
/// ends. A letter is 1,600 bytes: returned by value through each step and then boxed,
/// it was copied four times (memmove was ~3% of a `summary`'s CPU); here it is moved
/// into its allocation once, then masked and previewed where it lies.
pub fn prepare_shared(
    masker: &Masker,
    mappings: &[UserMapping],
    codec: Option<&dyn PayloadCodec>,
    previews: bool,
    raw: crate::model::RawLetter,
) -> (Arc<DeadLetter>, String) {
    let mut dl = Arc::new(extract_decoding(raw, mappings, codec));
    // Just made, so not shared: `make_mut` clones nothing.
    let preview = mask_and_preview(masker, previews, Arc::make_mut(&mut dl));
    (dl, preview)
}

/// Mask the extracted fields (the policy widened by the fields the letter's schema tags
/// PII) and, when asked, the preview with the same policy.
fn mask_and_preview(masker: &Masker, previews: bool, dl: &mut DeadLetter) -> String {
    let masker = masker.with_fields(dl.pii_fields());
    mask_extracted(&masker, dl);
    if !previews {
        return String::new();
    }
    if dl.schema.as_ref().is_some_and(|s| s.decoded().is_none()) {
        // Not decoded: which bytes are a name cannot be told, so none are previewed.
        return format!("[{} B, not decoded]", dl.raw.payload.len());
    }
    let payload = dl.readable_payload();
    let focus = dl
        .payload_span
        .clone()
        .and_then(|r| payload.get(r))
        .unwrap_or(payload);
    preview(&masker, focus)
}

/// Conventions on a letter, with the extracted fields masked (see [`mask_extracted`]):
/// every front end's view of a letter comes from this or [`prepare_with`].
pub fn extract_masked(
    masker: &Masker,
    mappings: &[UserMapping],
    codec: Option<&dyn PayloadCodec>,
    raw: crate::model::RawLetter,
) -> DeadLetter {
    prepare_with(masker, mappings, codec, false, raw).0
}

/// Pass every field the conventions took from the letter through the detectors, so
/// what is shown, grouped, filtered and recorded never carries a card number in a reason
/// code or an email in a message id: a masked value groups as its mask. `raw` stays as
/// the broker gave it (payload and headers are masked where they are rendered; replay
/// re-extracts its target from `raw`).
pub fn mask_extracted(masker: &Masker, dl: &mut DeadLetter) {
    let m = masker;
    // The id is most often the message id itself: masked once, for both.
    let id_is_message_id = dl
        .event
        .message_id
        .as_ref()
        .is_some_and(|s| s.value == dl.id.value.0);
    let id_masked = m.mask_unique(&dl.id.value.0);
    if let Some(masked) = &id_masked {
        dl.id.value.0.clone_from(masked);
    }
    let f = &mut dl.failure;
    for field in [
        &mut f.reason_code,
        &mut f.reason_detail,
        &mut f.exception_type,
        &mut f.consumer,
        &mut f.consumer_version,
        &mut f.death_reason,
    ] {
        text(m, field, false);
    }
    if let Some(o) = f.origin.as_mut() {
        mask_origin(m, &mut o.value);
    }
    let e = &mut dl.event;
    match (&mut e.message_id, id_is_message_id) {
        (Some(s), true) => {
            if let Some(masked) = id_masked {
                s.value = masked;
            }
            location(m, s);
        }
        (field, _) => text(m, field, true),
    }
    text(m, &mut e.correlation_id, true);
    text(m, &mut e.payload_ref, true);
    for field in [&mut e.event_type, &mut e.schema_version] {
        text(m, field, false);
    }
    if let Some(err) = dl.body_error.as_mut() {
        mask(m, err, true);
    }
    // A decoder's error may quote the bytes it choked on.
    for s in [&mut dl.schema, &mut dl.key_schema].into_iter().flatten() {
        if let crate::schema::Decoding::Pending(why) | crate::schema::Decoding::Undecodable(why) = s
        {
            mask(m, why, false);
        }
    }
}

/// Replace `s` by its mask when it has anything to mask (no copy otherwise). A value
/// that repeats across letters goes through the masker's memo; one unique to this
/// letter (`unique`) does not.
fn mask(m: &Masker, s: &mut String, unique: bool) {
    let masked = if unique {
        m.mask_unique(s)
    } else {
        m.mask_if_needed(s)
    };
    if let Some(masked) = masked {
        *s = masked;
    }
}

/// Fixed locations are ours; an owned one is formatted and masked anyway.
fn location(m: &Masker, s: &mut crate::model::Sourced<String>) {
    if let Cow::Owned(location) = &mut s.from.location {
        mask(m, location, false);
    }
}

fn text(m: &Masker, f: &mut Option<crate::model::Sourced<String>>, unique: bool) {
    if let Some(s) = f {
        mask(m, &mut s.value, unique);
        location(m, s);
    }
}

/// Where a letter came from names topics, exchanges, routing keys, queues, endpoints:
/// each masked like any other extracted value.
fn mask_origin(m: &Masker, o: &mut crate::model::Origin) {
    use crate::model::Origin;
    match o {
        Origin::Kafka { topic, .. } => mask(m, topic, false),
        Origin::Amqp {
            exchange,
            routing_keys,
            queue,
        } => {
            mask(m, exchange, false);
            for k in routing_keys.iter_mut() {
                mask(m, k, false);
            }
            if let Some(q) = queue {
                mask(m, q, false);
            }
        }
        Origin::Endpoint(e) => mask(m, e, false),
    }
}

impl Catalog {
    pub fn record_problem(&mut self, location: String, message: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_KEPT_PROBLEMS {
            self.problems.push(Problem { location, message });
        }
    }

    /// Release growth slack once a scan is complete.
    pub fn shrink_to_fit(&mut self) {
        self.store.shrink_to_fit();
    }

    /// The first problems (up to 100) and how many there were in all.
    pub fn problems(&self) -> (&[Problem], u64) {
        (&self.problems, self.problem_count)
    }
}

/// A masked single-line preview of a payload, from its first few KiB only.
pub fn preview(masker: &Masker, payload: &[u8]) -> String {
    let (input, cut) = if payload.len() > PREVIEW_INPUT {
        // Cut after a delimiter so no half-token (a partial email) escapes the
        // detectors. The delimiter stays: a body that is one long string value
        // (`{"blob":"AAAA…`) previews as `{"blob":"…`, not as nothing.
        let cut = payload[..PREVIEW_INPUT]
            .iter()
            .rposition(|b| {
                b.is_ascii_whitespace()
                    || matches!(b, b',' | b':' | b'"' | b'{' | b'}' | b'[' | b']')
            })
            .map_or(0, |at| at + 1);
        (&payload[..cut], true)
    } else {
        (payload, false)
    };
    let (text, _) = masker.mask_payload(input, Layout::Compact, PREVIEW_BYTES);
    let mut one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if cut && one_line.len() < PREVIEW_BYTES {
        one_line.push('…');
    }
    if one_line.len() > PREVIEW_BYTES {
        let mut at = PREVIEW_BYTES;
        while !one_line.is_char_boundary(at) {
            at -= 1;
        }
        one_line.truncate(at);
    }
    one_line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large body that is one long string value still previews its start, marked as
    /// cut (it showed an empty preview: the only delimiter before the cut was the opening
    /// brace, and the cut dropped it).
    #[test]
    fn a_large_body_previews_its_start_without_a_half_token() {
        let m = Masker::with_key(b"k".to_vec());
        let blob = format!(r#"{{"blob":"{}"}}"#, "A".repeat(10 * PREVIEW_INPUT));
        assert_eq!(preview(&m, blob.as_bytes()), r#"{"blob":"…"#);
        // A small body is previewed whole, with no cut marker.
        assert_eq!(preview(&m, br#"{"a":1}"#), r#"{"a":1}"#);
    }

    /// The session's path (the letter prepared where it lies, behind its pointer) gives
    /// the letter and preview every other path gives, masked alike.
    #[test]
    fn a_letter_prepared_in_place_is_the_letter_prepared_by_value() {
        use crate::model::{Coords, Header, HeaderValue, RawLetter};
        let m = Masker::with_key(b"k".to_vec());
        let raw = |payload: &str, headers: Vec<Header>| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "payments.dlq".into(),
                partition: 3,
                offset: 42,
            }),
            headers,
            payload: payload.as_bytes().to_vec(),
            ..RawLetter::default()
        };
        let letters = [
            raw(
                r#"{"message_id":"m-1","failure":{"reason_code":"card_declined","reason_detail":"declined for jane.doe@example.com"},"payload":{"card":"4242424242424242"}}"#,
                vec![],
            ),
            raw(
                r#"{"iban":"DE89370400440532013000"}"#,
                vec![
                    Header::new("x-error", HeaderValue::text("Timeout: bob@example.org")),
                    Header::new("x-consumer-version", HeaderValue::text("v3.4.1")),
                ],
            ),
            raw("\u{0}not json\x1b[2J", vec![]),
        ];
        for r in letters {
            for previews in [true, false] {
                let (by_value, p1) = prepare_with(&m, &[], None, previews, r.clone());
                let (shared, p2) = prepare_shared(&m, &[], None, previews, r.clone());
                assert_eq!(*shared, by_value);
                assert_eq!(p1, p2);
                let shown = format!("{:?} {p2}", shared.failure);
                assert!(!shown.contains("jane.doe@example.com"), "{shown}");
                assert!(!shown.contains("bob@example.org"), "{shown}");
                assert!(!p2.contains("4242424242424242"), "{p2}");
            }
        }
    }
}
