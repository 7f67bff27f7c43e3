//! The JSON body envelope: `message_id`, `event_type`, `schema_version`, `occurred_at`,
//! `correlation_id`, `payload_ref` at the top level and a `failure` object.

use super::{json_scalar_text, Candidates, Field};
use crate::core::model::Convention;
use serde::Deserialize;
use serde_json::Value;

/// Only the envelope's own fields are materialised; the business payload is skipped.
#[derive(Deserialize, Default)]
pub(super) struct Envelope<'a> {
    message_id: Option<Value>,
    event_type: Option<Value>,
    schema_version: Option<Value>,
    occurred_at: Option<Value>,
    correlation_id: Option<Value>,
    payload_ref: Option<Value>,
    failure: Option<Value>,
    /// The business payload inside the envelope, borrowed (never parsed here).
    #[serde(borrow, default)]
    payload: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a serde_json::value::RawValue>,
}

impl Envelope<'_> {
    /// Byte range of the inner business payload within `body`, for previews.
    pub(super) fn payload_span(&self, body: &[u8]) -> Option<std::ops::Range<usize>> {
        let raw = self.payload.or(self.data)?.get();
        let start = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
        let end = start + raw.len();
        (end <= body.len() && raw.starts_with(['{', '['])).then_some(start..end)
    }
}

const TOP: [(&str, Field); 6] = [
    ("message_id", Field::MessageId),
    ("event_type", Field::EventType),
    ("schema_version", Field::SchemaVersion),
    ("occurred_at", Field::OccurredAt),
    ("correlation_id", Field::CorrelationId),
    ("payload_ref", Field::PayloadRef),
];

const FAILURE: [(&str, Field); 12] = [
    ("reason_code", Field::ReasonCode),
    ("reason_detail", Field::ReasonDetail),
    ("message", Field::ReasonDetail),
    ("error", Field::ReasonDetail),
    ("exception_type", Field::ExceptionType),
    ("exception", Field::ExceptionType),
    ("consumer", Field::Consumer),
    ("consumer_version", Field::ConsumerVersion),
    ("attempt", Field::Attempt),
    ("first_failed_at", Field::FirstFailedAt),
    ("last_failed_at", Field::LastFailedAt),
    ("origin", Field::Origin),
];

/// Parse a JSON object body once, as an envelope (every field is optional and untyped,
/// so any valid object parses). `Err` means the body is not a valid JSON object.
pub(super) fn parse(payload: &[u8]) -> Result<Envelope<'_>, serde_json::Error> {
    serde_json::from_slice::<Envelope>(payload)
}

pub(super) fn apply(env: &Envelope<'_>, c: &mut Candidates) {
    let conv = Convention::BodyEnvelope;
    let top = [
        &env.message_id,
        &env.event_type,
        &env.schema_version,
        &env.occurred_at,
        &env.correlation_id,
        &env.payload_ref,
    ];
    for ((name, field), value) in TOP.iter().zip(top) {
        if let Some(text) = value.as_ref().and_then(json_scalar_text) {
            c.offer_text(*field, &text, &conv, || format!("body /{name}"));
        }
    }
    if let Some(Value::Object(failure)) = &env.failure {
        for (name, field) in FAILURE {
            if let Some(text) = failure.get(name).and_then(json_scalar_text) {
                c.offer_text(field, &text, &conv, || format!("body /failure/{name}"));
            }
        }
    }
}
