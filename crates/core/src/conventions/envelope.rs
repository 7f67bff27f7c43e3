//! The JSON body envelope: `message_id`, `event_type`, `schema_version`, `occurred_at`,
//! `correlation_id`, `payload_ref` at the top level and a `failure` object.

use super::{json_scalar_text, Candidates, Field};
use crate::model::Convention;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// Only the envelope's own fields are read, borrowed from the body as raw JSON text and
/// decoded when offered; the business payload is skipped.
#[derive(Deserialize, Default)]
pub(super) struct Envelope<'a> {
    #[serde(borrow, default)]
    message_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    event_type: Option<&'a RawValue>,
    #[serde(borrow, default)]
    schema_version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    occurred_at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    correlation_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    payload_ref: Option<&'a RawValue>,
    #[serde(borrow, default)]
    failure: Option<&'a RawValue>,
    /// The business payload inside the envelope, borrowed (never parsed here).
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

/// The `failure` object's fields, borrowed like the envelope's (names as in `FAILURE`).
#[derive(Deserialize, Default)]
struct FailureFields<'a> {
    #[serde(borrow, default)]
    reason_code: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reason_detail: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    exception_type: Option<&'a RawValue>,
    #[serde(borrow, default)]
    exception: Option<&'a RawValue>,
    #[serde(borrow, default)]
    consumer: Option<&'a RawValue>,
    #[serde(borrow, default)]
    consumer_version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    attempt: Option<&'a RawValue>,
    #[serde(borrow, default)]
    first_failed_at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    last_failed_at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    origin: Option<&'a RawValue>,
}

impl<'a> FailureFields<'a> {
    /// In `FAILURE`'s order.
    fn values(&self) -> [Option<&'a RawValue>; 12] {
        [
            self.reason_code,
            self.reason_detail,
            self.message,
            self.error,
            self.exception_type,
            self.exception,
            self.consumer,
            self.consumer_version,
            self.attempt,
            self.first_failed_at,
            self.last_failed_at,
            self.origin,
        ]
    }
}

/// A JSON scalar as text (strings decoded, numbers and booleans as serde_json prints
/// them); objects, arrays and null are not text. Borrowed when the string has no escapes.
fn scalar_text(raw: &RawValue) -> Option<Cow<'_, str>> {
    let s = raw.get();
    let b = s.as_bytes();
    // Fast paths, with what serde would give, byte for byte: `raw` is valid JSON, so a
    // string with no backslash is its text between the quotes (JSON strings cannot hold
    // raw control characters), and a short plain integer prints as written.
    if b.len() >= 2 && b[0] == b'"' && b[b.len() - 1] == b'"' && !b.contains(&b'\\') {
        return Some(Cow::Borrowed(&s[1..s.len() - 1]));
    }
    if (1..=18).contains(&b.len())
        && b.iter().all(u8::is_ascii_digit)
        && (b[0] != b'0' || b.len() == 1)
    {
        return Some(Cow::Borrowed(s));
    }
    parsed_scalar_text(s)
}

/// [`scalar_text`] through serde: escapes, floats, big numbers.
fn parsed_scalar_text(s: &str) -> Option<Cow<'_, str>> {
    match s.as_bytes().first()? {
        b'"' => serde_json::from_str::<&str>(s)
            .map(Cow::Borrowed)
            .or_else(|_| serde_json::from_str::<String>(s).map(Cow::Owned))
            .ok(),
        b'{' | b'[' | b'n' => None,
        _ => serde_json::from_str::<Value>(s)
            .ok()
            .and_then(|v| json_scalar_text(&v))
            .map(Cow::Owned),
    }
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

/// `(name, field, location)` rows with the location spelled out at compile time.
macro_rules! fields {
    ($prefix:literal: $(($name:literal, $field:expr)),* $(,)?) => {
        [$(($name, $field, concat!($prefix, $name))),*]
    };
}

const TOP: [(&str, Field, &str); 6] = fields!["body /":
    ("message_id", Field::MessageId),
    ("event_type", Field::EventType),
    ("schema_version", Field::SchemaVersion),
    ("occurred_at", Field::OccurredAt),
    ("correlation_id", Field::CorrelationId),
    ("payload_ref", Field::PayloadRef),
];

const FAILURE: [(&str, Field, &str); 12] = fields!["body /failure/":
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
    // Checked as UTF-8 once, up front: parsed from bytes, serde_json validated every
    // borrowed field again, the business payload's whole span included.
    match std::str::from_utf8(payload) {
        Ok(text) => serde_json::from_str::<Envelope>(text),
        // Not UTF-8: the byte parser says where (the message the detail view shows).
        Err(_) => serde_json::from_slice::<Envelope>(payload),
    }
}

pub(super) fn apply(env: &Envelope<'_>, c: &mut Candidates) {
    let conv = Convention::BodyEnvelope;
    let top = [
        env.message_id,
        env.event_type,
        env.schema_version,
        env.occurred_at,
        env.correlation_id,
        env.payload_ref,
    ];
    for ((_, field, location), value) in TOP.iter().zip(top) {
        if let Some(text) = value.and_then(scalar_text) {
            c.offer_text(*field, &text, &conv, || (*location).into());
        }
    }
    let Some(failure) = env.failure.filter(|f| f.get().starts_with('{')) else {
        return;
    };
    match serde_json::from_str::<FailureFields>(failure.get()) {
        Ok(fields) => {
            for ((_, field, location), value) in FAILURE.iter().zip(fields.values()) {
                if let Some(text) = value.and_then(scalar_text) {
                    c.offer_text(*field, &text, &conv, || (*location).into());
                }
            }
        }
        // A `failure` the borrowed reading refuses (a repeated key): read it as a map,
        // where the last of a repeated key wins, as before.
        Err(_) => {
            if let Ok(Value::Object(failure)) = serde_json::from_str::<Value>(failure.get()) {
                for (name, field, location) in FAILURE {
                    if let Some(text) = failure.get(name).and_then(json_scalar_text) {
                        c.offer_text(field, &text, &conv, || location.into());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(json: &str) -> Result<(), TestCaseError> {
        let raw: Box<RawValue> =
            serde_json::from_str(json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(scalar_text(&raw), parsed_scalar_text(raw.get()), "{}", json);
        Ok(())
    }

    proptest! {
        /// The fast paths read a scalar exactly as serde does.
        #[test]
        fn fast_scalar_text_is_serdes(
            text in any::<String>(),
            int in any::<i64>(),
            big in any::<u64>(),
            float in any::<f64>(),
            digits in "[0-9]{1,24}",
        ) {
            same(&serde_json::to_string(&text).unwrap_or_default())?;
            same(&int.to_string())?;
            same(&big.to_string())?;
            if float.is_finite() {
                same(&serde_json::to_string(&float).unwrap_or_default())?;
            }
            if !digits.starts_with('0') || digits.len() == 1 {
                same(&digits)?;
            }
        }
    }

    #[test]
    fn odd_scalars_read_as_serde_reads_them() {
        for json in [
            r#""a\"b""#,
            r#""\u00e9""#,
            r#""""#,
            "0",
            "-0",
            "007",
            "1.50",
            "1e3",
            "true",
            "null",
            "123456789012345678901",
        ] {
            if let Ok(raw) = serde_json::from_str::<Box<RawValue>>(json) {
                assert_eq!(scalar_text(&raw), parsed_scalar_text(raw.get()), "{json}");
            }
        }
    }
}
