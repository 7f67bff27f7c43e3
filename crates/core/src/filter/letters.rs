//! Terms judged on whole letters — `payload.…` fields and header values — and where
//! bare words would have found something. The index keeps metadata only, so verdicts
//! are noted per letter while a scan hands letters over, keyed by the row's arena
//! offset, and everything is judged **as masked**: a filter never tests a value the
//! user could not see.

use super::*;
use crate::masking::{Layout, Masker};
use crate::model::DeadLetter;
use std::collections::BTreeSet;

/// What whole letters showed beyond the verdicts: for a filter that found nothing, the
/// reason in words.
#[derive(Debug, Clone, Default)]
pub(super) struct PayloadWords {
    /// Whole letters were noted (a scan of metadata only knows none of this).
    noted: bool,
    /// Letters whose masked payload holds every bare word.
    letters: u64,
    /// A term that selects one of them by its payload field (the first seen).
    example: Option<String>,
    /// Header terms' names (lowercase, as parsed) that at least one letter carries.
    headers_seen: BTreeSet<String>,
}

/// Deepest payload field looked into for an example path.
const MAX_PATH_DEPTH: usize = 32;

impl Filter {
    /// Does any term read whole letters (`payload.…`, header values)? Those need each
    /// letter handed to [`Filter::note_letter`] as it is scanned.
    pub fn needs_letters(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t, Term::Payload { .. } | Term::Header { .. }))
    }

    /// Would whole letters help: terms that need them, or bare words (which search the
    /// summary only, but can say when the payloads hold what they did not find).
    pub fn wants_letters(&self) -> bool {
        self.needs_letters() || self.needs_previews()
    }

    /// Judge the whole-letter terms on one letter, indexed as `r`: its readable payload
    /// (decoded when a schema decoded it) and its headers, masked as any view masks them.
    pub fn note_letter(&mut self, r: &Row, dl: &DeadLetter, masker: &Masker) {
        if !self.wants_letters() {
            return;
        }
        self.in_payloads.noted = true;
        let masker = masker.with_fields(dl.pii_fields());
        let masked_doc = || masked_doc(dl, &masker);
        let payload_terms = self.terms.iter().any(|t| matches!(t, Term::Payload { .. }));
        let mut doc = if payload_terms { masked_doc() } else { None };
        for t in &mut self.terms {
            match t {
                Term::Payload {
                    path,
                    negate,
                    patterns,
                    verdicts,
                } => {
                    let value = doc.as_ref().and_then(|d| field(d, path));
                    let text = value.map(leaf_text);
                    // A letter without the field matches neither `=` nor `!=`.
                    let ok = text.is_some_and(|t| any_glob(patterns, &t) != *negate);
                    verdicts.insert(r.text_at, ok);
                }
                Term::Header {
                    name,
                    negate,
                    patterns,
                    verdicts,
                } => {
                    let values = masked_headers(dl, &masker, name);
                    let seen = &mut self.in_payloads.headers_seen;
                    if !values.is_empty() && !seen.contains(name.as_str()) {
                        seen.insert(name.clone());
                    }
                    let any = values.iter().any(|v| any_glob(patterns, v));
                    verdicts.insert(r.text_at, !values.is_empty() && any != *negate);
                }
                _ => {}
            }
        }
        // Masking only replaces text, so a word missing from the payload as it is is
        // missing from the masked one too: most letters are passed over without masking
        // their payload (a bare-word `summary` of 1,000,000 letters would otherwise mask
        // every one).
        let words = self.fuzzy_words();
        if words.is_empty()
            || !words
                .iter()
                .all(|w| contains_ignoring_case(dl.readable_payload(), w))
        {
            return;
        }
        if !payload_terms {
            doc = masked_doc();
        }
        let text = match &doc {
            Some(d) => d.to_string(),
            None => match std::str::from_utf8(dl.readable_payload()) {
                Ok(t) => masker.mask_text(t),
                Err(_) => return,
            },
        };
        let lower = text.to_lowercase();
        if !words.iter().all(|w| lower.contains(w)) {
            return;
        }
        let example = self
            .in_payloads
            .example
            .is_none()
            .then(|| doc.as_ref().and_then(|d| example_term(d, words[0])))
            .flatten();
        self.in_payloads.letters += 1;
        if example.is_some() {
            self.in_payloads.example = example;
        }
    }

    /// Why a filter that matched `matched` letters found what it found, when whole
    /// letters say more: bare words that are in payloads but not where bare words look,
    /// header names no letter carries. Sanitized; empty when there is nothing to add.
    pub fn unmatched_notes(&self, matched: u64) -> Vec<String> {
        let seen = &self.in_payloads;
        if matched > 0 || !seen.noted {
            return Vec::new();
        }
        let mut notes = Vec::new();
        let words = self.fuzzy_words();
        if !words.is_empty() {
            let quoted: Vec<String> = words
                .iter()
                .map(|w| format!("`{}`", crate::sanitize::line(w, 60)))
                .collect();
            let quoted = quoted.join(" ");
            notes.push(if seen.letters == 0 {
                format!("{quoted}: in no letter's id, key, reason, preview or payload")
            } else {
                let how = match &seen.example {
                    Some(term) => format!(": {} finds them", crate::sanitize::line(term, 120)),
                    None => String::new(),
                };
                format!(
                    "{quoted}: not in any id, key, reason or preview (bare words search those), but in the payload of {}{how}",
                    crate::words::letters(seen.letters as usize)
                )
            });
        }
        for t in &self.terms {
            if let Term::Header { name, .. } = t {
                if !seen.headers_seen.contains(name) {
                    notes.push(format!(
                        "no letter has a header named `{}` (a field name with a `-` is read as a header; fields: {FIELDS})",
                        crate::sanitize::line(name, 60)
                    ));
                }
            }
        }
        notes
    }
}

