//! What a program made of a letter, as someone without the unmask right may see it.
//!
//! A jq program can launder a masked value into any shape (`@base64`, `explode`,
//! `split("")`, slices, an object key, an `error(…)` message), so no detector run over its
//! output can be trusted. The rule here does not look for copies: the same program is run
//! a second time on the letter **as the role sees it** (the masked view), and a value of
//! the real output is shown only when
//!
//! - it is unchanged from the input (then it is shown as the masked view shows it), or
//! - the run on the masked view produced exactly the same value at the same place — so it
//!   is a function of what the role already sees, and reveals nothing more.
//!
//! Anything else is shown as its shape (`‹masked string›`); an object key the role could
//! not have seen becomes `‹masked key›`. A failure's message is shown word by word where
//! the run on the masked view failed with the same words, `‹masked›` elsewhere.
//!
//! What remains is an oracle of one bit per letter and place: whether a value depends on
//! masked data (and the counts of changed/unchanged/failed letters, which any program can
//! steer with an `if`). That is why every dry-run is audited with its program.

use serde_json::{Map, Value};

/// Shapes stand in for values; they read as masked and never as data.
pub const MASKED_KEY: &str = "‹masked key›";

/// The shape of a value the role may not see.
pub fn shape(v: &Value) -> Value {
    Value::String(
        match v {
            Value::String(_) => "‹masked string›",
            Value::Number(_) => "‹masked number›",
            Value::Bool(_) => "‹masked boolean›",
            Value::Null => "‹masked null›",
            Value::Array(_) => "‹masked array›",
            Value::Object(_) => "‹masked object›",
        }
        .to_string(),
    )
}

/// The real output `after`, guarded: see the module doc. `before` is the program's real
/// input, `shown_before` that input as the role sees it (masked), `masked_run` the
/// program's output on `shown_before` (`None` when it failed there). `program` is the
/// program's text: a key it spells out is the author's, not the letter's.
pub fn guard<'a>(
    after: &Value,
    before: Option<&'a Value>,
    shown_before: Option<&'a Value>,
    masked_run: Option<&'a Value>,
    program: &str,
) -> Value {
    if let (Some(b), Some(shown)) = (before, shown_before) {
        if b == after {
            return shown.clone();
        }
    }
    if masked_run == Some(after) {
        return after.clone();
    }
    // A container is walked only where the role's view has one like it (an array of the
    // same length): else its size alone would tell how long a masked value is.
    let like = |x: Option<&Value>| match (x, after) {
        (Some(Value::Object(_)), Value::Object(_)) => true,
        (Some(Value::Array(a)), Value::Array(b)) => a.len() == b.len(),
        _ => false,
    };
    let walk = like(masked_run) || (shown_before.is_some() && like(before));
    match after {
        Value::Object(map) if walk => {
            let mut out = Map::new();
            let mut unseen = 0;
            for (k, v) in map {
                fn child<'a>(x: Option<&'a Value>, k: &str) -> Option<&'a Value> {
                    x.and_then(|x| x.get(k))
                }
                let visible = child(masked_run, k).is_some()
                    || (child(before, k).is_some() && child(shown_before, k).is_some())
                    || spelled_out(program, k);
                let key = if visible {
                    k.clone()
                } else {
                    unseen += 1;
                    if unseen == 1 {
                        MASKED_KEY.to_string()
                    } else {
                        format!("‹masked key {unseen}›")
                    }
                };
                let (b, sb, mr) = if visible {
                    (
                        child(before, k),
                        child(shown_before, k),
                        child(masked_run, k),
                    )
                } else {
                    (None, None, None)
                };
                out.insert(key, guard(v, b, sb, mr, program));
            }
            Value::Object(out)
        }
        Value::Array(items) if walk => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let at = |x: Option<&'a Value>| x.and_then(|x| x.get(i));
                    guard(v, at(before), at(shown_before), at(masked_run), program)
                })
                .collect(),
        ),
        other => shape(other),
    }
}

/// Whether a string is one of the shapes above (kept as it is by the diff's masking).
pub fn is_shape(s: &str) -> bool {
    s.starts_with("‹masked ") && s.ends_with('›') && s.chars().count() <= 24
}

