//! Payload revisions edited on the *masked* payload: values the editor left as they were
//! come back from the original (so PII is never seen nor lost), changed values replace
//! them. The original is never overwritten.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256: how revisions name the payloads and programs they came from.
pub fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Merge an edit of the masked rendering back onto the original.
pub fn merge_masked_edit(original: &Value, masked: &Value, edited: &Value) -> Value {
    if edited == masked {
        return original.clone();
    }
    match (original, masked, edited) {
        (Value::Object(o), Value::Object(m), Value::Object(e)) => Value::Object(
            e.iter()
                .map(|(k, ev)| {
                    let v = match (o.get(k), m.get(k)) {
                        (Some(ov), Some(mv)) => merge_masked_edit(ov, mv, ev),
                        _ => ev.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        (Value::Array(o), Value::Array(m), Value::Array(e)) => Value::Array(
            e.iter()
                .enumerate()
                .map(|(i, ev)| match (o.get(i), m.get(i)) {
                    (Some(ov), Some(mv)) => merge_masked_edit(ov, mv, ev),
                    _ => ev.clone(),
                })
                .collect(),
        ),
        _ => edited.clone(),
    }
}

/// JSON pointers where `a` and `b` differ (added, removed or changed).
pub fn changed_paths(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: Option<&Value>, b: Option<&Value>, path: &mut String, out: &mut Vec<String>) {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(x.get(k), y.get(k), path, out);
                    path.truncate(len);
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                for i in 0..x.len().max(y.len()) {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    walk(x.get(i), y.get(i), path, out);
                    path.truncate(len);
                }
            }
            (x, y) if x != y => out.push(if path.is_empty() {
                "/".into()
            } else {
                path.clone()
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(Some(a), Some(b), &mut String::new(), &mut out);
    out
}

/// Changed values that still carry a masked hint: edited in place, or moved or copied
/// to a path of their own (a renamed key, a shifted array element) — every one would
/// replace real data with asterisks. Untouched hints come back from the original and
/// are not among the changed paths.
pub fn edited_masked_values(merged: &Value, changed: &[String]) -> Vec<String> {
    changed
        .iter()
        .filter(|p| merged.pointer(p).is_some_and(holds_hint))
        .cloned()
        .collect()
}

/// A masked hint anywhere in `v` (a renamed key may carry a whole masked object). JSON
/// from serde_json nests at most 128 deep, so the recursion is bounded.
fn holds_hint(v: &Value) -> bool {
    match v {
        Value::String(s) => is_hint(s),
        Value::Array(items) => items.iter().any(holds_hint),
        Value::Object(map) => map.values().any(holds_hint),
        _ => false,
    }
}

fn is_hint(s: &str) -> bool {
    s.contains("***") || s.contains("[redacted]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn untouched_masked_values_come_back_changed_ones_replace() {
        let original = json!({"customer": {"email": "jane@example.com", "name": "Jane Doe"}, "amount": "1,500.00", "lines": [1, 2]});
        let masked = json!({"customer": {"email": "j***@e***.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]});
        let edited = json!({"customer": {"email": "j***@e***.com", "name": "J*** D***"}, "amount": 1500.0, "lines": [1, 2, 3]});
        let merged = merge_masked_edit(&original, &masked, &edited);
        assert_eq!(
            merged["customer"], original["customer"],
            "PII restored byte for byte"
        );
        assert_eq!(merged["amount"], json!(1500.0));
        assert_eq!(
            changed_paths(&original, &merged),
            vec!["/amount", "/lines/2"]
        );
        // Replacing a masked value entirely is an edit; editing the hint is refused.
        let replaced = merge_masked_edit(
            &original,
            &masked,
            &json!({"customer": {"email": "new@example.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]}),
        );
        assert_eq!(replaced["customer"]["email"], "new@example.com");
        let half = merge_masked_edit(
            &original,
            &masked,
            &json!({"customer": {"email": "j***@x***.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]}),
        );
        let changed = changed_paths(&original, &half);
        assert_eq!(
            edited_masked_values(&half, &changed),
            vec!["/customer/email"]
        );
    }

    /// A masked hint moved to a path of its own — a renamed key, a whole masked object
    /// under a new name — is refused like one edited in place: the revision would hold
    /// asterisks where the original held the data (a renamed `ssn` saved `"1***"`).
    #[test]
    fn masked_hints_moved_to_a_new_path_are_refused() {
        let original =
            json!({"ssn": "123-45-6789", "customer": {"email": "jane@example.com"}, "n": 1});
        let masked = json!({"ssn": "1***", "customer": {"email": "j***@e***.com"}, "n": 1});
        for (edited, refused) in [
            (
                json!({"ssn_v2": "1***", "customer": {"email": "j***@e***.com"}, "n": 1}),
                "/ssn_v2",
            ),
            (
                json!({"ssn": "1***", "client": {"email": "j***@e***.com"}, "n": 1}),
                "/client",
            ),
        ] {
            let merged = merge_masked_edit(&original, &masked, &edited);
            let changed = changed_paths(&original, &merged);
            assert_eq!(edited_masked_values(&merged, &changed), vec![refused]);
        }
        // A new value of the operator's own is an edit like any other.
        let merged = merge_masked_edit(
            &original,
            &masked,
            &json!({"ssn": "1***", "customer": {"email": "j***@e***.com"}, "n": 2, "note": "fixed"}),
        );
        let changed = changed_paths(&original, &merged);
        assert!(edited_masked_values(&merged, &changed).is_empty());
    }
}
