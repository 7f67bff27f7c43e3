//! User mappings from config, for in-house conventions: each field ← an ordered list of
//! sources (`header:NAME`, `json:/pointer`, `amqp:PROPERTY`, `key`). They run first.

use super::{json_scalar_text, Candidates, Field};
use crate::model::{BodyKind, Convention, RawLetter};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One place a value can come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldSource {
    Header(String),
    JsonPointer(String),
    AmqpProperty(String),
    Key,
}

impl FieldSource {
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "key" {
            return Ok(FieldSource::Key);
        }
        match s.split_once(':') {
            Some(("header", name)) if !name.is_empty() => Ok(FieldSource::Header(name.into())),
            Some(("json", ptr)) if ptr.starts_with('/') => Ok(FieldSource::JsonPointer(ptr.into())),
            Some(("json", ptr)) => Err(format!(
                "`json:{ptr}` is not a JSON pointer: it must start with `/`, e.g. `json:/error/code`"
            )),
            Some(("amqp", prop)) if !prop.is_empty() => Ok(FieldSource::AmqpProperty(prop.into())),
            _ => Err(format!(
                "`{s}` is not a field source: use `header:NAME`, `json:/pointer`, `amqp:PROPERTY` or `key`"
            )),
        }
    }
}

/// A named mapping: field → ordered sources.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMapping {
    pub name: String,
    pub fields: Vec<(Field, Vec<FieldSource>)>,
}

/// The config file form: `[[conventions]] name = "acme"` with `fields.reason_code = [...]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserMappingConfig {
    pub name: String,
    pub fields: BTreeMap<String, Vec<String>>,
}

impl TryFrom<UserMappingConfig> for UserMapping {
    type Error = String;

    fn try_from(cfg: UserMappingConfig) -> Result<Self, String> {
        let mut fields = Vec::new();
        for (name, sources) in cfg.fields {
            let field = Field::parse(&name).ok_or_else(|| {
                let known: Vec<_> = Field::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "convention `{}`: unknown field `{name}` (known: {})",
                    cfg.name,
                    known.join(", ")
                )
            })?;
            let parsed = sources
                .iter()
                .map(|s| {
                    FieldSource::parse(s)
                        .map_err(|e| format!("convention `{}`, field `{name}`: {e}", cfg.name))
                })
                .collect::<Result<Vec<_>, _>>()?;
            fields.push((field, parsed));
        }
        Ok(UserMapping {
            name: cfg.name,
            fields,
        })
    }
}

/// `payload`: the readable payload (decoded JSON of a schema-encoded one).
pub(super) fn apply(
    m: &UserMapping,
    raw: &RawLetter,
    payload: &[u8],
    body: BodyKind,
    c: &mut Candidates,
) {
    let conv = Convention::User(m.name.clone());
    // Parse the body once per letter, only if a pointer needs it.
    let needs_json = m
        .fields
        .iter()
        .any(|(_, s)| s.iter().any(|s| matches!(s, FieldSource::JsonPointer(_))));
    let json: Option<serde_json::Value> = (needs_json && body == BodyKind::Json)
        .then(|| serde_json::from_slice(payload).ok())
        .flatten();
    for (field, sources) in &m.fields {
        for src in sources {
            let (value, loc) = match src {
                FieldSource::Header(h) => (
                    raw.header(h).and_then(|v| v.as_nonempty_text()),
                    format!("header {h}"),
                ),
                FieldSource::JsonPointer(p) => (
                    json.as_ref()
                        .and_then(|j| j.pointer(p))
                        .and_then(json_scalar_text),
                    format!("body {p}"),
                ),
                FieldSource::AmqpProperty(p) => {
                    (raw.property(p).map(str::to_string), format!("property {p}"))
                }
                FieldSource::Key => (
                    raw.key
                        .as_ref()
                        .map(|k| String::from_utf8_lossy(k).into_owned()),
                    "record key".to_string(),
                ),
            };
            if let Some(v) = value {
                if c.offer_text(*field, &v, &conv, || loc.into()) {
                    break;
                }
            }
        }
    }
}
