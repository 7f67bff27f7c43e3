//! Masking: the only way payload, header and error text reaches a view, an export or a log.
//!
//! Two layers. *Field-name rules* mask the value under a sensitive key (JSON keys, header
//! names, `key=value` / `"key": "value"` in text) whatever it looks like. *Value detectors*
//! find emails, Luhn-valid card numbers, IBANs, JWTs, bearer/basic credentials, phone
//! numbers and long digit runs anywhere. JSON is masked on its token structure by an
//! iterative walker (no recursion, so hostile nesting depth cannot overflow the stack),
//! which also pretty-prints and stops early once a preview is long enough.

use crate::model::HeaderValue;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use std::collections::BTreeMap;

pub mod derived;
mod json;
mod spans;
mod typed;
pub use typed::printable_projection;
mod rules;

use json::*;
pub use rules::Class;
use rules::*;

/// What to do with a sensitive value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Keep a hint: `j***@e***.com`, `**** 4242`.
    Hint,
    /// Replace entirely: `[redacted]`.
    Redact,
    /// A short keyed hash, so equal values stay comparable without being shown.
    Hash,
}

/// `[masking]` in config.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskConfig {
    /// Action for every class without an explicit one (default `hint`).
    #[serde(default)]
    pub default_action: Option<Action>,
    /// Per-class actions, e.g. `email = "hash"`.
    #[serde(default)]
    pub actions: BTreeMap<String, Action>,
    /// Extra field names to mask (exact match after normalisation).
    #[serde(default)]
    pub extra_fields: Vec<String>,
    /// Field names never masked by name (value detectors still apply).
    #[serde(default)]
    pub allow_fields: Vec<String>,
}

/// A compiled policy plus the key for keyed hashes.
#[derive(Debug, Clone)]
pub struct Masker {
    default_action: Action,
    actions: BTreeMap<Class, Action>,
    extra: Vec<String>,
    allow: Vec<String>,
    hash_key: Vec<u8>,
    /// Which policy this is, for the per-thread memo of masked values (clones share it:
    /// same policy, same results).
    id: u64,
}

/// A fresh policy id.
fn next_masker_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Masked forms of short texts this thread has masked lately, under one policy.
///
/// A DLQ's reason codes, versions, consumers, event types and provenance labels repeat on
/// nearly every letter, and masking is a pure function of the text under a policy: the
/// preparing threads mask each distinct value once instead of running the detectors on it
/// a million times. Bounded (texts of at most `MEMO_TEXT` bytes, at most `MEMO_ENTRIES`
/// of them, then it starts over), so hostile input can only make it miss, not grow.
struct MaskMemo {
    policy: u64,
    /// `None`: the text has nothing to mask.
    seen: foldhash::HashMap<Box<str>, Option<Box<str>>>,
}

const MEMO_TEXT: usize = 160;
const MEMO_ENTRIES: usize = 4096;

thread_local! {
    static MEMO: std::cell::RefCell<MaskMemo> = std::cell::RefCell::new(MaskMemo {
        policy: 0,
        seen: foldhash::HashMap::default(),
    });
}

/// Output layout for JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Compact,
    Pretty,
}

/// Indentation stops growing here, so absurd nesting stays readable.
const MAX_INDENT_LEVELS: usize = 24;

impl Masker {
    pub fn new(cfg: &MaskConfig, hash_key: Vec<u8>) -> Result<Self, String> {
        let mut actions = BTreeMap::new();
        for (class, action) in &cfg.actions {
            let c = Class::parse(class).ok_or_else(|| {
                format!("masking.actions: unknown class `{class}` (known: email, phone, name, address, card, iban, national_id, secret, digits, generic)")
            })?;
            actions.insert(c, *action);
        }
        Ok(Masker {
            default_action: cfg.default_action.unwrap_or(Action::Hint),
            actions,
            extra: cfg.extra_fields.iter().map(|f| normalize_name(f)).collect(),
            allow: cfg.allow_fields.iter().map(|f| normalize_name(f)).collect(),
            hash_key,
            id: next_masker_id(),
        })
    }

    /// Default policy with the given hash key.
    pub fn with_key(hash_key: Vec<u8>) -> Self {
        Masker {
            default_action: Action::Hint,
            actions: BTreeMap::new(),
            extra: Vec::new(),
            allow: Vec::new(),
            hash_key,
            id: next_masker_id(),
        }
    }

