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

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::letters(0), "0 letters");
        assert_eq!(super::letters(1), "1 letter");
        assert_eq!(super::letters(2), "2 letters");
        assert_eq!(super::count(1u32, "replay"), "1 replay");
    }
}
