//! A schema as a store hands it over (text and references), and compiled for use.

use crate::avro::AvroSchema;
use crate::json_schema::JsonSchema;
use crate::protobuf::ProtoSchema;
use dlq_core::schema::Format;
use std::collections::HashMap;

/// A schema's text as a registry or a directory holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSchema {
    pub format: Format,
    pub text: String,
    /// Schemas it references, by the name it imports them under (Protobuf import path,
    /// Avro type name), in dependency order.
    pub references: Vec<(String, String)>,
    pub subject: Option<String>,
    pub version: Option<i32>,
    /// `registry` or the file's name.
    pub source: String,
    /// A Protobuf message named by a mapping (unframed letters), else by the framing.
    pub message: Option<String>,
    /// A compiled descriptor set instead of `.proto` text.
    pub descriptor_set: Option<Vec<u8>>,
}

impl RawSchema {
    pub fn new(format: Format, text: String, source: &str) -> Self {
        RawSchema {
            format,
            text,
            references: Vec::new(),
            subject: None,
            version: None,
            source: source.to_string(),
            message: None,
            descriptor_set: None,
        }
    }
}

#[derive(Debug)]
pub enum Kind {
    Avro(AvroSchema),
    Proto(ProtoSchema),
    Json(JsonSchema),
}

/// A compiled schema and what describes it.
#[derive(Debug)]
pub struct Compiled {
    pub raw: RawSchema,
    pub kind: Kind,
}

impl Compiled {
    pub fn compile(raw: RawSchema) -> Result<Compiled, String> {
        let kind = match raw.format {
            Format::Avro => {
                let refs: Vec<String> = raw.references.iter().map(|(_, t)| t.clone()).collect();
                Kind::Avro(
                    AvroSchema::parse(&raw.text, &refs)
                        .map_err(|e| format!("does not parse as Avro: {e}"))?,
                )
            }
            Format::Protobuf => Kind::Proto(match &raw.descriptor_set {
                Some(bytes) => ProtoSchema::from_descriptor_set(bytes)?,
                None => {
                    let imports: HashMap<String, String> = raw.references.iter().cloned().collect();
                    // A directory's file compiles under its own name (its siblings may
                    // import it); a registry's under a neutral one.
                    let name = if raw.source.ends_with(".proto") {
                        raw.source.as_str()
                    } else {
                        "schema.proto"
                    };
                    ProtoSchema::compile(name, &raw.text, &imports)
                        .map_err(|e| format!("does not compile as Protobuf: {e}"))?
                }
            }),
            Format::JsonSchema => Kind::Json(
                JsonSchema::parse(&raw.text).map_err(|e| format!("is not a JSON Schema: {e}"))?,
            ),
        };
        Ok(Compiled { raw, kind })
    }

    pub fn pii(&self) -> &[String] {
        match &self.kind {
            Kind::Avro(a) => &a.pii,
            Kind::Proto(p) => &p.pii,
            Kind::Json(j) => &j.pii,
        }
    }
}
