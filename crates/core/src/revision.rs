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

/// Merge an edit of the masked rendering back onto the original. Object keys may be
/// masked too (a map keyed by email): `shown(key)` is how the role sees a real key, and
/// an edited key is matched to the real key it stands for. A change under a key the role
/// sees only masked — its value edited, the key renamed, removed or new with a masked
/// hint in it — is **refused**: `Err` with the masked paths (never a real key), nothing
/// merged. An edit is made on what the role sees, and only there.
pub fn merge_masked_edit(
    original: &Value,
    masked: &Value,
    edited: &Value,
    shown: &dyn Fn(&str) -> String,
) -> Result<Value, Vec<String>> {
    let mut refused = Vec::new();
    let merged = merge(
        original,
        masked,
        edited,
        shown,
        &mut String::new(),
        &mut refused,
    );
    if refused.is_empty() {
        Ok(merged)
    } else {
        Err(refused)
    }
}

/// A JSON pointer segment.
fn segment(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn merge(
    o: &Value,
    m: &Value,
    e: &Value,
    shown: &dyn Fn(&str) -> String,
    path: &mut String,
    refused: &mut Vec<String>,
) -> Value {
    if e == m {
        return o.clone();
    }
    match (o, m, e) {
        (Value::Object(o), Value::Object(m), Value::Object(e)) => {
            // The real keys behind each key as shown (several may show alike).
            let mut real: std::collections::HashMap<String, Vec<&String>> =
                std::collections::HashMap::new();
            for k in o.keys() {
                real.entry(shown(k)).or_default().push(k);
            }
            let mut out = serde_json::Map::new();
            for (k, ev) in e {
                let at = segment(path, k);
                match (real.get(k).map(Vec::as_slice), m.get(k)) {
                    // Seen as it is: merged below it.
                    (Some([r]), Some(mv)) if *r == k => {
                        let len = path.len();
                        path.push_str(&at[len..]);
                        let v = merge(&o[k.as_str()], mv, ev, shown, path, refused);
                        path.truncate(len);
                        out.insert(k.clone(), v);
                    }
                    // A masked key (or several real keys masked alike): kept as it was,
                    // and only as it was.
                    (Some(reals), Some(mv)) => {
                        if ev != mv {
                            refused.push(at);
                        }
                        for r in reals {
                            out.insert((*r).clone(), o[r.as_str()].clone());
                        }
                    }
                    // A key the editor wrote: its own, unless it carries a masked hint.
                    _ => {
                        if is_hint(k) {
                            refused.push(at);
                        }
                        out.insert(k.clone(), ev.clone());
                    }
                }
            }
            // Keys removed: a masked one may not be.
            for (seen, reals) in &real {
                if !e.contains_key(seen) && reals.iter().any(|r| *r != seen) {
                    refused.push(segment(path, seen));
                }
            }
            Value::Object(out)
        }
        (Value::Array(o), Value::Array(m), Value::Array(e)) => Value::Array(
            e.iter()
                .enumerate()
                .map(|(i, ev)| match (o.get(i), m.get(i)) {
                    (Some(ov), Some(mv)) => {
                        let len = path.len();
                        path.push_str(&format!("/{i}"));
                        let v = merge(ov, mv, ev, shown, path, refused);
                        path.truncate(len);
                        v
                    }
                    _ => ev.clone(),
                })
                .collect(),
        ),
        _ => e.clone(),
    }
}

/// A JSON pointer with each key as the role sees it (`shown`): what the audit log records
/// of a revision's changed paths, read by every role (a key may be an email).
pub fn masked_path(path: &str, shown: &dyn Fn(&str) -> String) -> String {
    if path == "/" {
        return path.to_string();
    }
    path.split('/')
        .map(|seg| {
            let key = seg.replace("~1", "/").replace("~0", "~");
            shown(&key).replace('~', "~0").replace('/', "~1")
        })
        .collect::<Vec<_>>()
        .join("/")
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

    /// Keys shown as they are.
    fn same(k: &str) -> String {
        k.to_string()
    }

    #[test]
    fn untouched_masked_values_come_back_changed_ones_replace() {
        let original = json!({"customer": {"email": "jane@example.com", "name": "Jane Doe"}, "amount": "1,500.00", "lines": [1, 2]});
        let masked = json!({"customer": {"email": "j***@e***.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]});
        let edited = json!({"customer": {"email": "j***@e***.com", "name": "J*** D***"}, "amount": 1500.0, "lines": [1, 2, 3]});
        let merged = merge_masked_edit(&original, &masked, &edited, &same).expect("merged");
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
        let replaced = merge_masked_edit(&original, &masked, &json!({"customer": {"email": "new@example.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]}), &same).expect("merged");
        assert_eq!(replaced["customer"]["email"], "new@example.com");
        let half = merge_masked_edit(&original, &masked, &json!({"customer": {"email": "j***@x***.com", "name": "J*** D***"}, "amount": "1,500.00", "lines": [1, 2]}), &same).expect("merged");
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
            let merged = merge_masked_edit(&original, &masked, &edited, &same).expect("merged");
            let changed = changed_paths(&original, &merged);
            assert_eq!(edited_masked_values(&merged, &changed), vec![refused]);
        }
        // A new value of the operator's own is an edit like any other.
        let merged = merge_masked_edit(&original, &masked, &json!({"ssn": "1***", "customer": {"email": "j***@e***.com"}, "n": 2, "note": "fixed"}), &same).expect("merged");
        let changed = changed_paths(&original, &merged);
        assert!(edited_masked_values(&merged, &changed).is_empty());
    }

    /// #56: a payload keyed by PII (a map keyed by email, a card): the editor sees the
    /// keys masked. Values under a visible key are edited as ever; a change under a
    /// masked key — value, rename, removal — is refused naming only the masked path, and
    /// nothing is merged (no asterisks ever written over a real key).
    #[test]
    fn a_change_under_a_masked_key_is_refused_naming_only_the_masked_path() {
        let mask = |k: &str| {
            if k.contains('@') || k.starts_with("4111") {
                format!("{}***", &k[..1])
            } else {
                k.to_string()
            }
        };
        let original = json!({"by_email": {"jane@example.com": {"amount": "1,500.00"}, "4111111111111111": 2}, "n": 1});
        let masked = json!({"by_email": {"j***": {"amount": "1,500.00"}, "4***": 2}, "n": 1});
        // Untouched masked keys come back real; a visible value changes.
        let ok = merge_masked_edit(
            &original,
            &masked,
            &json!({"by_email": {"j***": {"amount": "1,500.00"}, "4***": 2}, "n": 2}),
            &mask,
        )
        .expect("a visible change");
        assert_eq!(ok["by_email"], original["by_email"]);
        assert_eq!(changed_paths(&original, &ok), vec!["/n"]);
        for (edited, at) in [
            (
                json!({"by_email": {"j***": {"amount": 1500}, "4***": 2}, "n": 1}),
                "/by_email/j***",
            ),
            (
                json!({"by_email": {"j***": {"amount": "1,500.00"}, "4***": 3}, "n": 1}),
                "/by_email/4***",
            ),
            (
                json!({"by_email": {"jx***": {"amount": "1,500.00"}, "4***": 2}, "n": 1}),
                "/by_email/jx***",
            ),
            (json!({"by_email": {"4***": 2}, "n": 1}), "/by_email/j***"),
        ] {
            let refused = merge_masked_edit(&original, &masked, &edited, &mask)
                .expect_err("under a masked key");
            assert!(refused.contains(&at.to_string()), "{refused:?}");
            let said = refused.join(" ");
            assert!(!said.contains("jane") && !said.contains("4111"), "{said}");
        }
    }
}
