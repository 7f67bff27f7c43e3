//! Profiling target for the ingest path (conventions + masked preview + index) on the
//! demo incident, repeated: `perf record target/release/examples/ingest_profile`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{TimeZone, Utc};
use dlq_triage::brokers::demo::scenario::{incident, Scale};
use dlq_triage::core::catalog::Catalog;
use dlq_triage::core::masking::Masker;

fn main() {
    let now = Utc
        .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
        .single()
        .unwrap_or_default();
    let raws = incident(7, now, Scale(1.0));
    let mut cat = Catalog::new(Masker::with_key(b"p".to_vec()), Vec::new());
    let started = std::time::Instant::now();
    let rounds = 150;
    for _ in 0..rounds {
        for r in raws.clone() {
            cat.ingest(r);
        }
    }
    let n = rounds * raws.len();
    let s = started.elapsed().as_secs_f64();
    println!(
        "{n} letters in {s:.2} s: {:.2} µs/letter",
        s * 1e6 / n as f64
    );
}
