//! Structural JSON diff and line diff, masked on the way out.
//!
//! The diff runs on the raw values (so a changed email is reported even when both masked
//! hints look alike) and every value and path segment it reports is masked: a sensitive
//! key anywhere above a value masks it by class, everything else goes through the
//! detectors.

use crate::masking::{Class, Layout, Masker};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        }
    }
}

/// One structural change; values are masked compact JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// JSON pointer, with masked segments.
    pub path: String,
    pub kind: ChangeKind,
    pub old: Option<String>,
    pub new: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTag {
    Same,
    Removed,
    Added,
    /// A run of unchanged lines left out, with its length.
    Skipped(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub tag: LineTag,
    /// Masked text of the line (empty for `Skipped`).
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Diff {
    Json(Vec<Change>),
    Text(Vec<Line>),
    /// Not comparable structurally or by line (binary); says how they differ.
    Opaque {
        equal: bool,
        note: String,
    },
}

/// Lines beyond this on either side are not line-diffed (quadratic).
const MAX_LINES: usize = 4000;
/// Unchanged context kept around changes.
const CONTEXT: usize = 2;

/// Compare two letters' payloads as they are read: schema-encoded ones field by field
/// in their decoded form, masked by name and by the fields either schema tags PII.
pub fn diff_letters(
    masker: &Masker,
    a: &crate::model::DeadLetter,
    b: &crate::model::DeadLetter,
) -> Diff {
    let mut pii = a.pii_fields().to_vec();
    pii.extend_from_slice(b.pii_fields());
    diff_payloads(
        &masker.with_fields(&pii),
        a.readable_payload(),
        b.readable_payload(),
    )
}

/// Compare two payloads: structurally when both are JSON, by lines when both are text.
pub fn diff_payloads(masker: &Masker, a: &[u8], b: &[u8]) -> Diff {
    if let (Ok(va), Ok(vb)) = (
        serde_json::from_slice::<Value>(a),
        serde_json::from_slice::<Value>(b),
    ) {
        let mut out = Vec::new();
        json_diff(masker, &va, &vb, &mut Vec::new(), None, &mut out);
        return Diff::Json(out);
    }
    match (std::str::from_utf8(a), std::str::from_utf8(b)) {
        (Ok(ta), Ok(tb)) if !has_binary(ta) && !has_binary(tb) => line_diff(masker, ta, tb),
        _ => {
            let (ha, hb) = (Sha256::digest(a), Sha256::digest(b));
            let equal = ha == hb;
            Diff::Opaque {
                equal,
                note: format!(
                    "binary payloads: {} vs {} bytes, sha256 {}",
                    a.len(),
                    b.len(),
                    if equal { "identical" } else { "different" }
                ),
            }
        }
    }
}

/// The changes between two JSON values as they are, nothing masked: only for a view the
/// caller has checked the unmask right for and audited (`transform --dry-run --unmask`).
pub fn unmasked_changes(a: &Value, b: &Value) -> Vec<Change> {
    let text = |v: Option<&Value>| v.map(|v| v.to_string());
    crate::revision::changed_paths(a, b)
        .into_iter()
        .map(|path| {
            let at = if path == "/" { "" } else { path.as_str() };
            let (old, new) = (a.pointer(at), b.pointer(at));
            let kind = match (old, new) {
                (None, _) => ChangeKind::Added,
                (_, None) => ChangeKind::Removed,
                _ => ChangeKind::Changed,
            };
            Change {
                path,
                kind,
                old: text(old),
                new: text(new),
            }
        })
        .collect()
}

fn has_binary(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && !c.is_whitespace())
}

fn pointer_segment(masker: &Masker, seg: &str) -> String {
    if crate::masking::derived::is_shape(seg) {
        return seg.to_string();
    }
    masker.mask_text(seg).replace('~', "~0").replace('/', "~1")
}

fn masked_value(masker: &Masker, class: Option<Class>, v: &Value) -> String {
    if let Value::String(s) = v {
        if crate::masking::derived::is_shape(s) {
            return v.to_string();
        }
    }
    let raw = serde_json::to_vec(v).unwrap_or_default();
    masker
        .mask_json_under(class, &raw, Layout::Compact)
        .unwrap_or_else(|_| "[unrenderable]".to_string())
}

fn json_diff(
    masker: &Masker,
    a: &Value,
    b: &Value,
    path: &mut Vec<String>,
    class: Option<Class>,
    out: &mut Vec<Change>,
) {
    let here = |path: &[String]| {
        if path.is_empty() {
            String::new()
        } else {
            format!("/{}", path.join("/"))
        }
    };
    match (a, b) {
        (Value::Object(oa), Value::Object(ob)) => {
            for (k, va) in oa {
                let cls = class.or_else(|| masker.field_class(k));
                path.push(pointer_segment(masker, k));
                match ob.get(k) {
                    Some(vb) => json_diff(masker, va, vb, path, cls, out),
                    None => out.push(Change {
                        path: here(path),
                        kind: ChangeKind::Removed,
                        old: Some(masked_value(masker, cls, va)),
                        new: None,
                    }),
                }
                path.pop();
            }
            for (k, vb) in ob {
                if !oa.contains_key(k) {
                    let cls = class.or_else(|| masker.field_class(k));
                    path.push(pointer_segment(masker, k));
                    out.push(Change {
                        path: here(path),
                        kind: ChangeKind::Added,
                        old: None,
                        new: Some(masked_value(masker, cls, vb)),
                    });
                    path.pop();
                }
            }
        }
        (Value::Array(xa), Value::Array(xb)) => {
            for i in 0..xa.len().max(xb.len()) {
                path.push(i.to_string());
                match (xa.get(i), xb.get(i)) {
                    (Some(va), Some(vb)) => json_diff(masker, va, vb, path, class, out),
                    (Some(va), None) => out.push(Change {
                        path: here(path),
                        kind: ChangeKind::Removed,
                        old: Some(masked_value(masker, class, va)),
                        new: None,
                    }),
                    (None, Some(vb)) => out.push(Change {
                        path: here(path),
                        kind: ChangeKind::Added,
                        old: None,
                        new: Some(masked_value(masker, class, vb)),
                    }),
                    (None, None) => {}
                }
                path.pop();
            }
        }
        (va, vb) if va != vb => out.push(Change {
            path: here(path),
            kind: ChangeKind::Changed,
            old: Some(masked_value(masker, class, va)),
            new: Some(masked_value(masker, class, vb)),
        }),
        _ => {}
    }
}

/// Line diff (LCS) with context; lines masked one by one.
fn line_diff(masker: &Masker, a: &str, b: &str) -> Diff {
    let la: Vec<&str> = a.lines().collect();
    let lb: Vec<&str> = b.lines().collect();
    if la.len() > MAX_LINES || lb.len() > MAX_LINES {
        let equal = a == b;
        return Diff::Opaque {
            equal,
            note: format!(
                "too many lines to diff ({} vs {}, limit {MAX_LINES}); texts are {}",
                la.len(),
                lb.len(),
                if equal { "identical" } else { "different" }
            ),
        };
    }
    let (n, m) = (la.len(), lb.len());
    // lcs[i][j] = LCS length of la[i..] and lb[j..]
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if la[i] == lb[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut full = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && la[i] == lb[j] {
            full.push((LineTag::Same, la[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[at(i, j + 1)] >= lcs[at(i + 1, j)]) {
            full.push((LineTag::Added, lb[j]));
            j += 1;
        } else {
            full.push((LineTag::Removed, la[i]));
            i += 1;
        }
    }
    // Keep CONTEXT unchanged lines around changes; collapse the rest.
    let changed: Vec<bool> = full.iter().map(|(t, _)| *t != LineTag::Same).collect();
    let near = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(changed.len());
        changed[lo..hi].iter().any(|c| *c)
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for (k, (tag, text)) in full.iter().enumerate() {
        if *tag == LineTag::Same && !near(k) {
            skipped += 1;
            continue;
        }
        if skipped > 0 {
            out.push(Line {
                tag: LineTag::Skipped(skipped),
                text: String::new(),
            });
            skipped = 0;
        }
        out.push(Line {
            tag: *tag,
            text: masker.mask_text(text),
        });
    }
    if skipped > 0 {
        out.push(Line {
            tag: LineTag::Skipped(skipped),
            text: String::new(),
        });
    }
    Diff::Text(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Masker {
        Masker::with_key(b"k".to_vec())
    }

    #[test]
    fn json_paths_added_removed_changed_masked() {
        let a = br#"{"amount":"1,500.00","customer":{"email":"jane@example.com","tier":"gold"},"lines":[1,2],"gone":true}"#;
        let b = br#"{"amount":1500.0,"customer":{"email":"jack@example.com","tier":"gold"},"lines":[1,2,3],"new":{"card":"4242424242424242"}}"#;
        let Diff::Json(changes) = diff_payloads(&m(), a, b) else {
            panic!("json diff expected")
        };
        let find = |p: &str| {
            changes
                .iter()
                .find(|c| c.path == p)
                .unwrap_or_else(|| panic!("{p} in {changes:?}"))
        };
        let amount = find("/amount");
        assert_eq!(amount.kind, ChangeKind::Changed);
        assert_eq!(amount.old.as_deref(), Some("\"1,500.00\""));
        assert_eq!(amount.new.as_deref(), Some("1500.0"));
        // A changed email is reported, but both sides are masked.
        let email = find("/customer/email");
        assert_eq!(email.kind, ChangeKind::Changed);
        assert_eq!(email.old.as_deref(), Some("\"j***@e***.com\""));
        assert_eq!(find("/lines/2").kind, ChangeKind::Added);
        assert_eq!(find("/gone").kind, ChangeKind::Removed);
        let new = find("/new");
        assert_eq!(new.new.as_deref(), Some("{\"card\":\"**** 4242\"}"));
        assert_eq!(changes.len(), 5);
        let all = format!("{changes:?}");
        assert!(
            !all.contains("jane@") && !all.contains("jack@") && !all.contains("4242424242424242"),
            "{all}"
        );
    }

    #[test]
    fn sensitive_keys_mask_whole_subtrees_and_path_segments() {
        let a = br#"{"address":{"street":"1 Main St"},"by_email":{"jane@example.com":1}}"#;
        let b = br#"{"address":{"street":"2 Main St"},"by_email":{"jane@example.com":2}}"#;
        let Diff::Json(changes) = diff_payloads(&m(), a, b) else {
            panic!("json diff expected")
        };
        let all = format!("{changes:?}");
        assert!(!all.contains("Main St") && !all.contains("jane@"), "{all}");
        assert!(
            changes.iter().any(|c| c.path == "/by_email/j***@e***.com"),
            "{all}"
        );
    }

    #[test]
    fn text_line_diff_with_context() {
        let a = "a\nb\nc\nd\ne\nf\ng\nmail jane@example.com\n";
        let b = "a\nb\nc\nd\ne\nf\ng\nmail john@example.com\nh\n";
        let Diff::Text(lines) = diff_payloads(&m(), a.as_bytes(), b.as_bytes()) else {
            panic!("text diff")
        };
        assert_eq!(lines[0].tag, LineTag::Skipped(5));
        assert!(lines
            .iter()
            .any(|l| l.tag == LineTag::Removed && l.text == "mail j***@e***.com"));
        assert!(lines
            .iter()
            .any(|l| l.tag == LineTag::Added && l.text == "h"));
        assert!(!format!("{lines:?}").contains("jane@"));
    }

    #[test]
    fn binary_is_opaque() {
        let Diff::Opaque { equal, note } = diff_payloads(&m(), &[0, 1, 0xff], &[0, 1, 0xfe]) else {
            panic!("opaque")
        };
        assert!(!equal);
        assert!(note.contains("different"));
    }
}
