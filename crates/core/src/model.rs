//! The domain model: what a dead letter is, independent of any broker.
//!
//! A [`RawLetter`] is exactly what the broker handed us (bytes are never rewritten).
//! A [`DeadLetter`] adds what the conventions extracted from it, each field carrying the
//! [`Provenance`] that says which convention and which header or JSON path produced it.

use chrono::{DateTime, Utc};
use std::borrow::Cow;
use std::fmt;

/// Where a letter sits now, in broker terms. Serialized as in the dump format:
/// `{"kafka":{…}}` or `{"amqp":{…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coords {
    Kafka {
        topic: String,
        partition: i32,
        offset: i64,
    },
    Amqp {
        vhost: String,
        queue: String,
        /// Position in our browse order (deliveries are not addressable on classic queues).
        position: u64,
        /// Set for stream queues, which are addressable by offset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream_offset: Option<i64>,
    },
}

impl Coords {
    /// The topic or queue name.
    pub fn container(&self) -> &str {
        match self {
            Coords::Kafka { topic, .. } => topic,
            Coords::Amqp { queue, .. } => queue,
        }
    }
}

impl fmt::Display for Coords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coords::Kafka {
                topic,
                partition,
                offset,
            } => write!(f, "{topic}/{partition}/{offset}"),
            Coords::Amqp {
                queue,
                position,
                stream_offset,
                ..
            } => match stream_offset {
                Some(o) => write!(f, "{queue}@{o}"),
                None => write!(f, "{queue}#{position}"),
            },
        }
    }
}

/// A header value as the broker typed it. Kafka headers are always bytes (or null);
/// AMQP field tables carry typed values, nested tables and arrays (`x-death`).
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    Null,
    Bytes(Vec<u8>),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// AMQP timestamp: seconds since the epoch.
    Timestamp(u64),
    Array(Vec<HeaderValue>),
    Table(Vec<(String, HeaderValue)>),
}

impl HeaderValue {
    pub fn text(s: &str) -> Self {
        HeaderValue::Bytes(s.as_bytes().to_vec())
    }

