//! Value detectors: a table of rules, each a regular expression (the `regex` crate runs
//! in time linear in the input, so a hostile payload cannot make masking quadratic) plus
//! a validator for what a pattern alone cannot decide (Luhn, mod-97, SSN ranges, digit
//! boundaries). Every rule has positives and near-misses in `tests.rs`'s corpus.

use super::Class;
use regex::bytes::Regex;
use std::ops::Range;
use std::sync::OnceLock;

mod checks;
use checks::*;

/// One detector.
pub struct Rule {
    pub name: &'static str,
    pub class: Class,
    pattern: &'static str,
    /// Given the haystack and the match, the span to mask (possibly narrowed), or `None`
    /// when the candidate is not what the rule looks for.
    validate: fn(&[u8], Range<usize>) -> Option<Range<usize>>,
    /// What any match needs somewhere in the text (see [`may_match`]).
    needs: Needs,
    /// Bytes a match can start with: rules that cannot start at a candidate are not tried
    /// there (a payload of digits tries 5 rules per candidate, not 16).
    first: fn(u8) -> bool,
}

/// A condition every match of a rule meets, cheap to check on a whole text: a short
/// text that meets no rule's condition cannot hold a match, and skips the alternation.
/// Ids (ULIDs, UUIDs, hashes) are why: unique per letter, so no memo helps, and random
/// alphanumerics walk the alternation's lazy DFA into new states (1.3-2.8 µs an id,
/// measured on 200,000 ULIDs; masking one now takes 0.35-0.44 µs in all).
/// Each condition must hold for everything its rule reports, validator included:
/// `every_detection_meets_its_rules_condition` checks the corpus and random texts.
#[derive(Clone, Copy)]
enum Needs {
    /// One of these literals (ASCII case-insensitively when the flag is set).
    Literal(&'static [&'static str], bool),
    /// At least this many digits in one run, where digits may be up to
    /// `MAX_DIGIT_GAP` bytes apart as long as none of those is a letter or digit
    /// (`4111 1111`, `(555) 123-4567`, `4111\u{a0}1111`).
    Digits(usize),
    /// A known IBAN country code, two digits, and at least that country's IBAN length in
    /// letters and digits from there on.
    Iban,
}

/// The widest separator between two digits of one number: `[ \-./]{1,2}` or a
/// three-byte UTF-8 space in a card number.
const MAX_DIGIT_GAP: usize = 3;

/// Texts at most this long are checked against [`Needs`] first; longer ones (payload
/// text) usually meet some condition anyway and go straight to the alternation.
const GATED_TEXT: usize = 256;

