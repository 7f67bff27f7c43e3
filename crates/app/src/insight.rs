//! "Why", for one group: since when and with which release, what is different about its
//! letters against a baseline, and the program that would repair it — assembled once
//! for every front end from `core::insight`.
//!
//! The baseline is the letters of the *other* groups that carry the group's event type
//! (any other letters when the group has none): letters that reached the same consumer
//! and failed for another reason, so whatever their payloads share and the group's do
//! not is a candidate cause. Only letters whose bytes are at hand are read, a bounded
//! sample of each side, each through the masked view the role is shown.

use dlq_core::access::{Permission, Role};
use dlq_core::catalog::Catalog;
use dlq_core::insight::fix::{suggest, Suggestion};
use dlq_core::insight::shape::{differences, Change, Difference, Shapes};
use dlq_core::insight::since::{since_when, SinceWhen};
use dlq_core::masking::Layout;
use dlq_core::model::DeadLetter;
use dlq_core::model::Origin;
use dlq_core::ports::OriginLog;
use dlq_core::store::{RowId, NO_TIME};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Letters of the group read for its shape, at most.
pub const GROUP_SAMPLE: usize = 400;
/// Baseline letters read, at most.
pub const BASELINE_SAMPLE: usize = 1_500;
/// A payload bigger than this is not read for its shape.
const SHAPE_PAYLOAD_MAX: usize = 256 * 1024;

/// What the payloads say, when the role may see them.
#[derive(Debug, Clone, Serialize)]
pub struct Payloads {
    /// Letters read of the group, and how many it has.
    pub group_read: (usize, usize),
    pub baseline_read: usize,
    /// The baseline in words.
    pub baseline: String,
    pub differences: Vec<Difference>,
    pub suggestion: Option<Suggestion>,
}

/// The answers after "what is failing", for one group.
#[derive(Debug, Clone, Serialize)]
pub struct Insight {
    pub since: SinceWhen,
    /// `Err`: why the payloads are not compared (the role, nothing in memory). As JSON:
    /// the comparison, or `{"not_compared": why}`.
    #[serde(serialize_with = "compared_or_why")]
    pub payloads: Result<Payloads, String>,
}

fn compared_or_why<S: serde::Serializer>(
    p: &Result<Payloads, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match p {
        Ok(p) => p.serialize(s),
        Err(why) => serde_json::json!({ "not_compared": why }).serialize(s),
    }
}

/// The group `rows` of `catalog`; `letter` gives a letter's bytes when they are at
/// hand (the TUI's payload cache, a CLI scan). The baseline is the other groups'
/// letters (see [`group_insight_with`] for the origin topic's records).
pub fn group_insight(
    catalog: &Catalog,
    rows: &[RowId],
    letter: &dyn Fn(RowId) -> Option<std::sync::Arc<DeadLetter>>,
    role: Role,
    now_ms: i64,
    steps: usize,
) -> Insight {
    group_insight_with(catalog, rows, letter, role, now_ms, steps, None)
}

/// As [`group_insight`], with a reader of the origin topics: where the letters name
/// their origin partition and offset, the records around those offsets are the
/// baseline — what the consumer read without failing.
pub fn group_insight_with(
    catalog: &Catalog,
    rows: &[RowId],
    letter: &dyn Fn(RowId) -> Option<std::sync::Arc<DeadLetter>>,
    role: Role,
    now_ms: i64,
    steps: usize,
    origin: Option<&mut dyn OriginLog>,
) -> Insight {
    let since = since_when(&catalog.store, rows, now_ms, steps);
    let payloads = match dlq_core::access::check(role, Permission::ViewPayload) {
        Err(_) => Err(format!(
            "payload differences need the {} role (you are {role}): payloads are hidden",
            Permission::ViewPayload.needs()
        )),
        Ok(()) => compare(catalog, rows, letter, origin),
    };
    Insight { since, payloads }
}

