//! Failure metadata from the conventions real DLQs use, recognised per message with no
//! configuration (the README lists every convention and header name).
//!
//! Every convention *offers* values for fields; the first offer for a field wins, and the
//! conventions run most specific first: user mappings, the JSON body envelope, framework
//! headers (Spring, Kafka Connect, MassTransit, NServiceBus, Azure), RabbitMQ `x-death`,
//! generic `x-` headers, AMQP properties, and finally the broker itself. Reason codes are
//! special: an explicit code from any convention beats a fingerprint of the exception,
//! which beats the broker's bare death reason (`rejected`, `expired`, …).

mod envelope;
mod header_rules;
mod rabbit;
pub mod user;

use crate::fingerprint;
use crate::model::{
    BodyKind, Convention, DeadLetter, EventMeta, Failure, LetterId, Location, Origin, Provenance,
    RawLetter, Sourced,
};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
pub use user::{FieldSource, UserMapping};

/// The fields a convention can fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    ReasonCode,
    ReasonDetail,
    ExceptionType,
    Consumer,
    ConsumerVersion,
    Attempt,
    FirstFailedAt,
    LastFailedAt,
    DeathReason,
    MessageId,
    EventType,
    SchemaVersion,
    CorrelationId,
    OccurredAt,
    PayloadRef,
    DeadLetteredAt,
    Origin,
}

impl Field {
    pub const ALL: [Field; 17] = [
        Field::ReasonCode,
        Field::ReasonDetail,
        Field::ExceptionType,
        Field::Consumer,
        Field::ConsumerVersion,
        Field::Attempt,
        Field::FirstFailedAt,
        Field::LastFailedAt,
        Field::DeathReason,
        Field::MessageId,
        Field::EventType,
        Field::SchemaVersion,
        Field::CorrelationId,
        Field::OccurredAt,
        Field::PayloadRef,
        Field::DeadLetteredAt,
        Field::Origin,
    ];

