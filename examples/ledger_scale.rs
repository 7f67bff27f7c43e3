//! How long a write path's verification takes on a big ledger:
//! `cargo run --release --example ledger_scale -- 1000000 /tmp/big-ledger.db`. Fills the
//! ledger (unless it exists) with that many audit entries (unmask-like entries, written
//! 10,000 to a transaction through the real chain code) and five finished replays of
//! 2,000 letters, then times `Ledger::open` with a full `verify` (`audit verify`, the
//! TUI's check at open), and, after a discard, `open` with the incremental
//! `verify_recent` that `Principal::ledger_to_write` runs before every write.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_ledger::Ledger;
use std::time::Instant;

/// The binary's allocator, so what is measured here is what `audit verify` costs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let path = std::path::PathBuf::from(args.next().unwrap_or("/tmp/big-ledger.db".into()));
    if !path.exists() {
        let mut l = Ledger::open(&path, "bench").expect("open");
        let started = Instant::now();
        l.audit_batch(n, |i| {
            (
                "unmask".to_string(),
                format!("m-{i}"),
                format!("{{\"source\":\"kafka://b/orders.dlq\",\"reason\":\"ticket {i}\"}}"),
            )
        })
        .expect("fill");
        for r in 0..5 {
            dlq_testkit::journal::finished_replay(
                &mut l,
                &format!("r-{r}"),
                "kafka://b/orders.dlq",
                2_000,
                500,
            );
        }
        println!(
            "filled {n} entries in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    let l = Ledger::open(&path, "bench").expect("open");
    let opened = started.elapsed();
    let v = l.verify(None).expect("verify");
    let total = started.elapsed();
    println!(
        "full: open {:.3} s, open + verify {:.3} s: {} entries, ok {}",
        opened.as_secs_f64(),
        total.as_secs_f64(),
        v.entries,
        v.ok
    );
    // A write since the checkpoint the full walk left, then what the next write checks.
    let mut l = l;
    let seq = v.entries;
    l.record_discard(
        "kafka://b/orders.dlq",
        &format!("m-{seq}"),
        &format!("at:{seq}"),
        None,
        "bench",
    )
    .expect("discard");
    drop(l);
    let started = Instant::now();
    let l = Ledger::open(&path, "bench").expect("open");
    let quick = l.verify_since_checkpoint().expect("verify");
    println!(
        "incremental: open + verify_recent {:.3} s: {:?}",
        started.elapsed().as_secs_f64(),
        quick.map(|v| (v.entries, v.ok))
    );
}