fn compare(
    catalog: &Catalog,
    rows: &[RowId],
    letter: &dyn Fn(RowId) -> Option<std::sync::Arc<DeadLetter>>,
    origin: Option<&mut dyn OriginLog>,
) -> Result<Payloads, String> {
    let store = &catalog.store;
    let kin = kin_of(catalog, rows);
    let mut member = vec![false; store.len()];
    for &r in rows {
        if let Some(m) = member.get_mut(r as usize) {
            *m = true;
        }
    }
    let others: Vec<RowId> = (0..store.len() as RowId)
        .filter(|&i| !member[i as usize])
        .filter(|&i| {
            kin.as_ref()
                .is_none_or(|k| store.row(i).is_some_and(|r| k.holds(r)))
        })
        .collect();
    let shapes = |ids: &[RowId], most: usize| {
        let mut s = Shapes {
            population: ids.len(),
            ..Shapes::default()
        };
        for id in spread(ids, most, letter) {
            if let Some(dl) = letter(id) {
                add(catalog, &mut s, &dl);
            }
        }
        s
    };
    let group = shapes(rows, GROUP_SAMPLE);
    if group.letters == 0 {
        return Err(if group.unreadable > 0 {
            "the group's payloads are not JSON: no shape to compare".into()
        } else {
            "none of the group's letters' bytes are in memory".into()
        });
    }
    let sampled: Vec<std::sync::Arc<DeadLetter>> = spread(rows, GROUP_SAMPLE, letter)
        .into_iter()
        .filter_map(letter)
        .collect();
    let (base, baseline) = match origin.and_then(|o| origin_baseline(catalog, &sampled, o)) {
        Some(found) => found,
        None => (
            shapes(&others, BASELINE_SAMPLE),
            match &kin {
                Some(k) => k.describe(store),
                None => "letters of the other groups".into(),
            },
        ),
    };
    let mut diffs = differences(&group, &base, true);
    // The failure's own fields (the reason code in an envelope) differ by definition.
    let own = own_labels(catalog, rows);
    diffs.retain(|d| match &d.change {
        Change::NewValues { values, .. } => !values.iter().all(|v| own.contains(v)),
        _ => true,
    });
    Ok(Payloads {
        group_read: (group.letters, rows.len()),
        baseline_read: base.letters,
        baseline,
        suggestion: suggest(&diffs),
        differences: diffs,
    })
}

/// Records read around each failed offset, per origin partition.
const ORIGIN_SPAN: i64 = 10;
/// Origin records read at most, over all partitions.
const ORIGIN_BUDGET: usize = 2_000;
/// Fewer healthy records than this are no baseline.
const ORIGIN_ENOUGH: usize = 10;

/// The origin topic's records around the failed offsets, when the letters name them
/// and carry the record itself (not an envelope around it): healthy by construction.
fn origin_baseline(
    catalog: &Catalog,
    sampled: &[std::sync::Arc<DeadLetter>],
    log: &mut dyn OriginLog,
) -> Option<(Shapes, String)> {
    let mut at: BTreeMap<(String, i32), Vec<i64>> = BTreeMap::new();
    for dl in sampled {
        let enveloped = dl
            .failure
            .reason_code
            .as_ref()
            .is_some_and(|r| r.from.location.starts_with("body "));
        if enveloped {
            return None;
        }
        // Exact, from the raw letter: the extracted fields are masked for display.
        let exact = dlq_core::conventions::extract(dl.raw.clone(), catalog.mappings());
        if let Some(Origin::Kafka {
            topic,
            partition: Some(p),
            offset: Some(o),
        }) = exact.failure.origin.map(|o| o.value)
        {
            at.entry((topic, p)).or_default().push(o);
        }
    }
    let per = ORIGIN_BUDGET / at.len().max(1);
    let mut shapes = Shapes {
        healthy: true,
        ..Shapes::default()
    };
    let mut topics = BTreeSet::new();
    for ((topic, p), offsets) in at.iter().take(32) {
        let Ok(records) = log.around(topic, *p, offsets, ORIGIN_SPAN, per) else {
            continue;
        };
        for raw in records {
            let (dl, _) =
                dlq_core::catalog::prepare_letter(catalog.masker(), catalog.mappings(), raw);
            add(catalog, &mut shapes, &dl);
        }
        topics.insert(dlq_core::sanitize::clean(topic));
    }
    (shapes.letters >= ORIGIN_ENOUGH).then(|| {
        let said = format!(
            "records of {} around the failed offsets (read by assignment, nothing committed)",
            topics.into_iter().collect::<Vec<_>>().join(", ")
        );
        (shapes, said)
    })
}

/// What the group's letters were grouped and told by (reasons, versions, exceptions,
/// consumers): values an envelope repeats, not differences of the payload.
fn own_labels(catalog: &Catalog, rows: &[RowId]) -> std::collections::HashSet<String> {
    let store = &catalog.store;
    let mut out = std::collections::HashSet::new();
    for r in rows.iter().filter_map(|&r| store.row(r)) {
        for sym in [r.reason, r.version, r.exception, r.consumer] {
            if out.len() < 10_000 {
                out.insert(store.sym(sym).to_string());
            }
        }
    }
    out
}

/// What the baseline's letters share with the group: its event type, else the topic
/// or queue it sits in.
enum Kin {
    Event(u32),
    Container(u32),
}

impl Kin {
    fn holds(&self, r: &dlq_core::store::Row) -> bool {
        match self {
            Kin::Event(e) => r.event == *e,
            Kin::Container(c) => r.container == *c,
        }
    }

