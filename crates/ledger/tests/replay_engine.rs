//! The plan and the engine against a scripted publisher and a real SQLite ledger.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::conventions::extract;
use dlq_core::journal::ItemState;
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter, TriageState};
use dlq_core::ports::{
    Confirmed, KeyScan, OriginLog, Outcome, Outgoing, Publisher, SourceError, Target,
};
use dlq_core::replay::engine::{Control, End, Engine, Phase};
use dlq_core::replay::plan::{self, Candidate, Options, Plan, Why};
use dlq_ledger::Ledger;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

fn raw(i: i64, key: &str, origin_offset: i64, extra: Vec<Header>) -> RawLetter {
    let mut headers = vec![
        Header::new("kafka_dlt-original-topic", HeaderValue::text("orders")),
        Header::new("kafka_dlt-original-partition", HeaderValue::text("0")),
        Header::new(
            "kafka_dlt-original-offset",
            HeaderValue::text(&origin_offset.to_string()),
        ),
        Header::new("x-message-id", HeaderValue::text(&format!("m-{i}"))),
        Header::new("x-reason-code", HeaderValue::text("timeout")),
        Header::new("x-death", HeaderValue::text("should go")),
        Header::new("x-first-death-queue", HeaderValue::text("should go")),
        Header::new("traceparent", HeaderValue::text("00-abc-01")),
    ];
    headers.extend(extra);
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: "orders.dlq".into(),
            partition: 0,
            offset: i,
        }),
        key: Some(key.as_bytes().to_vec()),
        headers,
        properties: Vec::new(),
        payload: format!("{{\"n\":{i}}}").into_bytes(),
        timestamp: None,
    }
}

fn cand(r: RawLetter) -> Candidate {
    let letter = extract(r, &[]);
    Candidate {
        binding: dlq_core::decisions::binding(&letter.raw),
        location: letter
            .raw
            .coords
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        settle: None,
        state: TriageState::Open,
        ledger_replays: 0,
        revision: None,
        preview: String::new(),
        revision_preview: None,
        held_by: None,
        letter: letter.into(),
    }
}

fn build(cands: Vec<Candidate>, opts: &Options, log: Option<&mut dyn OriginLog>) -> Plan {
    plan::build(
        cands,
        opts,
        plan::Context {
            id: "r-test".into(),
            source: "kafka://b/orders.dlq".into(),
            actor: "alice".into(),
            mappings: &[],
            kafka_source: true,
            origin_log: log,
            seqs: None,
        },
    )
}

