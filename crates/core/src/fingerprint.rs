//! Stable reason codes for failures that only carry an exception type and message.
//!
//! Variable parts (numbers, UUIDs, hex ids, quoted values, timestamps, emails) become
//! placeholders so that `Order 8812 not found` and `Order 9120 not found` group together.
//! The placeholders also keep PII that exception messages often carry out of group labels.

use std::borrow::Cow;

/// Longest fingerprint we produce, in characters.
pub const MAX_LEN: usize = 120;

/// Split `Type: message` when the prefix looks like an exception type name.
pub fn split_exception(text: &str) -> (Option<&str>, &str) {
    if let Some((head, rest)) = text.split_once(": ") {
        let head_t = head.trim();
        let looks_like_type = !head_t.is_empty()
            && head_t.len() <= 120
            && head_t
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$' | '`' | '+'))
            && head_t.chars().next().is_some_and(|c| c.is_alphabetic());
        if looks_like_type {
            return (Some(head_t), rest);
        }
    }
    (None, text)
}

/// The last segment of a qualified type name: `java.lang.IllegalStateException` →
/// `IllegalStateException`.
pub fn short_type(t: &str) -> &str {
    let t = t.trim();
    t.rsplit(['.', '$', '+'])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(t)
}

/// Fingerprint from an optional exception type and an optional message.
pub fn fingerprint(exception_type: Option<&str>, message: Option<&str>) -> Option<String> {
    let message = message.map(str::trim).filter(|m| !m.is_empty());
    let (embedded_type, msg) = match message {
        Some(m) => {
            let first_line = m.lines().next().unwrap_or(m);
            let (t, rest) = split_exception(first_line);
            (t, Some(rest))
        }
        None => (None, None),
    };
    let ty = exception_type
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .or(embedded_type)
        .map(short_type);
    let norm = msg.map(normalize).filter(|m| !m.is_empty());
    let fp = match (ty, norm) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (Some(t), None) => t.to_string(),
        (None, Some(m)) => m,
        (None, None) => return None,
    };
    Some(truncate_chars(fp, MAX_LEN))
}

/// `s` cut to `max` characters, marked with `…` when cut.
fn truncate_chars(mut s: String, max: usize) -> String {
    if let Some((i, _)) = s.char_indices().nth(max) {
        s.truncate(i);
        s.push('…');
    }
    s
}

/// Replace the variable parts of a message with placeholders and collapse whitespace.
pub fn normalize(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(256));
    let mut chars = msg.chars().peekable();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if !token.is_empty() {
            classify_into(token, out);
            token.clear();
        }
    };
    while let Some(c) = chars.next() {
        if matches!(c, '\'' | '"' | '`') {
            // A quoted value: replace whole, if it closes on this line.
            let inside = chars.clone().take_while(|&d| d != c && d != '\n').count();
            let closes = chars.clone().nth(inside) == Some(c);
            if closes {
                flush(&mut token, &mut out);
                out.push_str("<str>");
                for _ in 0..=inside {
                    chars.next();
                }
                continue;
            }
        }
        if c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@' | '+' | '/') {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            if c.is_whitespace() {
                if !out.ends_with(' ') && !out.is_empty() {
                    out.push(' ');
                }
            } else {
                out.push(c);
            }
        }
    }
    flush(&mut token, &mut out);
    out.truncate(out.trim_end().len());
    out
}

/// Classify one token (with trailing punctuation split off) and append its normal form.
fn classify_into(token: &str, out: &mut String) {
    let core = token.trim_end_matches(['.', ',', ':', ';']);
    let trail = &token[core.len()..];
    out.push_str(&classify(core));
    out.push_str(trail);
}

