//! The JSON body envelope: `message_id`, `event_type`, `schema_version`, `occurred_at`,
//! `correlation_id`, `payload_ref` at the top level and a `failure` object.

use super::{json_scalar_text, Candidates, Field};
use crate::core::model::Convention;
use serde::Deserialize;
use serde_json::Value;

/// Only the envelope's own fields are materialised; the business payload is skipped.
#[derive(Deserialize, Default)]
struct Envelope {
    message_id: Option<Value>,
    event_type: Option<Value>,
    schema_version: Option<Value>,
    occurred_at: Option<Value>,
    correlation_id: Option<Value>,
    payload_ref: Option<Value>,
    failure: Option<Value>,
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

pub(super) fn apply(payload: &[u8], c: &mut Candidates) {
    // Top-level arrays and type mismatches are simply "not an envelope".
    let Ok(env) = serde_json::from_slice::<Envelope>(payload) else {
        return;
    };
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
