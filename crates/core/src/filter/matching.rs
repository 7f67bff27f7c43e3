//! How a term's value matches: globs with `|` alternatives and quoting, and the fuzzy
//! match of bare words (subsequence, scored, with the matched characters for the screen).

pub(super) fn any_glob(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|p| glob(p, value))
}

/// Characters a value escapes with a backslash to mean themselves.
pub(super) const SPECIAL: [char; 6] = ['\\', '|', '*', '?', '"', '\''];

/// A value's alternatives (`a|b`), split at `|` not escaped.
pub(super) fn alternatives(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| SPECIAL.contains(n)) => {
                cur.push(c);
                cur.extend(chars.next());
            }
            '|' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `value` as a filter value that matches exactly it: quoted, its special characters
/// escaped. `summary --json` gives each group's filter made this way.
pub fn quote_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// One element of a glob pattern.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum G {
    Lit(char),
    One,
    Any,
}

pub(super) fn glob_tokens(pattern: &str) -> Vec<G> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' if chars.peek().is_some_and(|n| SPECIAL.contains(n)) => {
                G::Lit(chars.next().unwrap_or('\\'))
            }
            '*' => G::Any,
            '?' => G::One,
            c => G::Lit(c),
        });
    }
    out
}

/// Case-sensitive glob with `*` and `?` (`\*`, `\?`, `\|`, `\\`, `\"` for themselves).
/// Iterative with one backtrack point: linear-ish, no exponential blow-up on hostile
/// patterns.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p = glob_tokens(pattern);
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == G::Any {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == G::One || p[pi] == G::Lit(t[ti])) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == G::Any {
        pi += 1;
    }
    pi == p.len()
}

/// Fuzzy matching through `nucleo-matcher` (helix's matcher: faster than skim's
/// `fuzzy-matcher`, maintained, allocation-free once warm). One matcher and the last
/// needle's atom per thread: filtering 1M letters reuses them.
pub(super) struct Fuzzy {
    matcher: nucleo_matcher::Matcher,
    atom: Option<(String, nucleo_matcher::pattern::Atom)>,
    chars: Vec<char>,
    indices: Vec<u32>,
}

thread_local! {
    static FUZZY: std::cell::RefCell<Fuzzy> = std::cell::RefCell::new(Fuzzy {
        matcher: nucleo_matcher::Matcher::new(nucleo_matcher::Config::DEFAULT),
        atom: None,
        chars: Vec::new(),
        indices: Vec::new(),
    });
}

/// Where `needle` (lowercase) matches in `hay`, case-insensitively: the char indices of
/// the matched characters, sorted. Accepted: a substring anywhere; or, for needles of
/// three or more characters, a subsequence within a window of at most twice the
/// needle's length (so `taxprof` finds `tax_profile` but `ab` does not match any text
/// that merely has an `a` and later a `b`, which nucleo alone would score).
pub fn fuzzy_indices(needle: &str, hay: &str) -> Option<Vec<u32>> {
    use nucleo_matcher::pattern::{Atom, AtomKind, CaseMatching, Normalization};
    use nucleo_matcher::Utf32Str;
    if needle.is_empty() {
        return Some(Vec::new());
    }
    FUZZY.with(|f| {
        let mut f = f.borrow_mut();
        let Fuzzy {
            matcher,
            atom,
            chars,
            indices,
        } = &mut *f;
        if atom.as_ref().is_none_or(|(n, _)| n != needle) {
            let a = Atom::new(
                needle,
                CaseMatching::Ignore,
                Normalization::Smart,
                AtomKind::Fuzzy,
                false,
            );
            *atom = Some((needle.to_string(), a));
        }
        let (_, a) = atom.as_ref()?;
        let h = Utf32Str::new(hay, chars);
        a.score(h, matcher)?;
        indices.clear();
        a.indices(h, matcher, indices)?;
        indices.sort_unstable();
        indices.dedup();
        let n = needle.chars().count();
        let (first, last) = (*indices.first()?, *indices.last()?);
        let span = (last - first + 1) as usize;
        let contiguous = span == n;
        (contiguous || (n >= 3 && span <= 2 * n)).then(|| indices.clone())
    })
}

/// Fuzzy match of a lowercase `needle` in `hay` (see [`fuzzy_indices`]): the matched
/// span's slack, 0 for a substring (lower is better).
pub fn fuzzy_match(needle: &str, hay: &str) -> Option<usize> {
    let idx = fuzzy_indices(needle, hay)?;
    let (Some(first), Some(last)) = (idx.first(), idx.last()) else {
        return Some(0);
    };
    Some((last - first + 1) as usize - needle.chars().count())
}