    /// The name used in config mappings and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Field::ReasonCode => "reason_code",
            Field::ReasonDetail => "reason_detail",
            Field::ExceptionType => "exception_type",
            Field::Consumer => "consumer",
            Field::ConsumerVersion => "consumer_version",
            Field::Attempt => "attempt",
            Field::FirstFailedAt => "first_failed_at",
            Field::LastFailedAt => "last_failed_at",
            Field::DeathReason => "death_reason",
            Field::MessageId => "message_id",
            Field::EventType => "event_type",
            Field::SchemaVersion => "schema_version",
            Field::CorrelationId => "correlation_id",
            Field::OccurredAt => "occurred_at",
            Field::PayloadRef => "payload_ref",
            Field::DeadLetteredAt => "dead_lettered_at",
            Field::Origin => "origin",
        }
    }

    pub fn parse(s: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// Longest reason detail we keep, in bytes (exception messages can carry whole payloads).
const MAX_DETAIL: usize = 2048;

/// Collects offers; the first offer per field wins.
#[derive(Default)]
pub struct Candidates {
    failure: Failure,
    event: EventMeta,
    dead_lettered_at: Option<Sourced<DateTime<Utc>>>,
}

fn prov(convention: &Convention, location: impl Into<Location>) -> Provenance {
    Provenance {
        convention: convention.clone(),
        location: location.into(),
    }
}

impl Candidates {
    fn has(&self, field: Field) -> bool {
        let f = &self.failure;
        let e = &self.event;
        match field {
            Field::ReasonCode => f.reason_code.is_some(),
            Field::ReasonDetail => f.reason_detail.is_some(),
            Field::ExceptionType => f.exception_type.is_some(),
            Field::Consumer => f.consumer.is_some(),
            Field::ConsumerVersion => f.consumer_version.is_some(),
            Field::Attempt => f.attempt.is_some(),
            Field::FirstFailedAt => f.first_failed_at.is_some(),
            Field::LastFailedAt => f.last_failed_at.is_some(),
            Field::DeathReason => f.death_reason.is_some(),
            Field::MessageId => e.message_id.is_some(),
            Field::EventType => e.event_type.is_some(),
            Field::SchemaVersion => e.schema_version.is_some(),
            Field::CorrelationId => e.correlation_id.is_some(),
            Field::OccurredAt => e.occurred_at.is_some(),
            Field::PayloadRef => e.payload_ref.is_some(),
            Field::DeadLetteredAt => self.dead_lettered_at.is_some(),
            Field::Origin => f.origin.is_some(),
        }
    }

    /// Offer a textual value; parsed into the field's type (ints and times leniently).
    /// Returns whether the offer was taken.
    pub fn offer_text(
        &mut self,
        field: Field,
        value: &str,
        convention: &Convention,
        location: impl FnOnce() -> Location,
    ) -> bool {
        let value = value.trim();
        if value.is_empty() || self.has(field) {
            return false;
        }
        match field {
            Field::Attempt => match value.parse::<u32>() {
                Ok(n) => self.offer_attempt(n, convention, location()),
                Err(_) => false,
            },
            Field::FirstFailedAt
            | Field::LastFailedAt
            | Field::OccurredAt
            | Field::DeadLetteredAt => match crate::timefmt::parse_timestamp(value) {
                Some(t) => self.offer_time(field, t, convention, location()),
                None => false,
            },
            Field::Origin => {
                let o = Origin::Endpoint(value.to_string());
                self.offer_origin(o, convention, location())
            }
            _ => {
                let mut v = value.to_string();
                if v.len() > MAX_DETAIL {
                    let mut cut = MAX_DETAIL;
                    while !v.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    v.truncate(cut);
                    v.push('…');
                }
                let s = Some(Sourced {
                    value: v,
                    from: prov(convention, location()),
                });
                let f = &mut self.failure;
                let e = &mut self.event;
                match field {
                    Field::ReasonCode => f.reason_code = s,
                    Field::ReasonDetail => f.reason_detail = s,
                    Field::ExceptionType => f.exception_type = s,
                    Field::Consumer => f.consumer = s,
                    Field::ConsumerVersion => f.consumer_version = s,
                    Field::DeathReason => f.death_reason = s,
                    Field::MessageId => e.message_id = s,
                    Field::EventType => e.event_type = s,
                    Field::SchemaVersion => e.schema_version = s,
                    Field::CorrelationId => e.correlation_id = s,
                    Field::PayloadRef => e.payload_ref = s,
                    _ => return false,
                }
                true
            }
        }
    }

    pub fn offer_attempt(&mut self, n: u32, c: &Convention, location: impl Into<Location>) -> bool {
        if self.failure.attempt.is_some() {
            return false;
        }
        self.failure.attempt = Some(Sourced {
            value: n,
            from: prov(c, location),
        });
        true
    }

    pub fn offer_time(
        &mut self,
        field: Field,
        t: DateTime<Utc>,
        c: &Convention,
        location: impl Into<Location>,
    ) -> bool {
        if self.has(field) {
            return false;
        }
        let s = Some(Sourced {
            value: t,
            from: prov(c, location),
        });
        match field {
            Field::FirstFailedAt => self.failure.first_failed_at = s,
            Field::LastFailedAt => self.failure.last_failed_at = s,
            Field::OccurredAt => self.event.occurred_at = s,
            Field::DeadLetteredAt => self.dead_lettered_at = s,
            _ => return false,
        }
        true
    }

    pub fn offer_origin(
        &mut self,
        o: Origin,
        c: &Convention,
        location: impl Into<Location>,
    ) -> bool {
        if self.failure.origin.is_some() {
            return false;
        }
        self.failure.origin = Some(Sourced {
            value: o,
            from: prov(c, location),
        });
        true
    }
}

/// What the payload is, with the parse error for broken JSON, and the envelope when the
/// body is a JSON object (parsed once for both purposes).
fn classify_body(payload: &[u8]) -> (BodyKind, Option<String>, Option<envelope::Envelope<'_>>) {
    let first = payload.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => (BodyKind::Empty, None, None),
        Some(b'{') => match envelope::parse(payload) {
            Ok(env) => (BodyKind::Json, None, Some(env)),
            Err(e) => (BodyKind::BrokenJson, Some(e.to_string()), None),
        },
        Some(b'[') => match serde_json::from_slice::<serde::de::IgnoredAny>(payload) {
            Ok(_) => (BodyKind::Json, None, None),
            Err(e) => (BodyKind::BrokenJson, Some(e.to_string()), None),
        },
        Some(_) => match std::str::from_utf8(payload) {
            Ok(s) if !s.chars().any(|c| c.is_control() && !c.is_whitespace()) => {
                (BodyKind::Text, None, None)
            }
            _ => (BodyKind::Binary, None, None),
        },
    }
}

