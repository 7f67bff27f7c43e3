//! Compact per-letter metadata for incident-scale DLQs (1,000,000 letters).
//!
//! Each letter is one fixed-size [`Row`] (repeated strings interned as [`Sym`]s) plus its
//! id, key and masked preview in one shared byte arena. Payload bytes are not kept here:
//! sources re-fetch them by coordinates when a view needs them.

use crate::model::{BodyKind, Coords, DeadLetter, TriageState};

/// An interned string. `0` is the empty string, used for "unknown".
pub type Sym = u32;

/// Row index in the store.
pub type RowId = u32;

/// Repeated strings of a scan (reason codes, versions, topics), each stored once.
///
/// Hashed with foldhash, not SipHash: this lookup runs for every field of every letter.
/// The keys are letter content, so an attacker could choose them, but foldhash is seeded
/// per process at random and the hashes never leave the process, so colliding keys cannot
/// be computed offline; and the strings interned here are the grouping fields (at most a
/// few distinct values per letter), not a server's request keys.
#[derive(Default, Debug)]
pub struct Interner {
    map: foldhash::HashMap<Box<str>, Sym>,
    names: Vec<Box<str>>,
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Interner::default();
        i.intern("");
        i
    }

    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.names.len() as Sym;
        self.names.push(s.into());
        self.map.insert(s.into(), id);
        id
    }

    pub fn get(&self, s: &str) -> Option<Sym> {
        self.map.get(s).copied()
    }

    pub fn resolve(&self, sym: Sym) -> &str {
        self.names.get(sym as usize).map_or("", |s| s)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.names
            .iter()
            .map(|s| 2 * s.len() + 2 * 16 + 8)
            .sum::<usize>()
            + self.map.capacity() * (16 + 4 + 1)
    }
}

/// Sentinel for an unknown timestamp.
pub const NO_TIME: i64 = i64::MIN;

/// One letter's metadata. Kept `Copy` and small: 72 bytes (a million letters' rows are
/// 72 MB; the content digest RabbitMQ letters need lives beside, in `LetterStore::fps`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// dead_lettered_at, epoch milliseconds, or [`NO_TIME`].
    pub at_ms: i64,
    pub reason: Sym,
    pub version: Sym,
    pub event: Sym,
    pub schema: Sym,
    pub origin: Sym,
    pub consumer: Sym,
    pub exception: Sym,
    /// Topic or queue the letter sits in.
    pub container: Sym,
    /// Kafka offset, or AMQP browse position / stream offset.
    pub offset: i64,
    /// Offset of `id ‖ key ‖ preview` in the arena.
    pub text_at: u64,
    pub partition: i32,
    pub id_len: u16,
    pub key_len: u16,
    pub preview_len: u16,
    pub attempt: u16,
    pub replay_count: u8,
    pub state: TriageState,
    pub body: BodyKind,
}

/// The letters of one scan.
#[derive(Debug)]
pub struct LetterStore {
    rows: Vec<Row>,
    /// Each row's content digest, for letters without a stable position (RabbitMQ
    /// queues; 0 for others): what binds a ledger decision to this exact letter
    /// (`binding`). Empty while no row has one, so a Kafka scan pays nothing for it.
    fps: Vec<u64>,
    arena: Vec<u8>,
    pub syms: Interner,
    /// Rows with a known time by the minute they were dead-lettered in: what a moving
    /// clock reads to find the letters that crossed an age since it last moved. Built on
    /// first use (the TUI's clock; a one-shot `summary` never pays for it). Buckets, not
    /// one sorted array: Kafka's partitions hand letters over out of time order, and
    /// keeping a million of them sorted cost ~100 ms a second on the UI thread during a
    /// scan; a row goes into its bucket in O(log minutes), and only a big bucket that a
    /// clock move reads is sorted (a burst of letters in one minute).
    by_minute: std::collections::BTreeMap<i64, TimeBucket>,
    /// Rows `..timed_upto` are in `by_minute` (if timed).
    timed_upto: usize,
}