/// Whether the program's text spells this key (as `.key`, `"key"` or `{key: …}`).
fn spelled_out(program: &str, key: &str) -> bool {
    !key.is_empty() && program.contains(key)
}

/// A failure's message as the role may see it: each word of `real` that stands at the
/// same place in `masked_run` (the failure on the masked view), `‹masked›` for the others.
/// When the two do not line up word for word, nothing of the message is shown.
pub fn guard_text(real: &str, masked_run: Option<&str>) -> String {
    let words: Vec<&str> = real.split_whitespace().collect();
    let Some(seen) = masked_run.map(|m| m.split_whitespace().collect::<Vec<_>>()) else {
        return "‹a message made of masked values›".into();
    };
    if seen.len() != words.len() {
        return "‹a message made of masked values›".into();
    }
    let shown: Vec<&str> = words
        .iter()
        .zip(&seen)
        .map(|(w, s)| if w == s { *w } else { "‹masked›" })
        .collect();
    shown.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(after: Value, before: Value, shown: Value, masked_run: Option<Value>, p: &str) -> Value {
        guard(&after, Some(&before), Some(&shown), masked_run.as_ref(), p)
    }

    #[test]
    fn a_value_made_from_an_unmasked_field_is_shown() {
        let before = json!({"amount": "1,500.00", "name": "Jane Doe"});
        let shown = json!({"amount": "1,500.00", "name": "J*** D**"});
        let p = r#".amount |= (gsub(",";"") | tonumber)"#;
        let out = run(
            json!({"amount": 1500, "name": "Jane Doe"}),
            before,
            shown.clone(),
            Some(json!({"amount": 1500, "name": "J*** D**"})),
            p,
        );
        assert_eq!(out, json!({"amount": 1500, "name": "J*** D**"}));
    }

    #[test]
    fn a_value_made_from_a_masked_field_is_a_shape() {
        let before = json!({"email": "jane@example.com", "note": ""});
        let shown = json!({"email": "j***@e***.com", "note": ""});
        // `.note = (.email | @base64)`: the run on the masked view encodes the hint.
        let out = run(
            json!({"email": "jane@example.com", "note": "amFuZUBleGFtcGxlLmNvbQ=="}),
            before,
            shown,
            Some(json!({"email": "j***@e***.com", "note": "aioqKkBlKioqLmNvbQ=="})),
            ".note = (.email | @base64)",
        );
        assert_eq!(
            out,
            json!({"email": "j***@e***.com", "note": "‹masked string›"})
        );
    }

    #[test]
    fn a_key_made_from_a_masked_value_is_not_shown() {
        let before = json!({"name": "Aiko Berg"});
        let shown = json!({"name": "A*** B***"});
        let out = run(
            json!({"name": "Aiko Berg", "by": {"Aiko Berg": 1}}),
            before,
            shown,
            Some(json!({"name": "A*** B***", "by": {"A*** B***": 1}})),
            ".by = {(.name): 1}",
        );
        assert_eq!(
            out,
            json!({"name": "A*** B***", "by": {"‹masked key›": "‹masked number›"}})
        );
        assert!(!out.to_string().contains("Aiko"));
    }

    #[test]
    fn a_failed_masked_run_leaves_only_shapes_of_what_changed() {
        let out = run(
            json!({"tax": "DE123", "n": [1, "x"]}),
            json!({"tax": "DE1234567"}),
            json!({"tax": "DE*******"}),
            None,
            ".tax |= .[0:5] | .n = [1, \"x\"]",
        );
        assert_eq!(
            out,
            json!({"tax": "‹masked string›", "n": "‹masked array›"})
        );
    }

    #[test]
    fn a_message_shows_only_the_words_the_masked_view_also_gives() {
        assert_eq!(
            guard_text("bad amount for Aiko Berg", Some("bad amount for A*** B***")),
            "bad amount for ‹masked› ‹masked›"
        );
        assert_eq!(
            guard_text("Aiko Berg", Some("[redacted]")),
            "‹a message made of masked values›"
        );
        assert_eq!(guard_text("x", None), "‹a message made of masked values›");
        assert_eq!(
            guard_text(
                r#"cannot parse "1,500.00" as number"#,
                Some(r#"cannot parse "1,500.00" as number"#)
            ),
            r#"cannot parse "1,500.00" as number"#
        );
    }
}
