//! The incremental group index: counts, oldest/newest, inflow and a one-hour sparkline per
//! group, for any combination of dimensions. Adding a letter is O(1); changing the
//! grouping or the clock is one pass over the compact rows.

use crate::filter::Filter;
use crate::model::TriageState;
use crate::store::{LetterStore, Row, RowId, Sym, NO_TIME};
use crate::timefmt::AgeBucket;
use std::collections::HashMap;

mod clock;
pub use clock::Advanced;

/// A grouping dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dim {
    Reason,
    Version,
    Age,
    Event,
    Schema,
    Origin,
    Consumer,
    Exception,
    State,
    Container,
}

impl Dim {
    pub const ALL: [Dim; 10] = [
        Dim::Reason,
        Dim::Version,
        Dim::Age,
        Dim::Event,
        Dim::Schema,
        Dim::Origin,
        Dim::Consumer,
        Dim::Exception,
        Dim::State,
        Dim::Container,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dim::Reason => "reason",
            Dim::Version => "version",
            Dim::Age => "age",
            Dim::Event => "event",
            Dim::Schema => "schema",
            Dim::Origin => "origin",
            Dim::Consumer => "consumer",
            Dim::Exception => "exception",
            Dim::State => "state",
            Dim::Container => "topic",
        }
    }

    /// The key this dimension has in `summary --json` groups.
    pub fn json_key(self) -> &'static str {
        match self {
            Dim::Reason => "reason_code",
            Dim::Version => "consumer_version",
            Dim::Age => "age_bucket",
            Dim::Event => "event_type",
            Dim::Schema => "schema_version",
            Dim::Origin => "origin",
            Dim::Consumer => "consumer",
            Dim::Exception => "exception_type",
            Dim::State => "state",
            Dim::Container => "topic",
        }
    }

    pub fn parse(s: &str) -> Option<Dim> {
        match s.trim() {
            "reason" | "reason_code" => Some(Dim::Reason),
            "version" | "consumer_version" => Some(Dim::Version),
            "age" | "age_bucket" => Some(Dim::Age),
            "event" | "event_type" => Some(Dim::Event),
            "schema" | "schema_version" => Some(Dim::Schema),
            "origin" => Some(Dim::Origin),
            "consumer" => Some(Dim::Consumer),
            "exception" | "exception_type" => Some(Dim::Exception),
            "state" => Some(Dim::State),
            "topic" | "queue" => Some(Dim::Container),
            _ => None,
        }
    }

    /// Parse `reason,version,age`.
    pub fn parse_list(s: &str) -> Result<Vec<Dim>, String> {
        let mut dims = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let d = Dim::parse(part).ok_or_else(|| {
                let known: Vec<_> = Dim::ALL.iter().map(|d| d.name()).collect();
                format!(
                    "unknown group dimension `{part}` (known: {})",
                    known.join(", ")
                )
            })?;
            if dims.contains(&d) {
                return Err(format!("group dimension `{part}` is listed twice"));
            }
            dims.push(d);
        }
        if dims.is_empty() {
            return Err("--group-by needs at least one dimension, e.g. reason,version,age".into());
        }
        if dims.len() > MAX_DIMS {
            return Err(format!("at most {MAX_DIMS} group dimensions"));
        }
        Ok(dims)
    }

    pub fn value(self, r: &Row, now_ms: i64) -> u32 {
        match self {
            Dim::Reason => r.reason,
            Dim::Version => r.version,
            Dim::Age => age_bucket(r, now_ms) as u32,
            Dim::Event => r.event,
            Dim::Schema => r.schema,
            Dim::Origin => r.origin,
            Dim::Consumer => r.consumer,
            Dim::Exception => r.exception,
            Dim::State => r.state as u32,
            Dim::Container => r.container,
        }
    }

    /// Display label of a dimension value.
    pub fn label(self, store: &LetterStore, v: u32) -> String {
        match self {
            Dim::Age => AgeBucket::from_index(v).label().to_string(),
            Dim::State => TriageState::ALL
                .get(v as usize)
                .map_or("?", |s| s.as_str())
                .to_string(),
            _ => store.sym(v).to_string(),
        }
    }

    /// The filter term that selects exactly this value: `reason="…"` with the label
    /// quoted and escaped, `age>=5m age<1h` for an age bucket. `None` for letters with no
    /// known time (no filter selects them by age).
    pub fn filter_term(self, store: &LetterStore, v: u32) -> Option<String> {
        if self == Dim::Age {
            return match AgeBucket::from_index(v) {
                AgeBucket::Under5m => Some("age<5m".into()),
                AgeBucket::M5ToH1 => Some("age>=5m age<1h".into()),
                AgeBucket::H1ToD1 => Some("age>=1h age<24h".into()),
                AgeBucket::D1ToD7 => Some("age>=24h age<7d".into()),
                AgeBucket::Over7d => Some("age>=7d".into()),
                AgeBucket::Unknown => None,
            };
        }
        Some(format!(
            "{}={}",
            self.name(),
            crate::filter::quote_value(&self.label(store, v))
        ))
    }
}

