//! What is different about a group's letters: the shape of their payloads (JSON paths,
//! types, string formats, small sets of values) against a baseline that did not fail
//! this way, as a ranked list of differences with counts — `/payload/amount: string
//! "1,500.00"-like in 301 of 301; number in 612 of 612 baseline letters`.
//!
//! Shapes are read from the **masked view** of each payload, the text `show` prints, so
//! nothing here knows more than the role is shown: a format is named by a fixed example
//! of the format (never the letter's value), and the values of a small enumeration are
//! listed only as masking left them, and only to a role that sees payloads.

use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Paths deeper than this are not followed (a deeply nested payload is not a schema).
const MAX_DEPTH: usize = 16;
/// Paths recorded per letter at most (a payload with thousands of keys is a map).
const MAX_PATHS: usize = 256;
/// More distinct values than this at a path: not an enumeration.
const MAX_VALUES: usize = 24;
/// Longer strings are not enumeration values.
const MAX_VALUE_LEN: usize = 32;

/// What a JSON value is, strings by their format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Null,
    Bool,
    Integer,
    Number,
    Object,
    Array,
    /// `"1,500.00"`: digits grouped by commas.
    GroupedNumberText,
    /// `"12.50"`, `"42"`.
    NumberText,
    /// RFC 3339.
    DateTimeText,
    /// `2026-09-21`.
    DateText,
    UuidText,
    EmailText,
    /// Masked by the detectors: its format is not known here.
    MaskedText,
    EmptyText,
    Text,
}

impl Kind {
    pub fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_i64() || n.is_u64() => Kind::Integer,
            Value::Number(_) => Kind::Number,
            Value::Object(_) => Kind::Object,
            Value::Array(_) => Kind::Array,
            Value::String(s) => text_kind(s),
        }
    }

    /// In words, strings with a fixed example of their format.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "boolean",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Object => "object",
            Kind::Array => "array",
            Kind::GroupedNumberText => "string \"1,500.00\"-like",
            Kind::NumberText => "string \"12.50\"-like",
            Kind::DateTimeText => "string RFC 3339 time",
            Kind::DateText => "string date",
            Kind::UuidText => "string UUID",
            Kind::EmailText => "string email",
            Kind::MaskedText => "masked string",
            Kind::EmptyText => "empty string",
            Kind::Text => "string",
        }
    }

    pub fn is_number(self) -> bool {
        matches!(self, Kind::Integer | Kind::Number)
    }

    pub fn is_number_text(self) -> bool {
        matches!(self, Kind::GroupedNumberText | Kind::NumberText)
    }
}

fn text_kind(s: &str) -> Kind {
    if s.is_empty() {
        return Kind::EmptyText;
    }
    let email = s
        .split_once('@')
        .is_some_and(|(a, d)| !a.is_empty() && d.contains('.') && !s.contains(char::is_whitespace));
    if email {
        return Kind::EmailText;
    }
    if s.contains("**") {
        return Kind::MaskedText;
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, "0"));
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if all_digits(frac) {
        if all_digits(whole) {
            return Kind::NumberText;
        }
        let mut groups = whole.split(',');
        let head_ok = groups.next().is_some_and(|h| all_digits(h) && h.len() <= 3);
        let mut rest = groups.peekable();
        if head_ok && rest.peek().is_some() && rest.all(|g| g.len() == 3 && all_digits(g)) {
            return Kind::GroupedNumberText;
        }
    }
    if chrono::DateTime::parse_from_rfc3339(s).is_ok() {
        return Kind::DateTimeText;
    }
    if chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() {
        return Kind::DateText;
    }
    let b = s.as_bytes();
    let uuid = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    if uuid {
        Kind::UuidText
    } else {
        Kind::Text
    }
}

/// One path across the letters: in how many letters it is present, with which kinds,
/// and which short values.
#[derive(Debug, Clone, Default)]
pub struct PathShape {
    pub present: usize,
    /// Letters in which the path holds a value of this kind.
    pub kinds: BTreeMap<Kind, usize>,
    /// Letters in which the path holds this (masked) value, while the path looks like an
    /// enumeration.
    values: BTreeMap<String, usize>,
    /// Too many distinct or long values: not an enumeration.
    open: bool,
}

