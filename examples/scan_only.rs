//! Measures the bare Kafka scan (no conventions, no index): `cargo run --release
//! --example scan_only -- HOST:PORT TOPIC`. Used to split benchmark time between the
//! client and our processing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_core::ports::{DlqSource, ScanEvent};
use dlq_kafka::KafkaSource;
use std::ops::ControlFlow;

/// The binary's allocator, so the split measured here is the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_default();
    let topic = args.next().unwrap_or_default();
    // Extra librdkafka properties as KEY=VALUE arguments, for experiments.
    let props: Vec<(String, String)> = args
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let mut src = KafkaSource::new(vec![addr], vec![topic], props);
    let started = std::time::Instant::now();
    let mut n = 0u64;
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            n += b.len() as u64;
        }
        ControlFlow::Continue(())
    })?;
    let s = started.elapsed().as_secs_f64();
    println!("{n} letters in {s:.2} s: {:.0}/s", n as f64 / s);
    Ok(())
}
