//! Since when, and with which release: a group's failures over time split by consumer
//! version, and the sentence an on-call engineer would write from them ("started 5h58m
//! ago with release-2026-09-21; no letter of release-2026-09-14 since 20h ago").
//!
//! The versions are the ones the conventions extracted (headers or the envelope), as
//! the group tree shows them; whether a version also failed *other* letters earlier is
//! read from the rest of the scan, which tells a release that broke something from a
//! release that was already running when something upstream changed.

use crate::grouping::sparkline;
use crate::store::{LetterStore, RowId, Sym, NO_TIME};
use crate::timefmt::format_age_ms;
use serde::Serialize;
use std::collections::HashMap;

/// A version that ran this long before a group began, failing other letters, did not
/// start it.
const ALREADY_RUNNING_MS: i64 = 15 * 60_000;

/// One consumer version's share of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionSpan {
    /// `(no version)` when the letters do not say.
    pub version: String,
    pub count: usize,
    pub first_ms: i64,
    pub last_ms: i64,
    /// Letters per step of the group's timeline.
    pub timeline: Vec<u32>,
}

impl VersionSpan {
    /// The timeline as a sparkline, one character per step.
    pub fn sparkline(&self) -> String {
        sparkline(&self.timeline)
    }
}

/// A group's failures over time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SinceWhen {
    /// Letters with a known time.
    pub timed: usize,
    /// Letters without one (not in the timeline).
    pub untimed: usize,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// The version of the newest letter first, then by last letter, newest first.
    pub versions: Vec<VersionSpan>,
    /// The timeline runs from `first_ms` to now in steps of this many ms.
    pub step_ms: i64,
    /// What stands out, in words.
    pub sentence: String,
}

/// When each consumer version first failed any letter of a store: read once for all
/// the groups of a summary (a pass over every row per group was ~4% of a 1,000,000-
/// letter `summary`, and its membership table zeroed a megabyte per group).
pub struct VersionFirsts(HashMap<Sym, i64>);

impl VersionFirsts {
    pub fn of(store: &LetterStore) -> Self {
        let mut first: HashMap<Sym, i64> = HashMap::new();
        for r in store.rows().iter().filter(|r| r.at_ms != NO_TIME) {
            let e = first.entry(r.version).or_insert(r.at_ms);
            *e = (*e).min(r.at_ms);
        }
        VersionFirsts(first)
    }
}

/// The group `rows` of `store`, its timeline in `steps` steps up to `now_ms`.
pub fn since_when(store: &LetterStore, rows: &[RowId], now_ms: i64, steps: usize) -> SinceWhen {
    since_when_in(&VersionFirsts::of(store), store, rows, now_ms, steps)
}

/// [`since_when`] with the versions' first failures read beforehand (for many groups).
pub fn since_when_in(
    firsts: &VersionFirsts,
    store: &LetterStore,
    rows: &[RowId],
    now_ms: i64,
    steps: usize,
) -> SinceWhen {
    let steps = steps.max(1);
    let mut spans: HashMap<Sym, (usize, i64, i64)> = HashMap::new();
    let mut untimed = 0;
    for &id in rows {
        let Some(r) = store.row(id) else { continue };
        if r.at_ms == NO_TIME {
            untimed += 1;
            continue;
        }
        let e = spans.entry(r.version).or_insert((0, i64::MAX, i64::MIN));
        *e = (e.0 + 1, e.1.min(r.at_ms), e.2.max(r.at_ms));
    }
    let timed: usize = spans.values().map(|s| s.0).sum();
    let first = spans.values().map(|s| s.1).min();
    let last = spans.values().map(|s| s.2).max();
    let step_ms = first.map_or(1, |f| ((now_ms.max(f) - f) / steps as i64 + 1).max(1));
    let mut versions: Vec<(Sym, VersionSpan)> = spans
        .iter()
        .map(|(&sym, &(count, first_ms, last_ms))| {
            (
                sym,
                VersionSpan {
                    version: label(store, sym),
                    count,
                    first_ms,
                    last_ms,
                    timeline: vec![0; steps],
                },
            )
        })
        .collect();
    versions.sort_by(|a, b| {
        (b.1.last_ms, b.1.count, &a.1.version).cmp(&(a.1.last_ms, a.1.count, &b.1.version))
    });
    fill_timelines(store, rows, first.unwrap_or(0), step_ms, &mut versions);
    // The newest version's first failure anywhere: when it is earlier than the group's
    // first letter of it, that letter is outside the group (the only case the sentence
    // reads).
    let elsewhere = versions
        .first()
        .and_then(|(sym, v)| firsts.0.get(sym).copied().filter(|e| *e < v.first_ms));
    let versions: Vec<VersionSpan> = versions.into_iter().map(|(_, v)| v).collect();
    let sentence = sentence(&versions, elsewhere, now_ms);
    SinceWhen {
        timed,
        untimed,
        first_ms: first,
        last_ms: last,
        versions,
        step_ms,
        sentence,
    }
}

fn label(store: &LetterStore, sym: Sym) -> String {
    match store.sym(sym) {
        "" => "(no version)".to_string(),
        v => crate::sanitize::clean(v),
    }
}