impl PathShape {
    /// The kind most letters hold here, with its count.
    pub fn dominant(&self) -> Option<(Kind, usize)> {
        dominant(&self.kinds)
    }

    fn enumeration(&self) -> Option<&BTreeMap<String, usize>> {
        (!self.open && !self.values.is_empty()).then_some(&self.values)
    }
}

/// The shapes of a set of letters' payloads.
#[derive(Debug, Clone, Default)]
pub struct Shapes {
    /// Payloads read as JSON.
    pub letters: usize,
    /// How many letters the read ones stand for (a sample of a bigger set); 0: as many
    /// as were read.
    pub population: usize,
    /// Records that did not fail (the origin topic's), not other failing letters: the
    /// group need not be the odd one out against them.
    pub healthy: bool,
    /// Payloads that were not JSON (not in `paths`).
    pub unreadable: usize,
    pub paths: BTreeMap<String, PathShape>,
    /// Letters per writer schema (`avro com.acme.Payout v2 (id 102, …)`), for letters a
    /// schema decoded.
    pub writers: BTreeMap<String, usize>,
}

/// What one letter holds at each path: its kinds and short values.
type LetterPaths = BTreeMap<String, (BTreeSet<Kind>, BTreeSet<String>, bool)>;

impl Shapes {
    /// `n` of the letters read here, scaled to the population they stand for.
    fn estimate(&self, n: usize) -> f64 {
        let population = self.population.max(self.letters);
        n as f64 / self.letters.max(1) as f64 * population as f64
    }

    /// Add one payload's masked view (JSON text; anything else counts as unreadable).
    pub fn add_masked(&mut self, masked: &str) {
        match serde_json::from_str::<Value>(masked) {
            Ok(v) => self.add_value(&v),
            Err(_) => self.unreadable += 1,
        }
    }

    pub fn add_value(&mut self, v: &Value) {
        let mut seen = LetterPaths::new();
        walk(v, &mut String::new(), 0, &mut seen);
        self.letters += 1;
        for (path, (kinds, values, long)) in seen {
            let p = self.paths.entry(path).or_default();
            p.present += 1;
            for k in kinds {
                *p.kinds.entry(k).or_default() += 1;
            }
            p.open |= long;
            if !p.open {
                for v in values {
                    *p.values.entry(v).or_default() += 1;
                }
                if p.values.len() > MAX_VALUES {
                    p.open = true;
                    p.values.clear();
                }
            }
        }
    }
}

fn walk(v: &Value, path: &mut String, depth: usize, seen: &mut LetterPaths) {
    if seen.len() >= MAX_PATHS && !seen.contains_key(path.as_str()) {
        return;
    }
    let e = seen.entry(path.clone()).or_default();
    e.0.insert(Kind::of(v));
    match v {
        Value::String(s) if s.chars().count() <= MAX_VALUE_LEN && text_kind(s) == Kind::Text => {
            e.1.insert(s.clone());
        }
        Value::String(_) | Value::Number(_) => e.2 = true,
        _ => {}
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let len = path.len();
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push('/');
                push_key(path, k);
                walk(child, path, depth + 1, seen);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            path.push_str("/[]");
            for child in items {
                walk(child, path, depth + 1, seen);
            }
            path.truncate(len);
        }
        _ => {}
    }
}

/// A key as a JSON Pointer segment (`~` and `/` escaped), cut and made printable: keys
/// are the letter's bytes too.
fn push_key(path: &mut String, k: &str) {
    for c in crate::sanitize::line(k, 64).chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// How a path differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// The group holds another kind than the baseline.
    Type { from: Kind, to: Kind },
    /// The baseline has the path, the group does not.
    Missing { kind: Kind },
    /// The letters were written with another schema than the baseline's.
    Writer { from: String, to: String },
    /// The group has a path the baseline does not.
    Added { kind: Kind },
    /// The group has `path` where the baseline has `from` (same parent, same kind).
    Renamed { from: String, kind: Kind },
    /// Values of an enumeration the baseline never holds (empty when the role may not
    /// see payload values: only their number is said).
    NewValues {
        values: Vec<String>,
        distinct: usize,
    },
}