/// The table. Order matters only for ties (same start): earlier rules win.
const RULES: &[Rule] = &[
    Rule {
        name: "private key block",
        class: Class::Secret,
        pattern: r"-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----[\s\S]{0,8192}?(?:-----END [A-Z ]{0,20}PRIVATE KEY-----|$)",
        validate: any,
        needs: Needs::Literal(&["-----BEGIN "], false),
        first: |c| c == b'-',
    },
    Rule {
        name: "jwt",
        class: Class::Secret,
        pattern: r"eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",
        validate: any,
        needs: Needs::Literal(&["eyJ"], false),
        first: |c| c == b'e',
    },
    Rule {
        name: "base64 json",
        class: Class::Secret,
        pattern: r"eyJ[A-Za-z0-9+/_\-]{12,}={0,2}",
        validate: base64_json,
        needs: Needs::Literal(&["eyJ"], false),
        first: |c| c == b'e',
    },
    Rule {
        name: "bearer or basic credential",
        class: Class::Secret,
        pattern: r"(?i:bearer|basic)[ \t]+[^\s\x22',;&]{8,}",
        validate: any,
        needs: Needs::Literal(&["bearer", "basic"], true),
        first: |c| matches!(c, b'b' | b'B'),
    },
    Rule {
        name: "aws access key id",
        class: Class::Secret,
        pattern: r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}",
        validate: any,
        needs: Needs::Literal(
            &[
                "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
            ],
            false,
        ),
        first: |c| c == b'A',
    },
    Rule {
        name: "google api key",
        class: Class::Secret,
        pattern: r"AIza[0-9A-Za-z_\-]{35}",
        validate: any,
        needs: Needs::Literal(&["AIza"], false),
        first: |c| c == b'A',
    },
    Rule {
        name: "payment provider key",
        class: Class::Secret,
        pattern: r"(?:sk|rk|pk|whsec)_(?:live|test)_[0-9A-Za-z]{10,}",
        validate: any,
        needs: Needs::Literal(&["_live_", "_test_"], false),
        first: |c| matches!(c, b's' | b'r' | b'p' | b'w'),
    },
    Rule {
        name: "code host token",
        class: Class::Secret,
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_\-]{20,})",
        validate: any,
        needs: Needs::Literal(
            &[
                "ghp_",
                "gho_",
                "ghu_",
                "ghs_",
                "ghr_",
                "github_pat_",
                "glpat-",
            ],
            false,
        ),
        first: |c| c == b'g',
    },
    Rule {
        name: "chat token",
        class: Class::Secret,
        pattern: r"xox[abposr]-[A-Za-z0-9\-]{10,}",
        validate: any,
        needs: Needs::Literal(&["xox"], false),
        first: |c| c == b'x',
    },
    Rule {
        name: "email",
        class: Class::Email,
        pattern: r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.[A-Za-z]{2,24}",
        validate: any,
        needs: Needs::Literal(&["@"], false),
        first: email_start,
    },
    Rule {
        name: "iban",
        class: Class::Iban,
        pattern: r"[A-Za-z]{2}[0-9]{2}(?:[ ]?[A-Za-z0-9]){11,30}",
        validate: iban,
        needs: Needs::Iban,
        first: letter,
    },
    Rule {
        name: "us ssn",
        class: Class::NationalId,
        pattern: r"[0-9]{3}-[0-9]{2}-[0-9]{4}",
        validate: ssn,
        needs: Needs::Digits(9),
        first: digit,
    },
    Rule {
        name: "card",
        class: Class::Card,
        // 13–19 digits with one optional separator between any two: space, dash, dot,
        // slash (two in a row where a binary view shows a no-break space as `..`), no-break
        // space, narrow no-break space, thin space.
        pattern: r"[0-9](?:(?:[ \-./]{1,2}|\xC2\xA0|\xE2\x80\xAF|\xE2\x80\x89)?[0-9]){12,18}",
        validate: card,
        needs: Needs::Digits(13),
        first: digit,
    },
    Rule {
        name: "international phone",
        class: Class::Phone,
        pattern: r"\+[0-9](?:[ \-.()]{0,2}[0-9]){7,14}",
        validate: phone,
        needs: Needs::Literal(&["+"], false),
        first: |c| c == b'+',
    },
    Rule {
        name: "national phone",
        class: Class::Phone,
        pattern: r"(?:\([0-9]{2,4}\)[ ]?|[0-9]{2,4}[ .\-])[0-9]{3,4}[ .\-][0-9]{3,4}",
        validate: national_phone,
        needs: Needs::Digits(10),
        first: digit_or_paren,
    },
    Rule {
        name: "long digit run",
        class: Class::Digits,
        pattern: r"[0-9]{9,}",
        validate: long_run,
        needs: Needs::Digits(9),
        first: digit,
    },
];

/// The compiled table, built once per process: one alternation of every rule to find
/// the next candidate in a single linear pass, and each rule anchored to decide which
/// rules match there.
struct Compiled {
    any: Regex,
    anchored: Vec<(&'static Rule, Regex)>,
    /// Every [`Needs::Literal`] of the table in one alternation (a literal search).
    literals: Regex,
}

fn build(pattern: &str) -> Option<Regex> {
    regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(1 << 26)
        .dfa_size_limit(1 << 26)
        .build()
        .ok()
}

fn compiled() -> Option<&'static Compiled> {
    static C: OnceLock<Option<Compiled>> = OnceLock::new();
    C.get_or_init(|| {
        let alternation: Vec<String> = RULES.iter().map(|r| format!("(?:{})", r.pattern)).collect();
        let any = build(&alternation.join("|"))?;
        let anchored = RULES
            .iter()
            .map(|r| build(&format!("^(?:{})", r.pattern)).map(|re| (r, re)))
            .collect::<Option<Vec<_>>>()?;
        let literals: Vec<String> = RULES
            .iter()
            .filter_map(|r| match r.needs {
                Needs::Literal(words, ci) => {
                    let words: Vec<String> = words.iter().map(|w| regex::escape(w)).collect();
                    Some(format!(
                        "(?{}:{})",
                        if ci { "i" } else { "" },
                        words.join("|")
                    ))
                }
                _ => None,
            })
            .collect();
        let literals = build(&literals.join("|"))?;
        Some(Compiled {
            any,
            anchored,
            literals,
        })
    })
    .as_ref()
}

/// How many rules the table has (for the README and the corpus test).
#[cfg(test)]
pub fn rule_count() -> usize {
    RULES.len()
}

/// Whether every rule compiled (a test keeps it so; without the table nothing would
/// be detected, so `detect` then reports the whole input as one secret).
#[cfg(test)]
pub fn all_compiled() -> bool {
    compiled().is_some()
}