impl Default for LetterStore {
    fn default() -> Self {
        LetterStore {
            rows: Vec::new(),
            fps: Vec::new(),
            arena: Vec::new(),
            syms: Interner::new(),
            by_minute: Default::default(),
            timed_upto: 0,
        }
    }
}

/// The time buckets' width.
const MINUTE_MS: i64 = 60_000;
/// Above this many rows a bucket that is read is sorted, then binary-searched; below,
/// reading all of it is as cheap.
const SORT_ABOVE: usize = 2_048;

/// One minute's rows; the first `sorted` are in (dead_lettered_at, row) order.
#[derive(Debug, Default)]
struct TimeBucket {
    ids: Vec<RowId>,
    sorted: usize,
}

/// Longest id/key kept in the arena; longer ones are cut (with `…`).
const MAX_TEXT: usize = 512;

fn capped(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    &s[..at]
}

impl LetterStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, id: RowId) -> Option<&Row> {
        self.rows.get(id as usize)
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }
}

/// The minute buckets `[from_ms, to_ms]` falls in.
fn minutes(from_ms: i64, to_ms: i64) -> std::ops::RangeInclusive<i64> {
    let first = from_ms.div_euclid(MINUTE_MS);
    first..=to_ms.div_euclid(MINUTE_MS).max(first)
}

/// The value of an optional extracted text field, or "".
fn text(o: &Option<crate::model::Sourced<String>>) -> &str {
    o.as_ref().map_or("", |s| s.value.as_str())
}

impl LetterStore {
    /// Add a letter with its already-masked preview; returns its row id.
    pub fn push(&mut self, dl: &DeadLetter, masked_preview: &str) -> RowId {
        let fp = crate::binding::content_fp(&dl.raw);
        self.push_with_fp(dl, masked_preview, fp)
    }

    /// `push` with the content digest already computed (`Prepared::fp`).
    pub fn push_with_fp(
        &mut self,
        dl: &DeadLetter,
        masked_preview: &str,
        fp: Option<u64>,
    ) -> RowId {
        let f = &dl.failure;
        let e = &dl.event;
        let reason = self.syms.intern(dl.reason_code());
        let version = self.syms.intern(text(&f.consumer_version));
        let event = self.syms.intern(text(&e.event_type));
        let schema = self.syms.intern(text(&e.schema_version));
        let origin_label = f
            .origin
            .as_ref()
            .map(|o| o.value.label())
            .unwrap_or_default();
        let origin = self.syms.intern(&origin_label);
        let consumer = self.syms.intern(text(&f.consumer));
        let exception_short = f
            .exception_type
            .as_ref()
            .map_or("", |t| crate::fingerprint::short_type(&t.value));
        let exception = self.syms.intern(exception_short);
        let (container, partition, offset) = self.place(dl.raw.coords.as_ref());
        let id = capped(&dl.id.value.0, MAX_TEXT);
        let key_lossy = dl.readable_key().unwrap_or_default();
        let key = capped(&key_lossy, MAX_TEXT);
        let preview = capped(masked_preview, u16::MAX as usize);
        let text_at = self.arena.len() as u64;
        self.arena.extend_from_slice(id.as_bytes());
        self.arena.extend_from_slice(key.as_bytes());
        self.arena.extend_from_slice(preview.as_bytes());
        let row = Row {
            at_ms: dl
                .dead_lettered_at
                .as_ref()
                .map_or(NO_TIME, |t| t.value.timestamp_millis()),
            reason,
            version,
            event,
            schema,
            origin,
            consumer,
            exception,
            container,
            offset,
            text_at,
            partition,
            id_len: id.len() as u16,
            key_len: key.len() as u16,
            preview_len: preview.len() as u16,
            attempt: f
                .attempt
                .as_ref()
                .map_or(0, |a| a.value.min(u16::MAX as u32) as u16),
            replay_count: dl.replay_count.min(255) as u8,
            state: TriageState::Open,
            body: dl.body,
        };
        if fp.is_some() || !self.fps.is_empty() {
            self.fps.resize(self.rows.len(), 0);
            self.fps.push(fp.unwrap_or(0));
        }
        self.rows.push(row);
        (self.rows.len() - 1) as RowId
    }