    /// This policy plus field names a payload's schema tags as PII (masked by name like
    /// `extra_fields`, whatever they are called). Borrowed when there are none.
    pub fn with_fields(&self, pii: &[String]) -> std::borrow::Cow<'_, Masker> {
        if pii.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut m = self.clone();
        m.extra.extend(pii.iter().map(|f| normalize_name(f)));
        // Field-name rules change what text masks to: not this policy's memo, but one
        // shared by every letter of the same schema (an id derived from the policy and
        // the fields, in a space the counter never reaches), so a scan of one schema's
        // letters keeps its memo instead of starting over at each letter.
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(0x5c4e_3a11).build_hasher();
        self.id.hash(&mut h);
        pii.hash(&mut h);
        m.id = h.finish() | (1 << 63);
        std::borrow::Cow::Owned(m)
    }

    fn action(&self, class: Class) -> Action {
        if let Some(a) = self.actions.get(&class) {
            return *a;
        }
        match class {
            // Secrets never keep a hint, whatever the default.
            Class::Secret => Action::Redact,
            _ => self.default_action,
        }
    }

    /// The class a field name is sensitive as, if any.
    pub fn field_class(&self, name: &str) -> Option<Class> {
        if name.len() > 64 {
            return None; // not a field name
        }
        // Normalise on the stack: this runs for every key of every previewed payload.
        let mut buf = [0u8; 64];
        let mut len = 0;
        if name.is_ascii() {
            for b in name
                .bytes()
                .filter(|b| !matches!(b, b'_' | b'-' | b'.' | b' '))
            {
                buf[len] = b.to_ascii_lowercase();
                len += 1;
            }
            // ASCII in, ASCII out.
            return std::str::from_utf8(&buf[..len])
                .ok()
                .and_then(|n| self.class_of_normalized(n));
        }
        self.class_of_normalized(&normalize_name(name))
    }

    fn class_of_normalized(&self, n: &str) -> Option<Class> {
        if n.is_empty() || self.allow.iter().any(|a| a == n) {
            return None;
        }
        if self.extra.iter().any(|e| e == n) {
            return Some(Class::Generic);
        }
        static_class(n)
    }

    /// Mask a whole value known to be sensitive as `class`.
    pub fn mask_value(&self, class: Class, value: &str) -> String {
        match self.action(class) {
            Action::Redact => "[redacted]".to_string(),
            Action::Hash => format!("#{}", self.keyed_hash(value)),
            Action::Hint => hint(class, value),
        }
    }

    fn keyed_hash(&self, value: &str) -> String {
        // HMAC accepts keys of any length; new_from_slice cannot fail for HMAC.
        match Hmac::<Sha256>::new_from_slice(&self.hash_key) {
            Ok(mut mac) => {
                mac.update(value.as_bytes());
                let out = mac.finalize().into_bytes();
                out[..5].iter().map(|b| format!("{b:02x}")).collect()
            }
            Err(_) => "hash-unavailable".into(),
        }
    }

    /// Mask free text: `key=value` pairs under sensitive names, then value detectors.
    pub fn mask_text(&self, s: &str) -> String {
        self.mask_if_needed(s).unwrap_or_else(|| s.to_string())
    }

    /// `mask_text`, or `None` when nothing in `s` needs masking (no copy made). Short
    /// texts are remembered per thread (see `MaskMemo`).
    pub fn mask_if_needed(&self, s: &str) -> Option<String> {
        if s.len() > MEMO_TEXT {
            return self.mask_uncached(s);
        }
        let known = MEMO.with(|m| {
            let m = m.borrow();
            if m.policy != self.id {
                return None;
            }
            m.seen.get(s).map(|v| v.as_deref().map(str::to_string))
        });
        if let Some(known) = known {
            return known;
        }
        let masked = self.mask_uncached(s);
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.policy != self.id || m.seen.len() >= MEMO_ENTRIES {
                m.seen.clear();
                m.policy = self.id;
            }
            m.seen.insert(s.into(), masked.as_deref().map(Box::from));
        });
        masked
    }

    /// `mask_if_needed` for a text unique to one letter (an id, a correlation id): the
    /// memo would only miss on it, and each insert pushed out a value that repeats.
    pub fn mask_unique(&self, s: &str) -> Option<String> {
        self.mask_uncached(s)
    }

    fn mask_uncached(&self, s: &str) -> Option<String> {
        let spans = self.sensitive_spans(s);
        if spans.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        for (range, rep) in spans {
            out.push_str(&s[last..range.start]);
            out.push_str(&rep);
            last = range.end;
        }
        out.push_str(&s[last..]);
        Some(out)
    }

    /// Mask at most about `max_out` bytes of `s`: a 2 MB payload shown in a 256 KiB view
    /// costs 256 KiB of masking, wherever it is rendered (the TUI's thread included).
    /// Whatever a cut could split (a card number across the cut) is dropped with a
    /// margin longer than any detectable token. Returns whether the input was cut.
    pub fn mask_text_bounded(&self, s: &str, max_out: usize) -> (String, bool) {
        const MARGIN: usize = 1024;
        let limit = max_out.saturating_add(2 * MARGIN);
        if s.len() <= limit {
            return (self.mask_text(s), false);
        }
        let mut at = limit;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        let mut masked = self.mask_text(&s[..at]);
        let mut keep = masked.len().saturating_sub(MARGIN);
        while !masked.is_char_boundary(keep) {
            keep -= 1;
        }
        masked.truncate(keep);
        (masked, true)
    }

    /// Mask a header value for display: by header name first, then detectors.
    pub fn mask_header(&self, name: &str, value: &HeaderValue) -> String {
        let text = match value {
            HeaderValue::Table(_) | HeaderValue::Array(_) => render_header(value),
            other => other.as_text().map(|t| t.into_owned()).unwrap_or_default(),
        };
        match self.field_class(name) {
            Some(class) => self.mask_value(class, &text),
            None => self.mask_text(&text),
        }
    }

    /// Mask a JSON document. `max_out` bounds the output (a preview stops early and
    /// the flag says so). Errors when the input is not JSON.
    pub fn mask_json(
        &self,
        input: &[u8],
        layout: Layout,
        max_out: usize,
    ) -> Result<(String, bool), String> {
        JsonMasker {
            m: self,
            layout,
            max_out,
            root_class: None,
        }
        .run(input)
    }

    /// Mask a JSON value that sits under `class` (a sensitive key higher up), e.g. a
    /// sub-document reported by a diff.
    pub fn mask_json_under(
        &self,
        class: Option<Class>,
        input: &[u8],
        layout: Layout,
    ) -> Result<String, String> {
        JsonMasker {
            m: self,
            layout,
            max_out: usize::MAX,
            root_class: class,
        }
        .run(input)
        .map(|r| r.0)
    }

    /// Mask a payload whatever it is; JSON structurally, text by detectors, binary not
    /// shown. Returns the masked text and whether it was cut at `max_out`.
    pub fn mask_payload(&self, payload: &[u8], layout: Layout, max_out: usize) -> (String, bool) {
        let looks_json = matches!(
            payload.iter().find(|b| !b.is_ascii_whitespace()),
            Some(b'{') | Some(b'[')
        );
        if looks_json {
            if let Ok(r) = self.mask_json(payload, layout, max_out) {
                return r;
            }
        }
        let text = String::from_utf8_lossy(payload);
        let (mut masked, input_cut) = self.mask_text_bounded(&text, max_out);
        let cut = input_cut || masked.len() > max_out;
        if cut {
            let mut at = max_out;
            while !masked.is_char_boundary(at) {
                at -= 1;
            }
            masked.truncate(at);
        }
        (masked, cut)
    }
}