/// Header names other than the conventions' own that most DLQ letters carry.
const COMMON_HEADERS: &[&str] = &[
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    "x-dlq-replay-id",
    "x-dlq-replay-count",
    "x-dlq-replayed-by",
    "x-dlq-replayed-from",
    "x-exception-message",
    "x-exception-stacktrace",
    "x-retry-count",
    "x-tenant",
    "x-trace-id",
    "kafka_dlt-exception-stacktrace",
    "kafka_dlt-original-consumer-group",
    "__connect.errors.stage",
    "__connect.errors.exception.stacktrace",
    "content-type",
    "traceparent",
    "tracestate",
    "authorization",
];

/// `name` as a static string when it is a header name the conventions read or most DLQ
/// letters carry (case as written), so a letter's headers need not copy it.
pub fn known_header(name: &str) -> Option<&'static str> {
    static KNOWN: std::sync::OnceLock<foldhash::HashSet<&'static str>> = std::sync::OnceLock::new();
    KNOWN
        .get_or_init(|| {
            header_rules::CONVENTIONS
                .iter()
                .chain([&&header_rules::X_HEADERS])
                .flat_map(|c| c.slot_names())
                .chain(COMMON_HEADERS.iter().copied())
                .collect()
        })
        .get(name)
        .copied()
}

/// A header as a broker names it: a well-known name (one the conventions read, or most
/// letters carry) is borrowed, not copied, for each of a million letters.
pub fn header(name: &str, value: crate::model::HeaderValue) -> crate::model::Header {
    let name = match known_header(name) {
        Some(known) => std::borrow::Cow::Borrowed(known),
        None => std::borrow::Cow::Owned(name.to_string()),
    };
    crate::model::Header { name, value }
}

/// Run every convention on one raw letter.
pub fn extract(raw: RawLetter, mappings: &[UserMapping]) -> DeadLetter {
    extract_decoding(raw, mappings, None)
}

/// [`extract`], with schema-encoded payloads decoded first: the conventions, the body
/// kind and the envelope read the decoded JSON (an envelope inside an Avro record is read
/// like one in a JSON body).
pub fn extract_decoding(
    raw: RawLetter,
    mappings: &[UserMapping],
    codec: Option<&dyn crate::schema::PayloadCodec>,
) -> DeadLetter {
    use crate::schema::Part;
    let container = raw.coords.as_ref().map_or("", |c| c.container());
    let schema = codec.and_then(|c| c.decode(container, Part::Value, &raw.payload));
    let key_schema = match (codec, raw.key.as_deref()) {
        (Some(c), Some(key)) if !key.is_empty() => c.decode(container, Part::Key, key),
        _ => None,
    };
    let readable: &[u8] = match schema.as_ref().and_then(|s| s.decoded()) {
        Some(d) => d.json.as_bytes(),
        None => &raw.payload,
    };
    let (body, body_error, env) = classify_body(readable);
    let mut c = Candidates::default();

    for m in mappings {
        user::apply(m, &raw, readable, body, &mut c);
    }
    let payload_span = env.as_ref().and_then(|e| e.payload_span(readable));
    if let Some(env) = &env {
        envelope::apply(env, &mut c);
    }
    let present = header_rules::present(&raw);
    for (i, conv) in header_rules::CONVENTIONS.iter().enumerate() {
        if present & (1 << i) != 0 {
            header_rules::apply(conv, &raw, &mut c);
        }
    }
    rabbit::spring_amqp_origin(&raw, &mut c);
    rabbit::apply(&raw, &mut c);
    if present & header_rules::X_HEADERS_BIT != 0 {
        header_rules::apply(&header_rules::X_HEADERS, &raw, &mut c);
    }
    amqp_properties(&raw, &mut c);
    if let Some(ts) = raw.timestamp {
        // The DLQ record's own timestamp is when it was dead-lettered; it outranks
        // convention fields for this one purpose, so it replaces any earlier offer.
        c.dead_lettered_at = Some(Sourced {
            value: ts,
            from: prov(&Convention::Broker, "record timestamp"),
        });
    }
    let undecodable = schema
        .as_ref()
        .and_then(|s| Some((s.reason()?, s.outranks_derived())));
    let mut dl = finish(raw, body, body_error, undecodable, c);
    dl.payload_span = payload_span;
    dl.schema = schema;
    dl.key_schema = key_schema;
    dl
}

