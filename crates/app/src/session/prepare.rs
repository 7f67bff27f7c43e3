//! Letter preparation on persistent worker threads: conventions, masking and previews
//! run beside the source's fetch and the front end's indexing, in arrival order, with
//! back-pressure on the source when the workers fall behind.

use super::{LetterState, Prepared, SessionEvent, BATCH, BATCH_WAIT};
use dlq_core::catalog::prepare_shared;
use dlq_core::conventions::UserMapping;
use dlq_core::decisions;
use dlq_core::journal::Decision;
use dlq_core::masking::Masker;
use dlq_core::model::{RawLetter, TriageState};
use dlq_core::pipeline::{Broken, Pipeline};
use std::collections::{HashMap, HashSet};
use std::thread::Scope;
use std::time::Instant;

/// Letters per batch while tailing.
pub(super) const TAIL_BATCH: usize = 256;

/// What preparing a letter needs; shared read-only by the preparing threads.
pub(super) struct Prep<'a> {
    pub masker: &'a Masker,
    pub mappings: &'a [UserMapping],
    pub codec: Option<&'a dyn dlq_core::schema::PayloadCodec>,
    pub previews: bool,
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    pub decided_ids: &'a HashSet<String>,
    pub decided: &'a HashMap<String, Decision>,
    pub outcomes: &'a HashMap<String, TriageState>,
}

impl Prep<'_> {
    /// Whether a prepared letter is inside `--since` (one with no known time is).
    pub fn keeps(&self, p: &Prepared) -> bool {
        match (self.since, &p.letter.dead_lettered_at) {
            (Some(since), Some(at)) => at.value >= since,
            _ => true,
        }
    }

    pub fn one(&self, raw: RawLetter) -> Prepared {
        let (letter, preview) =
            prepare_shared(self.masker, self.mappings, self.codec, self.previews, raw);
        let fp = decisions::content_fp(&letter.raw);
        let id = &letter.id.value.0;
        let state = if self.decided_ids.contains(id) {
            let b = fp.map_or_else(|| decisions::binding(&letter.raw), decisions::content_label);
            LetterState::of(self.decided.get(&b).filter(|d| &d.letter_id == id))
                .after_replay(self.outcomes.get(&b).copied())
                .state
        } else {
            TriageState::Open
        };
        Prepared {
            letter,
            preview,
            state,
            fp,
            receipt: None,
        }
    }
}

/// The session's preparing pipeline: raw batches in, prepared batches out, in order.
pub(super) type Preparing = Pipeline<Vec<RawLetter>, Vec<Prepared>>;

/// Start the preparing workers for a scan.
pub(super) fn preparing<'scope>(
    scope: &'scope Scope<'scope, '_>,
    prep: &'scope Prep<'scope>,
) -> Preparing {
    Pipeline::start(scope, move |batch: Vec<RawLetter>| {
        // Sized up front: a filtered `collect` cannot know the count and grew each batch
        // by doubling (when letters were unboxed, megabytes copied and fresh pages).
        let mut out = Vec::with_capacity(batch.len());
        out.extend(
            batch
                .into_iter()
                .map(|r| prep.one(r))
                .filter(|p| prep.keeps(p)),
        );
        out
    })
}

/// One scan's batching: raw letters collect into batches for the pipeline; prepared
/// batches go to `emit` in order.
pub(super) struct Pump<'p> {
    pub tail: bool,
    pub batch: Vec<RawLetter>,
    pub last: Instant,
    pub pipeline: Preparing,
    pub emit: &'p mut dyn FnMut(SessionEvent) -> bool,
}

