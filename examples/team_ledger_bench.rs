//! The ledger's write paths, SQLite file against the team's PostgreSQL, on this machine:
//! `cargo run --release --example team_ledger_bench` (the server from
//! `DLQ_TRIAGE_TEST_PG`, default postgres://postgres@127.0.0.1:5432/test; a database is
//! created for the run and dropped after).
//!
//! 1. 10,000 discards as `discard` records them: each letter's decision, then its
//!    application (two transactions each: ledger first, broker second).
//! 2. A 50,000-letter replay's journal as the engine writes it at 5,000/s: batches of 50
//!    letters (10 ms of sending) marked `sending`, then confirmed (ledger-only).
//! 3. Change-feed latency: one client commits a discard, another is woken by the server
//!    (LISTEN/NOTIFY) — p50 and p99 over 200 discards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_core::ledger_location::Location;
use dlq_ledger::Ledger;
use std::time::{Duration, Instant};

fn discards(l: &mut Ledger, n: usize) -> f64 {
    let started = Instant::now();
    for i in 0..n {
        let d = l
            .record_discard(
                "kafka://b/orders.dlq",
                &format!("m-{i}"),
                &format!("at:{i}"),
                None,
                "bench",
            )
            .expect("discard");
        l.mark_applied(&d, "ledger-only").expect("applied");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn replay_journal(l: &mut Ledger, n: u32) -> f64 {
    let started = Instant::now();
    dlq_testkit::journal::finished_replay(l, "r-bench", "kafka://b/orders.dlq", n, 50);
    f64::from(n) / started.elapsed().as_secs_f64()
}

fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut file = Ledger::open(&dir.path().join("ledger.db"), "bench").expect("sqlite");
    let db = dlq_testkit::pg::TempDb::create().expect("a PostgreSQL server");
    let at = Location::Server(db.url.clone());
    let mut server = Ledger::open_at(&at, "bench").expect("server");

    println!("discards (decision + application each), 10,000:");
    println!(
        "  SQLite file      {:>8.0} letters/s",
        discards(&mut file, 10_000)
    );
    println!(
        "  PostgreSQL       {:>8.0} letters/s",
        discards(&mut server, 10_000)
    );

    println!("replay journal, 50,000 letters in batches of 50 (the engine at 5,000/s):");
    println!(
        "  SQLite file      {:>8.0} letters/s",
        replay_journal(&mut file, 50_000)
    );
    println!(
        "  PostgreSQL       {:>8.0} letters/s",
        replay_journal(&mut server, 50_000)
    );

    let other = Ledger::open_at(&at, "bench").expect("second client");
    let mut watch = other.watch().expect("watch").expect("a server watches");
    let mut lat: Vec<Duration> = Vec::with_capacity(200);
    for i in 0..200 {
        let t = Instant::now();
        server
            .record_discard(
                "kafka://b/n.dlq",
                &format!("n-{i}"),
                &format!("at:n{i}"),
                None,
                "bench",
            )
            .expect("discard");
        assert!(
            watch.wait(Duration::from_secs(5)).expect("wait"),
            "no notification"
        );
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "change feed, commit to the other client woken, 200 discards: p50 {:.2} ms, p99 {:.2} ms",
        lat[99].as_secs_f64() * 1e3,
        lat[197].as_secs_f64() * 1e3
    );
}
