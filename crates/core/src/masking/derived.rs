//! Shapes: what stands in for a value the role may not see (`‹masked string›`). A
//! program's output is never shown through a comparison with the real run (see
//! `dlq_app::transform`: a program can recognise the masked run and encode the real letter
//! into whatever a comparison lets through); a shape says "a value is here" and nothing
//! of it.

use serde_json::Value;

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

/// Whether a string is one of the shapes above (kept as it is by the diff's masking).
pub fn is_shape(s: &str) -> bool {
    s.starts_with("‹masked ") && s.ends_with('›') && s.chars().count() <= 24
}
