//! Profiling target for the ingest path (conventions + masked preview + index) on the
//! demo incident (`SCALE` times its size, default 1), repeated (`ROUNDS`, default 150,
//! times; `PREVIEWS=0` for what `summary` does; `KAFKA=1` to start from Kafka messages,
//! so the copy out of the consumer's message, `dlq_kafka::to_raw`, is counted too):
//! `perf record target/release/examples/ingest_profile`.
//! Besides the time per letter (noisy on a shared machine) it prints the heap
//! allocations per letter, which do not vary from run to run: a change that removes
//! allocations from the hot path shows there even where timings cannot tell.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture
#![allow(unsafe_code)] // the counting allocator wraps mimalloc; nothing else here is unsafe

use chrono::{TimeZone, Utc};
use dlq_core::catalog::Catalog;
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, RawLetter};
use dlq_kafka::demo::scenario::{incident, Scale};
use rdkafka::message::{OwnedMessage, Timestamp};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// The binary's allocator, counting allocations (reallocations count as one each).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let now = Utc
        .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
        .single()
        .unwrap_or_default();
    // SCALE=N: an incident N times the size, every letter distinct (ROUNDS repeats the
    // same letters, which flatters anything memoised per value, ids included).
    let scale = std::env::var("SCALE")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1.0);
    let raws = incident(7, now, Scale(scale));
    // PREVIEWS=0: what `summary` prepares (no masked previews).
    let previews = std::env::var("PREVIEWS").map_or(true, |p| p != "0");
    let mut cat = Catalog::new(Masker::with_key(b"p".to_vec()), Vec::new()).with_previews(previews);
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(150);
    let kafka = std::env::var("KAFKA").is_ok_and(|k| k == "1");
    // The letters are cloned outside the counted span: the copy stands in for the
    // source's, which is not what this measures (with KAFKA=1, the messages stand in for
    // librdkafka's, and what the poller makes of them is counted).
    let batches: Vec<_> = (0..rounds).map(|_| raws.clone()).collect();
    let input = if kafka {
        Input::Messages(
            batches
                .iter()
                .map(|b| b.iter().map(message).collect())
                .collect(),
        )
    } else {
        Input::Letters(batches)
    };
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    counted(&mut cat, input);
    let n = rounds * raws.len();
    let s = started.elapsed().as_secs_f64();
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    println!(
        "{n} letters in {s:.2} s: {:.2} µs/letter, {:.1} allocations/letter",
        s * 1e6 / n as f64,
        allocations as f64 / n as f64
    );
}

/// What the counted span starts from, built (and, for messages, the letters they came
/// from dropped) before it.
enum Input {
    Letters(Vec<Vec<RawLetter>>),
    Messages(Vec<Vec<OwnedMessage>>),
}

/// The counted span, a function of its own so callgrind can count it alone
/// (`--toggle-collect='ingest_profile::counted*'`): set-up clones are not in it.
#[inline(never)]
fn counted(cat: &mut Catalog, input: Input) {
    match input {
        Input::Letters(batches) => {
            for r in batches.into_iter().flatten() {
                cat.ingest(r);
            }
        }
        Input::Messages(batches) => {
            for m in batches.into_iter().flatten() {
                cat.ingest(dlq_kafka::to_raw(&m));
            }
        }
    }
}

/// A letter as librdkafka hands it to the poller.
fn message(r: &RawLetter) -> OwnedMessage {
    let (topic, partition, offset) = match &r.coords {
        Some(Coords::Kafka {
            topic,
            partition,
            offset,
        }) => (topic.clone(), *partition, *offset),
        _ => ("bench.dlq".to_string(), 0, 0),
    };
    OwnedMessage::new(
        Some(r.payload.to_vec()),
        r.key.as_ref().map(|k| k.to_vec()),
        topic,
        r.timestamp.map_or(Timestamp::NotAvailable, |t| {
            Timestamp::CreateTime(t.timestamp_millis())
        }),
        partition,
        offset,
        Some(dlq_kafka::kafka_headers(&r.headers)),
    )
}
