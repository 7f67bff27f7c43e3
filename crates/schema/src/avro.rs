//! Avro: apache-avro reads and writes the binary encoding; this module only maps its
//! values to readable JSON and back, guided by the writer schema (decimals as exact
//! strings, timestamps as RFC 3339, uuids as text, unions without their branch tag,
//! bytes as the Avro JSON encoding's code points 0–255) so an edit round-trips.

use apache_avro::schema::{DecimalSchema, InnerDecimalSchema, Name, RecordSchema};
use apache_avro::types::Value;
use apache_avro::Schema;
use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, TimeZone, Utc};
use num_bigint::BigInt;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::fmt::Write as _;

mod from_json;

/// A parsed writer schema with the named types it references.
#[derive(Debug)]
pub struct AvroSchema {
    schema: Schema,
    /// Schemas named by references (registry `references`), parsed first.
    refs: Vec<Schema>,
    names: HashMap<Name, Schema>,
    pub name: String,
    pub pii: Vec<String>,
    /// A record that contains itself (a linked list, a tree): its depth is bounded only by
    /// the bytes, and apache-avro decodes by recursion.
    recursive: bool,
}

/// Payload bytes a recursive schema is decoded from, at most: every level takes at least
/// a byte, so this bounds the depth the decoder's recursion can reach.
/// Debug builds' decoder frames are many times larger: a smaller bound keeps the tests'
/// hostile inputs as safe there as release builds are with theirs.
pub(crate) const RECURSIVE_MAX_BYTES: usize = if cfg!(debug_assertions) {
    1024
} else {
    16 * 1024
};
/// The stack a recursive schema's letters are decoded on: address space reserved, not
/// memory used (a level costs about 1 KiB of it in a release build, several in a debug
/// one; 16 Ki levels at most).
const RECURSIVE_STACK: usize = 512 << 20;
/// What one letter may make apache-avro allocate (its default is 512 MiB): a hostile
/// length prefix costs an error, not the machine's memory.
pub const MAX_ALLOCATION: usize = 64 << 20;

/// Nesting beyond this is refused (a hostile schema or value cannot overflow the stack).
const MAX_DEPTH: usize = 64;

impl AvroSchema {
    /// Parse `text` with the schemas it references (`refs`, in dependency order).
    pub fn parse(text: &str, refs: &[String]) -> Result<AvroSchema, String> {
        let (schema, refs) = if refs.is_empty() {
            (
                Schema::parse_str(text).map_err(|e| e.to_string())?,
                Vec::new(),
            )
        } else {
            Schema::parse_str_with_list(text, refs).map_err(|e| e.to_string())?
        };
        let mut names = HashMap::new();
        {
            // Referenced schemas first: each resolves against those before it.
            let all: Vec<&Schema> = refs.iter().chain(std::iter::once(&schema)).collect();
            let resolved = apache_avro::schema::ResolvedSchema::new_with_schemata(all)
                .map_err(|e| e.to_string())?;
            for (n, s) in resolved.get_names() {
                names.insert(n.clone(), (*s).clone());
            }
        }
        let name = match &schema {
            Schema::Record(r) => r.name.fullname(None),
            Schema::Enum(e) => e.name.fullname(None),
            Schema::Fixed(f) => f.name.fullname(None),
            other => format!("{:?}", apache_avro::schema::SchemaKind::from(other)).to_lowercase(),
        };
        apache_avro::util::max_allocation_bytes(MAX_ALLOCATION);
        let recursive = names
            .iter()
            .any(|(n, s)| refers_to(s, n, &names, &mut Vec::new()));
        let mut pii = Vec::new();
        collect_pii(&schema, &names, &mut pii, &mut Vec::new());
        for r in &refs {
            collect_pii(r, &names, &mut pii, &mut Vec::new());
        }
        pii.sort();
        pii.dedup();
        Ok(AvroSchema {
            schema,
            refs,
            names,
            name,
            pii,
            recursive,
        })
    }