    /// The value as text when it is text-like (UTF-8 bytes or a scalar), lossy for bytes.
    pub fn as_text(&self) -> Option<Cow<'_, str>> {
        match self {
            // `from_utf8`'s word-at-a-time check first: `from_utf8_lossy` walks valid
            // text byte by byte (~1.4% of preparing a letter, headers read as text by
            // several conventions each).
            HeaderValue::Bytes(b) => Some(match std::str::from_utf8(b) {
                Ok(t) => Cow::Borrowed(t),
                Err(_) => String::from_utf8_lossy(b),
            }),
            HeaderValue::Int(i) => Some(Cow::Owned(i.to_string())),
            HeaderValue::Float(x) => Some(Cow::Owned(x.to_string())),
            HeaderValue::Bool(b) => Some(Cow::Owned(b.to_string())),
            HeaderValue::Timestamp(t) => Some(Cow::Owned(t.to_string())),
            HeaderValue::Null | HeaderValue::Array(_) | HeaderValue::Table(_) => None,
        }
    }

    /// Trimmed non-empty text, borrowed when the bytes are UTF-8 (the hot path of the
    /// header conventions), or `None`.
    pub fn nonempty_text(&self) -> Option<Cow<'_, str>> {
        match self.as_text()? {
            Cow::Borrowed(t) => Some(t.trim()).filter(|t| !t.is_empty()).map(Cow::Borrowed),
            Cow::Owned(t) => Some(t.trim())
                .filter(|t| !t.is_empty())
                .map(|t| Cow::Owned(t.to_string())),
        }
    }

    /// Trimmed non-empty text, or `None`.
    pub fn as_nonempty_text(&self) -> Option<String> {
        let t = self.as_text()?;
        let t = t.trim();
        (!t.is_empty()).then(|| t.to_string())
    }

    /// An integer, parsed leniently: typed ints, ASCII decimal text, or big-endian binary
    /// of 1, 2, 4 or 8 bytes (Spring Kafka writes partition and offset that way).
    pub fn as_i64_lenient(&self) -> Option<i64> {
        match self {
            HeaderValue::Int(i) => Some(*i),
            HeaderValue::Timestamp(t) => i64::try_from(*t).ok(),
            HeaderValue::Float(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Some(*x as i64),
            HeaderValue::Bytes(b) => {
                let ascii_num = !b.is_empty()
                    && b.iter()
                        .enumerate()
                        .all(|(i, c)| c.is_ascii_digit() || (i == 0 && *c == b'-' && b.len() > 1));
                if ascii_num {
                    std::str::from_utf8(b).ok()?.parse().ok()
                } else if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
                    // Printable text is text: a count of "x" is no count, not 120 (the
                    // byte read as an integer). Binary integers carry bytes below 0x20.
                    std::str::from_utf8(b).ok()?.trim().parse().ok()
                } else {
                    match b.len() {
                        8 => Some(i64::from_be_bytes(b[..8].try_into().ok()?)),
                        4 => Some(i64::from(i32::from_be_bytes(b[..4].try_into().ok()?))),
                        2 => Some(i64::from(i16::from_be_bytes(b[..2].try_into().ok()?))),
                        1 => Some(i64::from(b[0] as i8)),
                        _ => {
                            let t = String::from_utf8_lossy(b);
                            t.trim().parse().ok()
                        }
                    }
                }
            }
            _ => None,
        }
    }

    /// Field of a table value, by name.
    pub fn field(&self, name: &str) -> Option<&HeaderValue> {
        match self {
            HeaderValue::Table(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A header's name: borrowed when it is one of the names the conventions know (most
/// names of most letters), so a million letters do not each allocate and free a dozen
/// copies of `x-error` and `x-death`.
pub type HeaderName = Cow<'static, str>;

#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub name: HeaderName,
    pub value: HeaderValue,
}

impl Header {
    pub fn new(name: impl Into<HeaderName>, value: HeaderValue) -> Self {
        Header {
            name: name.into(),
            value,
        }
    }
}

/// One DLQ record exactly as the broker handed it over.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawLetter {
    pub coords: Option<Coords>,
    pub key: Option<Vec<u8>>,
    /// Ordered as on the wire; names may repeat.
    pub headers: Vec<Header>,
    /// AMQP basic properties (message_id, correlation_id, type, app_id, content_type, …).
    pub properties: Vec<(String, String)>,
    pub payload: Vec<u8>,
    /// Broker timestamp of the DLQ record (Kafka CreateTime/LogAppendTime).
    pub timestamp: Option<DateTime<Utc>>,
}

impl RawLetter {
    /// The last header with this exact name (producers append; the latest wins).
    pub fn header(&self, name: &str) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .rev()
            .find(|h| h.name == name)
            .map(|h| &h.value)
    }

    /// Case-insensitive header lookup (AMQP/NServiceBus users vary the case); the
    /// conventions index names instead (`header_rules::Slots`), tests compare with this.
    #[cfg(test)]
    pub fn header_ci(&self, name: &str) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .rev()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| &h.value)
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Which convention produced a field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Convention {
    /// A user mapping from config, by name.
    User(String),
    BodyEnvelope,
    SpringKafka,
    /// Spring Cloud Stream's DLQ (Kafka and RabbitMQ binders) and Spring AMQP's
    /// `RepublishMessageRecoverer`: `x-exception-*`, `x-original-*`.
    SpringStream,
    KafkaConnect,
    MassTransit,
    NServiceBus,
    AzureServiceBus,
    /// A Kafka share group's broker-written DLQ (KIP-1191): `__dlq.errors.*`.
    KafkaShareGroup,
    /// Kafka Streams' DLQ (KIP-1034): `__streams.errors.*`.
    KafkaStreams,
    /// Karafka's DLQ: `source_*`.
    Karafka,
    /// Watermill's poison queue: `*_poisoned`.
    Watermill,
    RabbitMqDeath,
    XHeaders,
    AmqpProperties,
    /// The broker itself: record timestamp or coordinates.
    Broker,
    /// Computed by us (reason fingerprint, content hash).
    Derived,
}

