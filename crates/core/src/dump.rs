//! The NDJSON dump format: one dead letter per line, exact bytes preserved.
//!
//! It is what `export` writes and what the file source reads. Text that is valid UTF-8 is
//! stored as a JSON string (readable, greppable); anything else as base64 (`*_b64`, or
//! `{"b64": …}` for header values). AMQP typed header values keep their types.

use crate::model::{Coords, HeaderValue, RawLetter};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, Read};

/// Longest line we accept; beyond it the line is reported, not loaded.
pub const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("line {line}: {message}")]
    BadLine { line: u64, message: String },
    #[error("reading dump: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct DumpLine {
    #[serde(default = "one")]
    v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coords: Option<Coords>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_b64: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<(String, Value)>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload_b64: Option<String>,
    /// Set by `export`: payload and headers were masked on the way out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    masked: bool,
}

fn one() -> u32 {
    1
}

/// Encode one letter as a dump line (no trailing newline).
pub fn to_line(raw: &RawLetter, masked: bool) -> String {
    let (key, key_b64) = split_bytes(raw.key.as_deref());
    let (payload, payload_b64) = split_bytes(Some(&raw.payload));
    let line = DumpLine {
        v: 1,
        coords: raw.coords.clone(),
        timestamp: raw
            .timestamp
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true)),
        key,
        key_b64,
        headers: raw
            .headers
            .iter()
            .map(|h| (h.name.to_string(), header_to_json(&h.value)))
            .collect(),
        properties: raw.properties.iter().cloned().collect(),
        payload,
        payload_b64,
        masked,
    };
    // Serializing plain strings/maps cannot fail; fall back to an explicit marker anyway.
    serde_json::to_string(&line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn split_bytes(b: Option<&[u8]>) -> (Option<String>, Option<String>) {
    match b {
        None => (None, None),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => (Some(s.to_string()), None),
            Err(_) => (None, Some(B64.encode(b))),
        },
    }
}

pub fn header_to_json(v: &HeaderValue) -> Value {
    match v {
        HeaderValue::Null => Value::Null,
        HeaderValue::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => json!({ "b64": B64.encode(b) }),
        },
        HeaderValue::Int(i) => json!(i),
        HeaderValue::Float(f) => json!(f),
        HeaderValue::Bool(b) => json!(b),
        HeaderValue::Timestamp(t) => json!({ "ts": t }),
        HeaderValue::Array(items) => Value::Array(items.iter().map(header_to_json).collect()),
        HeaderValue::Table(fields) => json!({
            "table": fields.iter().map(|(k, v)| json!([k, header_to_json(v)])).collect::<Vec<_>>()
        }),
    }
}

pub fn header_from_json(v: &Value) -> Result<HeaderValue, String> {
    Ok(match v {
        Value::Null => HeaderValue::Null,
        Value::String(s) => HeaderValue::Bytes(s.as_bytes().to_vec()),
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => HeaderValue::Int(i),
            None => HeaderValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Array(items) => HeaderValue::Array(
            items
                .iter()
                .map(header_from_json)
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => object_header(o)?,
    })
}

fn object_header(o: &Map<String, Value>) -> Result<HeaderValue, String> {
    if o.len() != 1 {
        return Err(
            "a header object must be exactly one of {\"b64\"}, {\"ts\"}, {\"table\"}".into(),
        );
    }
    match o.iter().next() {
        Some((k, Value::String(s))) if k == "b64" => B64
            .decode(s)
            .map(HeaderValue::Bytes)
            .map_err(|e| format!("bad base64 in header value: {e}")),
        Some((k, Value::Number(n))) if k == "ts" => n
            .as_u64()
            .map(HeaderValue::Timestamp)
            .ok_or_else(|| "`ts` must be a non-negative integer (epoch seconds)".to_string()),
        Some((k, Value::Array(pairs))) if k == "table" => {
            let mut fields = Vec::with_capacity(pairs.len());
            for p in pairs {
                match p.as_array().map(Vec::as_slice) {
                    Some([Value::String(name), value]) => {
                        fields.push((name.clone(), header_from_json(value)?))
                    }
                    _ => return Err("`table` entries must be [name, value] pairs".into()),
                }
            }
            Ok(HeaderValue::Table(fields))
        }
        Some((k, _)) => Err(format!("unknown header value form `{k}`")),
        None => Err("empty header object".into()),
    }
}

/// Decode one dump line.
pub fn from_line(line: &[u8]) -> Result<RawLetter, String> {
    let d: DumpLine =
        serde_json::from_slice(line).map_err(|e| format!("not a dump record: {e}"))?;
    if d.v != 1 {
        return Err(format!(
            "unsupported dump version {} (this build reads version 1)",
            d.v
        ));
    }
    let bytes = |text: Option<String>,
                 b64: Option<String>,
                 what: &str|
     -> Result<Option<Vec<u8>>, String> {
        match (text, b64) {
            (Some(_), Some(_)) => Err(format!("both `{what}` and `{what}_b64` are set")),
            (Some(t), None) => Ok(Some(t.into_bytes())),
            (None, Some(b)) => B64
                .decode(b)
                .map(Some)
                .map_err(|e| format!("`{what}_b64` is not base64: {e}")),
            (None, None) => Ok(None),
        }
    };
    let timestamp = match d.timestamp {
        None => None,
        Some(t) => Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|e| format!("`timestamp` {t:?} is not RFC 3339: {e}"))?
                .with_timezone(&Utc),
        ),
    };
    let headers = d
        .headers
        .iter()
        .map(|(name, v)| {
            header_from_json(v)
                .map(|value| crate::conventions::header(name, value))
                .map_err(|e| format!("header `{name}`: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RawLetter {
        coords: d.coords,
        key: bytes(d.key, d.key_b64, "key")?,
        headers,
        properties: d.properties.into_iter().collect(),
        payload: bytes(d.payload, d.payload_b64, "payload")?.unwrap_or_default(),
        timestamp,
    })
}

/// Streams records from a dump, naming the line of every bad one.
pub struct DumpReader<R> {
    inner: R,
    line_no: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> DumpReader<R> {
    pub fn new(inner: R) -> Self {
        DumpReader {
            inner,
            line_no: 0,
            buf: Vec::new(),
        }
    }

    /// Next record with its 1-based line number; `None` at end of input. Blank lines are
    /// skipped. An I/O error ends the stream. (The file source parses on workers.)
    #[cfg(test)]
    pub fn next_record(&mut self) -> Option<Result<(u64, RawLetter), DumpError>> {
        self.next_line().map(|r| r.and_then(DumpLineText::parse))
    }

    /// Next non-blank line, unparsed (parsing is the costly part, and any thread can do
    /// it: [`DumpLineText::parse`]). A line over [`MAX_LINE_BYTES`] is skipped and
    /// reported as a bad line; an I/O error ends the stream.
    pub fn next_line(&mut self) -> Option<Result<DumpLineText, DumpError>> {
        loop {
            self.buf.clear();
            self.line_no += 1;
            let n = match (&mut self.inner)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut self.buf)
            {
                Ok(0) => return None,
                Ok(n) => n,
                Err(e) => return Some(Err(DumpError::Io(e))),
            };
            if n as u64 > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
                // Skip the rest of the oversized line so the next record still reads.
                let line = self.line_no;
                let mut sink = Vec::new();
                loop {
                    sink.clear();
                    match (&mut self.inner).take(1 << 20).read_until(b'\n', &mut sink) {
                        Ok(0) => break,
                        Ok(_) if sink.last() == Some(&b'\n') => break,
                        Ok(_) => continue,
                        Err(e) => return Some(Err(DumpError::Io(e))),
                    }
                }
                return Some(Err(DumpError::BadLine {
                    line,
                    message: format!(
                        "longer than {} — skipped",
                        crate::sanitize::human_bytes(MAX_LINE_BYTES)
                    ),
                }));
            }
            let line = trim_ascii(&self.buf);
            if line.is_empty() {
                continue;
            }
            return Some(Ok(DumpLineText {
                line: self.line_no,
                text: line.to_vec(),
            }));
        }
    }
}

