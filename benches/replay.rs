//! Replay pacing and the kill switch, on the real path: a session on the mock cluster,
//! the real Kafka publisher (acks=all, idempotent), the real ledger journaling every
//! letter, the engine stepped by the DLQ tail as in `dlq-triage replay`.
//!
//! `cargo bench --bench replay` prints, for set rates of 1, 100 and 5,000 letters/s, the
//! achieved rate (first to last publish start), and the kill-switch latency: from the
//! switch to the last publish start (≤ 0 means nothing started after it) and to the end
//! of the run (confirms in flight awaited and journaled). Not a test: figures, not
//! assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::Utc;
use dlq_core::replay::{Control, Progress};
use dlq_kafka::demo::scenario::Scale;
use dlq_kafka::demo::Demo;
use std::time::{Duration, Instant};

mod support;
use support::{replay_topic, replay_topic_into, seed};

type Thrown = std::sync::Arc<std::sync::Mutex<Option<Instant>>>;

struct Run {
    sent: usize,
    first: Option<Instant>,
    last: Option<Instant>,
    ended: Instant,
}

/// Replay every letter of `topic` at `rate`; `kill_after` throws the switch.
fn replay(demo: &Demo, topic: &str, rate: f64, kill: Option<(Duration, &Control, Thrown)>) -> Run {
    let control = kill
        .as_ref()
        .map(|(_, c, _)| (*c).clone())
        .unwrap_or_default();
    if let Some((after, c, thrown)) = kill {
        let c = c.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let at = Instant::now();
            c.kill();
            *thrown.lock().expect("lock") = Some(at);
        });
    }
    let mut last = None;
    replay_topic(demo, topic, rate, &control, &mut |p: &Progress| {
        last = Some(p.clone());
    });
    let p = last.expect("progress");
    Run {
        sent: p.sent,
        first: p.first_send_start,
        last: p.last_send_start,
        ended: Instant::now(),
    }
}

/// #57: 10,000 share-group letters replayed (scan, plan, publish, journal) as the broker
/// writes them by default — no value, the payload read from the source topic at the
/// letter's offset, in batches per source partition — against the same letters with
/// their values copied (`errors.deadletterqueue.copy.record.enable=true`). Best of 3.
fn share_group_letters(demo: &Demo) {
    use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
    const N: usize = 10_000;
    // Every replay appends to the source topic (the letters' origin), and the mock
    // cluster keeps ~5 MiB a partition: spread wide enough that the first records stay.
    const PARTS: i32 = 64;
    let templates = dlq_kafka::demo::scenario::incident(7, Utc::now(), Scale(1.0));
    demo.seed_bench("share.src", 0, PARTS, Utc::now(), None)
        .expect("topic");
    let source: Vec<RawLetter> = (0..N)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "share.src".into(),
                partition: (i as i32) % PARTS,
                offset: 0,
            }),
            key: Some(format!("key-{i}").into_bytes()),
            payload: templates[i % templates.len()].payload.clone(),
            ..RawLetter::default()
        })
        .collect();
    dlq_kafka::demo::produce_all(&demo.bootstrap(), &source).expect("source");
    // Offsets in each source partition run 0.. in the order produced.
    let letter = |topic: &str, i: usize, copied: bool| {
        let text = |n: &'static str, v: String| Header::new(n, HeaderValue::text(&v));
        RawLetter {
            coords: Some(Coords::Kafka {
                topic: topic.into(),
                partition: (i as i32) % PARTS,
                offset: 0,
            }),
            key: copied.then(|| format!("key-{i}").into_bytes()),
            headers: vec![
                text("__dlq.errors.topic", "share.src".into()),
                text("__dlq.errors.partition", ((i as i32) % PARTS).to_string()),
                text("__dlq.errors.offset", (i / PARTS as usize).to_string()),
                text("__dlq.errors.group", "bench-share".into()),
                text("__dlq.errors.message", "Offset rejected by client.".into()),
            ],
            payload: if copied {
                source[i].payload.clone()
            } else {
                Vec::new()
            },
            ..RawLetter::default()
        }
    };
    let mut best = [f64::MAX; 2];
    for round in 0..3 {
        for (k, copied) in [(0, true), (1, false)] {
            let topic = format!("share{round}{k}.dlq");
            demo.seed_bench(&topic, 0, PARTS, Utc::now(), None)
                .expect("topic");
            let letters: Vec<RawLetter> = (0..N).map(|i| letter(&topic, i, copied)).collect();
            dlq_kafka::demo::produce_all(&demo.bootstrap(), &letters).expect("dlq");
            let started = Instant::now();
            let mut sent = 0;
            replay_topic(
                demo,
                &topic,
                1e9,
                &Control::default(),
                &mut |p: &Progress| {
                    sent = p.sent;
                },
            );
            assert_eq!(sent, N, "every letter replayed");
            best[k] = best[k].min(started.elapsed().as_secs_f64());
        }
    }
    println!(
        "share group, {N} letters replayed: values copied {:.2} s, value-less (read from the source) {:.2} s, ratio {:.2} (target <= 1.5)",
        best[0],
        best[1],
        best[1] / best[0]
    );
}