impl fmt::Display for Convention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Convention::User(name) => return write!(f, "user mapping {name}"),
            Convention::BodyEnvelope => "body envelope",
            Convention::SpringKafka => "spring-kafka",
            Convention::SpringStream => "spring-cloud-stream",
            Convention::KafkaConnect => "kafka-connect",
            Convention::MassTransit => "masstransit",
            Convention::NServiceBus => "nservicebus",
            Convention::AzureServiceBus => "azure",
            Convention::KafkaShareGroup => "kafka share group",
            Convention::KafkaStreams => "kafka-streams",
            Convention::Karafka => "karafka",
            Convention::Watermill => "watermill",
            Convention::RabbitMqDeath => "rabbitmq x-death",
            Convention::XHeaders => "x-headers",
            Convention::AmqpProperties => "amqp properties",
            Convention::Broker => "broker",
            Convention::Derived => "derived",
        };
        f.write_str(s)
    }
}

/// Where an extracted value came from: the convention and the exact header or JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub convention: Convention,
    /// e.g. `header x-reason-code`, `body /failure/reason_code`, `x-death[0].time`.
    pub location: Location,
}

/// Where a value was found. The built-in conventions name fixed places, spelled out at
/// compile time, so a letter costs no allocation per field; a place that depends on the
/// letter (an `x-death` index, a user mapping's path) is owned, and it alone is masked.
pub type Location = Cow<'static, str>;

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.location, self.convention)
    }
}

/// A value together with its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub from: Provenance,
}

/// Where the letter was originally headed: the replay target by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Kafka {
        topic: String,
        partition: Option<i32>,
        offset: Option<i64>,
    },
    Amqp {
        exchange: String,
        routing_keys: Vec<String>,
        queue: Option<String>,
    },
    /// A queue or endpoint name only (NServiceBus.FailedQ, MassTransit input address).
    Endpoint(String),
}

impl Origin {
    /// A short label for grouping: topic, exchange or endpoint.
    pub fn label(&self) -> String {
        match self {
            Origin::Kafka { topic, .. } => topic.clone(),
            Origin::Amqp {
                exchange,
                routing_keys,
                queue,
            } => match (queue, routing_keys.first()) {
                (Some(q), _) => q.clone(),
                (None, Some(rk)) if exchange.is_empty() => rk.clone(),
                (None, Some(rk)) => format!("{exchange}/{rk}"),
                (None, None) => exchange.clone(),
            },
            Origin::Endpoint(e) => e.clone(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Kafka {
                topic,
                partition,
                offset,
            } => {
                write!(f, "{topic}")?;
                if let Some(p) = partition {
                    write!(f, " p{p}")?;
                }
                if let Some(o) = offset {
                    write!(f, " @ {o}")?;
                }
                Ok(())
            }
            Origin::Amqp {
                exchange,
                routing_keys,
                queue,
            } => {
                let ex = if exchange.is_empty() {
                    "(default)"
                } else {
                    exchange
                };
                write!(f, "exchange {ex} rk {}", routing_keys.join(","))?;
                if let Some(q) = queue {
                    write!(f, " queue {q}")?;
                }
                Ok(())
            }
            Origin::Endpoint(e) => f.write_str(e),
        }
    }
}

/// Failure metadata gathered from the conventions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Failure {
    /// Always set after extraction: explicit code, exception fingerprint, broker death
    /// reason, or `unknown`.
    pub reason_code: Option<Sourced<String>>,
    pub reason_detail: Option<Sourced<String>>,
    pub exception_type: Option<Sourced<String>>,
    pub consumer: Option<Sourced<String>>,
    pub consumer_version: Option<Sourced<String>>,
    pub attempt: Option<Sourced<u32>>,
    pub first_failed_at: Option<Sourced<DateTime<Utc>>>,
    pub last_failed_at: Option<Sourced<DateTime<Utc>>>,
    pub origin: Option<Sourced<Origin>>,
    /// Broker-level dead-letter reason (`rejected`, `expired`, …), kept even when a
    /// better reason code exists.
    pub death_reason: Option<Sourced<String>>,
}

/// Business event metadata.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventMeta {
    pub message_id: Option<Sourced<String>>,
    pub event_type: Option<Sourced<String>>,
    pub schema_version: Option<Sourced<String>>,
    pub correlation_id: Option<Sourced<String>>,
    pub occurred_at: Option<Sourced<DateTime<Utc>>>,
    pub payload_ref: Option<Sourced<String>>,
}

