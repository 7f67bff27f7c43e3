//! Masking what is not text: typed header values (tables and arrays keep their shape,
//! so an exported `x-death` still parses), binary and opaque payloads byte for byte.

use super::*;

impl Masker {
    /// Mask a header value keeping its type and structure (so an exported `x-death`
    /// still parses): tables by their field names, text by name then detectors.
    pub fn mask_header_value(&self, name: &str, value: &HeaderValue) -> HeaderValue {
        let class = self.field_class(name);
        match value {
            HeaderValue::Table(fields) => HeaderValue::Table(
                fields
                    .iter()
                    .map(|(k, v)| {
                        let masked = match class {
                            Some(_) => self.mask_header_value(name, v),
                            None => self.mask_header_value(k, v),
                        };
                        (k.clone(), masked)
                    })
                    .collect(),
            ),
            HeaderValue::Array(items) => HeaderValue::Array(
                items
                    .iter()
                    .map(|v| self.mask_header_value(name, v))
                    .collect(),
            ),
            HeaderValue::Bytes(b) => {
                let text = String::from_utf8_lossy(b);
                let masked = match class {
                    Some(c) => self.mask_value(c, &text),
                    None => self.mask_text(&text),
                };
                if masked == text && std::str::from_utf8(b).is_ok() {
                    value.clone()
                } else if masked == text {
                    HeaderValue::Bytes(self.mask_binary(b))
                } else {
                    HeaderValue::Bytes(masked.into_bytes())
                }
            }
            HeaderValue::Null => HeaderValue::Null,
            other => match class {
                Some(c) => HeaderValue::Bytes(
                    self.mask_value(c, &other.as_text().unwrap_or_default())
                        .into_bytes(),
                ),
                None => other.clone(),
            },
        }
    }

    /// Mask arbitrary bytes in place: printable runs go through the detectors and every
    /// byte of a sensitive span becomes `*`; everything else (and the length) is kept.
    pub fn mask_binary(&self, bytes: &[u8]) -> Vec<u8> {
        let hidden = self.sensitive_bytes(bytes);
        bytes
            .iter()
            .zip(hidden)
            .map(|(&b, h)| if h { b'*' } else { b })
            .collect()
    }

    /// [`Masker::mask_binary`] for schema-encoded bytes that did not decode: their text
    /// fields cannot be told apart, so none is shown — every printable run of three or
    /// more bytes is starred too, leaving the structure (lengths, tags, ids) readable.
    pub fn mask_opaque(&self, bytes: &[u8]) -> Vec<u8> {
        let hidden = self.opaque_bytes(bytes);
        bytes
            .iter()
            .zip(hidden)
            .map(|(&b, h)| if h { b'*' } else { b })
            .collect()
    }

    /// The bytes [`Masker::mask_opaque`] hides.
    pub fn opaque_bytes(&self, bytes: &[u8]) -> Vec<bool> {
        let mut hidden = self.sensitive_bytes(bytes);
        let printable = |b: u8| b.is_ascii_graphic() || b == b' ';
        let mut i = 0;
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && printable(bytes[i]) {
                i += 1;
            }
            if i - start >= 3 {
                hidden[start..i].iter_mut().for_each(|h| *h = true);
            }
            i = i.max(start + 1);
        }
        hidden
    }

    /// For each byte of a binary blob, whether it lies in a sensitive span, judged on its
    /// printable-ASCII projection (non-printables as `.`).
    pub fn sensitive_bytes(&self, bytes: &[u8]) -> Vec<bool> {
        let projection = printable_projection(bytes);
        let mut hidden = vec![false; bytes.len()];
        for (range, _) in self.sensitive_spans(&projection) {
            for h in &mut hidden[range] {
                *h = true;
            }
        }
        hidden
    }
}

/// Bytes as printable ASCII, one char per byte (`.` for the rest), so byte offsets and
/// char offsets coincide.
pub fn printable_projection(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect()
}