    /// Decode one datum to compact JSON, or why not (with how far it got). A recursive
    /// schema's letters are decoded on a thread with a stack their size cannot exhaust.
    pub fn decode(&self, bytes: &[u8], label: &str) -> Result<String, String> {
        if !self.recursive {
            return self.decode_here(bytes, label);
        }
        if bytes.len() > RECURSIVE_MAX_BYTES {
            return Err(format!(
                "Avro for {label} is not decoded: its schema is recursive and the payload is over {} KiB\n{} bytes",
                RECURSIVE_MAX_BYTES / 1024,
                bytes.len()
            ));
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("avro-recursive".into())
                .stack_size(RECURSIVE_STACK)
                .spawn_scoped(scope, || self.decode_here(bytes, label))
                .map_err(|e| format!("cannot start a decoding thread: {e}"))?
                .join()
                .map_err(|_| format!("Avro for {label}: the decoder failed"))?
        })
    }

    fn decode_here(&self, bytes: &[u8], label: &str) -> Result<String, String> {
        let mut reader = bytes;
        let datum = self
            .reader()
            .and_then(|r| r.read_value(&mut reader).map_err(|e| e.to_string()));
        let read = bytes.len() - reader.len();
        match datum {
            Err(_) if reader.is_empty() => Err(format!(
                "Avro for {label} ends before the record does (written with another schema?)\nthe bytes end after {read}; the schema reads more"
            )),
            Err(e) => Err(format!(
                "Avro for {label} does not decode (written with another schema?)\nat byte {read} of {}: {e}",
                bytes.len()
            )),
            Ok(_) if !reader.is_empty() => Err(format!(
                "Avro for {label} leaves bytes unread (written with another schema?)\n{} of {} bytes unread",
                reader.len(),
                bytes.len()
            )),
            Ok(v) => {
                let mut out = String::with_capacity(bytes.len() * 2);
                self.write_json(&v, &self.schema, &mut out, 0)?;
                Ok(out)
            }
        }
    }

    /// The JSON an edit produced, encoded with this schema, or the field that does not fit.
    pub fn encode(&self, json: &str) -> Result<Vec<u8>, String> {
        let doc: Json = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
        let value = self.from_json(&doc, &self.schema, "", 0)?;
        let writer = if self.refs.is_empty() {
            apache_avro::writer::datum::GenericDatumWriter::builder(&self.schema).build()
        } else {
            apache_avro::writer::datum::GenericDatumWriter::builder(&self.schema)
                .schemata(self.refs.iter().collect())
                .and_then(|b| b.build())
        };
        writer
            .and_then(|w| w.write_value_to_vec(value))
            .map_err(|e| format!("does not fit {}: {e}", self.name))
    }

    fn reader(&self) -> Result<apache_avro::reader::datum::GenericDatumReader<'_>, String> {
        if self.refs.is_empty() {
            apache_avro::reader::datum::GenericDatumReader::builder(&self.schema).build()
        } else {
            apache_avro::reader::datum::GenericDatumReader::builder(&self.schema)
                .writer_schemata(self.refs.iter().collect())
                .and_then(|b| b.build())
        }
        .map_err(|e| e.to_string())
    }

    fn resolve<'a>(&'a self, schema: &'a Schema) -> Result<&'a Schema, String> {
        match schema {
            Schema::Ref { name } => self.names.get(name).ok_or_else(|| {
                format!(
                    "the schema references {} and does not define it",
                    name.fullname(None)
                )
            }),
            s => Ok(s),
        }
    }

    fn write_json(
        &self,
        v: &Value,
        schema: &Schema,
        out: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("Avro value nested deeper than {MAX_DEPTH} levels"));
        }
        let schema = self.resolve(schema)?;
        match (v, schema) {
            (Value::Union(i, inner), Schema::Union(u)) => {
                let branch = u.variants().get(*i as usize).unwrap_or(schema);
                self.write_json(inner, branch, out, depth + 1)?;
            }
            (Value::Record(fields), Schema::Record(RecordSchema { fields: defs, .. })) => {
                let members = fields.iter().map(|(name, fv)| {
                    let fs = defs
                        .iter()
                        .find(|d| &d.name == name)
                        .map_or(&Schema::Null, |d| &d.schema);
                    (name, fv, fs)
                });
                self.write_object(members, out, depth)?;
            }
            (Value::Map(items), Schema::Map(m)) => {
                // Keys sorted: the same map renders the same text every time.
                let mut keys: Vec<(&String, &Value)> = items.iter().collect();
                keys.sort_by_key(|(k, _)| *k);
                let members = keys.into_iter().map(|(k, v)| (k, v, &*m.types));
                self.write_object(members, out, depth)?;
            }
            (Value::Array(items), Schema::Array(a)) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    self.write_json(item, &a.items, out, depth + 1)?;
                }
                out.push(']');
            }
            (Value::Decimal(d), Schema::Decimal(DecimalSchema { scale, .. })) => {
                let bytes: Vec<u8> = d
                    .try_into()
                    .map_err(|e: apache_avro::Error| e.to_string())?;
                write_str(
                    &decimal_text(&BigInt::from_signed_bytes_be(&bytes), *scale),
                    out,
                );
            }
            (Value::TimestampMillis(t), _) => {
                write_time(Utc.timestamp_millis_opt(*t).single(), *t, out)
            }
            (Value::TimestampMicros(t), _) => {
                write_time(Utc.timestamp_micros(*t).single(), *t, out);
            }
            (Value::Date(d), _) => {
                match NaiveDate::from_num_days_from_ce_opt(d.saturating_add(719_163)) {
                    Some(day) => write_str(&day.format("%Y-%m-%d").to_string(), out),
                    None => {
                        let _ = write!(out, "{d}");
                    }
                }
            }
            (Value::Bytes(b) | Value::Fixed(_, b), _) => write_str(&bytes_text(b), out),
            (other, _) => scalar(other, out),
        }
        Ok(())
    }

    /// A JSON object of `(name, value, its schema)` members, in the order given.
    fn write_object<'v>(
        &self,
        members: impl Iterator<Item = (&'v String, &'v Value, &'v Schema)>,
        out: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        out.push('{');
        for (k, (name, v, schema)) in members.enumerate() {
            if k > 0 {
                out.push(',');
            }
            write_str(name, out);
            out.push(':');
            self.write_json(v, schema, out, depth + 1)?;
        }
        out.push('}');
        Ok(())
    }
}