    /// Where a letter is: its container (interned), partition (-1 on RabbitMQ) and
    /// offset (a stream's offset, a queue's position).
    fn place(&mut self, coords: Option<&Coords>) -> (Sym, i32, i64) {
        match coords {
            Some(Coords::Kafka {
                topic,
                partition,
                offset,
            }) => (self.syms.intern(topic), *partition, *offset),
            Some(Coords::Amqp {
                queue,
                position,
                stream_offset,
                ..
            }) => (
                self.syms.intern(queue),
                -1,
                stream_offset.unwrap_or(*position as i64),
            ),
            None => (0, -1, -1),
        }
    }

    fn slice(&self, at: u64, len: u16) -> &str {
        let start = at as usize;
        let bytes = self
            .arena
            .get(start..start + len as usize)
            .unwrap_or_default();
        // Written from &str slices cut on char boundaries: always valid UTF-8.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    pub fn id(&self, r: &Row) -> &str {
        self.slice(r.text_at, r.id_len)
    }

    pub fn key(&self, r: &Row) -> &str {
        self.slice(r.text_at + u64::from(r.id_len), r.key_len)
    }

    pub fn preview(&self, r: &Row) -> &str {
        self.slice(
            r.text_at + u64::from(r.id_len) + u64::from(r.key_len),
            r.preview_len,
        )
    }

    pub fn sym(&self, s: Sym) -> &str {
        self.syms.resolve(s)
    }

    /// Where the letter sits, as `topic/partition/offset` or `queue#position`.
    pub fn coords_label(&self, r: &Row) -> String {
        let c = self.sym(r.container);
        if r.partition >= 0 {
            format!("{c}/{}/{}", r.partition, r.offset)
        } else if c.is_empty() {
            String::new()
        } else {
            format!("{c}#{}", r.offset)
        }
    }

    /// Where a Kafka letter can be fetched again (topic, partition, offset); `None` for
    /// letters without a stable position (RabbitMQ queues, dumps).
    pub fn kafka_coords(&self, r: &Row) -> Option<crate::model::Coords> {
        (r.partition >= 0).then(|| crate::model::Coords::Kafka {
            topic: self.sym(r.container).to_string(),
            partition: r.partition,
            offset: r.offset,
        })
    }

    /// The exact-letter binding of a row, as `core::binding::binding` renders it.
    pub fn binding(&self, row: RowId) -> Option<String> {
        let r = self.row(row)?;
        let c = self.sym(r.container);
        let fp = self.fps.get(row as usize).copied().unwrap_or(0);
        Some(if fp != 0 {
            crate::binding::content_label(fp)
        } else if r.partition >= 0 {
            format!("at:{c}/{}/{}", r.partition, r.offset)
        } else {
            format!("at:{c}@{}", r.offset)
        })
    }

    /// Release growth slack (Vec doubling) once the initial scan is complete.
    pub fn shrink_to_fit(&mut self) {
        self.rows.shrink_to_fit();
        self.fps.shrink_to_fit();
        self.arena.shrink_to_fit();
    }

    /// The source's estimate of how many letters the scan will hold (Kafka watermarks,
    /// a queue's count): room is made once, so a million-letter scan does not double its
    /// vectors (and hold old and new copies at once) twenty times on the way. Capped, and
    /// the arena sized from what letters took so far, so a wild estimate cannot reserve
    /// absurd amounts; `shrink_to_fit` gives back what was not used.
    pub fn reserve(&mut self, total: u64) {
        const MOST: u64 = 16_000_000;
        let total = usize::try_from(total.min(MOST)).unwrap_or(0);
        let more = total.saturating_sub(self.rows.len());
        if more == 0 || self.rows.capacity() - self.rows.len() >= more {
            return;
        }
        // Not `reserve_exact`: an estimate that grows as partitions report in still
        // grows the vectors geometrically.
        self.rows.reserve(more);
        if self.rows.len() >= 1_000 {
            let per_letter = self.arena.len() / self.rows.len() + 1;
            self.arena.reserve(more.saturating_mul(per_letter));
        }
    }