fn fill_timelines(
    store: &LetterStore,
    rows: &[RowId],
    from_ms: i64,
    step_ms: i64,
    versions: &mut [(Sym, VersionSpan)],
) {
    let at: HashMap<Sym, usize> = versions.iter().enumerate().map(|(i, v)| (v.0, i)).collect();
    for &id in rows {
        let Some(r) = store.row(id).filter(|r| r.at_ms != NO_TIME) else {
            continue;
        };
        let Some(v) = at.get(&r.version).map(|&i| &mut versions[i].1) else {
            continue;
        };
        let step = ((r.at_ms - from_ms).max(0) / step_ms) as usize;
        let last = v.timeline.len() - 1;
        v.timeline[step.min(last)] += 1;
    }
}

/// What stands out: when the newest version's letters began, the versions that stopped
/// failing since, and whether the newest version was already running before.
fn sentence(versions: &[VersionSpan], elsewhere: Option<i64>, now_ms: i64) -> String {
    let ago = |ms: i64| format_age_ms(now_ms - ms);
    let Some(cur) = versions.first() else {
        return "no failure time is known for these letters".into();
    };
    let mut parts = Vec::new();
    if versions.len() == 1 {
        parts.push(format!(
            "since {} ago, all {} with {}",
            ago(cur.first_ms),
            cur.count,
            cur.version
        ));
    } else {
        parts.push(format!(
            "started {} ago with {}",
            ago(cur.first_ms),
            cur.version
        ));
        for w in &versions[1..] {
            if w.last_ms < cur.first_ms {
                parts.push(format!(
                    "no letter of {} since {} ago",
                    w.version,
                    ago(w.last_ms)
                ));
            } else {
                parts.push(format!(
                    "{} fails too ({}, last {} ago)",
                    w.version,
                    w.count,
                    ago(w.last_ms)
                ));
            }
        }
    }
    if let Some(e) = elsewhere.filter(|e| *e <= cur.first_ms - ALREADY_RUNNING_MS) {
        parts.push(format!(
            "{} was already failing other letters {} before these began: look upstream (a producer, the data)",
            cur.version,
            format_age_ms(cur.first_ms - e)
        ));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::prepare_letter;
    use crate::masking::Masker;
    use crate::model::{Header, HeaderValue, RawLetter};

    const NOW: i64 = 1_764_000_000_000;
    const MIN: i64 = 60_000;

    /// Letters of (reason, version, minutes ago), in a store.
    fn store(letters: &[(&str, &str, i64)]) -> LetterStore {
        let masker = Masker::with_key(vec![1]);
        let mut s = LetterStore::new();
        for (reason, version, ago) in letters {
            let raw = RawLetter {
                headers: vec![
                    Header::new("x-reason-code", HeaderValue::text(reason)),
                    Header::new("x-consumer-version", HeaderValue::text(version)),
                ],
                payload: b"{}".to_vec(),
                timestamp: chrono::DateTime::from_timestamp_millis(NOW - ago * MIN),
                ..RawLetter::default()
            };
            let (dl, preview) = prepare_letter(&masker, &[], raw);
            s.push(&dl, &preview);
        }
        s
    }

    fn of_reason(s: &LetterStore, reason: &str) -> Vec<RowId> {
        (0..s.len() as RowId)
            .filter(|&i| s.row(i).is_some_and(|r| s.sym(r.reason) == reason))
            .collect()
    }

    #[test]
    fn a_group_names_the_release_it_started_with_and_the_one_that_stopped() {
        let s = store(&[
            ("tax", "r-14", 3 * 24 * 60),
            ("tax", "r-14", 20 * 60),
            ("tax", "r-21", 6 * 60),
            ("tax", "r-21", 2),
        ]);
        let w = since_when(&s, &of_reason(&s, "tax"), NOW, 12);
        assert_eq!(
            w.sentence,
            "started 6h ago with r-21; no letter of r-14 since 20h ago"
        );
        assert_eq!((w.timed, w.untimed), (4, 0));
        assert_eq!(w.versions[0].version, "r-21");
        assert_eq!(w.versions[0].timeline.iter().sum::<u32>(), 2);
        assert_eq!(
            w.versions[1].timeline[0], 1,
            "the oldest letter is in step 0"
        );
        assert_eq!(
            w.versions[0].timeline[11], 1,
            "the newest is in the last step"
        );
    }

    /// A release that was failing other letters hours before this group began did not
    /// start it: the sentence points upstream.
    #[test]
    fn a_release_already_running_points_upstream() {
        let s = store(&[
            ("tax", "r-21", 6 * 60),
            ("amount", "r-21", 2 * 60),
            ("amount", "r-21", 1),
        ]);
        let w = since_when(&s, &of_reason(&s, "amount"), NOW, 8);
        assert_eq!(
            w.sentence,
            "since 2h ago, all 2 with r-21; r-21 was already failing other letters 4h before these began: look upstream (a producer, the data)"
        );
        // The tax group itself began with r-21: nothing upstream to say.
        let w = since_when(&s, &of_reason(&s, "tax"), NOW, 8);
        assert_eq!(w.sentence, "since 6h ago, all 1 with r-21");
    }

    #[test]
    fn overlapping_versions_and_no_times_are_said_plainly() {
        let s = store(&[("x", "a", 50), ("x", "b", 40), ("x", "a", 10)]);
        let w = since_when(&s, &of_reason(&s, "x"), NOW, 4);
        assert_eq!(
            w.sentence,
            "started 50m ago with a; b fails too (1, last 40m ago)"
        );
        let w = since_when(&s, &[], NOW, 4);
        assert_eq!(w.sentence, "no failure time is known for these letters");
        assert!(w.first_ms.is_none() && w.versions.is_empty());
    }
}
