//! A moved clock must leave the index exactly as a rebuild at the new time would.

use super::*;
use crate::conventions::extract;
use crate::model::{Coords, Header, HeaderValue, RawLetter};
use crate::retention::{by_symbol, Retention};
use proptest::prelude::*;

const NOW: i64 = 1_790_000_000_000;
const MIN: i64 = 60_000;

fn letter(reason: &str, event: &str, topic: &str, at_ms: i64) -> RawLetter {
    RawLetter {
        headers: vec![
            Header::new("x-reason-code", HeaderValue::text(reason)),
            Header::new("x-event-type", HeaderValue::text(event)),
        ],
        coords: Some(Coords::Kafka {
            topic: topic.into(),
            partition: 0,
            offset: 0,
        }),
        timestamp: chrono::DateTime::from_timestamp_millis(at_ms),
        ..RawLetter::default()
    }
}

/// Everything a rebuild computes, in a comparable form (event types are "seen", so
/// the moved index may keep more of them).
/// A group as a rebuild computes it: labels, count, members, oldest, newest,
/// deletion, last hour, sparkline.
type Seen = (
    Vec<String>,
    u64,
    Vec<RowId>,
    i64,
    i64,
    i64,
    u64,
    [u32; SPARK_BUCKETS],
);

fn snapshot(idx: &GroupIndex, store: &LetterStore) -> Vec<Seen> {
    let mut v: Vec<_> = idx
        .sorted(store)
        .into_iter()
        .map(|(k, g)| {
            let mut members = g.members.clone();
            members.sort_unstable();
            assert_eq!(members, g.members, "members stay in row order");
            let times: Vec<i64> = g
                .members
                .iter()
                .map(|id| store.row(*id).map_or(NO_TIME, |r| r.at_ms))
                .collect();
            assert_eq!(times, g.member_times, "times stay beside their members");
            (
                idx.labels(store, &k),
                g.count,
                members,
                g.oldest_ms,
                g.newest_ms,
                g.expires_ms,
                g.last_hour,
                g.spark,
            )
        })
        .collect();
    v.sort();
    v
}

fn filters() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "",
        "age<10m",
        "age>=1h age<2d",
        "age>3m reason=a|c",
        "age<=7m",
        "reason=b",
    ])
}