/// One line of a dump, read but not parsed, with its 1-based line number.
pub struct DumpLineText {
    pub line: u64,
    pub text: Vec<u8>,
}

impl DumpLineText {
    pub fn parse(self) -> Result<(u64, RawLetter), DumpError> {
        from_line(&self.text)
            .map(|r| (self.line, r))
            .map_err(|message| DumpError::BadLine {
                line: self.line,
                message,
            })
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Header;
    use chrono::TimeZone;

    fn sample() -> RawLetter {
        RawLetter {
            coords: Some(Coords::Kafka {
                topic: "invoices.dlq".into(),
                partition: 3,
                offset: 88121,
            }),
            key: Some(b"cus-8812".to_vec()),
            headers: vec![
                Header::new("x-error", HeaderValue::text("SyntaxError: boom")),
                Header::new(
                    "kafka_dlt-original-partition",
                    HeaderValue::Bytes(vec![0, 0, 0, 3]),
                ),
                Header::new("bin", HeaderValue::Bytes(vec![0xff, 0x00])),
                Header::new(
                    "x-death",
                    HeaderValue::Array(vec![HeaderValue::Table(vec![
                        ("queue".into(), HeaderValue::text("work")),
                        ("count".into(), HeaderValue::Int(2)),
                        ("time".into(), HeaderValue::Timestamp(1_790_000_000)),
                    ])]),
                ),
                Header::new("nullable", HeaderValue::Null),
            ],
            properties: vec![("message_id".into(), "m-1".into())],
            payload: b"\xff\xfe binary".to_vec(),
            timestamp: Utc.timestamp_millis_opt(1_790_000_000_123).single(),
        }
    }

    #[test]
    fn round_trips_exact_bytes() {
        let raw = sample();
        let line = to_line(&raw, false);
        assert!(line.contains("\"payload_b64\""), "{line}");
        assert!(line.contains("\"key\":\"cus-8812\""), "{line}");
        assert_eq!(from_line(line.as_bytes()), Ok(raw));
    }

    #[test]
    fn bad_lines_are_named_and_skipped() {
        let good = to_line(&sample(), false);
        let mut input = format!("{good}\n\n{{\"payload\": truncated\n").into_bytes();
        input.extend_from_slice(b"\xffnot json\n");
        input.extend_from_slice(format!("{good}\n").as_bytes());
        let mut r = DumpReader::new(std::io::Cursor::new(input));
        let mut results = Vec::new();
        while let Some(x) = r.next_record() {
            results.push(x.map(|(line, _)| line).map_err(|e| e.to_string()));
        }
        assert_eq!(results.len(), 4);
        assert_eq!(results[0], Ok(1));
        assert!(
            results[1].as_ref().is_err_and(|e| e.starts_with("line 3:")),
            "{results:?}"
        );
        assert!(
            results[2].as_ref().is_err_and(|e| e.starts_with("line 4:")),
            "{results:?}"
        );
        assert_eq!(results[3], Ok(5));
    }

    #[test]
    fn rejects_ambiguous_and_unknown_forms() {
        assert!(from_line(br#"{"payload":"a","payload_b64":"YQ=="}"#).is_err());
        assert!(from_line(br#"{"headers":[["h",{"weird":1}]]}"#).is_err());
        assert!(from_line(br#"{"v":2}"#).is_err());
        assert!(from_line(br#"{"paylod":"typo"}"#).is_err());
    }
}
