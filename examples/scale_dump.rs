//! The core pipeline at scale, from an NDJSON dump this example writes (not committed):
//! `cargo run --release --example scale_dump -- 10000000 /tmp/scale.ndjson`. Writes the
//! dump (the demo incident's letters, cycled, each with its own ids and offset) unless it
//! exists, then loads it through a session into a catalog as `summary` does, and times
//! the load, a grouping, a filter and a regroup; prints the process's peak RSS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::Utc;
use dlq_app::brokers::{open, OpenOptions};
use dlq_app::session::{Principal, Session, SessionEvent, Settings};
use dlq_core::catalog::Catalog;
use dlq_core::dump::to_line;
use dlq_core::filter::Filter;
use dlq_core::grouping::{Dim, GroupIndex};
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, Header, HeaderValue};
use dlq_core::source::SourceRef;
use dlq_kafka::demo::scenario::{incident, make_distinct, Scale};
use std::io::Write;
use std::ops::ControlFlow;
use std::time::Instant;

fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// The binary's allocator, so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000_000);
    let path = std::path::PathBuf::from(args.next().unwrap_or_else(|| "/tmp/scale.ndjson".into()));
    let now = Utc::now();
    if !path.exists() {
        let t = Instant::now();
        let templates = incident(42, now, Scale(1.0));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for i in 0..n {
            let mut l = templates[i % templates.len()].clone();
            make_distinct(&mut l, i);
            l.coords = Some(Coords::Kafka {
                topic: "scale.dlq".into(),
                partition: (i % 256) as i32,
                offset: (i / 256) as i64,
            });
            l.headers.push(Header::new(
                "x-message-id",
                HeaderValue::text(&format!("scale-{i}")),
            ));
            writeln!(out, "{}", to_line(&l, false))?;
        }
        out.flush()?;
        println!(
            "wrote {n} letters to {} in {:.1?}",
            path.display(),
            t.elapsed()
        );
    }
    let size = std::fs::metadata(&path)?.len();
    let dir = tempfile::tempdir()?;
    let source = SourceRef::File { path: path.clone() };
    let masker = Masker::with_key(vec![9; 32]);
    let mut session = Session::new(
        open(&source, &OpenOptions::default())?,
        Settings {
            codec: None,
            source_key: source.to_string(),
            principal: Principal {
                actor: "scale".into(),
                role: dlq_core::access::Role::Operator,
                read_only: true,
                ledger_unreachable: None,
                ledger: Some(dlq_core::ledger_location::Location::File(
                    dir.path().join("l.db"),
                )),
            },
            masker: masker.clone(),
            mappings: Vec::new(),
            since: None,
            approval_above: None,
            discard_approval_above: None,
            allowed_targets: Vec::new(),
        },
    )?;
    let mut catalog = Catalog::new(masker, Vec::new());
    let t = Instant::now();
    session.scan(false, &mut |ev| {
        if let SessionEvent::Letters(b) = ev {
            for p in b {
                catalog.store.push(&p.letter, &p.preview);
            }
        }
        ControlFlow::Continue(())
    })?;
    catalog.shrink_to_fit();
    let load = t.elapsed();
    let store = &catalog.store;
    println!(
        "loaded {} letters ({:.1} GB of dump) in {:.1?} ({:.0}/s); peak RSS so far {} MB",
        store.len(),
        size as f64 / 1e9,
        load,
        store.len() as f64 / load.as_secs_f64(),
        peak_rss_mb()
    );
    let now_ms = now.timestamp_millis();
    let t = Instant::now();
    let idx = GroupIndex::build(store, &[Dim::Reason, Dim::Version, Dim::Age], now_ms, None);
    println!(
        "group reason › version › age: {:.1?} ({} letters)",
        t.elapsed(),
        idx.total()
    );
    let mut filter = Filter::parse("reason=amount_* age<1d")?;
    let t = Instant::now();
    let idx = GroupIndex::build(
        store,
        &[Dim::Reason, Dim::Version, Dim::Age],
        now_ms,
        Some(&mut filter),
    );
    println!(
        "filter reason=amount_* age<1d: {:.1?} ({} match)",
        t.elapsed(),
        idx.total()
    );
    let t = Instant::now();
    let idx = GroupIndex::build(store, &[Dim::Event, Dim::Reason], now_ms, None);
    println!(
        "regroup event › reason: {:.1?} ({} letters)",
        t.elapsed(),
        idx.total()
    );
    println!(
        "peak RSS {} MB ({} bytes a letter)",
        peak_rss_mb(),
        peak_rss_mb() * 1024 * 1024 / store.len().max(1) as u64
    );
    Ok(())
}
