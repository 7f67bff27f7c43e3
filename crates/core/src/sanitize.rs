//! The one sanitizer every untrusted byte passes through before it reaches a terminal,
//! stdout, a log or an error message.
//!
//! Control characters (C0, DEL, C1), bidi controls and invisible format characters become
//! visible escapes; invalid UTF-8 becomes `\xNN`. A hostile payload can therefore never
//! move the cursor, write the clipboard (OSC 52), retitle the window or reorder text.
//! Backslashes are left alone for readability: the goal is terminal safety, not an
//! unambiguous encoding (use `--json` or `export` for exact bytes).

use std::fmt::Write as _;

/// How newlines are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything on one line: `\n`, `\r`, `\t` become escapes.
    Line,
    /// Multi-line text: `\n` kept, tabs expanded to spaces, `\r` escaped.
    Block,
}

/// Is this character one that must never reach a terminal raw?
pub fn is_unsafe_char(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || u == 0x7f || (0x80..=0x9f).contains(&u) || is_format_char(c)
}

/// Like [`is_unsafe_char`] but allowing the newline, for checking multi-line output.
pub fn is_unsafe_char_in_output(c: char) -> bool {
    c != '\n' && is_unsafe_char(c)
}

/// Bidi controls, zero-width and other invisible format characters (Unicode Cf that
/// matter in terminals), plus line/paragraph separators.
fn is_format_char(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

/// Sanitize arbitrary bytes for display, keeping at most `max_chars` output characters;
/// if cut, a marker says how many input bytes are hidden.
pub fn sanitize_bytes(bytes: &[u8], mode: Mode, max_chars: usize) -> String {
    let mut out = String::with_capacity(bytes.len().min(max_chars) + 8);
    let mut shown = 0usize;
    let mut rest = bytes;
    let mut consumed = 0usize;
    'outer: while !rest.is_empty() {
        let (valid, invalid_len) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => {
                let valid_up_to = e.valid_up_to();
                // SAFETY-free: from_utf8 on the prefix cannot fail.
                let s = std::str::from_utf8(&rest[..valid_up_to]).unwrap_or_default();
                (s, e.error_len().unwrap_or(rest.len() - valid_up_to))
            }
        };
        for c in valid.chars() {
            let before = out.len();
            push_char(&mut out, c, mode);
            shown += out[before..].chars().count();
            consumed += c.len_utf8();
            if shown >= max_chars {
                break 'outer;
            }
        }
        let valid_len = valid.len();
        for &b in &rest[valid_len..valid_len + invalid_len] {
            let _ = write!(out, "\\x{b:02x}");
            shown += 4;
            consumed += 1;
            if shown >= max_chars {
                break 'outer;
            }
        }
        rest = &rest[valid_len + invalid_len..];
    }
    let hidden = bytes.len().saturating_sub(consumed);
    if hidden > 0 {
        let _ = write!(out, "… [{} hidden]", human_bytes(hidden as u64));
    }
    out
}

/// Sanitize text that is already valid UTF-8 (header names, error messages, ids).
pub fn sanitize_str(s: &str, mode: Mode, max_chars: usize) -> String {
    // This invocation's secrets never reach a screen, whoever echoed them.
    sanitize_bytes(crate::secrets::scrub(s).as_bytes(), mode, max_chars)
}

/// One line, capped. The common case for table cells and status lines.
pub fn line(s: &str, max_chars: usize) -> String {
    sanitize_str(s, Mode::Line, max_chars)
}

/// Already-clean text in at most `w` characters, `…` where it was cut (unlike `line`,
/// which says how much it hid: a terminal row must not grow past its width).
pub fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Uncapped single-line sanitization, for error messages and identifiers.
pub fn clean(s: &str) -> String {
    sanitize_str(s, Mode::Line, usize::MAX)
}

/// A TOML error as `line L, column C: message`. toml's own text quotes the offending
/// line over several lines: printed on one, it read as `…\n  |\n2 | uri = 5…`, and the
/// quoted line may hold a password (a config's `sasl.password`, a roles file's names).
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.len()
                - before
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |at| at + 1)
                + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

fn push_char(out: &mut String, c: char, mode: Mode) {
    match c {
        '\n' if mode == Mode::Block => out.push('\n'),
        '\t' if mode == Mode::Block => out.push_str("    "),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if is_unsafe_char(c) => {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// `1.5 KiB`, `10.0 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A TOML error says where, on one line, and never quotes the line it is on.
    #[test]
    fn toml_errors_say_where_without_quoting_the_line() {
        let text = "[sources.x]\nkafka = { \"sasl.password\" = hunter2 }\n";
        let e = toml::from_str::<toml::Table>(text).expect_err("invalid");
        let m = toml_error(text, &e);
        assert!(m.starts_with("line 2, column "), "{m}");
        assert!(!m.contains("hunter2") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn escapes_terminal_attacks() {
        let osc52 = b"\x1b]52;c;ZXZpbA==\x07 clear\x1b[2J title\x1b]0;pwned\x07";
        let s = sanitize_bytes(osc52, Mode::Line, 1000);
        assert!(!s.chars().any(is_unsafe_char), "{s}");
        assert!(s.contains("\\x1b]52;c;"), "{s}");
        assert!(s.contains("\\x07"));
    }

    #[test]
    fn invalid_utf8_becomes_hex() {
        assert_eq!(
            sanitize_bytes(b"ok\xff\xfe!", Mode::Line, 100),
            "ok\\xff\\xfe!"
        );
    }

    #[test]
    fn bidi_and_zero_width_are_visible() {
        let s = sanitize_str("admin\u{202e}txt.exe\u{200b}", Mode::Line, 100);
        assert_eq!(s, "admin\\u{202e}txt.exe\\u{200b}");
    }

    #[test]
    fn block_mode_keeps_newlines() {
        assert_eq!(sanitize_str("a\nb\tc\r", Mode::Block, 100), "a\nb    c\\r");
        assert_eq!(sanitize_str("a\nb", Mode::Line, 100), "a\\nb");
    }

    #[test]
    fn caps_length_and_says_what_is_hidden() {
        let big = vec![b'a'; 10 * 1024 * 1024];
        let s = sanitize_bytes(&big, Mode::Line, 10);
        assert!(s.starts_with("aaaaaaaaaa… ["), "{s}");
        assert!(s.contains("10.0 MiB hidden"), "{s}");
    }

    proptest! {
        #[test]
        fn never_emits_unsafe_chars(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            for mode in [Mode::Line, Mode::Block] {
                let s = sanitize_bytes(&bytes, mode, usize::MAX);
                for c in s.chars() {
                    prop_assert!(!is_unsafe_char(c) || (mode == Mode::Block && c == '\n'),
                        "unsafe {:?} in {:?}", c, s);
                }
            }
        }

        #[test]
        fn never_emits_unsafe_chars_from_text(s in "\\PC*[\\x00-\\x1f\\u{80}-\\u{9f}\\u{200b}-\\u{200f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]\\PC*") {
            let out = sanitize_str(&s, Mode::Line, usize::MAX);
            prop_assert!(!out.chars().any(is_unsafe_char));
        }
    }

    #[test]
    fn a_progress_line_fits_the_terminal() {
        assert_eq!(super::fit("abcdef", 10), "abcdef");
        assert_eq!(super::fit("abcdefghijkl", 6), "abcde…");
        assert_eq!(super::fit("a·b·c·d·e", 5).chars().count(), 5);
    }
}