impl Pump<'_> {
    /// Letters per batch: large for a scan, small while tailing (arrivals show quickly).
    /// The next batch is allocated at its full size (grown from nothing, each batch was
    /// reallocated and moved ~10 times).
    fn size(&self) -> usize {
        if self.tail {
            TAIL_BATCH
        } else {
            BATCH
        }
    }

    fn full(&self) -> bool {
        self.batch.len() >= self.size()
    }

    /// Letters arrived, in the source's own batch. A batch of at least half the
    /// pipeline's size goes to the workers as it is (no copy into ours); smaller ones
    /// collect until full. A partial batch goes after `BATCH_WAIT` (a slow source still
    /// shows letters as they come) and is waited for, as is every batch while tailing.
    pub fn letters(&mut self, raws: Vec<RawLetter>) -> Result<bool, Broken> {
        if raws.is_empty() {
            return Ok(true);
        }
        if self.batch.is_empty() && raws.len() >= self.size() / 2 {
            self.last = Instant::now();
            let emit = &mut *self.emit;
            let mut out = |p: Vec<Prepared>| emit(SessionEvent::Letters(p));
            let go = self.pipeline.send(raws, &mut out)?;
            return Ok(go && self.pipeline.collect(self.tail, &mut out)?);
        }
        self.batch.extend(raws);
        let late = self.last.elapsed() > BATCH_WAIT;
        if self.full() || late {
            self.last = Instant::now();
            return self.flush(self.tail || late);
        }
        Ok(true)
    }

    /// A heartbeat from the source. While tailing, letters go before it: a sink that
    /// breaks on a heartbeat (the replay engine, to settle) must not strand them. While
    /// scanning, whatever is prepared goes out, and so does a partial batch held too long.
    pub fn heartbeat(&mut self, ev: SessionEvent) -> Result<bool, Broken> {
        let go = if self.tail || (!self.batch.is_empty() && self.last.elapsed() > BATCH_WAIT) {
            self.last = Instant::now();
            self.flush(true)?
        } else {
            let emit = &mut *self.emit;
            self.pipeline
                .collect(false, &mut |p| emit(SessionEvent::Letters(p)))?
        };
        Ok(go && (self.emit)(ev))
    }

    /// Send the current batch; hand over what is prepared (`wait`: everything sent).
    pub fn flush(&mut self, wait: bool) -> Result<bool, Broken> {
        let full = if self.batch.is_empty() {
            None
        } else {
            let next = Vec::with_capacity(self.size());
            Some(std::mem::replace(&mut self.batch, next))
        };
        let emit = &mut *self.emit;
        let mut out = |p: Vec<Prepared>| emit(SessionEvent::Letters(p));
        let mut go = true;
        if let Some(batch) = full {
            go = self.pipeline.send(batch, &mut out)?;
        }
        Ok(go && self.pipeline.collect(wait, &mut out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::model::Coords;

    fn raw(offset: i64) -> RawLetter {
        RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders.dlq".into(),
                partition: 0,
                offset,
            }),
            key: None,
            headers: Vec::new(),
            properties: Vec::new(),
            payload: format!(r#"{{"order":{offset}}}"#).into_bytes(),
            timestamp: None,
        }
    }

    fn offset(p: &Prepared) -> i64 {
        match &p.letter.raw.coords {
            Some(Coords::Kafka { offset, .. }) => *offset,
            other => panic!("unexpected coords {other:?}"),
        }
    }

    /// Run `test` with a preparation context that knows no decisions.
    fn with_prep(previews: bool, test: impl FnOnce(&Prep<'_>)) {
        let masker = Masker::with_key(b"k".to_vec());
        let (ids, decided, outcomes) = (HashSet::new(), HashMap::new(), HashMap::new());
        test(&Prep {
            codec: None,
            masker: &masker,
            mappings: &[],
            previews,
            since: None,
            decided_ids: &ids,
            decided: &decided,
            outcomes: &outcomes,
        });
    }

    /// Many more batches than workers and queue slots, of uneven sizes: every letter
    /// comes out once, in the order it went in, whether collected eagerly or at the end.
    #[test]
    fn prepared_batches_come_out_in_the_order_they_went_in() {
        with_prep(true, |prep| {
            let mut seen = Vec::new();
            std::thread::scope(|scope| {
                let mut pipeline = preparing(scope, prep);
                let mut out = |p: Vec<Prepared>| {
                    seen.extend(p.iter().map(offset));
                    true
                };
                let mut next = 0i64;
                for (k, size) in [1usize, 300, 7, 4096, 0, 55, 1000, 3, 3, 3, 900, 12]
                    .iter()
                    .cycle()
                    .take(60)
                    .enumerate()
                {
                    let batch: Vec<RawLetter> = (next..next + *size as i64).map(raw).collect();
                    next += *size as i64;
                    assert!(pipeline.send(batch, &mut out).is_ok());
                    if k % 3 == 0 {
                        assert!(pipeline.collect(false, &mut out).is_ok());
                    }
                }
                assert!(pipeline.collect(true, &mut out).is_ok());
                assert_eq!(pipeline.in_flight(), 0);
                let want: Vec<i64> = (0..next).collect();
                assert_eq!(seen, want);
            });
        });
    }

    /// A consumer that says stop gets nothing more, and the rest is not delivered.
    #[test]
    fn a_stop_from_the_consumer_stops_delivery() {
        with_prep(false, |prep| {
            std::thread::scope(|scope| {
                let mut pipeline = preparing(scope, prep);
                let mut calls = 0;
                let mut out = |_: Vec<Prepared>| {
                    calls += 1;
                    false
                };
                for k in 0..3 {
                    assert!(pipeline.send(vec![raw(k)], &mut out).is_ok());
                }
                assert!(matches!(pipeline.collect(true, &mut out), Ok(false)));
                assert_eq!(calls, 1);
            });
        });
    }
}