/// One difference, with its counts and a line to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub path: String,
    #[serde(flatten)]
    pub change: Change,
    /// Letters of the group that show it, of all the group's letters read.
    pub group: (usize, usize),
    /// Baseline letters that hold what the group departs from, of all read.
    pub baseline: (usize, usize),
    pub line: String,
    #[serde(skip)]
    score: f64,
}

/// At least this share of letters: "most".
const MOST: f64 = 0.8;
/// At most this share: "hardly any".
const FEW: f64 = 0.2;

/// The ranked differences of `group` against `baseline`; `values` lets enumeration
/// values (as masked) be named. A difference is kept only where the group is the odd
/// one out: fewer letters (scaled to their populations) show it than hold what it
/// departs from.
pub fn differences(group: &Shapes, baseline: &Shapes, values: bool) -> Vec<Difference> {
    if group.letters == 0 || baseline.letters == 0 {
        return Vec::new();
    }
    let (gn, bn) = (group.letters, baseline.letters);
    let share = |p: Option<&PathShape>, n: usize| p.map_or(0.0, |p| p.present as f64 / n as f64);
    let mut missing = Vec::new();
    let mut added = Vec::new();
    let mut out = Vec::new();
    let paths: BTreeSet<&String> = group.paths.keys().chain(baseline.paths.keys()).collect();
    for path in paths {
        let (g, b) = (group.paths.get(path), baseline.paths.get(path));
        let (gs, bs) = (share(g, gn), share(b, bn));
        match (g, b) {
            (_, Some(b)) if bs >= MOST && gs <= FEW => missing.push((path.clone(), b)),
            (Some(g), _) if gs >= MOST && bs <= FEW => added.push((path.clone(), g)),
            (Some(g), Some(b)) if gs >= 0.5 && bs >= 0.5 => {
                out.extend(type_change(path, g, b, gn, bn));
                out.extend(new_values(path, g, b, gn, bn, values));
            }
            _ => {}
        }
    }
    out.extend(renames_and_rest(missing, added, group, baseline));
    out.extend(writer_change(group, baseline));
    let structural: Vec<String> = out
        .iter()
        .filter(|d| !matches!(d.change, Change::NewValues { .. } | Change::Writer { .. }))
        .map(|d| format!("{}/", d.path))
        .collect();
    // A missing or changed object says it for its children.
    out.retain(|d| !structural.iter().any(|p| d.path.starts_with(p.as_str())));
    // The group must be the odd one out: when the "baseline" is other failing letters
    // and more of them differ from this group than the group has letters, the
    // difference is theirs, not this group's cause.
    if !baseline.healthy {
        out.retain(|d| group.estimate(d.group.0) < baseline.estimate(d.baseline.0.max(1)));
    }
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
    });
    out
}

fn type_change(
    path: &str,
    g: &PathShape,
    b: &PathShape,
    gn: usize,
    bn: usize,
) -> Option<Difference> {
    let (gf, bf) = (g.families(), b.families());
    let (gk, gc) = dominant(&gf)?;
    let (bk, bc) = dominant(&bf)?;
    let masked = gk == Kind::MaskedText || bk == Kind::MaskedText;
    let rare_in_base = bf.get(&gk).copied().unwrap_or(0) as f64 <= 0.1 * b.present as f64;
    let most_in_group = gc as f64 >= MOST * g.present as f64;
    if gk == bk || masked || !rare_in_base || !most_in_group {
        return None;
    }
    let (to, to_said) = g.member(gk);
    let (from, from_said) = b.member(bk);
    Some(Difference {
        path: path.to_string(),
        change: Change::Type { from, to },
        group: (gc, gn),
        baseline: (bc, bn),
        line: format!(
            "{path}: {to_said} in {gc} of {gn}; {from_said} in {bc} of {bn} baseline letters"
        ),
        score: 3.0 + gc as f64 / gn as f64,
    })
}