    /// Bring the time buckets up to date with rows pushed since their last use, and put
    /// the big ones that `[from_ms, to_ms]` reads in order.
    pub fn index_times(&mut self, spans: &[(i64, i64)]) {
        for i in self.timed_upto..self.rows.len() {
            let at = self.rows[i].at_ms;
            if at != NO_TIME {
                self.by_minute
                    .entry(at.div_euclid(MINUTE_MS))
                    .or_default()
                    .ids
                    .push(i as RowId);
            }
        }
        self.timed_upto = self.rows.len();
        let rows = &self.rows;
        for &(from, to) in spans {
            for (_, b) in self.by_minute.range_mut(minutes(from, to)) {
                if b.ids.len() > SORT_ABOVE && b.sorted < b.ids.len() {
                    // The new rows after a sorted run: the stable sort merges the two.
                    b.ids.sort_by_key(|id| (rows[*id as usize].at_ms, *id));
                    b.sorted = b.ids.len();
                }
            }
        }
    }

    /// Rows dead-lettered in `[from_ms, to_ms]` (in no particular order) onto `out`, as
    /// of the last [`LetterStore::index_times`].
    pub fn dead_lettered_between(&self, from_ms: i64, to_ms: i64, out: &mut Vec<RowId>) {
        let at = |id: &RowId| self.rows.get(*id as usize).map_or(NO_TIME, |r| r.at_ms);
        for (_, b) in self.by_minute.range(minutes(from_ms, to_ms)) {
            if b.sorted == b.ids.len() && b.ids.len() > SORT_ABOVE {
                let lo = b.ids.partition_point(|id| at(id) < from_ms);
                let hi = b.ids.partition_point(|id| at(id) <= to_ms);
                out.extend_from_slice(b.ids.get(lo..hi.max(lo)).unwrap_or_default());
            } else {
                out.extend(
                    b.ids
                        .iter()
                        .filter(|id| (from_ms..=to_ms).contains(&at(id))),
                );
            }
        }
    }

    pub fn set_state(&mut self, id: RowId, state: TriageState) {
        if let Some(r) = self.rows.get_mut(id as usize) {
            r.state = state;
        }
    }