    fn describe(&self, store: &dlq_core::store::LetterStore) -> String {
        let clean = |s: u32| dlq_core::sanitize::clean(store.sym(s));
        match self {
            Kin::Event(e) => format!("letters of other groups with event type {}", clean(*e)),
            Kin::Container(c) => format!("letters of other groups in {}", clean(*c)),
        }
    }
}

/// The event type most of the group carries, else the container most of it sits in.
fn kin_of(catalog: &Catalog, rows: &[RowId]) -> Option<Kin> {
    let store = &catalog.store;
    let most = |f: &dyn Fn(&dlq_core::store::Row) -> u32| {
        let mut n: HashMap<u32, usize> = HashMap::new();
        for r in rows.iter().filter_map(|&r| store.row(r)) {
            *n.entry(f(r)).or_default() += 1;
        }
        n.into_iter()
            .max_by_key(|(e, c)| (*c, std::cmp::Reverse(*e)))
            .map(|(e, _)| e)
            .filter(|e| !store.sym(*e).is_empty())
    };
    most(&|r| r.event)
        .map(Kin::Event)
        .or_else(|| most(&|r| r.container).map(Kin::Container))
}

/// Up to `most` of `ids` whose bytes are at hand, spread over the list (not just its
/// first letters, which may all be from one hour).
fn spread(
    ids: &[RowId],
    most: usize,
    letter: &dyn Fn(RowId) -> Option<std::sync::Arc<DeadLetter>>,
) -> Vec<RowId> {
    let at_hand: Vec<RowId> = ids
        .iter()
        .copied()
        .filter(|i| letter(*i).is_some())
        .collect();
    let step = (at_hand.len() / most.max(1)).max(1);
    at_hand.into_iter().step_by(step).take(most).collect()
}

/// One letter's payload through the masked view, into the shapes.
fn add(catalog: &Catalog, shapes: &mut Shapes, dl: &DeadLetter) {
    if let Some(d) = dl.schema.as_ref().and_then(|s| s.decoded()) {
        *shapes.writers.entry(d.schema.describe()).or_default() += 1;
    }
    let bytes = dl.readable_payload();
    if bytes.len() > SHAPE_PAYLOAD_MAX {
        shapes.unreadable += 1;
        return;
    }
    match catalog
        .masker()
        .mask_json(bytes, Layout::Compact, SHAPE_PAYLOAD_MAX * 2)
    {
        Ok((masked, false)) => shapes.add_masked(&masked),
        _ => shapes.unreadable += 1,
    }
}

impl Insight {
    /// The insight as lines for a terminal, `width` columns wide for the timeline.
    pub fn lines(&self, now_ms: i64) -> Vec<String> {
        let s = &self.since;
        let mut out = vec![s.sentence.clone(), String::new()];
        if let Some(first) = s.first_ms.filter(|f| *f != NO_TIME) {
            out.push(format!(
                "failures over the last {}, one mark per {}:",
                dlq_core::timefmt::format_age_ms(now_ms - first),
                dlq_core::timefmt::format_age_ms(s.step_ms)
            ));
            let w = s.versions.iter().map(|v| v.version.chars().count()).max();
            let w = w.unwrap_or(0).min(28);
            for v in &s.versions {
                out.push(format!(
                    "  {:<w$}  {}  {:>6}  last {} ago",
                    dlq_core::sanitize::line(&v.version, 28),
                    v.sparkline(),
                    v.count,
                    dlq_core::timefmt::format_age_ms(now_ms - v.last_ms)
                ));
            }
            if s.untimed > 0 {
                out.push(format!("  ({} without a time)", s.untimed));
            }
            out.push(String::new());
        }
        match &self.payloads {
            Err(why) => out.push(why.clone()),
            Ok(p) => p.lines(&mut out),
        }
        out
    }
}

impl Payloads {
    fn lines(&self, out: &mut Vec<String>) {
        out.push(format!(
            "what is different ({} of {} letters read; baseline: {} {}):",
            self.group_read.0, self.group_read.1, self.baseline_read, self.baseline
        ));
        if self.baseline_read == 0 {
            out.push("  no baseline letters in memory to compare with".into());
        } else if self.differences.is_empty() {
            out.push("  nothing sets these payloads apart from the baseline's".into());
        }
        for d in &self.differences {
            out.push(format!("  {}", d.line));
        }
        if let Some(s) = &self.suggestion {
            out.push(String::new());
            out.push("suggested fix (a dry-run first; nothing is recorded without you):".into());
            for r in &s.repairs {
                out.push(format!("  {r}"));
            }
            out.push(format!("  {}", s.program));
        }
    }
}