/// A token's normal form: a placeholder, the token itself, or (mixed tokens) a copy with
/// its numbers replaced — borrowed unless it had to change.
fn classify(t: &str) -> Cow<'_, str> {
    if t.is_empty() {
        return Cow::Borrowed("");
    }
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    if is_uuid(t) {
        return Cow::Borrowed("<uuid>");
    }
    if let Some((user, domain)) = t.split_once('@') {
        if !user.is_empty() && domain.contains('.') {
            return Cow::Borrowed("<email>");
        }
    }
    if looks_like_timestamp(t) {
        return Cow::Borrowed("<ts>");
    }
    if digits == 0 {
        return Cow::Borrowed(t);
    }
    // Long hex or digit runs are identifiers (a tx id `9f3a11c2` and `12345678` alike):
    // one placeholder, or letters would split by whether an id happened to be all digits.
    let hex_body = t.strip_prefix("0x").unwrap_or(t);
    if hex_body.len() >= 8 && hex_body.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Cow::Borrowed("<id>");
    }
    if t.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b',' | b'-' | b'+'))
    {
        return Cow::Borrowed("<n>");
    }
    if t.len() >= 16 && digits >= 3 && !t.contains('/') {
        return Cow::Borrowed("<id>");
    }
    // Mixed token like `cus-8812`, `acc-7` or `INV-2026-001`: numeric segments become
    // `<n>`; digits glued to letters only when long (`user1234`), so `utf8`/`Int32` stay.
    if !t.is_ascii() {
        return Cow::Borrowed(t);
    }
    let bytes = t.as_bytes();
    let mut s = String::with_capacity(t.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let after_letter = start > 0 && bytes[start - 1].is_ascii_alphabetic();
            let before_letter = i < bytes.len() && bytes[i].is_ascii_alphabetic();
            if (!after_letter && !before_letter) || i - start >= 3 {
                s.push_str("<n>");
            } else {
                s.push_str(&t[start..i]);
            }
        } else {
            s.push(bytes[i] as char);
            i += 1;
        }
    }
    Cow::Owned(s)
}

fn is_uuid(t: &str) -> bool {
    t.len() == 36
        && t.split('-').count() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(t.split('-'))
            .all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn looks_like_timestamp(t: &str) -> bool {
    let b = t.as_bytes();
    let date = b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-';
    let clock = b.len() >= 8
        && b[..2].iter().all(u8::is_ascii_digit)
        && b[2] == b':'
        && b[3..5].iter().all(u8::is_ascii_digit)
        && b[5] == b':';
    date || clock
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_group_together() {
        let a = fingerprint(None, Some("Order 8812 not found"));
        let b = fingerprint(None, Some("Order 9120 not found"));
        assert_eq!(a, b);
        assert_eq!(a.as_deref(), Some("Order <n> not found"));
    }

    #[test]
    fn type_prefix_and_placeholders() {
        let fp = fingerprint(
            Some("com.acme.billing.TaxProfileMissingException"),
            Some("No tax profile for customer 'ACME GmbH' (id 3f2b8c1e-0d1a-4b7e-9a55-0c2f8e9d1a77) at 2026-09-21T10:04:31Z"),
        );
        assert_eq!(
            fp.as_deref(),
            Some(
                "TaxProfileMissingException: No tax profile for customer <str> (id <uuid>) at <ts>"
            )
        );
    }

    #[test]
    fn embedded_type_and_emails_and_hex() {
        let fp = fingerprint(
            None,
            Some("SyntaxError: Unexpected token } in JSON at position 42"),
        );
        assert_eq!(
            fp.as_deref(),
            Some("SyntaxError: Unexpected token } in JSON at position <n>")
        );
        let fp = fingerprint(
            None,
            Some("user jane.doe@example.com has no account deadbeef00ff"),
        );
        assert_eq!(fp.as_deref(), Some("user <email> has no account <id>"));
        assert_eq!(
            normalize("tx 9f3a11c2 and tx 12345678"),
            "tx <id> and tx <id>"
        );
        let fp = fingerprint(None, Some("customer cus-8812 blocked"));
        assert_eq!(fp.as_deref(), Some("customer cus-<n> blocked"));
        assert_eq!(
            normalize("acc-7 and acc-42 in INV-2026-001"),
            "acc-<n> and acc-<n> in INV-<n>-<n>"
        );
        assert_eq!(normalize("utf8 Int32 user12345"), "utf8 Int32 user<n>");
    }

    #[test]
    fn only_first_line_and_bounded() {
        let fp = fingerprint(Some("E"), Some("boom\n  at a.b.c(X.java:10)"));
        assert_eq!(fp.as_deref(), Some("E: boom"));
        let long = "word ".repeat(100);
        assert!(fingerprint(None, Some(&long)).is_some_and(|f| f.chars().count() <= MAX_LEN + 1));
        assert_eq!(fingerprint(None, Some("   ")), None);
    }

    #[test]
    fn unclosed_quote_is_kept() {
        assert_eq!(normalize("it's 42"), "it's <n>");
    }
}