pub const DEFAULT_DIMS: [Dim; 3] = [Dim::Reason, Dim::Version, Dim::Age];

fn age_bucket(r: &Row, now_ms: i64) -> AgeBucket {
    if r.at_ms == NO_TIME {
        AgeBucket::Unknown
    } else {
        AgeBucket::of_age_ms(now_ms.saturating_sub(r.at_ms))
    }
}

pub const MAX_DIMS: usize = 6;

/// Values of the grouping dimensions for one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    vals: [u32; MAX_DIMS],
    len: u8,
}

impl GroupKey {
    pub fn values(&self) -> &[u32] {
        &self.vals[..self.len as usize]
    }
}

/// Minutes per sparkline bucket; 12 buckets cover the last hour.
pub const SPARK_BUCKET_MS: i64 = 5 * 60_000;
pub const SPARK_BUCKETS: usize = 12;
const HOUR_MS: i64 = 3_600_000;
const MAX_EVENT_TYPES: usize = 8;

#[derive(Debug, Clone)]
pub struct GroupStats {
    pub count: u64,
    /// Oldest/newest dead_lettered_at in epoch ms ([`NO_TIME`] if none known).
    pub oldest_ms: i64,
    pub newest_ms: i64,
    /// Letters dead-lettered within the last hour.
    pub last_hour: u64,
    /// Arrivals per 5 minutes over the last hour, oldest first.
    pub spark: [u32; SPARK_BUCKETS],
    /// Up to 8 distinct event types seen in the group (one whose letters have all aged
    /// out into another bucket may stay until the next regroup).
    pub event_types: Vec<Sym>,
    /// Rows in the group, in arrival (row id) order.
    pub members: Vec<RowId>,
    /// When the broker deletes the group's first letter (its retention from its time),
    /// or [`NO_TIME`] when none of its containers has a time limit known.
    pub expires_ms: i64,
    /// Each member's dead_lettered_at ([`NO_TIME`] if unknown), beside it: putting a
    /// big group's letters in time order then reads one array in order instead of every
    /// member's row in the store at random (the first visit of a 459,476-letter group
    /// took ~25 ms that way).
    pub member_times: Vec<i64>,
}

impl GroupStats {
    fn new() -> Self {
        GroupStats {
            count: 0,
            oldest_ms: NO_TIME,
            newest_ms: NO_TIME,
            expires_ms: NO_TIME,
            last_hour: 0,
            spark: [0; SPARK_BUCKETS],
            event_types: Vec::new(),
            members: Vec::new(),
            member_times: Vec::new(),
        }
    }

    /// Letters per minute over the last hour.
    pub fn inflow_per_min(&self) -> f64 {
        self.last_hour as f64 / 60.0
    }

    /// Count one more letter (appended to the members: callers add in row order).
    fn absorb(
        &mut self,
        row_id: RowId,
        r: &Row,
        now: i64,
        retention: &foldhash::HashMap<Sym, i64>,
    ) {
        self.count += 1;
        self.members.push(row_id);
        self.member_times.push(r.at_ms);
        self.take_times(r, now, retention);
        if r.event != 0
            && self.event_types.len() < MAX_EVENT_TYPES
            && !self.event_types.contains(&r.event)
        {
            self.event_types.push(r.event);
        }
    }