/// What the payload is, decided once so every view renders it the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyKind {
    Json,
    /// Looks like JSON (starts with `{` or `[`) but does not parse: a poison pill.
    BrokenJson,
    Text,
    Binary,
    Empty,
}

impl BodyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BodyKind::Json => "json",
            BodyKind::BrokenJson => "broken-json",
            BodyKind::Text => "text",
            BodyKind::Binary => "binary",
            BodyKind::Empty => "empty",
        }
    }
}

/// Stable identity of a letter across scans.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LetterId(pub String);

impl fmt::Display for LetterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Triage state of a letter (kept in the ledger; `Open` until a decision exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TriageState {
    #[default]
    Open,
    Discarded,
    Replaying,
    Replayed,
    Resolved,
    FailedAgain,
}

impl TriageState {
    pub const ALL: [TriageState; 6] = [
        TriageState::Open,
        TriageState::Discarded,
        TriageState::Replaying,
        TriageState::Replayed,
        TriageState::Resolved,
        TriageState::FailedAgain,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TriageState::Open => "open",
            TriageState::Discarded => "discarded",
            TriageState::Replaying => "replaying",
            TriageState::Replayed => "replayed",
            TriageState::Resolved => "resolved",
            TriageState::FailedAgain => "failed-again",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Still failing, as far as anyone knows: open, failed again, or being replayed
    /// right now. What the default views count; the handled ones (discarded, replayed,
    /// resolved) are reachable with `state=…`.
    pub fn unhandled(self) -> bool {
        matches!(
            self,
            TriageState::Open | TriageState::FailedAgain | TriageState::Replaying
        )
    }
}

/// A dead letter with everything the conventions could tell about it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub id: Sourced<LetterId>,
    pub raw: RawLetter,
    pub body: BodyKind,
    /// Why a JSON-looking body does not parse (poison pills), for the detail view.
    pub body_error: Option<String>,
    pub dead_lettered_at: Option<Sourced<DateTime<Utc>>>,
    pub failure: Failure,
    pub event: EventMeta,
    /// How many times dlq-triage replayed it before (`x-dlq-replay-count`).
    pub replay_count: u32,
    /// Where the business payload sits inside a JSON envelope (`payload`/`data`), so
    /// previews show the data rather than envelope metadata shown elsewhere.
    pub payload_span: Option<std::ops::Range<usize>>,
    /// What the schema decoder made of a schema-encoded payload (`None`: not schema data,
    /// or no decoder configured).
    pub schema: Option<crate::schema::Decoding>,
    /// The same for the key.
    pub key_schema: Option<crate::schema::Decoding>,
}

impl DeadLetter {
    /// The payload as every view reads it: the decoded JSON of a schema-encoded payload,
    /// else the bytes as the broker gave them. `body` describes this, not the raw bytes.
    pub fn readable_payload(&self) -> &[u8] {
        match self.schema.as_ref().and_then(|s| s.decoded()) {
            Some(d) => d.json.as_bytes(),
            None => &self.raw.payload,
        }
    }

    /// The key as views read it: its decoded JSON when a schema decoded it, else its
    /// bytes as (lossy) text. Unmasked: mask before showing.
    pub fn readable_key(&self) -> Option<Cow<'_, str>> {
        match self.key_schema.as_ref().and_then(|s| s.decoded()) {
            Some(d) => Some(Cow::Borrowed(d.json.as_str())),
            None => self.raw.key.as_deref().map(String::from_utf8_lossy),
        }
    }

    /// The decoded payload, when a schema decoded it.
    pub fn decoded(&self) -> Option<&crate::schema::Decoded> {
        self.schema.as_ref().and_then(|s| s.decoded())
    }

    /// Field names the payload's schema tags as PII (masked whatever their name).
    pub fn pii_fields(&self) -> &[String] {
        self.decoded().map_or(&[], |d| &d.schema.pii_fields)
    }

    pub fn reason_code(&self) -> &str {
        self.failure
            .reason_code
            .as_ref()
            .map_or("unknown", |r| r.value.as_str())
    }
}