/// Does `hay` hold `word` (lowercase), ignoring case? ASCII words are compared byte by
/// byte; others on the lowercased text.
fn contains_ignoring_case(hay: &[u8], word: &str) -> bool {
    let w = word.as_bytes();
    if word.is_ascii() {
        return w.is_empty() || hay.windows(w.len()).any(|h| h.eq_ignore_ascii_case(w));
    }
    String::from_utf8_lossy(hay).to_lowercase().contains(word)
}

/// The value at a payload path (array items by index).
fn field<'a>(doc: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(doc, |v, seg| match v {
        serde_json::Value::Array(items) => items.get(seg.parse::<usize>().ok()?),
        _ => v.get(seg.as_str()),
    })
}

fn leaf_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `payload.lines.0.sku="*SKU-18*"` for the first field whose (masked) value holds
/// `word` (lowercase), when its path can be written as a term.
fn example_term(doc: &serde_json::Value, word: &str) -> Option<String> {
    let mut path = Vec::new();
    let value = find_leaf(doc, word, &mut path, 0)?;
    let writable = |s: &String| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    };
    if !path.iter().all(writable) {
        return None;
    }
    // The word as the value spells it, when lowercasing kept its place.
    let at = value.to_lowercase().find(word)?;
    let spelled = value
        .get(at..at + word.len())
        .filter(|s| s.to_lowercase() == word)
        .unwrap_or(word);
    let escaped: String = spelled
        .chars()
        .flat_map(|c| {
            let esc = SPECIAL.contains(&c).then_some('\\');
            esc.into_iter().chain(std::iter::once(c))
        })
        .collect();
    Some(format!("payload.{}=\"*{escaped}*\"", path.join(".")))
}

fn find_leaf(
    v: &serde_json::Value,
    word: &str,
    path: &mut Vec<String>,
    depth: usize,
) -> Option<String> {
    if depth > MAX_PATH_DEPTH {
        return None;
    }
    let mut within = |seg: String, child: &serde_json::Value| {
        path.push(seg);
        let found = find_leaf(child, word, path, depth + 1);
        if found.is_none() {
            path.pop();
        }
        found
    };
    match v {
        serde_json::Value::Object(m) => m.iter().find_map(|(k, c)| within(k.clone(), c)),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, c)| within(i.to_string(), c)),
        leaf => {
            let text = leaf_text(leaf);
            text.to_lowercase().contains(word).then_some(text)
        }
    }
}

/// The values of header `name` (any case) on a letter, masked as any view masks them.
fn masked_headers(dl: &DeadLetter, masker: &Masker, name: &str) -> Vec<String> {
    dl.raw
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| masker.mask_header(&h.name, &h.value))
        .collect()
}

/// A JSON letter's payload (decoded where a schema decoded it), masked, as a document.
fn masked_doc(dl: &DeadLetter, masker: &Masker) -> Option<serde_json::Value> {
    let json =
        dl.body == BodyKind::Json && dl.schema.as_ref().is_none_or(|s| s.decoded().is_some());
    if !json {
        return None;
    }
    masker
        .mask_json(dl.readable_payload(), Layout::Compact, usize::MAX)
        .ok()
        .and_then(|(t, _)| serde_json::from_str(&t).ok())
}