    /// Rows whose id (or coordinates) equals `needle`, newest first.
    pub fn find(&self, needle: &str) -> Vec<RowId> {
        let mut hits: Vec<RowId> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| self.id(r) == needle || self.coords_label(r) == needle)
            .map(|(i, _)| i as RowId)
            .collect();
        hits.sort_by_key(|&i| std::cmp::Reverse(self.rows[i as usize].at_ms));
        hits
    }

    /// Heap bytes held for letter metadata (rows, arena, interner), for the memory budget.
    pub fn heap_bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row>()
            + self.fps.capacity() * std::mem::size_of::<u64>()
            + self
                .by_minute
                .values()
                .map(|b| b.ids.capacity() * std::mem::size_of::<RowId>() + 64)
                .sum::<usize>()
            + self.arena.capacity()
            + self.syms.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_stays_small() {
        assert!(
            std::mem::size_of::<Row>() <= 72,
            "{}",
            std::mem::size_of::<Row>()
        );
    }

    /// A row's binding: its position where it has a stable one, else its content digest
    /// (kept beside the rows, and only once some letter has one).
    #[test]
    fn bindings_come_from_the_position_or_the_content_digest_kept_beside() {
        use crate::model::RawLetter;
        let kafka = |offset| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders.dlq".into(),
                partition: 2,
                offset,
            }),
            ..RawLetter::default()
        };
        let mut s = LetterStore::new();
        s.push_with_fp(&crate::conventions::extract(kafka(9), &[]), "", None);
        s.push_with_fp(&crate::conventions::extract(kafka(10), &[]), "", None);
        assert_eq!(s.fps.capacity(), 0, "no digest kept for positioned letters");
        s.push_with_fp(
            &crate::conventions::extract(RawLetter::default(), &[]),
            "",
            Some(0xfeed),
        );
        s.push_with_fp(&crate::conventions::extract(kafka(11), &[]), "", None);
        assert_eq!(s.binding(0).as_deref(), Some("at:orders.dlq/2/9"));
        assert_eq!(s.binding(1).as_deref(), Some("at:orders.dlq/2/10"));
        assert_eq!(s.binding(2), Some(crate::binding::content_label(0xfeed)));
        assert_eq!(s.binding(3).as_deref(), Some("at:orders.dlq/2/11"));
        assert_eq!(s.binding(4), None);
    }

    /// The time buckets give exactly the rows in a span, whether a bucket was read
    /// whole or sorted and searched (a burst of 5,000 letters in one minute, more
    /// arriving out of order after it was sorted), and none without a time.
    #[test]
    fn time_buckets_find_exactly_the_rows_in_a_span() {
        use crate::model::RawLetter;
        let base = 1_790_000_000_000i64;
        let mut s = LetterStore::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut push = |s: &mut LetterStore, n: usize| {
            for _ in 0..n {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Most in one burst minute, some spread over an hour, some untimed.
                let at = match rng % 10 {
                    0 => None,
                    1 | 2 => Some(base + (rng % 3_600_000) as i64),
                    _ => Some(base + 120_000 + (rng % 60_000) as i64),
                };
                let l = RawLetter {
                    timestamp: at.and_then(chrono::DateTime::from_timestamp_millis),
                    ..RawLetter::default()
                };
                s.push(&crate::conventions::extract(l, &[]), "");
            }
        };
        let spans = [
            (base + 130_000, base + 131_000),
            (base, base + 3_600_000),
            (base + 119_999, base + 120_000),
            (base + 500_000, base + 740_123),
        ];
        let check = |s: &mut LetterStore| {
            s.index_times(&spans);
            for (from, to) in spans {
                let mut got = Vec::new();
                s.dead_lettered_between(from, to, &mut got);
                got.sort_unstable();
                let want: Vec<RowId> = (0..s.len() as RowId)
                    .filter(|i| (from..=to).contains(&s.rows[*i as usize].at_ms))
                    .collect();
                assert_eq!(got, want, "[{from}, {to}]");
            }
        };
        push(&mut s, 6_000);
        check(&mut s);
        push(&mut s, 3_000);
        check(&mut s);
        assert!(
            s.by_minute
                .values()
                .any(|b| b.ids.len() > SORT_ABOVE && b.sorted == b.ids.len()),
            "the burst minute was sorted"
        );
    }

    #[test]
    fn interner_dedups_and_zero_is_empty() {
        let mut i = Interner::new();
        assert_eq!(i.intern(""), 0);
        let a = i.intern("x");
        assert_eq!(i.intern("x"), a);
        assert_eq!(i.resolve(a), "x");
        assert_eq!(i.resolve(999), "");
    }

    #[test]
    fn an_estimate_makes_room_once_and_a_wild_one_is_capped() {
        let mut s = LetterStore::new();
        s.reserve(100_000);
        assert!(s.rows.capacity() >= 100_000);
        let cap = s.rows.capacity();
        s.reserve(50_000); // less than there is room for: nothing to do
        assert_eq!(s.rows.capacity(), cap);
        // A watermark of a compacted topic can be huge; a reservation never is.
        let mut wild = LetterStore::new();
        wild.reserve(u64::MAX);
        assert!(wild.rows.capacity() <= 32_000_000);
        wild.shrink_to_fit();
        assert_eq!(wild.rows.capacity(), 0);
    }
}