/// One-line rendering of a typed AMQP header (tables and arrays).
pub fn render_header(v: &HeaderValue) -> String {
    match v {
        HeaderValue::Null => "null".into(),
        HeaderValue::Table(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}={}", render_header(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        HeaderValue::Array(items) => {
            let inner: Vec<String> = items.iter().map(render_header).collect();
            format!("[{}]", inner.join(", "))
        }
        // A timestamp is not PII, and as a bare number the digit-run detector would hide it.
        HeaderValue::Timestamp(t) => i64::try_from(*t)
            .ok()
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
            .map_or_else(
                || t.to_string(),
                |d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
        other => other.as_text().map(|t| t.into_owned()).unwrap_or_default(),
    }
}

/// Lowercase, without `_ - . ` and spaces: `Card_Number` → `cardnumber`.
pub fn normalize_name(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

fn stars(n: usize) -> String {
    "*".repeat(n.clamp(3, 8))
}

/// The hint shape per class.
fn hint(class: Class, v: &str) -> String {
    let v = v.trim();
    let first = |s: &str| s.chars().next().map(String::from).unwrap_or_default();
    let digits: String = v.chars().filter(char::is_ascii_digit).collect();
    let last_digits = |n: usize| digits[digits.len().saturating_sub(n)..].to_string();
    match class {
        Class::Email => match v.split_once('@') {
            Some((user, domain)) => {
                let (host, tld) = domain.rsplit_once('.').unwrap_or((domain, ""));
                let tld = if tld.is_empty() {
                    String::new()
                } else {
                    format!(".{tld}")
                };
                format!("{}***@{}***{}", first(user), first(host), tld)
            }
            None => "***".into(),
        },
        Class::Card if digits.len() >= 12 => format!("**** {}", last_digits(4)),
        Class::Iban if v.len() > 8 => {
            let compact: String = v.chars().filter(|c| !c.is_whitespace()).collect();
            format!(
                "{}** **** {}",
                &compact[..2.min(compact.len())],
                &compact[compact.len().saturating_sub(4)..]
            )
        }
        Class::Phone if digits.len() >= 6 => format!("***{}", last_digits(2)),
        Class::Digits if digits.len() >= 12 => {
            format!("{}{}", stars(digits.len() - 4), last_digits(4))
        }
        Class::Name => v
            .split_whitespace()
            .map(|w| format!("{}***", first(w)))
            .collect::<Vec<_>>()
            .join(" "),
        Class::Secret => "[redacted]".into(),
        _ if v.chars().count() >= 6 => format!("{}***", first(v)),
        _ => "***".into(),
    }
}

/// Extend a byte range to the nearest char boundaries (detectors work on bytes).
fn widen_to_chars(s: &str, r: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let mut start = r.start.min(s.len());
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = r.end.min(s.len());
    while !s.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

pub mod detectors;

#[cfg(test)]
mod tests;