/// The group's letters were written with a schema the baseline's hardly were.
fn writer_change(group: &Shapes, baseline: &Shapes) -> Option<Difference> {
    let top = |m: &BTreeMap<String, usize>| {
        m.iter()
            .max_by_key(|(w, n)| (**n, std::cmp::Reverse((*w).clone())))
            .map(|(w, n)| (w.clone(), *n))
    };
    let (to, gc) = top(&group.writers)?;
    let (from, bc) = top(&baseline.writers)?;
    let (gn, bn) = (group.letters, baseline.letters);
    let rare = baseline.writers.get(&to).copied().unwrap_or(0) * 10 <= bn;
    if to == from || !rare || (gc as f64) < MOST * gn as f64 {
        return None;
    }
    let clean = |w: &str| crate::sanitize::line(w, 120);
    Some(Difference {
        path: String::new(),
        line: format!(
            "writer schema: {} in {gc} of {gn}; {} in {bc} of {bn} baseline letters",
            clean(&to),
            clean(&from)
        ),
        change: Change::Writer { from, to },
        group: (gc, gn),
        baseline: (bc, bn),
        score: 3.2,
    })
}

fn dominant(kinds: &BTreeMap<Kind, usize>) -> Option<(Kind, usize)> {
    kinds
        .iter()
        .max_by_key(|(k, n)| (**n, std::cmp::Reverse(**k)))
        .map(|(k, n)| (*k, *n))
}

/// Kinds that are one kind to a consumer: integers are numbers, a number in text is
/// one with or without thousands separators.
fn family(k: Kind) -> Kind {
    match k {
        Kind::Integer => Kind::Number,
        Kind::GroupedNumberText => Kind::NumberText,
        k => k,
    }
}

impl PathShape {
    /// Letters per family of kinds.
    fn families(&self) -> BTreeMap<Kind, usize> {
        let mut out = BTreeMap::new();
        for (k, n) in &self.kinds {
            *out.entry(family(*k)).or_default() += n;
        }
        out
    }

    /// The member of a family this path holds most, and the family in words: both
    /// formats of a number in text when both occur.
    fn member(&self, fam: Kind) -> (Kind, String) {
        let members: Vec<(Kind, usize)> = self
            .kinds
            .iter()
            .filter(|(k, _)| family(**k) == fam)
            .map(|(k, n)| (*k, *n))
            .collect();
        let top = members
            .iter()
            .max_by_key(|(k, n)| (*n, std::cmp::Reverse(*k)))
            .map_or(fam, |m| m.0);
        let said = match (fam, members.len()) {
            (Kind::NumberText, 2) => "string \"1,500.00\"- or \"12.50\"-like".to_string(),
            (Kind::Number, 2) => "number".to_string(),
            _ => top.describe().to_string(),
        };
        (top, said)
    }
}

fn new_values(
    path: &str,
    g: &PathShape,
    b: &PathShape,
    gn: usize,
    bn: usize,
    show: bool,
) -> Option<Difference> {
    let (gv, bv) = (g.enumeration()?, b.enumeration()?);
    // A closed set: few values, seen often enough to know them.
    if bv.len() > MAX_VALUES / 2 || b.present < 10 {
        return None;
    }
    let new: Vec<(&String, usize)> = gv
        .iter()
        .filter(|(v, _)| !bv.contains_key(*v))
        .map(|(v, n)| (v, *n))
        .collect();
    let letters: usize = new.iter().map(|(_, n)| n).sum::<usize>().min(gn);
    if new.is_empty() || (letters as f64) < 0.5 * gn as f64 {
        return None;
    }
    let names: Vec<String> = new
        .iter()
        .map(|(v, _)| crate::sanitize::line(v, MAX_VALUE_LEN))
        .collect();
    let said = if show {
        let quoted: Vec<String> = names.iter().map(|v| format!("{v:?}")).collect();
        format!("values never in the baseline: {}", quoted.join(", "))
    } else {
        format!("{} values never in the baseline", names.len())
    };
    Some(Difference {
        path: path.to_string(),
        change: Change::NewValues {
            values: if show { names } else { Vec::new() },
            distinct: new.len(),
        },
        group: (letters, gn),
        baseline: (b.present, bn),
        line: format!(
            "{path}: {said}, in {letters} of {gn}; the baseline's {} values in {} of {bn}",
            bv.len(),
            b.present
        ),
        score: 1.0 + 0.9 * letters as f64 / gn as f64,
    })
}

