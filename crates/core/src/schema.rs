//! Schema-encoded payloads (Confluent's wire format: Avro, Protobuf, JSON Schema): what a
//! decoder tells about a letter, and the port that decodes. Core never decodes bytes
//! itself — `dlq-schema` does, with apache-avro, prost-reflect + protox and serde_json —
//! so the domain stays free of codecs and of the registry's I/O.
//!
//! A decoded payload is JSON text: every view (detail, `show`, previews, filters,
//! conventions, diff, export) reads it where it would read a JSON body, and masks it by
//! field name as JSON, plus by the fields the schema itself tags as PII.

use std::fmt;
use std::sync::Arc;

/// The serialisation a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Avro,
    Protobuf,
    JsonSchema,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Avro => "avro",
            Format::Protobuf => "protobuf",
            Format::JsonSchema => "json-schema",
        }
    }
}

/// Which schema a payload was written with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaInfo {
    pub format: Format,
    /// The registry's schema id (Confluent framing), when the payload carries one.
    pub id: Option<u32>,
    pub subject: Option<String>,
    pub version: Option<i32>,
    /// Record or message full name (`com.acme.Payment`), or the JSON Schema's title.
    pub name: String,
    /// Whether the bytes carry Confluent's framing (magic byte and id): an edit is
    /// written back with the same framing.
    pub framed: bool,
    /// Protobuf message indexes from the framing (`[0]` is the first message).
    pub message_indexes: Vec<i32>,
    /// Field names the schema tags as PII (Avro `confluent:tags`/`pii`, Protobuf
    /// `(confluent.field_meta).tags` or `debug_redact`, JSON Schema `confluent:tags`):
    /// masked whatever their name.
    pub pii_fields: Vec<String>,
    /// Where the schema came from: `registry` or the local file.
    pub source: String,
    /// The topic or queue whose mapping named the schema (unframed letters): an edit is
    /// written back with the same mapping.
    pub container: Option<String>,
}

impl SchemaInfo {
    /// A Confluent-framed schema by its registry id (the rest is filled in by a decode):
    /// what writing JSON with a known schema id needs.
    pub fn framed(format: Format, id: u32, message_indexes: Vec<i32>) -> SchemaInfo {
        SchemaInfo {
            format,
            id: Some(id),
            subject: None,
            version: None,
            name: String::new(),
            framed: true,
            message_indexes,
            pii_fields: Vec::new(),
            source: String::new(),
            container: None,
        }
    }

    /// One line for the detail pane and `show`: `avro com.acme.Payment v2 (id 12,
    /// subject payments-value, registry)`. Untrusted (the registry's names): sanitize.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {}", self.format.as_str(), self.name);
        if let Some(v) = self.version {
            s.push_str(&format!(" v{v}"));
        }
        let mut bits = Vec::new();
        if let Some(id) = self.id {
            bits.push(format!("id {id}"));
        }
        if let Some(subject) = &self.subject {
            bits.push(format!("subject {subject}"));
        }
        if !self.framed {
            bits.push("unframed".into());
        }
        bits.push(self.source.clone());
        format!("{s} ({})", bits.join(", "))
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "format": self.format.as_str(),
            "id": self.id,
            "subject": self.subject,
            "version": self.version,
            "name": self.name,
            "framed": self.framed,
            "pii_fields": self.pii_fields,
            "source": self.source,
        })
    }
}

/// A payload decoded to JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Compact JSON text, fields in schema order.
    pub json: String,
    pub schema: Arc<SchemaInfo>,
}

/// What a decoder made of a payload it was asked about.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoding {
    Decoded(Decoded),
    /// The schema is being fetched (the registry has not answered yet, or answered with
    /// a transient error): the letter is shown as bytes until a later read decodes it.
    Pending(String),
    /// A poison pill by cause: `unknown schema id 4711`, `Avro for com.acme.Order v3
    /// ends before the record does`, `not Confluent-framed`. The first line is the cause
    /// letters group under; lines after it are this letter's particulars (`after 17 of 40
    /// bytes`), shown in its detail.
    Undecodable(String),
}

impl Decoding {
    pub fn decoded(&self) -> Option<&Decoded> {
        match self {
            Decoding::Decoded(d) => Some(d),
            _ => None,
        }
    }

    /// The reason code a letter that cannot be decoded groups under.
    pub fn reason(&self) -> Option<String> {
        match self {
            Decoding::Undecodable(why) => Some(format!(
                "undecodable: {}",
                why.lines().next().unwrap_or_default()
            )),
            _ => None,
        }
    }

    /// Whether the decoder's reason names the cause better than a fingerprint of the
    /// consumer's exception: yes for framed bytes that do not decode; not for bytes
    /// without framing, which on a topic of mixed formats may be anything (they take the
    /// reason only when nothing else gives one).
    pub fn outranks_derived(&self) -> bool {
        matches!(self, Decoding::Undecodable(why) if why != NOT_FRAMED && !why.starts_with(TOO_BIG))
    }

    /// One line for the detail pane and `show`.
    pub fn describe(&self) -> String {
        match self {
            Decoding::Decoded(d) => d.schema.describe(),
            Decoding::Pending(why) => format!("schema pending: {why}"),
            Decoding::Undecodable(why) => format!("undecodable: {}", why.replace('\n', " — ")),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Decoding::Decoded(d) => {
                let mut v = d.schema.to_json();
                v["state"] = "decoded".into();
                v
            }
            Decoding::Pending(why) => serde_json::json!({"state": "pending", "why": why}),
            Decoding::Undecodable(why) => {
                serde_json::json!({"state": "undecodable", "why": why})
            }
        }
    }
}

/// Why unframed binary on a source with schemas is undecodable.
pub const NOT_FRAMED: &str = "not Confluent-framed";

/// Decoded JSON larger than this is not kept (bytes fields grow several-fold as text):
/// the letter is shown as bytes and says why.
pub const MAX_DECODED: usize = 16 << 20;
/// Why a letter that decodes is shown as bytes anyway.
pub const TOO_BIG: &str = "decoded form over 16 MiB";

/// The key or the value of a letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Key,
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Key => "key",
            Part::Value => "value",
        })
    }
}

/// Why an edited payload cannot be written back in its schema: the field and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(pub String);

/// The port: decodes schema-encoded payloads and writes edited ones back. Implemented by
/// `dlq-schema`; shared by the preparing threads, so lookups must not block for long (a
/// registry that is slow answers `Pending`).
pub trait PayloadCodec: Send + Sync + fmt::Debug {
    /// `None`: not schema data this codec knows about (a JSON or text body stays as is).
    fn decode(&self, container: &str, part: Part, bytes: &[u8]) -> Option<Decoding>;

    /// The JSON an edit produced, written with the letter's own writer schema (same id and
    /// framing), or the exact field error.
    fn encode(&self, schema: &SchemaInfo, json: &str) -> Result<Vec<u8>, EncodeError>;
}

/// A codec shared by a session's threads.
pub type Codec = Arc<dyn PayloadCodec>;
