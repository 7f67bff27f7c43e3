//! How a payload is shown: pretty masked JSON, masked text, or a masked hex dump, with a
//! size guard that says how much is hidden. The output is masked but not sanitized; the
//! front end sanitizes what it prints.

use crate::masking::{Layout, Masker};
use crate::model::{BodyKind, DeadLetter};
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    Json,
    Text,
    Hex,
    Empty,
}

impl ViewKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ViewKind::Json => "json",
            ViewKind::Text => "text",
            ViewKind::Hex => "hex",
            ViewKind::Empty => "empty",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PayloadView {
    pub kind: ViewKind,
    /// Masked rendering.
    pub text: String,
    pub total_bytes: usize,
    /// Set when the rendering was cut by the size guard.
    pub truncated: bool,
}

/// Bytes of a binary payload shown as hex.
pub const HEX_LIMIT: usize = 4096;

/// Render a payload masked, at most about `max_out` bytes of output.
pub fn render(masker: &Masker, payload: &[u8], body: BodyKind, max_out: usize) -> PayloadView {
    let (kind, text, truncated) = match body {
        BodyKind::Empty => (ViewKind::Empty, String::new(), false),
        BodyKind::Json => match masker.mask_json(payload, Layout::Pretty, max_out) {
            Ok((t, cut)) => (ViewKind::Json, t, cut),
            Err(_) => {
                let (t, cut) = masker.mask_payload(payload, Layout::Pretty, max_out);
                (ViewKind::Text, t, cut)
            }
        },
        BodyKind::BrokenJson | BodyKind::Text => {
            let (t, cut) = masker.mask_payload(payload, Layout::Pretty, max_out);
            (ViewKind::Text, t, cut)
        }
        BodyKind::Binary => {
            let (t, cut) = hex(payload, max_out, |b| masker.sensitive_bytes(b));
            (ViewKind::Hex, t, cut)
        }
    };
    PayloadView {
        kind,
        text,
        total_bytes: payload.len(),
        truncated,
    }
}

/// Render a letter's payload masked: the decoded JSON of a schema-encoded payload
/// (masked by field name and by the fields its schema tags as PII), else its bytes.
/// Schema-encoded bytes that did not decode (pending, undecodable) show as a hex dump
/// with every text run starred: which field holds a name cannot be told without the
/// schema, so no text is shown (`show --unmask` shows it, audited).
pub fn render_letter(masker: &Masker, dl: &DeadLetter, max_out: usize) -> PayloadView {
    if dl.schema.as_ref().is_some_and(|s| s.decoded().is_none()) {
        let (text, truncated) = hex(&dl.raw.payload, max_out, |b| masker.opaque_bytes(b));
        return PayloadView {
            kind: ViewKind::Hex,
            text,
            total_bytes: dl.raw.payload.len(),
            truncated,
        };
    }
    let masker = masker.with_fields(dl.pii_fields());
    let mut view = render(&masker, dl.readable_payload(), dl.body, max_out);
    view.total_bytes = dl.raw.payload.len();
    view
}

/// [`render_unmasked`] for a letter (the decoded form when a schema decoded it).
pub fn render_letter_unmasked(dl: &DeadLetter, max_out: usize) -> PayloadView {
    let mut view = render_unmasked(dl.readable_payload(), dl.body, max_out);
    view.total_bytes = dl.raw.payload.len();
    view
}

/// Render a payload **unmasked** — only after the privileged role, a reason and an audit
/// entry. Still size-capped; the caller still sanitizes.
pub fn render_unmasked(payload: &[u8], body: BodyKind, max_out: usize) -> PayloadView {
    let cap = |mut t: String| {
        let cut = t.len() > max_out;
        if cut {
            let mut at = max_out;
            while !t.is_char_boundary(at) {
                at -= 1;
            }
            t.truncate(at);
        }
        (t, cut)
    };
    let (kind, (text, truncated)) = match body {
        BodyKind::Empty => (ViewKind::Empty, (String::new(), false)),
        BodyKind::Json => match serde_json::from_slice::<serde_json::Value>(payload)
            .and_then(|v| serde_json::to_string_pretty(&v))
        {
            Ok(t) => (ViewKind::Json, cap(t)),
            Err(_) => (
                ViewKind::Text,
                cap(String::from_utf8_lossy(payload).into_owned()),
            ),
        },
        BodyKind::BrokenJson | BodyKind::Text => (
            ViewKind::Text,
            cap(String::from_utf8_lossy(payload).into_owned()),
        ),
        BodyKind::Binary => (
            ViewKind::Hex,
            hex(payload, max_out, |b| vec![false; b.len()]),
        ),
    };
    PayloadView {
        kind,
        text,
        total_bytes: payload.len(),
        truncated,
    }
}

/// The first bytes of a payload (at most `HEX_LIMIT`, and a quarter of `max_out`) as a
/// hex dump with the bytes `hidden` names starred, and whether bytes were left out.
fn hex(payload: &[u8], max_out: usize, hidden: impl FnOnce(&[u8]) -> Vec<bool>) -> (String, bool) {
    let shown = &payload[..payload.len().min(HEX_LIMIT).min(max_out / 4)];
    (dump(shown, &hidden(shown)), shown.len() < payload.len())
}

/// Classic 16-bytes-per-line hex dump with the `hidden` bytes shown as `**` and `*`, in
/// both columns, since hex of an email is as readable as the email.
fn dump(bytes: &[u8], hidden: &[bool]) -> String {
    let projection = crate::masking::printable_projection(bytes);
    let mut out = String::new();
    for (line, chunk) in bytes.chunks(16).enumerate() {
        let base = line * 16;
        let _ = write!(out, "{base:08x}  ");
        for k in 0..16 {
            match chunk.get(k) {
                Some(_) if hidden[base + k] => out.push_str("** "),
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
            if k == 7 {
                out.push(' ');
            }
        }
        out.push_str(" |");
        for (k, _) in chunk.iter().enumerate() {
            out.push(if hidden[base + k] {
                '*'
            } else {
                projection.as_bytes()[base + k] as char
            });
        }
        out.push_str("|\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_dump_masks_both_columns() {
        let m = Masker::with_key(vec![1]);
        let mut bytes = vec![0x00, 0x01];
        bytes.extend_from_slice(b" jane@example.com ");
        bytes.push(0xff);
        let d = hex(&bytes, usize::MAX, |b| m.sensitive_bytes(b)).0;
        assert!(!d.contains("jane"), "{d}");
        assert!(!d.contains("6a 61 6e 65"), "hex of 'jane' leaked: {d}");
        assert!(d.starts_with("00000000  00 01 20 ** **"), "{d}");
    }

    #[test]
    fn size_guard_reports_truncation() {
        let m = Masker::with_key(vec![1]);
        let big = format!("{{\"a\":\"{}\"}}", "x".repeat(100_000));
        let v = render(&m, big.as_bytes(), BodyKind::Json, 1000);
        assert!(v.truncated);
        assert!(v.text.len() <= 1000);
        assert_eq!(v.total_bytes, big.len());
        let bin = render(&m, &vec![0u8; 10_000], BodyKind::Binary, 1 << 20);
        assert_eq!(bin.kind, ViewKind::Hex);
        assert!(bin.truncated);
    }
}
