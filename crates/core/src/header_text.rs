//! A header value's derived `Debug` text, written without the formatter: the content
//! digests that bind decisions to letters (and ids derived from content) were taken over
//! that text and are kept in ledgers, so it must not change by a byte.

use crate::model::HeaderValue;

/// A header value as `format!("{value:?}")` writes it, byte for byte: digests recorded
/// in ledgers were taken over that text, so it cannot change. Written out because the
/// derived `Debug` (each byte of a value a formatted number) was half the cost of
/// preparing a RabbitMQ letter; rare cases (floats, strings that need escapes) still
/// go through `Debug` itself.
pub fn write(v: &HeaderValue, out: &mut Vec<u8>) {
    use std::io::Write as _;
    /// A list of items as `[a, b]`.
    fn list<T>(out: &mut Vec<u8>, items: &[T], mut item: impl FnMut(&mut Vec<u8>, &T)) {
        out.push(b'[');
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            item(out, x);
        }
        out.push(b']');
    }
    /// A string as its `Debug`: quoted, and raw when no character needs an escape.
    fn quoted(out: &mut Vec<u8>, s: &str) {
        if s.bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        } else {
            let _ = write!(out, "{s:?}");
        }
    }
    /// A decimal number, as `Display` writes it.
    fn num(out: &mut Vec<u8>, n: impl Into<i128>) {
        let _ = write!(out, "{}", n.into());
    }
    match v {
        HeaderValue::Null => out.extend_from_slice(b"Null"),
        HeaderValue::Bytes(b) => {
            out.extend_from_slice(b"Bytes(");
            list(out, b, |out, x| {
                // Up to three digits, no leading zeros.
                let x = *x;
                if x >= 100 {
                    out.push(b'0' + x / 100);
                }
                if x >= 10 {
                    out.push(b'0' + x / 10 % 10);
                }
                out.push(b'0' + x % 10);
            });
            out.push(b')');
        }
        HeaderValue::Int(i) => {
            out.extend_from_slice(b"Int(");
            num(out, *i);
            out.push(b')');
        }
        HeaderValue::Float(x) => {
            let _ = write!(out, "Float({x:?})");
        }
        HeaderValue::Bool(b) => {
            out.extend_from_slice(if *b { b"Bool(true)" } else { b"Bool(false)" });
        }
        HeaderValue::Timestamp(t) => {
            out.extend_from_slice(b"Timestamp(");
            num(out, *t);
            out.push(b')');
        }
        HeaderValue::Array(items) => {
            out.extend_from_slice(b"Array(");
            list(out, items, |out, x| write(x, out));
            out.push(b')');
        }
        HeaderValue::Table(fields) => {
            out.extend_from_slice(b"Table(");
            list(out, fields, |out, (k, x)| {
                out.push(b'(');
                quoted(out, k);
                out.extend_from_slice(b", ");
                write(x, out);
                out.push(b')');
            });
            out.push(b')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any header value, nested a few levels, with any text and any float.
    fn header_value() -> impl Strategy<Value = HeaderValue> {
        let leaf = prop_oneof![
            Just(HeaderValue::Null),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(HeaderValue::Bytes),
            any::<i64>().prop_map(HeaderValue::Int),
            any::<f64>().prop_map(HeaderValue::Float),
            any::<bool>().prop_map(HeaderValue::Bool),
            any::<u64>().prop_map(HeaderValue::Timestamp),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(HeaderValue::Array),
                proptest::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(HeaderValue::Table),
                proptest::collection::vec(("[a-z\\-\"\\\\ ]{0,12}", Just(HeaderValue::Null)), 0..3)
                    .prop_map(HeaderValue::Table),
            ]
        })
    }

    proptest! {
        /// Ledgers hold digests taken over the derived `Debug` text: the hand-written
        /// encoder must produce exactly those bytes, or recorded decisions stop matching.
        #[test]
        fn header_text_is_the_derived_debug_byte_for_byte(v in header_value()) {
            let mut out = Vec::new();
            write(&v, &mut out);
            prop_assert_eq!(String::from_utf8_lossy(&out), format!("{v:?}"));
        }
    }

    /// An x-death table, the value that dominates a RabbitMQ letter's digest.
    #[test]
    fn an_x_death_table_writes_as_its_debug() {
        let v = HeaderValue::Array(vec![HeaderValue::Table(vec![
            ("count".into(), HeaderValue::Int(4)),
            ("reason".into(), HeaderValue::text("expired")),
            (
                "queue".into(),
                HeaderValue::text("orders \"work\"\n\u{202e}"),
            ),
            ("time".into(), HeaderValue::Timestamp(1_764_547_200)),
            (
                "routing-keys".into(),
                HeaderValue::Array(vec![HeaderValue::Bytes(vec![0, 9, 10, 99, 100, 255])]),
            ),
            ("ratio".into(), HeaderValue::Float(f64::NAN)),
        ])]);
        let mut out = Vec::new();
        write(&v, &mut out);
        assert_eq!(String::from_utf8_lossy(&out), format!("{v:?}"));
    }
}