fn amqp_properties(raw: &RawLetter, c: &mut Candidates) {
    let conv = Convention::AmqpProperties;
    for (prop, field, location) in [
        ("message_id", Field::MessageId, "property message_id"),
        (
            "correlation_id",
            Field::CorrelationId,
            "property correlation_id",
        ),
        ("type", Field::EventType, "property type"),
        ("timestamp", Field::OccurredAt, "property timestamp"),
    ] {
        if let Some(v) = raw.property(prop) {
            c.offer_text(field, v, &conv, || location.into());
        }
    }
}

/// `undecodable`: why a schema-encoded payload could not be decoded, and whether that
/// names the cause more exactly than anything derived (a fingerprint of
/// `SerializationException`, a broker death reason): then it takes the reason code
/// unless a convention gave one; else only when nothing else would.
fn finish(
    raw: RawLetter,
    body: BodyKind,
    body_error: Option<String>,
    undecodable: Option<(String, bool)>,
    mut c: Candidates,
) -> DeadLetter {
    let derived = |loc: &'static str| prov(&Convention::Derived, loc);
    let nothing_else = c.failure.exception_type.is_none()
        && c.failure.reason_detail.is_none()
        && c.failure.death_reason.is_none();
    if let (None, Some((why, strong))) = (&c.failure.reason_code, undecodable) {
        if strong || nothing_else {
            c.failure.reason_code = Some(Sourced {
                value: why,
                from: derived("schema decoder: the payload does not decode"),
            });
        }
    }
    if c.failure.reason_code.is_none() {
        let fp = fingerprint::fingerprint(
            c.failure.exception_type.as_ref().map(|s| s.value.as_str()),
            c.failure.reason_detail.as_ref().map(|s| s.value.as_str()),
        );
        c.failure.reason_code = match (fp, &c.failure.death_reason) {
            (Some(fp), _) => Some(Sourced {
                value: fp,
                from: derived("fingerprint of exception type + message"),
            }),
            (None, Some(dr)) => Some(Sourced {
                value: dr.value.clone(),
                from: dr.from.clone(),
            }),
            (None, None) if body == BodyKind::BrokenJson => Some(Sourced {
                value: "poison: unparseable JSON".into(),
                from: derived("payload does not parse as JSON"),
            }),
            (None, None) => Some(Sourced {
                value: "unknown".into(),
                from: derived("no convention matched"),
            }),
        };
    }
    if c.dead_lettered_at.is_none() {
        if let Some(last) = &c.failure.last_failed_at {
            c.dead_lettered_at = Some(last.clone());
        }
    }
    let replay_count = raw
        .header("x-dlq-replay-count")
        .and_then(|v| v.as_i64_lenient())
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    let id = match &c.event.message_id {
        Some(m) => Sourced {
            value: LetterId(m.value.clone()),
            from: m.from.clone(),
        },
        None => derived_id(&raw),
    };
    DeadLetter {
        id,
        raw,
        body,
        body_error,
        dead_lettered_at: c.dead_lettered_at,
        failure: c.failure,
        event: c.event,
        replay_count,
        payload_span: None,
        schema: None,
        key_schema: None,
    }
}

/// Without a message id: Kafka coordinates, else a content hash (stable across browses
/// of a RabbitMQ queue, where positions are not).
fn derived_id(raw: &RawLetter) -> Sourced<LetterId> {
    use std::fmt::Write as _;
    if let Some(coords @ crate::model::Coords::Kafka { .. }) = &raw.coords {
        return Sourced {
            value: LetterId(coords.to_string()),
            from: prov(&Convention::Broker, "topic/partition/offset"),
        };
    }
    let mut h = Sha256::new();
    let mut text = Vec::new();
    h.update(raw.key.as_deref().unwrap_or_default());
    h.update([0]);
    h.update(&raw.payload);
    for hd in &raw.headers {
        if hd.name.starts_with("x-death")
            || hd.name.starts_with("x-first-death")
            || hd.name.starts_with("x-last-death")
        {
            h.update(hd.name.as_bytes());
            text.clear();
            crate::header_text::write(&hd.value, &mut text);
            h.update(&text);
        }
    }
    let digest = h.finalize();
    let mut id = String::with_capacity(23);
    id.push_str("sha256:");
    for b in &digest[..8] {
        let _ = write!(id, "{b:02x}");
    }
    Sourced {
        value: LetterId(id),
        from: prov(&Convention::Derived, "content hash (no message id)"),
    }
}

/// Text of a JSON scalar.
pub fn json_scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
