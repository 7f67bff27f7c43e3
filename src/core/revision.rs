//! Payload revisions edited on the *masked* payload: values the editor left as they were
//! come back from the original (so PII is never seen nor lost), changed values replace
//! them. The original is never overwritten.

use serde_json::Value;

/// Merge an edit of the masked rendering back onto the original.
pub(crate) fn merge_masked_edit(original: &Value, masked: &Value, edited: &Value) -> Value {
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

/// Values an editor must not half-change: a masked hint edited in place would replace
/// real data with asterisks.
pub(crate) fn edited_masked_values(
    masked: &Value,
    merged: &Value,
    changed: &[String],
) -> Vec<String> {
    changed
        .iter()
        .filter(|p| {
            let was_masked = masked
                .pointer(p)
                .and_then(Value::as_str)
                .is_some_and(is_hint);
            let still_hint = merged
                .pointer(p)
                .and_then(Value::as_str)
                .is_some_and(is_hint);
            was_masked && still_hint
        })
        .cloned()
        .collect()
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
            edited_masked_values(&masked, &half, &changed),
            vec!["/customer/email"]
        );
    }
}
