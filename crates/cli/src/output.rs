//! Writing JSON to stdout safely.
//!
//! serde_json escapes C0 controls but passes DEL, C1 controls and bidi/zero-width
//! characters through raw; on a terminal those can still do harm. They are re-escaped as
//! `\uXXXX` here: the JSON stays valid and means exactly the same.

use dlq_core::sanitize::is_unsafe_char;
use std::io::Write;

/// Escape every unsafe character as a JSON `\u` escape (surrogate pairs above the BMP).
pub(crate) fn json_safe(s: &str) -> String {
    if !s.chars().any(is_unsafe_char) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe_char(c) && c != '\n' {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Pretty JSON on stdout.
pub(crate) fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", json_safe(&serde_json::to_string_pretty(value)?))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_serde_leaves_raw_and_stays_valid() {
        let v = serde_json::json!({"k": "a\u{7f}b\u{85}c\u{202e}d\u{e0041}e\n"});
        let s = json_safe(&serde_json::to_string(&v).expect("serializable"));
        assert!(!s.chars().any(is_unsafe_char), "{s}");
        let back: serde_json::Value = serde_json::from_str(&s).expect("still JSON");
        assert_eq!(back, v);
    }
}
