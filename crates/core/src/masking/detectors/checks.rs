//! What a regex hit must also be to count: a card number with a valid Luhn digit, an
//! IBAN of its country's length with a valid check, a phone number or SSN bounded like
//! one — so the masker hides what is there and leaves order ids alone.

use std::ops::Range;

pub(super) fn digit(c: u8) -> bool {
    c.is_ascii_digit()
}

pub(super) fn digit_or_paren(c: u8) -> bool {
    c.is_ascii_digit() || c == b'('
}

pub(super) fn letter(c: u8) -> bool {
    c.is_ascii_alphabetic()
}

pub(super) fn email_start(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-')
}

pub(super) fn any(_: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    Some(r)
}

pub(super) fn is_digit_at(b: &[u8], i: Option<usize>) -> bool {
    i.and_then(|i| b.get(i)).is_some_and(u8::is_ascii_digit)
}

/// Not part of a longer number: no digit right before or after (letters and `_` may
/// touch it: `ref_4111…` is still a card).
pub(super) fn digit_bounded(b: &[u8], r: &Range<usize>) -> bool {
    !is_digit_at(b, r.start.checked_sub(1)) && !is_digit_at(b, Some(r.end))
}

pub(super) fn digits_of(b: &[u8]) -> Vec<u8> {
    b.iter()
        .filter(|c| c.is_ascii_digit())
        .map(|c| c - b'0')
        .collect()
}

pub(super) fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(k, &d)| {
            let d = u32::from(d);
            match (k % 2 == 1, d * 2) {
                (true, x) if x > 9 => x - 9,
                (true, x) => x,
                (false, _) => d,
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

pub(super) fn card(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let d = digits_of(&b[r.clone()]);
    ((13..=19).contains(&d.len()) && digit_bounded(b, &r) && luhn(&d)).then_some(r)
}

pub(super) fn long_run(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    digit_bounded(b, &r).then_some(r)
}

pub(super) fn phone(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let n = digits_of(&b[r.clone()]).len();
    ((8..=15).contains(&n) && digit_bounded(b, &r)).then_some(r)
}

/// Not one group of a longer grouped number (`1234 5678 9012 3456`, a date, a version):
/// no digit group joined to it by the separator it uses inside.
pub(super) fn group_bounded(b: &[u8], r: &Range<usize>) -> bool {
    let Some(&inner) = b[r.clone()]
        .iter()
        .find(|c| matches!(c, b' ' | b'.' | b'-' | b'/'))
    else {
        return true;
    };
    // A neighbouring group of two or more digits (`4-555-…` is still a phone).
    let sep = |i: usize| b.get(i) == Some(&inner);
    let before = r.start >= 3
        && sep(r.start - 1)
        && is_digit_at(b, Some(r.start - 2))
        && is_digit_at(b, Some(r.start - 3));
    let after = sep(r.end) && is_digit_at(b, Some(r.end + 1)) && is_digit_at(b, Some(r.end + 2));
    !before && !after
}

/// A national number written in groups: 10–11 digits, standing alone.
pub(super) fn national_phone(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let n = digits_of(&b[r.clone()]).len();
    ((10..=11).contains(&n) && digit_bounded(b, &r) && group_bounded(b, &r)).then_some(r)
}

pub(super) fn ssn(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let d = digits_of(&b[r.clone()]);
    let area = u32::from(d[0]) * 100 + u32::from(d[1]) * 10 + u32::from(d[2]);
    let ok = group_bounded(b, &r)
        && area != 0
        && area != 666
        && area < 900
        && (d[3], d[4]) != (0, 0)
        && d[5..] != [0, 0, 0, 0];
    (ok && digit_bounded(b, &r)).then_some(r)
}

pub(super) fn iban_valid(chars: &[u8]) -> bool {
    let mut rem: u32 = 0;
    for &c in chars[4..].iter().chain(&chars[..4]) {
        let v = if c.is_ascii_digit() {
            u32::from(c - b'0')
        } else {
            u32::from(c.to_ascii_uppercase() - b'A') + 10
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// IBAN lengths by country (the SWIFT registry): with mod-97 this keeps random
/// alphanumerics (ULIDs, hashes) from passing as account numbers. Kept in country
/// order (looked up by binary search; a test checks the order).
pub(super) const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NL", 18),
    (b"NO", 15),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"SA", 24),
    (b"SC", 31),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
];

/// [`IBAN_LENGTHS`] by country code, `AA` to `ZZ` (0: no IBANs), built at compile time.
/// The masking gate asks at every letter-letter-digit-digit of every text it checks (a
/// binary search there was ~1% of preparing a letter).
static IBAN_BY_COUNTRY: [u8; 26 * 26] = {
    let mut table = [0u8; 26 * 26];
    let mut k = 0;
    while k < IBAN_LENGTHS.len() {
        let (c, len) = IBAN_LENGTHS[k];
        let slot = country_slot(*c);
        // Checked when compiling: every length fits, and no code is listed twice.
        assert!(len > 0 && len <= u8::MAX as usize);
        assert!(table[slot] == 0);
        table[slot] = len as u8;
        k += 1;
    }
    table
};

/// An uppercase country code's place in [`IBAN_BY_COUNTRY`].
const fn country_slot([a, b]: [u8; 2]) -> usize {
    (a - b'A') as usize * 26 + (b - b'A') as usize
}

/// The IBAN length of an (uppercase) country code, if it has IBANs.
pub(super) fn iban_length(country: [u8; 2]) -> Option<usize> {
    if !country.iter().all(u8::is_ascii_uppercase) {
        return None;
    }
    match IBAN_BY_COUNTRY[country_slot(country)] {
        0 => None,
        len => Some(usize::from(len)),
    }
}

/// An IBAN of its country's exact length passing mod-97, in any case, grouped or not.
/// Glued to a preceding letter or digit (`xDE89…`) it must end its word, so a random
/// stretch inside an id does not count.
pub(super) fn iban(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    let country = [
        b[r.start].to_ascii_uppercase(),
        b[r.start + 1].to_ascii_uppercase(),
    ];
    let len = iban_length(country)?;
    let mut chars = Vec::with_capacity(len);
    let mut end = r.start;
    for (i, &c) in b[r.clone()].iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            chars.push(c.to_ascii_uppercase());
            if chars.len() == len {
                end = r.start + i + 1;
                break;
            }
        }
    }
    if chars.len() != len || !iban_valid(&chars) {
        return None;
    }
    let glued_before = r.start > 0 && b[r.start - 1].is_ascii_alphanumeric();
    let glued_after = b.get(end).is_some_and(u8::is_ascii_alphanumeric);
    (!(glued_before && glued_after)).then_some(r.start..end)
}

/// Base64 that decodes to JSON (`{"` encodes as `eyJ`): hidden whole, since what it
/// carries cannot be checked field by field in place.
pub(super) fn base64_json(b: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    use base64::Engine as _;
    let s = std::str::from_utf8(&b[r.clone()]).ok()?;
    let trimmed = s.trim_end_matches('=');
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed.replace(['-', '_'], "+"))
        .ok()
        .or_else(|| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(trimmed)
                .ok()
        })?;
    decoded.starts_with(b"{\"").then_some(r)
}