    /// The time-derived stats of one member: oldest, newest, deletion, last hour.
    fn take_times(&mut self, r: &Row, now: i64, retention: &foldhash::HashMap<Sym, i64>) {
        if r.at_ms == NO_TIME {
            return;
        }
        if self.oldest_ms == NO_TIME || r.at_ms < self.oldest_ms {
            self.oldest_ms = r.at_ms;
        }
        if self.newest_ms == NO_TIME || r.at_ms > self.newest_ms {
            self.newest_ms = r.at_ms;
        }
        if let Some(keep) = retention.get(&r.container) {
            self.expires_ms = min_time(self.expires_ms, r.at_ms.saturating_add(*keep));
        }
        if let Some(slot) = spark_slot(now, r.at_ms) {
            self.last_hour += 1;
            self.spark[slot] += 1;
        }
    }
}

/// The sparkline bucket of a letter dead-lettered at `at_ms`, if within the last hour
/// at `now` (which also counts it in `last_hour`).
fn spark_slot(now: i64, at_ms: i64) -> Option<usize> {
    let age = now.checked_sub(at_ms)?;
    (at_ms != NO_TIME && (0..HOUR_MS).contains(&age))
        .then(|| SPARK_BUCKETS - 1 - (age / SPARK_BUCKET_MS) as usize)
}

/// Groups for one choice of dimensions, at one clock reading.
#[derive(Debug, Clone)]
pub struct GroupIndex {
    dims: Vec<Dim>,
    now_ms: i64,
    /// foldhash: keys are interned symbols and buckets (small integers we assign), looked
    /// up once per letter; nothing here for SipHash's flood resistance to protect.
    groups: foldhash::HashMap<GroupKey, GroupStats>,
    total: u64,
    /// Retention in ms by container symbol (see [`GroupIndex::with_retention`]).
    retention: std::sync::Arc<foldhash::HashMap<Sym, i64>>,
}

impl GroupIndex {
    pub fn new(dims: &[Dim], now_ms: i64) -> Self {
        GroupIndex {
            dims: dims.iter().copied().take(MAX_DIMS).collect(),
            now_ms,
            groups: foldhash::HashMap::default(),
            total: 0,
            retention: Default::default(),
        }
    }

    /// Containers' retention (ms, by container symbol): each group then knows when its
    /// first letter is deleted by the broker. Set before letters are added.
    pub fn with_retention(
        mut self,
        by_container: std::sync::Arc<foldhash::HashMap<Sym, i64>>,
    ) -> Self {
        self.retention = by_container;
        self
    }

    /// Index every row of the store that passes the filter.
    pub fn build(
        store: &LetterStore,
        dims: &[Dim],
        now_ms: i64,
        mut filter: Option<&mut Filter>,
    ) -> Self {
        Self::build_with(store, dims, now_ms, filter.take(), Default::default())
    }

    /// `build`, with the containers' retention (see [`GroupIndex::with_retention`]).
    pub fn build_with(
        store: &LetterStore,
        dims: &[Dim],
        now_ms: i64,
        mut filter: Option<&mut Filter>,
        retention: std::sync::Arc<foldhash::HashMap<Sym, i64>>,
    ) -> Self {
        let mut idx = GroupIndex::new(dims, now_ms).with_retention(retention);
        for (i, r) in store.rows().iter().enumerate() {
            if let Some(f) = filter.as_deref_mut() {
                if !f.matches(store, r, now_ms) {
                    continue;
                }
            }
            idx.add(i as RowId, r);
        }
        idx
    }

    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn key_of(&self, r: &Row) -> GroupKey {
        self.key_at(r, self.now_ms)
    }

    fn key_at(&self, r: &Row, now_ms: i64) -> GroupKey {
        let mut k = GroupKey {
            vals: [0; MAX_DIMS],
            len: self.dims.len() as u8,
        };
        for (slot, d) in k.vals.iter_mut().zip(&self.dims) {
            *slot = d.value(r, now_ms);
        }
        k
    }

    /// Add one letter. O(1) amortised.
    pub fn add(&mut self, row_id: RowId, r: &Row) {
        let key = self.key_of(r);
        self.groups
            .entry(key)
            .or_insert_with(GroupStats::new)
            .absorb(row_id, r, self.now_ms, &self.retention);
        self.total += 1;
    }