/// Whether `schema` reaches the type named `target` (through fields, unions, arrays, maps
/// and references).
fn refers_to(
    schema: &Schema,
    target: &Name,
    names: &HashMap<Name, Schema>,
    seen: &mut Vec<Name>,
) -> bool {
    match schema {
        Schema::Ref { name } => {
            if name == target {
                return true;
            }
            if seen.contains(name) || seen.len() > MAX_DEPTH {
                return false;
            }
            seen.push(name.clone());
            names
                .get(name)
                .is_some_and(|s| refers_to(s, target, names, seen))
        }
        Schema::Record(r) => r
            .fields
            .iter()
            .any(|f| refers_to(&f.schema, target, names, seen)),
        Schema::Union(u) => u
            .variants()
            .iter()
            .any(|v| refers_to(v, target, names, seen)),
        Schema::Array(a) => refers_to(&a.items, target, names, seen),
        Schema::Map(m) => refers_to(&m.types, target, names, seen),
        _ => false,
    }
}

/// Fields whose schema attributes tag them PII: `"confluent:tags": ["PII"]` (Confluent
/// data contracts) or `"pii": true`.
fn collect_pii(
    schema: &Schema,
    names: &HashMap<Name, Schema>,
    out: &mut Vec<String>,
    seen: &mut Vec<Name>,
) {
    match schema {
        Schema::Record(r) => {
            if seen.contains(&r.name) || seen.len() > MAX_DEPTH {
                return;
            }
            seen.push(r.name.clone());
            for f in &r.fields {
                if tagged_pii(f.custom_attributes.get("confluent:tags"))
                    || f.custom_attributes.get("pii") == Some(&Json::Bool(true))
                {
                    out.push(f.name.clone());
                }
                collect_pii(&f.schema, names, out, seen);
            }
        }
        Schema::Union(u) => u
            .variants()
            .iter()
            .for_each(|v| collect_pii(v, names, out, seen)),
        Schema::Array(a) => collect_pii(&a.items, names, out, seen),
        Schema::Map(m) => collect_pii(&m.types, names, out, seen),
        Schema::Ref { name } => {
            if let Some(s) = names.get(name) {
                collect_pii(s, names, out, seen);
            }
        }
        _ => {}
    }
}

/// Whether a `confluent:tags` value names PII (case-insensitive).
pub fn tagged_pii(tags: Option<&Json>) -> bool {
    match tags {
        Some(Json::Array(items)) => items
            .iter()
            .any(|t| t.as_str().is_some_and(|s| s.eq_ignore_ascii_case("pii"))),
        Some(Json::String(s)) => s.eq_ignore_ascii_case("pii"),
        _ => false,
    }
}

