//! Measures the Kafka scan without our per-letter work, to split a benchmark's CPU
//! between the client library and our processing: `cargo run --release --example
//! scan_only -- HOST:PORT TOPIC [KEY=VALUE…]` (extra librdkafka properties).
//!
//! - `MODE=source` (default): `KafkaSource::scan` — librdkafka, the poller's copy into
//!   owned letters, the batches handed to this thread and dropped here (as the session's
//!   indexing thread drops them: a free across threads).
//! - `MODE=copy`: one thread polls with the source's consumer settings and copies each
//!   message as the poller does (`to_raw`), then drops it where it was made.
//! - `MODE=poll`: the same poll loop reading every field the copy reads (key, payload,
//!   headers, timestamp) without copying: librdkafka through rdkafka's safe API, the
//!   floor any safe Rust client pays.
//!
//! `JSON=1` also reads each payload through serde_json (validated and skipped, nothing
//! built): the floor of any job that reads JSON envelopes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_core::ports::{DlqSource, ScanEvent};
use dlq_kafka::KafkaSource;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::Duration;

/// The binary's allocator, so the split measured here is the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_default();
    let topic = args.next().unwrap_or_default();
    let props: Vec<(String, String)> = args
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let json = std::env::var("JSON").is_ok_and(|j| j == "1");
    let mode = std::env::var("MODE").unwrap_or_else(|_| "source".into());
    let started = std::time::Instant::now();
    let (n, valid) = match mode.as_str() {
        "source" => by_source(&addr, &topic, props, json)?,
        "copy" => by_poll(&addr, &topic, &props, json, true)?,
        "poll" => by_poll(&addr, &topic, &props, json, false)?,
        other => anyhow::bail!("MODE is source, copy or poll, not {other}"),
    };
    let s = started.elapsed().as_secs_f64();
    println!(
        "{mode}: {n} letters ({valid} valid JSON when read) in {s:.2} s: {:.0}/s",
        n as f64 / s
    );
    Ok(())
}

fn is_json(payload: &[u8]) -> bool {
    serde_json::from_slice::<&serde_json::value::RawValue>(payload).is_ok()
}

fn by_source(
    addr: &str,
    topic: &str,
    props: Vec<(String, String)>,
    json: bool,
) -> anyhow::Result<(u64, u64)> {
    let mut src = KafkaSource::new(vec![addr.to_string()], vec![topic.to_string()], props);
    let (mut n, mut valid) = (0u64, 0u64);
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            n += b.len() as u64;
            if json {
                valid += b.iter().filter(|r| is_json(&r.payload)).count() as u64;
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok((n, valid))
}

/// One thread, the source's consumer settings (`KafkaSource::config`, extra properties
/// over them), every partition from its start to its end.
fn by_poll(
    addr: &str,
    topic: &str,
    props: &[(String, String)],
    json: bool,
    copy: bool,
) -> anyhow::Result<(u64, u64)> {
    let src = KafkaSource::new(
        vec![addr.to_string()],
        vec![topic.to_string()],
        props.to_vec(),
    );
    let cfg = src.config();
    let consumer: BaseConsumer = cfg.create()?;
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let parts: Vec<i32> = md
        .topics()
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    let mut tpl = TopicPartitionList::new();
    for p in &parts {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let mut pending: HashSet<i32> = parts.into_iter().collect();
    let (mut n, mut valid, mut touched) = (0u64, 0u64, 0usize);
    while !pending.is_empty() {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                n += 1;
                if copy {
                    let raw = dlq_kafka::to_raw(&m);
                    touched += raw.payload.len() + raw.headers.len();
                    if json && is_json(&raw.payload) {
                        valid += 1;
                    }
                } else {
                    touched += m.key().map_or(0, <[u8]>::len)
                        + m.topic().len()
                        + usize::from(m.timestamp().to_millis().is_some());
                    if let Some(hs) = m.headers() {
                        for h in hs.iter() {
                            touched += h.key.len() + h.value.map_or(0, <[u8]>::len);
                        }
                    }
                    let payload = m.payload().unwrap_or_default();
                    touched += payload.len();
                    if json && is_json(payload) {
                        valid += 1;
                    }
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                pending.remove(&p);
            }
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    // Kept observable so the reads are not optimised away.
    std::hint::black_box(touched);
    Ok((n, valid))
}