    /// The groups under a tree node (`prefix` of the dimension values).
    fn groups_under<'a>(&'a self, prefix: &'a [u32]) -> impl Iterator<Item = &'a GroupStats> {
        self.groups
            .iter()
            .filter(move |(k, _)| k.values().starts_with(prefix))
            .map(|(_, g)| g)
    }

    /// Letters of every group under a tree node.
    pub fn members_under(&self, prefix: &[u32]) -> Vec<RowId> {
        let mut out = Vec::new();
        for g in self.groups_under(prefix) {
            out.extend_from_slice(&g.members);
        }
        out
    }

    /// Letters of every group under a tree node with their dead_lettered_at.
    pub fn timed_members_under(&self, prefix: &[u32]) -> Vec<(i64, RowId)> {
        // Sized once: the letters pane gathers a big group's members on every refresh
        // during a scan, and doubling its way there held up to twice the list.
        let n = self.groups_under(prefix).map(|g| g.members.len()).sum();
        let mut out = Vec::with_capacity(n);
        for g in self.groups_under(prefix) {
            out.extend(
                g.member_times
                    .iter()
                    .copied()
                    .zip(g.members.iter().copied()),
            );
        }
        out
    }

    /// At most `n` letters under a tree node, without gathering them all (a node's owner
    /// on screen is read from a sample of a big group).
    pub fn sample_under(&self, prefix: &[u32], n: usize) -> Vec<RowId> {
        let mut out = Vec::new();
        for g in self.groups_under(prefix) {
            if out.len() >= n {
                break;
            }
            let take = (n - out.len()).min(g.members.len());
            out.extend_from_slice(&g.members[..take]);
        }
        out
    }

    pub fn get(&self, key: &GroupKey) -> Option<&GroupStats> {
        self.groups.get(key)
    }

    /// Groups, largest first; ties broken by label so output is stable.
    pub fn sorted(&self, store: &LetterStore) -> Vec<(GroupKey, &GroupStats)> {
        let mut v: Vec<(GroupKey, &GroupStats)> =
            self.groups.iter().map(|(k, g)| (*k, g)).collect();
        v.sort_by(|a, b| {
            b.1.count
                .cmp(&a.1.count)
                .then_with(|| self.labels(store, &a.0).cmp(&self.labels(store, &b.0)))
        });
        v
    }

    /// Labels of a key, one per dimension.
    pub fn labels(&self, store: &LetterStore, key: &GroupKey) -> Vec<String> {
        self.dims
            .iter()
            .zip(key.values())
            .map(|(d, v)| d.label(store, *v))
            .collect()
    }
}

/// A one-line sparkline of bucket counts (▁…█), a space for an empty bucket, so a burst
/// and a quiet hour look different at a glance.
pub fn sparkline(values: &[u32]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().copied().max().unwrap_or(0);
    values
        .iter()
        .map(|&v| {
            if v == 0 || max == 0 {
                ' '
            } else {
                BARS[((v as usize * 7) / max as usize).min(7)]
            }
        })
        .collect()
}

/// One line of the group tree: a prefix of the grouping dimensions with merged stats.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    /// 0 for the first dimension.
    pub depth: usize,
    /// Dimension values from the root down to this node.
    pub path: Vec<u32>,
    pub label: String,
    pub count: u64,
    pub oldest_ms: i64,
    pub newest_ms: i64,
    /// The earliest deletion by the broker under this node ([`NO_TIME`]: none known).
    pub expires_ms: i64,
    pub last_hour: u64,
    pub spark: [u32; SPARK_BUCKETS],
}

impl TreeNode {
    pub fn inflow_per_min(&self) -> f64 {
        self.last_hour as f64 / 60.0
    }
}