fn at(path: &str) -> &str {
    if path.is_empty() {
        "the record"
    } else {
        path
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn kind(j: &Json) -> &'static str {
    match j {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn number(j: &Json) -> Option<f64> {
    match j {
        Json::Number(n) => n.as_f64(),
        Json::String(s) if matches!(s.as_str(), "NaN" | "Infinity" | "-Infinity") => s.parse().ok(),
        _ => None,
    }
}

/// A JSON string literal appended to `out`, escaped by serde_json, without a copy.
fn write_str(s: &str, out: &mut String) {
    /// serde_json writes a string as runs of the input cut at ASCII escapes, and the
    /// escapes: each write is whole UTF-8.
    struct Appender<'a>(&'a mut String);
    impl std::io::Write for Appender<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let text = std::str::from_utf8(buf)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            self.0.push_str(text);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mark = out.len();
    if serde_json::to_writer(Appender(out), s).is_err() {
        out.truncate(mark);
        out.push_str("\"\"");
    }
}

fn scalar(v: &Value, out: &mut String) {
    let _ = match v {
        Value::Null => write!(out, "null"),
        Value::Boolean(b) => write!(out, "{b}"),
        Value::Int(i) | Value::TimeMillis(i) => write!(out, "{i}"),
        Value::Long(l) | Value::TimeMicros(l) => write!(out, "{l}"),
        Value::LocalTimestampMillis(l)
        | Value::LocalTimestampMicros(l)
        | Value::LocalTimestampNanos(l)
        | Value::TimestampNanos(l) => {
            write!(out, "{l}")
        }
        Value::Float(f) => float(f64::from(*f), out),
        Value::Double(d) => float(*d, out),
        Value::String(s) | Value::Enum(_, s) => {
            write_str(s, out);
            Ok(())
        }
        Value::Uuid(u) => {
            write_str(&u.hyphenated().to_string(), out);
            Ok(())
        }
        other => {
            // A value the schema did not lead to (a mismatch apache-avro let through):
            // apache-avro's own JSON, never a panic.
            match serde_json::Value::try_from(other.clone()) {
                Ok(j) => write!(out, "{j}"),
                Err(_) => write!(out, "null"),
            }
        }
    };
}

fn float(x: f64, out: &mut String) -> std::fmt::Result {
    if x.is_finite() {
        match serde_json::Number::from_f64(x) {
            Some(n) => write!(out, "{n}"),
            None => write!(out, "null"),
        }
    } else {
        write_str(&x.to_string().replace("inf", "Infinity"), out);
        Ok(())
    }
}

fn write_time(t: Option<DateTime<Utc>>, raw: i64, out: &mut String) {
    match t {
        Some(t) => write_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true), out),
        None => {
            let _ = write!(out, "{raw}");
        }
    }
}

fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// Nanoseconds since the epoch; saturating outside the ±292 years an i64 holds.
fn nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

fn instant(j: &Json, path: &str, unit: impl Fn(DateTime<Utc>) -> i64) -> Result<i64, String> {
    match j {
        Json::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("{}: not a whole number", at(path))),
        Json::String(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| unit(t.with_timezone(&Utc)))
            .map_err(|e| format!("{}: not an RFC 3339 time: {e}", at(path))),
        _ => Err(format!("{}: expected a time, found {}", at(path), kind(j))),
    }
}

/// Bytes as the Avro JSON encoding writes them: one code point 0–255 per byte.
fn bytes_text(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(c)).collect()
}

fn text_bytes(s: &str, path: &str) -> Result<Vec<u8>, String> {
    s.chars()
        .map(|c| {
            u8::try_from(u32::from(c))
                .map_err(|_| format!("{}: bytes are code points 0–255, found `{c}`", at(path)))
        })
        .collect()
}

/// `unscaled × 10^-scale` as exact decimal text.
fn decimal_text(unscaled: &BigInt, scale: usize) -> String {
    let neg = unscaled.sign() == num_bigint::Sign::Minus;
    let digits = unscaled.magnitude().to_string();
    let body = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{}{digits}", "0".repeat(scale - digits.len()))
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// Decimal text → the unscaled integer at `scale` (more places than `scale` refused).
fn parse_decimal(text: &str, scale: usize) -> Option<BigInt> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > scale {
        return None;
    }
    let digits = format!("{int}{frac}{}", "0".repeat(scale - frac.len()));
    let n: BigInt = if digits.is_empty() {
        BigInt::from(0)
    } else {
        digits.parse().ok()?
    };
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_round_trips() {
        for (text, scale) in [
            ("12.34", 2),
            ("-0.05", 2),
            ("1500", 0),
            ("0.001", 3),
            ("-12.00", 2),
        ] {
            let n = parse_decimal(text, scale).unwrap();
            let back = decimal_text(&n, scale);
            assert_eq!(parse_decimal(&back, scale), Some(n), "{text}");
        }
        assert_eq!(decimal_text(&BigInt::from(-5), 2), "-0.05");
        assert_eq!(parse_decimal("1.234", 2), None);
        assert_eq!(parse_decimal("1,500.00", 2), None);
    }
}
