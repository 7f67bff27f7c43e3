//! Counted nouns for messages people read: "1 letter", "2 letters".

/// `n` and the noun, plural unless `n` is 1 (`noun` is the singular; an `s` is added).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `count(n, "letter")`, the noun most messages count.
pub fn letters(n: usize) -> String {
    count(n as u64, "letter")
}

/// The letters a title counts, with `--since`'s window when one left older letters out
/// (`429 letters in the last 2h`): the count must not read as the whole DLQ's.
pub fn letters_since(n: usize, since_ms: Option<i64>, now_ms: i64) -> String {
    match since_ms {
        Some(since) => format!(
            "{} in the last {}",
            letters(n),
            crate::timefmt::format_age_ms(now_ms - since)
        ),
        None => letters(n),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::letters(0), "0 letters");
        assert_eq!(super::letters(1), "1 letter");
        assert_eq!(super::letters(2), "2 letters");
        assert_eq!(super::count(1u32, "replay"), "1 replay");
        assert_eq!(super::letters_since(2, None, 0), "2 letters");
        assert_eq!(
            super::letters_since(1, Some(0), 2 * 3_600_000),
            "1 letter in the last 2h"
        );
    }
}