fn dims() -> impl Strategy<Value = Vec<Dim>> {
    prop::sample::select(vec![
        vec![Dim::Age],
        vec![Dim::Reason, Dim::Age],
        vec![Dim::Reason, Dim::Event, Dim::Age],
        vec![Dim::Reason],
        vec![Dim::Event, Dim::Container],
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Letters of any age (some in the future, some without a time), arriving out of
    /// order and between readings, two topics with different retention: after every
    /// step of the clock (a second to two days), the moved index equals a rebuild.
    #[test]
    fn a_moved_clock_equals_a_rebuild(
        ages in prop::collection::vec((0u8..4, 0u8..3, -10 * MIN..10 * 24 * 60 * MIN), 1..120),
        later in prop::collection::vec((0u8..4, -2 * MIN..90 * MIN), 0..40),
        steps in prop::collection::vec(prop::sample::select(vec![1_000, 59_000, 60_000, 5 * MIN + 1, 47 * MIN, 26 * 60 * MIN, 2 * 24 * 60 * MIN]), 1..12),
        filter_text in filters(),
        dims in dims(),
    ) {
        let mut store = LetterStore::new();
        let rules = vec![
            ("fast.dlq".to_string(), Retention::After { ms: 3 * 60 * MIN, basis: String::new() }),
            ("slow.dlq".to_string(), Retention::After { ms: 9 * 24 * 60 * MIN, basis: String::new() }),
        ];
        let retention = by_symbol(&mut store, &rules);
        let push = |store: &mut LetterStore, reason: u8, event: u8, at: i64| {
            let topic = if reason.is_multiple_of(2) { "fast.dlq" } else { "slow.dlq" };
            let mut l = letter(["a", "b", "c", "d"][reason as usize % 4], ["e1", "e2", "e3"][event as usize % 3], topic, at);
            if at.rem_euclid(7) == 0 {
                l.timestamp = None; // no time known: never moves
            }
            store.push(&extract(l, &[]), "")
        };
        for (reason, event, age) in &ages {
            push(&mut store, *reason, *event, NOW - age);
        }
        let mut filter = Filter::parse(filter_text).expect("valid filter");
        let mut idx = GroupIndex::build_with(&store, &dims, NOW, Some(&mut filter), retention.clone());
        let mut now = NOW;
        let mut arrivals = later.iter();
        for step in steps {
            if let Some((reason, age)) = arrivals.next() {
                let id = push(&mut store, *reason, 1, now - age);
                let r = *store.row(id).expect("just pushed");
                if filter.matches(&store, &r, now) {
                    idx.add(id, &r);
                }
            }
            now += step;
            idx.advance(&mut store, Some(&mut filter), now);
            let rebuilt = GroupIndex::build_with(&store, &dims, now, Some(&mut filter), retention.clone());
            prop_assert_eq!(idx.total(), rebuilt.total());
            prop_assert_eq!(snapshot(&idx, &store), snapshot(&rebuilt, &store));
        }
    }
}

/// A second that moves no letter across anything changes nothing; one that moves a
/// letter out of `<5m` regroups; one that only slides the sparkline says so.
#[test]
fn a_tick_says_what_it_changed() {
    let mut store = LetterStore::new();
    // 4m59s old at NOW: it turns five minutes old a second later.
    store.push(
        &extract(letter("a", "e", "t", NOW - 5 * MIN + 1_000), &[]),
        "",
    );
    let mut idx = GroupIndex::build(&store, &[Dim::Age], NOW, None);
    assert_eq!(idx.advance(&mut store, None, NOW), Advanced::default());
    let moved = idx.advance(&mut store, None, NOW + 1_000);
    assert!(moved.regrouped, "{moved:?}");
    let labels: Vec<String> = idx
        .sorted(&store)
        .iter()
        .map(|(k, _)| idx.labels(&store, k).join(""))
        .collect();
    assert_eq!(labels, ["5m-1h"]);
    // By reason only, the same crossing only slides the sparkline.
    let mut by_reason = GroupIndex::build(&store, &[Dim::Reason], NOW, None);
    let slid = by_reason.advance(&mut store, None, NOW + 1_000);
    assert_eq!(
        slid,
        Advanced {
            regrouped: false,
            inflow: true
        }
    );
    let quiet = by_reason.advance(&mut store, None, NOW + 2_000);
    assert!(!quiet.any(), "{quiet:?}");
}

/// A stepped-back system clock regroups from scratch rather than un-ageing letters.
#[test]
fn a_clock_that_goes_back_regroups() {
    let mut store = LetterStore::new();
    store.push(&extract(letter("a", "e", "t", NOW - 6 * MIN), &[]), "");
    let mut idx = GroupIndex::build(&store, &[Dim::Age], NOW, None);
    idx.advance(&mut store, None, NOW - 2 * MIN);
    let labels: Vec<String> = idx
        .sorted(&store)
        .iter()
        .map(|(k, _)| idx.labels(&store, k).join(""))
        .collect();
    assert_eq!(labels, ["<5m"]);
}

/// `age<=7m` holds at exactly seven minutes and not a millisecond later; `age>7m` the
/// other way round.
#[test]
fn inclusive_age_terms_turn_at_their_exact_millisecond() {
    let mut store = LetterStore::new();
    store.push(&extract(letter("a", "e", "t", NOW - 7 * MIN), &[]), "");
    for (text, before, after) in [("age<=7m", 1, 0), ("age>7m", 0, 1)] {
        let mut f = Filter::parse(text).expect("valid");
        let mut idx = GroupIndex::build(&store, &[Dim::Reason], NOW, Some(&mut f));
        assert_eq!(idx.total(), before, "{text}");
        idx.advance(&mut store, Some(&mut f), NOW + 1);
        assert_eq!(idx.total(), after, "{text}");
    }
}