/// A path the group lacks and one it has instead under the same parent, of the same
/// kind: a rename. The rest are missing or added.
fn renames_and_rest(
    missing: Vec<(String, &PathShape)>,
    mut added: Vec<(String, &PathShape)>,
    group: &Shapes,
    baseline: &Shapes,
) -> Vec<Difference> {
    let (gn, bn) = (group.letters, baseline.letters);
    let parent = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(a, _)| a.to_string())
    };
    let kind = |p: &PathShape| p.dominant().map_or(Kind::Null, |k| k.0);
    let mut out = Vec::new();
    for (m, b) in missing {
        let pair = added
            .iter()
            .position(|(a, g)| parent(a) == parent(&m) && kind(g) == kind(b));
        let diff = match pair {
            Some(i) => {
                let (a, g) = added.remove(i);
                Difference {
                    line: format!(
                        "{a}: {} in {} of {gn} where the baseline has {m} ({} of {bn}) — renamed?",
                        kind(g).describe(),
                        g.present,
                        b.present
                    ),
                    path: a,
                    change: Change::Renamed {
                        from: m,
                        kind: kind(g),
                    },
                    group: (g.present, gn),
                    baseline: (b.present, bn),
                    score: 3.5,
                }
            }
            None => {
                let had = group.paths.get(&m).map_or(0, |p| p.present);
                Difference {
                    line: format!(
                        "{m}: missing in {} of {gn}; {} in {} of {bn} baseline letters",
                        gn - had,
                        kind(b).describe(),
                        b.present
                    ),
                    path: m,
                    change: Change::Missing { kind: kind(b) },
                    group: (gn - had, gn),
                    baseline: (b.present, bn),
                    score: 2.5,
                }
            }
        };
        out.push(diff);
    }
    for (a, g) in added {
        let lacking = bn - baseline.paths.get(&a).map_or(0, |p| p.present);
        out.push(Difference {
            line: format!(
                "{a}: {} in {} of {gn}; not in the baseline's letters",
                kind(g).describe(),
                g.present
            ),
            path: a,
            change: Change::Added { kind: kind(g) },
            group: (g.present, gn),
            baseline: (lacking, bn),
            score: 2.0,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shapes(docs: impl IntoIterator<Item = Value>) -> Shapes {
        let mut s = Shapes::default();
        for d in docs {
            s.add_masked(&d.to_string());
        }
        s
    }

    #[test]
    fn strings_are_told_by_format() {
        for (s, k) in [
            ("1,500.00", Kind::GroupedNumberText),
            ("12,345,678", Kind::GroupedNumberText),
            ("12.50", Kind::NumberText),
            ("-42", Kind::NumberText),
            ("1,50.00", Kind::Text),
            ("2026-09-21T10:00:00Z", Kind::DateTimeText),
            ("2026-09-21", Kind::DateText),
            ("3f2b8c1e-0000-4abc-8def-1234567890ab", Kind::UuidText),
            ("j***@e***.com", Kind::EmailText),
            ("J*** D***", Kind::MaskedText),
            ("", Kind::EmptyText),
            ("EUR", Kind::Text),
        ] {
            assert_eq!(text_kind(s), k, "{s}");
        }
    }

    #[test]
    fn a_number_sent_as_a_formatted_string_is_the_first_difference() {
        let group = shapes(
            (0..30)
                .map(|i| json!({"payload": {"amount": format!("1,{i:03}.00"), "currency": "EUR"}})),
        );
        let base = shapes(
            (0..50).map(|i| json!({"payload": {"amount": 10.5 + i as f64, "currency": "EUR"}})),
        );
        let d = differences(&group, &base, true);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0].line,
            "/payload/amount: string \"1,500.00\"-like in 30 of 30; number in 50 of 50 baseline letters"
        );
        assert_eq!(
            d[0].change,
            Change::Type {
                from: Kind::Number,
                to: Kind::GroupedNumberText
            }
        );
    }

    #[test]
    fn a_format_change_and_a_writer_schema_are_differences() {
        let mut group = shapes((0..10).map(|_| json!({"due": "2026-09-21"})));
        let mut base = shapes((0..20).map(|_| json!({"due": "2026-09-21T10:00:00Z"})));
        group.writers.insert("avro Payout v2 (id 102)".into(), 10);
        base.writers.insert("avro Payout v1 (id 101)".into(), 20);
        let lines: Vec<String> = differences(&group, &base, true)
            .into_iter()
            .map(|d| d.line)
            .collect();
        assert_eq!(
            lines,
            [
                "/due: string date in 10 of 10; string RFC 3339 time in 20 of 20 baseline letters",
                "writer schema: avro Payout v2 (id 102) in 10 of 10; avro Payout v1 (id 101) in 20 of 20 baseline letters",
            ]
        );
    }

    /// Against a "baseline" of other failing letters fewer than the group, the group is
    /// the normal one: the difference is theirs and is not said (nor fixed) here.
    #[test]
    fn the_group_must_be_the_odd_one_out() {
        let mut group = shapes((0..40).map(|i| json!({"amount": 10.5 + i as f64})));
        let mut base = shapes((0..10).map(|_| json!({"amount": "1,500.00"})));
        assert!(differences(&group, &base, true).is_empty());
        // Samples stand for their populations: 40 read of 40 against 10 read of 4,000.
        base.population = 4_000;
        assert_eq!(differences(&group, &base, true).len(), 1);
        group.population = 9_000;
        assert!(differences(&group, &base, true).is_empty());
    }

    #[test]
    fn renames_missing_fields_and_new_enum_values_are_found() {
        let group = shapes(
            (0..10).map(|_| json!({"p": {"total": 1.5, "state": "ON_HOLD"}, "x": {"a": 1}})),
        );
        let base = shapes((0..20).map(|i| {
            json!({"p": {"amount": 1.5, "state": if i % 2 == 0 { "OPEN" } else { "PAID" }, "due": "2026-09-21"}})
        }));
        let d = differences(&group, &base, true);
        let lines: Vec<&str> = d.iter().map(|d| d.line.as_str()).collect();
        assert_eq!(
            lines,
            [
                "/p/total: number in 10 of 10 where the baseline has /p/amount (20 of 20) — renamed?",
                "/p/due: missing in 10 of 10; string date in 20 of 20 baseline letters",
                "/x: object in 10 of 10; not in the baseline's letters",
                "/p/state: values never in the baseline: \"ON_HOLD\", in 10 of 10; the baseline's 2 values in 20 of 20",
            ],
            "children of a new object are not listed again"
        );
        // A role that may not see payloads learns the number of new values, not them.
        let d = differences(&group, &base, false);
        let last = d.last().expect("a difference");
        assert!(last
            .line
            .starts_with("/p/state: 1 values never in the baseline, in 10 of 10"));
        assert!(!last.line.contains("ON_HOLD"));
    }

    #[test]
    fn hostile_keys_and_depth_are_bounded() {
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!({ "a": deep });
        }
        let mut s = Shapes::default();
        s.add_value(&deep);
        s.add_value(&json!({"\u{1b}[31mred/x~": 1}));
        s.add_masked("not json");
        assert!(s
            .paths
            .keys()
            .all(|p| p.matches('/').count() <= MAX_DEPTH + 1));
        assert!(
            s.paths.contains_key("/[31mred~1x~0") || s.paths.keys().any(|k| k.contains("~1x~0"))
        );
        assert!(s.paths.keys().all(|k| !k.contains('\u{1b}')));
        assert_eq!((s.letters, s.unreadable), (2, 1));
    }
}