#[test]
fn the_copy_loses_death_headers_keeps_the_rest_and_is_stamped() {
    let p = build(
        vec![cand(raw(1, "k1", 10, vec![]))],
        &Options::default(),
        None,
    );
    assert_eq!(p.items.len(), 1);
    let out = &p.items[0].outgoing;
    assert_eq!(
        out.target,
        Target::Kafka {
            topic: "orders".into()
        }
    );
    assert_eq!(out.key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(out.payload, b"{\"n\":1}");
    let names: Vec<&str> = out.headers.iter().map(|h| &*h.name).collect();
    assert!(!names.contains(&"x-death") && !names.contains(&"x-first-death-queue"));
    for kept in ["x-message-id", "traceparent", "kafka_dlt-original-offset"] {
        assert!(names.contains(&kept), "{kept} kept: {names:?}");
    }
    let h = |n: &str| {
        out.headers
            .iter()
            .find(|h| h.name == n)
            .and_then(|h| h.value.as_nonempty_text())
    };
    assert_eq!(h("x-dlq-replay-id").as_deref(), Some("r-test"));
    assert_eq!(h("x-dlq-replay-count").as_deref(), Some("1"));
    assert_eq!(h("x-dlq-replayed-by").as_deref(), Some("alice"));
    assert_eq!(h("x-dlq-replayed-from").as_deref(), Some("orders.dlq/0/1"));
    assert_eq!(
        h("x-message-id").as_deref(),
        Some("m-1"),
        "the message id is never changed"
    );
}

#[test]
fn amqp_properties_are_kept_but_not_the_dlq_delivery_facts() {
    let mut r = raw(1, "k", 1, vec![]);
    r.coords = Some(Coords::Amqp {
        vhost: "/".into(),
        queue: "dlq".into(),
        position: 1,
        stream_offset: None,
    });
    r.properties = vec![
        ("message_id".into(), "m-1".into()),
        ("correlation_id".into(), "c-1".into()),
        ("exchange".into(), "dlx".into()),
        ("routing_key".into(), "x".into()),
    ];
    let opts = Options {
        to: Some(Target::Amqp {
            exchange: "orders".into(),
            routing_key: "created".into(),
        }),
        ..Options::default()
    };
    let p = plan::build(
        vec![cand(r)],
        &opts,
        plan::Context {
            id: "r".into(),
            source: "amqp://".into(),
            actor: "a".into(),
            mappings: &[],
            kafka_source: false,
            origin_log: None,
            seqs: None,
        },
    );
    let props = &p.items[0].outgoing.properties;
    assert!(props.contains(&("message_id".into(), "m-1".into())));
    assert!(props.contains(&("correlation_id".into(), "c-1".into())));
    assert!(!props
        .iter()
        .any(|(k, _)| k == "exchange" || k == "routing_key"));
    let count = p.items[0]
        .outgoing
        .headers
        .iter()
        .find(|h| h.name == "x-dlq-replay-count")
        .map(|h| h.value.clone());
    assert_eq!(count, Some(HeaderValue::Int(1)));
}

#[test]
fn a_keys_letters_keep_their_origin_order_whatever_the_dlq_order() {
    // Dead-lettered out of order: offsets 30, 10, 20 of key K; another key between.
    let cands = vec![
        cand(raw(1, "K", 30, vec![])),
        cand(raw(2, "other", 5, vec![])),
        cand(raw(3, "K", 10, vec![])),
        cand(raw(4, "K", 20, vec![])),
    ];
    let p = build(cands, &Options::default(), None);
    let k: Vec<&str> = p
        .items
        .iter()
        .filter(|i| i.key.as_deref() == Some(&b"K"[..]))
        .map(|i| i.letter_id.as_str())
        .collect();
    assert_eq!(k, ["m-3", "m-4", "m-1"]);
    assert!(p
        .warnings
        .iter()
        .any(|w| w.kind == "same-key" && w.count == 3));
}

#[test]
fn the_replay_count_guard_refuses_unless_forced() {
    let tired = raw(
        1,
        "k",
        1,
        vec![Header::new("x-dlq-replay-count", HeaderValue::text("3"))],
    );
    let p = build(
        vec![cand(tired.clone()), cand(raw(2, "j", 2, vec![]))],
        &Options::default(),
        None,
    );
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.excluded, vec![("m-1".to_string(), Why::ReplayCount)]);
    let forced = Options {
        force_replay_count: true,
        ..Options::default()
    };
    let p = build(vec![cand(tired)], &forced, None);
    assert_eq!(p.items.len(), 1);
    let count = p.items[0]
        .outgoing
        .headers
        .iter()
        .find(|h| h.name == "x-dlq-replay-count")
        .and_then(|h| h.value.as_nonempty_text());
    assert_eq!(count.as_deref(), Some("4"));
}

#[test]
fn discarded_replayed_and_targetless_letters_are_excluded_with_reasons() {
    let mut d = cand(raw(1, "a", 1, vec![]));
    d.state = TriageState::Discarded;
    let mut r = cand(raw(2, "b", 2, vec![]));
    r.state = TriageState::Replayed;
    let mut lost = raw(3, "c", 3, vec![]);
    lost.headers.retain(|h| !h.name.starts_with("kafka_dlt"));
    let p = build(vec![d, r, cand(lost)], &Options::default(), None);
    assert!(p.items.is_empty());
    let whys: HashSet<Why> = p.excluded.iter().map(|(_, w)| *w).collect();
    assert_eq!(
        whys,
        HashSet::from([Why::Discarded, Why::AlreadyReplayed, Why::NoTarget])
    );
}