fn min_time(a: i64, b: i64) -> i64 {
    match (a == NO_TIME, b == NO_TIME) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

impl GroupIndex {
    /// The groups as a tree (first dimension at the root), depth-first. Siblings are
    /// ordered largest first, except age buckets, which keep their natural order.
    pub fn tree(&self, store: &LetterStore) -> Vec<TreeNode> {
        let mut nodes: Vec<TreeNode> = Vec::new();
        let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
        for (key, g) in &self.groups {
            let vals = key.values();
            for depth in 0..vals.len() {
                let path = vals[..=depth].to_vec();
                let i = *index.entry(path.clone()).or_insert_with(|| {
                    nodes.push(TreeNode {
                        depth,
                        label: self.dims[depth].label(store, vals[depth]),
                        path,
                        count: 0,
                        oldest_ms: NO_TIME,
                        newest_ms: NO_TIME,
                        expires_ms: NO_TIME,
                        last_hour: 0,
                        spark: [0; SPARK_BUCKETS],
                    });
                    nodes.len() - 1
                });
                let n = &mut nodes[i];
                n.count += g.count;
                n.oldest_ms = min_time(n.oldest_ms, g.oldest_ms);
                n.expires_ms = min_time(n.expires_ms, g.expires_ms);
                n.newest_ms = n.newest_ms.max(g.newest_ms);
                n.last_hour += g.last_hour;
                for (a, b) in n.spark.iter_mut().zip(g.spark) {
                    *a += b;
                }
            }
        }
        // Sort: by each ancestor's rank, then own rank.
        let rank = |n: &TreeNode| -> (std::cmp::Reverse<u64>, u32, String) {
            if self.dims[n.depth] == Dim::Age {
                (std::cmp::Reverse(0), n.path[n.depth], String::new())
            } else {
                (std::cmp::Reverse(n.count), 0, n.label.clone())
            }
        };
        let keys: Vec<Vec<(std::cmp::Reverse<u64>, u32, String)>> = nodes
            .iter()
            .map(|n| {
                (0..=n.depth)
                    .map(|d| {
                        let anc = &nodes[index[&n.path[..=d].to_vec()]];
                        rank(anc)
                    })
                    .collect()
            })
            .collect();
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        order.into_iter().map(|i| nodes[i].clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conventions::extract;
    use crate::model::{Header, HeaderValue, RawLetter};
    use chrono::DateTime;

    fn letter(reason: &str, version: &str, at_ms: i64) -> RawLetter {
        RawLetter {
            headers: vec![
                Header::new("x-reason-code", HeaderValue::text(reason)),
                Header::new("x-consumer-version", HeaderValue::text(version)),
                Header::new("x-event-type", HeaderValue::text("invoice.issue.requested")),
            ],
            timestamp: DateTime::from_timestamp_millis(at_ms),
            ..RawLetter::default()
        }
    }

    /// A group's clock is its earliest letter's time plus its container's retention, per
    /// container; a container with no known limit adds no clock; the tree takes the min.
    #[test]
    fn a_groups_clock_is_its_first_deletion_across_containers() {
        let now = 1_790_000_000_000;
        let h = 3_600_000;
        let mut store = LetterStore::new();
        for (topic, reason, age) in [
            ("slow.dlq", "tax", 30 * h),
            ("fast.dlq", "tax", h),
            ("kept.dlq", "amount", 90 * h),
        ] {
            let mut l = letter(reason, "r1", now - age);
            l.coords = Some(crate::model::Coords::Kafka {
                topic: topic.into(),
                partition: 0,
                offset: 0,
            });
            store.push(&extract(l, &[]), "");
        }
        use crate::retention::{by_symbol, Retention};
        let after = |ms| Retention::After {
            ms,
            basis: String::new(),
        };
        let rules = vec![
            ("slow.dlq".to_string(), after(36 * h)),
            ("fast.dlq".to_string(), after(2 * h)),
            (
                "kept.dlq".to_string(),
                Retention::Kept("retention.ms=-1".into()),
            ),
        ];
        let map = by_symbol(&mut store, &rules);
        let idx = GroupIndex::build_with(&store, &[Dim::Reason], now, None, map);
        let by_label: HashMap<String, i64> = idx
            .sorted(&store)
            .iter()
            .map(|(k, g)| (idx.labels(&store, k).join(""), g.expires_ms))
            .collect();
        // fast.dlq's letter (1 h old, 2 h kept) goes before slow.dlq's (30 h of 36).
        assert_eq!(by_label["tax"], now + h);
        assert_eq!(by_label["amount"], NO_TIME);
        let tree = idx.tree(&store);
        assert_eq!(
            tree.iter()
                .map(|n| n.expires_ms)
                .filter(|e| *e != NO_TIME)
                .min(),
            Some(now + h)
        );
    }

    #[test]
    fn groups_counts_ages_and_inflow() {
        let now = 1_790_000_000_000;
        let min = 60_000;
        let mut store = LetterStore::new();
        for (reason, version, age) in [
            ("tax", "r2", 2 * min),
            ("tax", "r2", 10 * min),
            ("tax", "r2", 70 * min),
            ("tax", "r1", 3 * 24 * 60 * min),
            ("amount", "r2", 30 * min),
        ] {
            store.push(&extract(letter(reason, version, now - age), &[]), "");
        }
        let idx = GroupIndex::build(&store, &[Dim::Reason, Dim::Version], now, None);
        let sorted = idx.sorted(&store);
        assert_eq!(idx.total(), 5);
        assert_eq!(idx.labels(&store, &sorted[0].0), vec!["tax", "r2"]);
        let g = sorted[0].1;
        assert_eq!(g.count, 3);
        assert_eq!(g.oldest_ms, now - 70 * min);
        assert_eq!(g.newest_ms, now - 2 * min);
        assert_eq!(g.last_hour, 2);
        assert_eq!(g.spark[SPARK_BUCKETS - 1], 1); // 2 minutes ago
        assert_eq!(g.spark[SPARK_BUCKETS - 3], 1); // 10 minutes ago: the 10-15m bucket
        assert!((g.inflow_per_min() - 2.0 / 60.0).abs() < 1e-9);
        assert_eq!(g.event_types.len(), 1);

        let by_age = GroupIndex::build(&store, &[Dim::Age], now, None);
        let labels: Vec<(String, u64)> = by_age
            .sorted(&store)
            .iter()
            .map(|(k, g)| (by_age.labels(&store, k).join(""), g.count))
            .collect();
        assert!(labels.contains(&("<5m".into(), 1)));
        assert!(labels.contains(&("5m-1h".into(), 2)));
        assert!(labels.contains(&("1h-24h".into(), 1)));
        assert!(labels.contains(&("1d-7d".into(), 1)));
    }

    #[test]
    fn incremental_add_matches_rebuild() {
        let now = 1_790_000_000_000;
        let mut store = LetterStore::new();
        let mut live = GroupIndex::new(&DEFAULT_DIMS, now);
        for i in 0..50 {
            let r = letter(if i % 3 == 0 { "a" } else { "b" }, "v", now - i * 90_000);
            let id = store.push(&extract(r, &[]), "");
            let row = *store.row(id).expect("row just pushed");
            live.add(id, &row);
        }
        let rebuilt = GroupIndex::build(&store, &DEFAULT_DIMS, now, None);
        assert_eq!(live.total(), rebuilt.total());
        for (k, g) in rebuilt.sorted(&store) {
            let l = live.get(&k).expect("same groups");
            assert_eq!(
                (l.count, l.oldest_ms, l.last_hour),
                (g.count, g.oldest_ms, g.last_hour)
            );
        }
    }

    #[test]
    fn tree_nests_and_sums() {
        let now = 1_790_000_000_000;
        let min = 60_000;
        let mut store = LetterStore::new();
        for (reason, version, age) in [
            ("tax", "r2", 2 * min),
            ("tax", "r2", 70 * min),
            ("tax", "r1", 90 * min),
            ("amount", "r2", 3 * min),
        ] {
            store.push(&extract(letter(reason, version, now - age), &[]), "");
        }
        let idx = GroupIndex::build(&store, &DEFAULT_DIMS, now, None);
        let lines: Vec<(usize, String, u64)> = idx
            .tree(&store)
            .into_iter()
            .map(|n| (n.depth, n.label, n.count))
            .collect();
        assert_eq!(
            lines,
            vec![
                (0, "tax".into(), 3),
                (1, "r2".into(), 2),
                (2, "<5m".into(), 1),
                (2, "1h-24h".into(), 1),
                (1, "r1".into(), 1),
                (2, "1h-24h".into(), 1),
                (0, "amount".into(), 1),
                (1, "r2".into(), 1),
                (2, "<5m".into(), 1),
            ]
        );
    }

    #[test]
    fn parse_dims() {
        assert_eq!(
            Dim::parse_list("reason, version,age"),
            Ok(DEFAULT_DIMS.to_vec())
        );
        assert!(Dim::parse_list("reason,colour").is_err_and(|e| e.contains("colour")));
        assert!(Dim::parse_list("reason,reason").is_err());
        assert!(Dim::parse_list("").is_err());
    }
}