/// Every detected span of `s`, in order, non-overlapping, with its class and the rule's
/// name. At each candidate start the longest validated match wins (then table order).
/// Linear: one pass of the alternation, plus bounded anchored matches per candidate.
pub fn detect(s: &[u8]) -> Vec<(Range<usize>, Class, &'static str)> {
    let Some(c) = compiled() else {
        // Fail closed: hide everything rather than show unchecked data.
        return vec![(0..s.len(), Class::Secret, "detectors unavailable")];
    };
    if s.len() <= GATED_TEXT && !may_match(c, s) {
        return Vec::new();
    }
    detect_with(c, s)
}

/// Whether any rule's [`Needs`] holds somewhere in `s`.
fn may_match(c: &Compiled, s: &[u8]) -> bool {
    let facts = Facts::of(s);
    RULES.iter().any(|r| match r.needs {
        Needs::Literal(..) => false,
        Needs::Digits(n) => facts.digit_run >= n,
        Needs::Iban => facts.iban,
    }) || c.literals.is_match(s)
}

/// What [`Needs::Digits`] and [`Needs::Iban`] ask of a text, found in one pass.
struct Facts {
    /// The most digits in one run (see [`Needs::Digits`]).
    digit_run: usize,
    /// Whether an IBAN could start somewhere (see [`Needs::Iban`]).
    iban: bool,
}

impl Facts {
    fn of(s: &[u8]) -> Self {
        let (mut digit_run, mut run, mut gap) = (0, 0, 0);
        // Letters and digits so far, and the fewest there must be in all for an IBAN
        // starting at one of the candidates seen (letters and digits before it plus
        // its country's length).
        let (mut alnum, mut iban_needs) = (0, usize::MAX);
        for (i, &b) in s.iter().enumerate() {
            if b.is_ascii_digit() {
                run = if run > 0 && gap <= MAX_DIGIT_GAP {
                    run + 1
                } else {
                    1
                };
                gap = 0;
                digit_run = digit_run.max(run);
                // `b` ends `LLDD`: an IBAN may start three bytes back.
                if i >= 3 && s[i - 1].is_ascii_digit() {
                    let (c0, c1) = (s[i - 3], s[i - 2]);
                    if c0.is_ascii_alphabetic() && c1.is_ascii_alphabetic() {
                        let country = [c0.to_ascii_uppercase(), c1.to_ascii_uppercase()];
                        if let Some(len) = iban_length(country) {
                            // `alnum` counts the three before `b`, which the IBAN uses.
                            iban_needs = iban_needs.min(alnum - 3 + len);
                        }
                    }
                }
            } else if b.is_ascii_alphabetic() {
                run = 0;
            } else {
                gap += 1;
            }
            alnum += usize::from(b.is_ascii_alphanumeric());
        }
        Facts {
            digit_run,
            iban: alnum >= iban_needs,
        }
    }
}

/// Whether `s` meets some rule's [`Needs`] wherever the full detectors find something in
/// it (the check may only skip texts with nothing to find).
#[cfg(test)]
pub fn gate_is_sound(s: &[u8]) -> bool {
    compiled().is_some_and(|c| detect_with(c, s).is_empty() || may_match(c, s))
}

/// Whether the lookup by country gives every listed country its length and every other
/// two-letter code none.
#[cfg(test)]
pub fn iban_table_matches_the_list() -> bool {
    (b'A'..=b'Z').all(|a| {
        (b'A'..=b'Z').all(|b| {
            let listed = IBAN_LENGTHS
                .iter()
                .find(|(c, _)| **c == [a, b])
                .map(|(_, len)| *len);
            iban_length([a, b]) == listed
        })
    }) && iban_length([b'd', b'e']).is_none()
}

/// [`detect`] without the [`Needs`] check.
fn detect_with(c: &Compiled, s: &[u8]) -> Vec<(Range<usize>, Class, &'static str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < s.len() {
        let Some(m) = c.any.find_at(s, pos) else {
            break;
        };
        let start = m.start();
        let mut best: Option<(Range<usize>, Class, &'static str)> = None;
        for (rule, re) in &c.anchored {
            if !(rule.first)(s[start]) {
                continue;
            }
            let Some(am) = re.find(&s[start..]) else {
                continue;
            };
            if let Some(r) = (rule.validate)(s, start..start + am.end()) {
                if !r.is_empty() && best.as_ref().is_none_or(|b| r.end > b.0.end) {
                    best = Some((r, rule.class, rule.name));
                }
            }
        }
        match best {
            Some(b) => {
                pos = b.0.end;
                out.push(b);
            }
            None => pos = start + 1,
        }
    }
    out
}
