//! Values a program copied out of a sensitive field. Masking by field name hides a
//! customer's name under `name`, but a jq program can write it anywhere (`.note =
//! .customer.name`), where no name rule and no detector would find it. Before a
//! program's output is shown, every string that contains a value the input showed
//! masked by name is masked like that value, on both sides of a diff (so fields the
//! program left alone still compare equal).

use super::{Class, Masker};
use serde_json::Value;

/// Shorter values are not followed: `"no"` under `name` would mask every `"note"`.
const MIN_LEN: usize = 4;
/// A letter's fields to follow; beyond these a document is not searched further.
const MAX_FOLLOWED: usize = 512;

/// Strings of `doc` masked by a field name (lowercased), with their class.
pub fn hidden_by_name(masker: &Masker, doc: &Value) -> Vec<(String, Class)> {
    fn walk(m: &Masker, v: &Value, class: Option<Class>, out: &mut Vec<(String, Class)>) {
        if out.len() >= MAX_FOLLOWED {
            return;
        }
        match v {
            Value::Object(map) => {
                for (k, x) in map {
                    walk(m, x, class.or_else(|| m.field_class(k)), out);
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(m, x, class, out)),
            Value::String(s) => push(class, s, out),
            Value::Number(n) => push(class, &n.to_string(), out),
            _ => {}
        }
    }
    fn push(class: Option<Class>, s: &str, out: &mut Vec<(String, Class)>) {
        if let Some(c) = class.filter(|_| s.chars().count() >= MIN_LEN) {
            out.push((s.to_lowercase(), c));
        }
    }
    let mut out = Vec::new();
    walk(masker, doc, None, &mut out);
    out.sort();
    out.dedup();
    out
}

/// `doc` with every string that contains one of `hidden` (case-insensitively) replaced
/// by its masked form.
pub fn mask_copies(masker: &Masker, doc: &Value, hidden: &[(String, Class)]) -> Value {
    if hidden.is_empty() {
        return doc.clone();
    }
    match doc {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask_copies(masker, v, hidden)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| mask_copies(masker, v, hidden))
                .collect(),
        ),
        Value::String(s) => {
            let lower = s.to_lowercase();
            match hidden.iter().find(|(h, _)| lower.contains(h.as_str())) {
                Some((_, class)) => Value::String(masker.mask_value(*class, s)),
                None => doc.clone(),
            }
        }
        _ => doc.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_name_copied_into_a_note_is_masked_there_and_untouched_fields_stay_equal() {
        let m = Masker::with_key(b"k".to_vec());
        let before = json!({"customer": {"name": "Jane Doe"}, "note": "", "amount": "1,500.00"});
        let after =
            json!({"customer": {"name": "Jane Doe"}, "note": "for JANE DOE", "amount": 1500.0});
        let hidden = hidden_by_name(&m, &before);
        assert_eq!(hidden.len(), 1, "{hidden:?}");
        let (b, a) = (
            mask_copies(&m, &before, &hidden),
            mask_copies(&m, &after, &hidden),
        );
        assert_eq!(a["customer"], b["customer"]);
        let note = a["note"].as_str().expect("note");
        assert!(!note.to_lowercase().contains("jane"), "{note}");
        assert_eq!(a["amount"], json!(1500.0));
    }
}