fn main() {
    let demo = Demo::start(5, Utc::now(), Scale(0.01)).expect("demo");
    if std::env::args().any(|a| a == "share") {
        share_group_letters(&demo);
        return;
    }
    println!("set rate   letters   achieved      error");
    let runs = [
        (1.0, 21usize, None, "distinct keys"),
        (100.0, 1_001, None, "distinct keys"),
        (5_000.0, 25_001, None, "distinct keys"),
        (
            5_000.0,
            5_001,
            Some(20),
            "20 hot keys: each key in order, in transactions",
        ),
    ];
    for (i, (rate, n, keys, what)) in runs.into_iter().enumerate() {
        let topic = format!("pace{i}.dlq");
        seed(&demo, &topic, n, keys);
        let r = replay(&demo, &topic, rate, None);
        let span = r.last.expect("sent") - r.first.expect("sent");
        let achieved = (r.sent - 1) as f64 / span.as_secs_f64();
        println!(
            "{rate:>7}/s {:>9} {achieved:>9.2}/s {:>+9.2}%   {what}",
            r.sent,
            (achieved / rate - 1.0) * 100.0
        );
    }
    // The same 5,000/s replay journaling into the team's ledger (PostgreSQL; skipped
    // without a server): one server call per batch of confirms.
    if let Some(db) = dlq_testkit::pg::TempDb::create() {
        let topic = "pace-team.dlq";
        seed(&demo, topic, 25_001, None);
        let mut last = None;
        replay_topic_into(
            &demo,
            topic,
            5_000.0,
            &Control::default(),
            &mut |p: &Progress| last = Some(p.clone()),
            dlq_core::ledger_location::Location::Server(db.url.clone()),
        );
        let p = last.expect("progress");
        let span = p.last_send_start.expect("sent") - p.first_send_start.expect("sent");
        let achieved = (p.sent - 1) as f64 / span.as_secs_f64();
        println!(
            "{:>7}/s {:>9} {achieved:>9.2}/s {:>+9.2}%   distinct keys, the team ledger (PostgreSQL)",
            5_000.0,
            p.sent,
            (achieved / 5_000.0 - 1.0) * 100.0
        );
    }
    let topic = "kill.dlq";
    seed(&demo, topic, 50_000, None);
    let control = Control::default();
    let thrown: Thrown = Default::default();
    let r = replay(
        &demo,
        topic,
        5_000.0,
        Some((Duration::from_secs(3), &control, thrown.clone())),
    );
    let thrown = thrown.lock().expect("lock").expect("the switch was thrown");
    let last = r.last.expect("sent");
    let to_last = if last > thrown {
        format!("{:.2} ms", (last - thrown).as_secs_f64() * 1e3)
    } else {
        "none started after it".to_string()
    };
    println!(
        "kill switch at 5000/s: {} of 50000 sent; switch → last publish start: {to_last}; switch → run ended (confirms awaited, journaled): {:.0} ms",
        r.sent,
        (r.ended - thrown).as_secs_f64() * 1e3
    );
}
