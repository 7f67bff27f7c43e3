//! Where the secrets are in a text: the detectors' spans, and `key=value` / `"key":
//! value` pairs whose key names a sensitive field.

use super::*;

impl Masker {
    /// Byte ranges of `s` that must not be shown, with their masked replacement; in order,
    /// non-overlapping. Used where text cannot simply be rewritten (hex dumps).
    /// `name=value` pairs under sensitive names come first; the detector table
    /// (`detectors`) finds values anywhere else. Both are linear in `s`.
    pub fn sensitive_spans(&self, s: &str) -> Vec<(std::ops::Range<usize>, String)> {
        let mut all = self.pair_spans(s);
        all.extend(
            detectors::detect(s.as_bytes())
                .into_iter()
                .map(|(r, class, _)| {
                    let r = widen_to_chars(s, r);
                    let rep = self.mask_value(class, &s[r.clone()]);
                    (r, rep)
                }),
        );
        // Earliest first, the longest of those first (a pair before a detector span of
        // the same extent: it keeps the field name readable).
        all.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.0.end.cmp(&a.0.end)));
        let mut out: Vec<(std::ops::Range<usize>, String)> = Vec::with_capacity(all.len());
        for (r, rep) in all {
            match out.last_mut() {
                // Inside a span already masked: nothing more to hide.
                Some(last) if r.end <= last.0.end => {}
                // Overlapping its end: no byte of either may show, so the union is
                // redacted whole.
                Some(last) if r.start < last.0.end => {
                    last.0.end = r.end;
                    last.1 = self.mask_value(Class::Secret, &s[last.0.clone()]);
                }
                _ => out.push((r, rep)),
            }
        }
        out
    }

    /// `name=value` spans under sensitive names, found at word boundaries.
    pub(super) fn pair_spans(&self, s: &str) -> Vec<(std::ops::Range<usize>, String)> {
        let b = s.as_bytes();
        let mut spans = Vec::new();
        // Every pair has its `=` or `:` (see `detect_pair`): most ids and codes have
        // neither and are done here.
        if !b.iter().any(|c| matches!(c, b'=' | b':')) {
            return spans;
        }
        let mut i = 0;
        while i < b.len() {
            let boundary = i == 0 || !is_word_byte(b[i - 1]);
            if boundary {
                if let Some((end, mut rep)) = self.detect_pair(s, i) {
                    // The pair's mask shows its name: a name that is itself a secret
                    // (a token before a colon) hides the pair whole.
                    let name_end = b[i..end]
                        .iter()
                        .position(|&c| {
                            !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
                        })
                        .map_or(end, |n| i + n);
                    if !detectors::detect(&b[i..name_end]).is_empty() {
                        rep = self.mask_value(Class::Secret, &s[i..end]);
                    }
                    spans.push((i..end, rep));
                    i = end;
                    continue;
                }
                // Skip the whole candidate name (`a.b-c_d`): a pair starting inside it
                // would end at the same place, and rescanning it from every dot made
                // `a.a.a.…` quadratic.
                let name_end = b[i..]
                    .iter()
                    .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))
                    .map_or(b.len(), |n| i + n);
                if name_end > i {
                    i = name_end;
                    continue;
                }
                if is_word_byte(b[i]) {
                    while i < b.len() && is_word_byte(b[i]) {
                        i += 1;
                    }
                    continue;
                }
            }
            i += 1;
        }
        spans
    }

    /// `name = value`, `name: value`, `"name": "value"` with a sensitive name.
    pub(super) fn detect_pair(&self, s: &str, i: usize) -> Option<(usize, String)> {
        let b = s.as_bytes();
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-' | b'.')) {
            j += 1;
        }
        if j == i {
            return None;
        }
        // Cheap structural check first: only `name=`/`name:` can be a pair.
        let mut k = j;
        if k < b.len() && matches!(b[k], b'"' | b'\'') {
            k += 1;
        }
        while k < b.len() && b[k] == b' ' {
            k += 1;
        }
        if k >= b.len() || !matches!(b[k], b'=' | b':') {
            return None;
        }
        let class = self.field_class(&s[i..j])?;
        k += 1;
        while k < b.len() && b[k] == b' ' {
            k += 1;
        }
        let (vstart, vend, next) = if k < b.len() && matches!(b[k], b'"' | b'\'') {
            let q = b[k];
            let mut e = k + 1;
            while e < b.len() && b[e] != q {
                if b[e] == b'\\' {
                    e += 1;
                }
                e += 1;
            }
            let e = e.min(b.len());
            (k + 1, e, e)
        } else {
            let mut e = k;
            // Authorization values have a scheme and a credential: take both.
            let stop = |c: u8| {
                c.is_ascii_whitespace() || matches!(c, b'&' | b',' | b';' | b'}' | b']' | b')')
            };
            while e < b.len() && !stop(b[e]) {
                e += 1;
            }
            if class == Class::Secret && e < b.len() && b[e] == b' ' {
                let scheme = &s[k..e];
                if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("basic") {
                    e += 1;
                    while e < b.len() && !stop(b[e]) {
                        e += 1;
                    }
                }
            }
            (k, e, e)
        };
        if vstart >= vend {
            return None;
        }
        let value = &s[vstart..vend];
        Some((
            next,
            format!("{}{}", &s[i..vstart], self.mask_value(class, value)),
        ))
    }
}
