//! Measures the bare RabbitMQ browse (no conventions, no index): `cargo run --release
//! --example rabbit_scan_only -- 'amqp://guest:guest@127.0.0.1:5672/%2f' QUEUE`. Splits
//! `scripts/bench-rabbitmq-vs-pika.py` time between the client and our processing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_app::brokers::{open, OpenOptions};
use dlq_core::ports::ScanEvent;
use dlq_core::source::SourceRef;
use std::ops::ControlFlow;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let uri = args.next().unwrap_or_default();
    let queue = args.next().unwrap_or_default();
    let source = SourceRef::parse(&format!("{uri}?queue={queue}"))?;
    let mut src = open(
        &source,
        &OpenOptions {
            queue_type: Some("classic".into()),
            ..OpenOptions::default()
        },
    )?;
    let started = std::time::Instant::now();
    let mut n = 0u64;
    let mut first = None;
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            n += b.len() as u64;
            first.get_or_insert_with(|| started.elapsed());
        }
        ControlFlow::Continue(())
    })?;
    let s = started.elapsed().as_secs_f64();
    drop(src);
    println!(
        "{n} letters in {s:.2} s: {:.0}/s (first after {:.2?}; closing took {:.2?})",
        n as f64 / s,
        first.unwrap_or_default(),
        started.elapsed() - std::time::Duration::from_secs_f64(s)
    );
    Ok(())
}