/// An origin partition as a list of (offset, key).
struct Partition(Vec<(i64, &'static str)>, u64);

impl OriginLog for Partition {
    fn newest_by_key(
        &mut self,
        _: &str,
        _: i32,
        from: i64,
        keys: &HashSet<Vec<u8>>,
        ignore: &HashSet<i64>,
        budget: u64,
    ) -> Result<KeyScan, SourceError> {
        let mut scan = KeyScan::default();
        let records: Vec<_> = self.0.iter().filter(|(o, _)| *o >= from).collect();
        for (n, (o, k)) in records.iter().enumerate() {
            if n as u64 >= budget.min(self.1) {
                return Ok(scan);
            }
            if keys.contains(k.as_bytes()) && !ignore.contains(o) {
                scan.newest.insert(k.as_bytes().to_vec(), *o);
            }
        }
        scan.complete = true;
        Ok(scan)
    }

    fn ends(&mut self, _: &str) -> Result<Vec<(i32, i64)>, SourceError> {
        Ok(vec![(0, self.0.last().map_or(0, |(o, _)| o + 1))])
    }

    /// The stale-key tests replay nothing: no record carries a replay id.
    fn replayed(
        &mut self,
        _: &str,
        _: &HashMap<i32, i64>,
        _: &str,
    ) -> Result<Vec<dlq_core::ports::Landed>, SourceError> {
        Ok(Vec::new())
    }
}

#[test]
fn a_key_with_a_newer_record_in_its_origin_partition_is_stale() {
    // Letter A (offset 10) has a newer record of key A at 15; B's key never came again;
    // C (offset 20) and C' (offset 40) share a key: C' is not "newer" news for C.
    let mut log = Partition(vec![(15, "A"), (16, "x"), (20, "C"), (40, "C")], u64::MAX);
    let cands = vec![
        cand(raw(1, "A", 10, vec![])),
        cand(raw(2, "B", 12, vec![])),
        cand(raw(3, "C", 20, vec![])),
        cand(raw(4, "C", 40, vec![])),
    ];
    let p = build(cands.clone(), &Options::default(), Some(&mut log));
    assert_eq!(p.excluded, vec![("m-1".to_string(), Why::Stale)]);
    assert_eq!(p.items.len(), 3);
    assert_eq!(p.stale.stale, 1);
    let opts = Options {
        include_stale: true,
        ..Options::default()
    };
    let p = build(cands.clone(), &opts, Some(&mut log));
    assert_eq!(p.items.len(), 4);
    assert!(p
        .warnings
        .iter()
        .any(|w| w.kind == "stale-key" && w.message.contains("INCLUDED")));
    // A budget that stops before the end says the check was partial.
    let mut short = Partition(vec![(15, "x"), (16, "x"), (17, "A")], 1);
    let p = build(cands, &Options::default(), Some(&mut short));
    assert!(p.stale.partial > 0);
    assert!(p.warnings.iter().any(|w| w.kind == "stale-check-partial"));
}

/// Confirms every send on the next poll, except letters whose payload says refuse.
#[derive(Default)]
struct Scripted {
    sent: Vec<(u64, Outgoing, Instant)>,
    waiting: Vec<u64>,
    refuse: HashSet<String>,
}

impl Publisher for Scripted {
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError> {
        self.sent.push((ticket, msg.clone(), Instant::now()));
        self.waiting.push(ticket);
        Ok(())
    }

    fn confirmations(&mut self, _: Duration) -> Vec<Outcome> {
        let sent: HashMap<u64, &Outgoing> = self.sent.iter().map(|(t, o, _)| (*t, o)).collect();
        self.waiting
            .drain(..)
            .map(|t| {
                let body = String::from_utf8_lossy(&sent[&t].payload).to_string();
                if self.refuse.contains(&body) {
                    (t, Err(SourceError::failed("unroutable: no queue is bound")))
                } else {
                    (
                        t,
                        Ok(Confirmed {
                            location: Some(format!("orders/0/{t}")),
                        }),
                    )
                }
            })
            .collect()
    }
}

fn ledger() -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("tmp");
    let l = Ledger::open(&dir.path().join("l.db"), "alice").expect("ledger");
    (dir, l)
}

fn start(l: &mut Ledger, p: &Plan) {
    let rows = p.journal_rows();
    l.replay_start(&p.id, &p.source, "orders", &serde_json::json!({}), &rows)
        .expect("start");
}

/// Step the engine on a virtual clock until it is done (or `limit`).
fn run(
    e: &mut Engine<'_>,
    p: &mut Scripted,
    l: &mut Ledger,
    t0: Instant,
    limit: Duration,
) -> Instant {
    let mut now = t0;
    while !e.done() && now < t0 + limit {
        e.step(p, l, now).expect("step");
        now += Duration::from_millis(50);
        // The rate's bucket runs on the real clock: let a little of it pass per step,
        // or a fast machine reaches the end of the fake one before the sends are due.
        std::thread::sleep(Duration::from_micros(500));
    }
    now
}

fn plan_of(n: i64, opts: Options) -> Plan {
    build(
        (0..n)
            .map(|i| cand(raw(i, &format!("k{}", i % 3), i, vec![])))
            .collect(),
        &opts,
        None,
    )
}

#[test]
fn canary_then_watch_then_ramp_and_every_letter_journaled() {
    let opts = Options {
        canary: 2,
        canary_rate: 1000.0,
        rate: 1000.0,
        watch: Duration::from_millis(500),
        ..Options::default()
    };
    let p = plan_of(12, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    let mut pb = Scripted::default();
    let t0 = Instant::now();
    let mut e = Engine::new(&p, Control::default(), t0);
    // The canary goes, then nothing until the watch window has passed.
    let mut now = t0;
    while e.progress(now).phase != Phase::Watching {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
        assert!(now < t0 + Duration::from_secs(5));
    }
    assert_eq!(pb.sent.len(), 2, "only the canary before the watch");
    e.step(&mut pb, &mut l, now + Duration::from_millis(100))
        .expect("step");
    assert_eq!(pb.sent.len(), 2, "nothing during the watch window");
    run(&mut e, &mut pb, &mut l, now, Duration::from_secs(30));
    assert_eq!(e.end(), Some(&End::Completed));
    assert_eq!(pb.sent.len(), 12);
    let (_, items) = l.replay("r-test").expect("read").expect("row");
    assert!(
        items.iter().all(|i| i.state == ItemState::Settled),
        "{items:?}"
    );
    assert_eq!(
        l.replay_counts("kafka://b/orders.dlq")
            .expect("counts")
            .len(),
        12
    );
    assert!(l.verify(None).expect("verify").ok);
}

#[test]
fn one_keys_letters_are_never_in_flight_together() {
    let opts = Options {
        canary: 0,
        rate: 1e6,
        watch: Duration::ZERO,
        ..Options::default()
    };
    let p = plan_of(30, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    /// Holds confirms back so several could be in flight.
    struct Slow(Scripted, u32);
    impl Publisher for Slow {
        fn send(&mut self, t: u64, m: &Outgoing) -> Result<(), SourceError> {
            self.0.send(t, m)
        }
        fn confirmations(&mut self, w: Duration) -> Vec<Outcome> {
            self.1 += 1;
            if self.1.is_multiple_of(3) {
                self.0.confirmations(w)
            } else {
                Vec::new()
            }
        }
    }
    let mut pb = Slow(Scripted::default(), 0);
    let mut e = Engine::new(&p, Control::default(), Instant::now());
    let mut now = Instant::now();
    let mut max_keys_in_flight = 0;
    while !e.done() {
        e.step(&mut pb, &mut l, now).expect("step");
        let waiting: Vec<&Vec<u8>> =
            pb.0.waiting
                .iter()
                .filter_map(|t| pb.0.sent.iter().find(|s| s.0 == *t)?.1.key.as_ref())
                .collect();
        let distinct: HashSet<_> = waiting.iter().collect();
        assert_eq!(distinct.len(), waiting.len(), "a key twice in flight");
        max_keys_in_flight = max_keys_in_flight.max(waiting.len());
        now += Duration::from_millis(10);
    }
    assert_eq!(max_keys_in_flight, 3, "different keys interleave");
    each_key_in_plan_order(&pb.0);
}

/// Each of `plan_of`'s keys was sent in plan order.
fn each_key_in_plan_order(pb: &Scripted) {
    for k in ["k0", "k1", "k2"] {
        let order: Vec<u64> = pb
            .sent
            .iter()
            .filter(|s| s.1.key.as_deref() == Some(k.as_bytes()))
            .map(|s| s.0)
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{k}: {order:?}");
    }
}

#[test]
fn letters_failing_again_stop_the_replay_in_the_canary() {
    let opts = Options {
        canary: 5,
        canary_rate: 1000.0,
        watch: Duration::from_secs(60),
        ..Options::default()
    };
    let p = plan_of(20, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    let mut pb = Scripted::default();
    let mut e = Engine::new(&p, Control::default(), Instant::now());
    let mut now = Instant::now();
    while pb.sent.len() < 3 {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(5);
    }
    // Two of them come back to the DLQ: one by our replay headers, one by message id.
    let back = |i: usize, stamped: bool| {
        let mut r = raw(100 + i as i64, "x", 0, vec![]);
        r.headers.retain(|h| h.name != "x-message-id");
        r.headers.push(Header::new(
            "x-message-id",
            HeaderValue::text(&p.items[i].letter_id),
        ));
        if stamped {
            r.headers
                .push(Header::new("x-dlq-replay-id", HeaderValue::text("r-test")));
            r.headers.push(Header::new(
                "x-dlq-replayed-from",
                HeaderValue::text(&p.items[i].location),
            ));
        }
        extract(r, &[])
    };
    e.observe(&back(0, true), &mut l).expect("observe");
    e.step(&mut pb, &mut l, now).expect("step");
    assert!(e.end().is_none(), "1 of 5 is not over 20%");
    e.observe(&back(1, false), &mut l).expect("observe");
    run(&mut e, &mut pb, &mut l, now, Duration::from_secs(5));
    assert!(
        matches!(e.end(), Some(End::AutoStopped(r)) if r.contains("failed again")),
        "{:?}",
        e.end()
    );
    assert!(pb.sent.len() <= 5, "no ramp after a failing canary");
    let (_, items) = l.replay("r-test").expect("read").expect("row");
    assert_eq!(
        items
            .iter()
            .filter(|i| i.state == ItemState::FailedAgain)
            .count(),
        2
    );
    assert!(
        items
            .iter()
            .filter(|i| i.state == ItemState::Planned)
            .count()
            >= 15
    );
}

#[test]
fn the_kill_switch_stops_publishing_at_once() {
    let opts = Options {
        canary: 0,
        rate: 200.0,
        watch: Duration::ZERO,
        ..Options::default()
    };
    let p = plan_of(1000, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    let mut pb = Scripted::default();
    let control = Control::default();
    let mut e = Engine::new(&p, control.clone(), Instant::now());
    let t0 = Instant::now();
    let mut now = t0;
    while pb.sent.len() < 10 {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
    }
    control.kill();
    let killed_at = pb.sent.len();
    run(&mut e, &mut pb, &mut l, now, Duration::from_secs(5));
    assert_eq!(pb.sent.len(), killed_at, "no publish starts after the kill");
    assert_eq!(e.end(), Some(&End::Killed));
    let (_, items) = l.replay("r-test").expect("read").expect("row");
    assert_eq!(
        items
            .iter()
            .filter(|i| i.state == ItemState::Settled)
            .count(),
        killed_at
    );
    assert!(
        items.iter().all(|i| i.state != ItemState::Sending),
        "in-flight confirms were awaited"
    );
}

#[test]
fn a_pause_holds_every_publish_keeps_collecting_and_resumes_without_a_burst() {
    let opts = Options {
        canary: 0,
        rate: 100.0,
        watch: Duration::ZERO,
        ..Options::default()
    };
    let p = plan_of(200, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    let mut pb = Scripted::default();
    let control = Control::default();
    let mut e = Engine::new(&p, control.clone(), Instant::now());
    let mut now = Instant::now();
    while pb.sent.len() < 10 {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(control.toggle_pause(), "now paused");
    let at_pause = pb.sent.len();
    // A second of real time paused: nothing starts, confirms in flight are collected.
    let paused_until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < paused_until {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
        std::thread::sleep(Duration::from_millis(5));
    }
    let pr = e.progress(now);
    assert!(pr.paused && pr.line().contains("PAUSED"), "{}", pr.line());
    assert_eq!(pb.sent.len(), at_pause, "nothing sent while paused");
    assert_eq!(pr.in_flight, 0, "confirms were still collected");
    assert_eq!(pr.confirmed, at_pause);
    assert!(!control.toggle_pause(), "resumed");
    let resumed = Instant::now();
    while pb.sent.len() < at_pause + 20 {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
        std::thread::sleep(Duration::from_millis(1));
    }
    // At 100/s, 20 letters take ~0.2 s: a burst of a paused second's tokens would not.
    assert!(
        resumed.elapsed() >= Duration::from_millis(120),
        "resumed at the set rate, not in a burst: {:?}",
        resumed.elapsed()
    );
    let until = Instant::now() + Duration::from_secs(20);
    while !e.done() && Instant::now() < until {
        e.step(&mut pb, &mut l, now).expect("step");
        now += Duration::from_millis(10);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(e.end(), Some(&End::Completed));
    let mut tickets: Vec<u64> = pb.sent.iter().map(|(t, _, _)| *t).collect();
    tickets.sort_unstable();
    tickets.dedup();
    assert_eq!(tickets.len(), 200, "each letter sent once");
}

/// A publisher that writes a batch (the letters between two polls) whole or not at
/// all, in order, as a Kafka transaction does: a key's letters go together, in plan
/// order; when a batch is refused, no later letter of its keys is confirmed.
#[test]
fn with_an_order_keeping_publisher_a_keys_letters_go_together_and_a_refusal_still_holds_back() {
    let opts = Options {
        canary: 0,
        rate: 1e6,
        watch: Duration::ZERO,
        ..Options::default()
    };
    struct Transactional(Scripted);
    impl Publisher for Transactional {
        fn send(&mut self, t: u64, m: &Outgoing) -> Result<(), SourceError> {
            self.0.send(t, m)
        }
        fn confirmations(&mut self, w: Duration) -> Vec<Outcome> {
            let outcomes = self.0.confirmations(w);
            // One refused letter aborts the whole batch.
            if outcomes.iter().any(|(_, o)| o.is_err()) {
                return outcomes
                    .into_iter()
                    .map(|(t, _)| (t, Err(SourceError::failed("its transaction was aborted"))))
                    .collect();
            }
            outcomes
        }
        fn keeps_key_order(&self) -> bool {
            true
        }
    }
    for refuse in [None, Some("{\"n\":13}")] {
        let p = plan_of(30, opts.clone());
        let (_d, mut l) = ledger();
        start(&mut l, &p);
        let mut pb = Transactional(Scripted::default());
        if let Some(r) = refuse {
            pb.0.refuse.insert(r.into());
        }
        let mut e = Engine::new(&p, Control::default(), Instant::now());
        let mut now = Instant::now();
        let mut most_of_one_key = 0;
        while !e.done() {
            e.step(&mut pb, &mut l, now).expect("step");
            let mut per_key: HashMap<Vec<u8>, usize> = HashMap::new();
            for t in &pb.0.waiting {
                if let Some(k) =
                    pb.0.sent
                        .iter()
                        .find(|s| s.0 == *t)
                        .and_then(|s| s.1.key.clone())
                {
                    *per_key.entry(k).or_default() += 1;
                }
            }
            most_of_one_key = most_of_one_key.max(per_key.values().copied().max().unwrap_or(0));
            now += Duration::from_millis(10);
        }
        assert!(
            most_of_one_key > 1,
            "a key's letters went together ({refuse:?})"
        );
        each_key_in_plan_order(&pb.0);
        let (_, items) = l.replay("r-test").expect("read").expect("row");
        match refuse {
            None => assert!(
                items.iter().all(|i| i.state == ItemState::Settled),
                "{items:?}"
            ),
            Some(_) => {
                // The refused letter's key: nothing confirmed after its first refusal.
                let key_of =
                    |i: &dlq_core::journal::ReplayItemRow| p.items[i.seq as usize].key.clone();
                let first_refused = items
                    .iter()
                    .find(|i| i.state == ItemState::Refused)
                    .expect("a refusal");
                let k = key_of(first_refused);
                assert!(
                    items
                        .iter()
                        .filter(|i| key_of(i) == k && i.seq > first_refused.seq)
                        .all(|i| i.state != ItemState::Settled && i.state != ItemState::Confirmed),
                    "{items:?}"
                );
            }
        }
        assert!(l.verify(None).expect("verify").ok);
    }
}

#[test]
fn a_refused_publish_stops_and_holds_back_its_key() {
    let opts = Options {
        canary: 0,
        rate: 1e6,
        watch: Duration::ZERO,
        ..Options::default()
    };
    let p = plan_of(9, opts);
    let (_d, mut l) = ledger();
    start(&mut l, &p);
    let mut pb = Scripted::default();
    pb.refuse.insert("{\"n\":4}".into());
    let mut e = Engine::new(&p, Control::default(), Instant::now());
    run(
        &mut e,
        &mut pb,
        &mut l,
        Instant::now(),
        Duration::from_secs(5),
    );
    assert!(matches!(e.end(), Some(End::AutoStopped(r)) if r.contains("unroutable")));
    let (_, items) = l.replay("r-test").expect("read").expect("row");
    let refused: Vec<_> = items
        .iter()
        .filter(|i| i.state == ItemState::Refused)
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(refused[0]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("unroutable")));
    // No decision for the refused letter: its DLQ copy stays open.
    assert!(!l
        .replay_counts("kafka://b/orders.dlq")
        .expect("counts")
        .contains_key("m-4"));
    assert!(l.verify(None).expect("verify").ok);
}

/// A share group's DLQ record as the broker writes it by default: no key, no value, the
/// origin in `__dlq.errors.*` headers.
fn share_group_letter(i: i64, value: &[u8]) -> RawLetter {
    let h = |n: &str, v: &str| Header::new(n.to_string(), HeaderValue::text(v));
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: "dlq.payments".into(),
            partition: 0,
            offset: i,
        }),
        key: None,
        headers: vec![
            h("__dlq.errors.topic", "payments"),
            h("__dlq.errors.partition", "0"),
            h("__dlq.errors.offset", &(100 + i).to_string()),
            h("__dlq.errors.group", "payments-share"),
            h("__dlq.errors.delivery.count", "5"),
            h(
                "__dlq.errors.message",
                "Offset delivery count exceeded the threshold.",
            ),
        ],
        properties: Vec::new(),
        payload: value.to_vec(),
        timestamp: None,
    }
}

/// A value-less share-group letter is never replayed as an empty record (a revision
/// gives it a payload); one with a copied value is, with a warning that every group
/// reading the source topic gets it again.
#[test]
fn share_group_letters_without_a_value_are_left_out_and_the_blast_radius_is_said() {
    let empty = cand(share_group_letter(1, b""));
    let copied = cand(share_group_letter(2, br#"{"payment":2}"#));
    let p = build(vec![empty, copied], &Options::default(), None);
    assert_eq!(p.items.len(), 1);
    assert_eq!(
        p.items[0].outgoing.target,
        Target::Kafka {
            topic: "payments".into()
        }
    );
    assert_eq!(p.excluded.len(), 1);
    assert_eq!(p.excluded[0].1, Why::NoPayload);
    let w = p
        .warnings
        .iter()
        .find(|w| w.kind == "share-group-source")
        .expect("blast radius");
    assert_eq!(w.count, 1);
    // A revision gives the empty one a payload to send.
    let mut revised = cand(share_group_letter(1, b""));
    revised.revision = Some((1, br#"{"payment":1}"#.to_vec()));
    let opts = Options {
        use_revisions: true,
        ..Options::default()
    };
    let p = build(vec![revised.clone()], &opts, None);
    assert_eq!(p.items.len(), 1, "{:?}", p.excluded);
    assert_eq!(p.items[0].outgoing.payload, br#"{"payment":1}"#);
    assert!(p.warnings.iter().all(|w| w.kind != "no-revision"));
    // Sent with revisions beside a letter that has none (it arrived after the
    // transform): that one is named, it goes as it failed.
    let p = build(
        vec![revised, cand(share_group_letter(3, br#"{"payment":3}"#))],
        &opts,
        None,
    );
    let w = p
        .warnings
        .iter()
        .find(|w| w.kind == "no-revision")
        .expect("the letter without a revision is said");
    assert_eq!(w.count, 1);
}

/// #68: an empty record is never sent, whatever the letter's headers — a value-less
/// Spring-style letter with a perfectly good origin stays out as `no-payload`.
#[test]
fn a_value_less_letter_with_an_origin_is_left_out_as_no_payload() {
    let mut empty = share_group_letter(3, b"");
    empty.headers = vec![
        Header::new("kafka_dlt-original-topic", HeaderValue::text("orders")),
        Header::new("x-message-id", HeaderValue::text("m-empty")),
    ];
    let p = build(vec![cand(empty)], &Options::default(), None);
    assert!(p.items.is_empty(), "{:?}", p.items.len());
    assert_eq!(p.excluded.len(), 1);
    assert_eq!(p.excluded[0].1, Why::NoPayload);
}

/// #68: a byte-identical copy of a letter (the same id and binding twice in the DLQ) is
/// one letter: planned and sent once, the copy left out as `duplicate`.
#[test]
fn a_byte_identical_copy_is_planned_once() {
    let a = cand(share_group_letter(4, br#"{"payment":4}"#));
    let b = cand(share_group_letter(4, br#"{"payment":4}"#));
    let p = build(vec![a, b], &Options::default(), None);
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.excluded.len(), 1);
    assert_eq!(p.excluded[0].1, Why::Duplicate);
}
