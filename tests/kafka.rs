//! The Kafka adapter against librdkafka's in-process mock cluster (real protocol, real
//! TCP ports). No external broker is needed, so these never skip.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{DateTime, Duration, Utc};
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_core::ports::{DlqSource, ScanEvent, SourceError};
use dlq_kafka::demo::produce_all;
use dlq_kafka::KafkaSource;
use rdkafka::mocking::MockCluster;
use std::ops::ControlFlow;
use std::sync::mpsc;

fn letters(topic: &str, n: usize, partitions: i32) -> Vec<RawLetter> {
    let base = DateTime::parse_from_rfc3339("2026-11-29T17:00:00Z")
        .expect("valid")
        .with_timezone(&Utc);
    (0..n)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: topic.into(),
                partition: (i as i32) % partitions,
                offset: 0,
            }),
            key: (i % 5 != 0).then(|| format!("key-{i}").into_bytes()),
            headers: vec![
                Header::new("x-message-id", HeaderValue::text(&format!("m-{i}"))),
                Header::new(
                    "x-reason-code",
                    HeaderValue::text(if i % 2 == 0 { "even" } else { "odd" }),
                ),
                Header::new(
                    "kafka_dlt-original-offset",
                    HeaderValue::Bytes((i as i64).to_be_bytes().to_vec()),
                ),
                Header::new("nullable", HeaderValue::Null),
            ],
            properties: Vec::new(),
            payload: if i % 7 == 0 {
                vec![0xff, 0x00, i as u8]
            } else {
                format!("{{\"n\":{i}}}").into_bytes()
            },
            timestamp: Some(base + Duration::seconds(i as i64)),
        })
        .collect()
}

fn scan(src: &mut dyn DlqSource) -> Result<Vec<RawLetter>, SourceError> {
    let mut got = Vec::new();
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            got.extend(b);
        }
        ControlFlow::Continue(())
    })?;
    Ok(got)
}

#[test]
fn scans_every_partition_with_keys_headers_and_timestamps() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("orders.dlq", 4, 1).expect("topic");
    cluster.create_topic("empty.dlq", 2, 1).expect("topic");
    let sent = letters("orders.dlq", 300, 4);
    produce_all(&cluster.bootstrap_servers(), &sent).expect("seeded");
    let mut src = KafkaSource::new(
        vec![cluster.bootstrap_servers()],
        vec!["orders.dlq".into(), "empty.dlq".into()],
        Vec::new(),
    );
    let got = scan(&mut src).expect("scan completes");
    assert_eq!(got.len(), 300);
    let id = |l: &RawLetter| {
        l.header("x-message-id")
            .and_then(|v| v.as_nonempty_text())
            .expect("id header")
    };
    for l in &got {
        let i: usize = id(l).trim_start_matches("m-").parse().expect("numeric id");
        let want = &sent[i];
        assert_eq!(l.key, want.key, "key of {i}");
        assert_eq!(l.payload, want.payload, "payload of {i}");
        assert_eq!(l.timestamp, want.timestamp, "timestamp of {i}");
        assert_eq!(l.headers, want.headers, "headers of {i}");
        let Some(Coords::Kafka {
            topic, partition, ..
        }) = &l.coords
        else {
            panic!("kafka coords")
        };
        assert_eq!(topic, "orders.dlq");
        assert_eq!(*partition, (i as i32) % 4);
    }
    // Offsets are per partition and in order.
    for p in 0..4 {
        let offs: Vec<i64> = got
            .iter()
            .filter_map(|l| match &l.coords {
                Some(Coords::Kafka {
                    partition, offset, ..
                }) if *partition == p => Some(*offset),
                _ => None,
            })
            .collect();
        assert_eq!(
            offs,
            (0..offs.len() as i64).collect::<Vec<_>>(),
            "partition {p}"
        );
    }
    // Browsing committed nothing: a second scan sees everything again.
    assert_eq!(scan(&mut src).expect("rescan").len(), 300);
}

#[test]
fn unknown_topic_is_a_clear_error() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("real.dlq", 1, 1).expect("topic");
    let mut src = KafkaSource::new(
        vec![cluster.bootstrap_servers()],
        vec!["nope.dlq".into()],
        vec![("allow.auto.create.topics".into(), "false".into())],
    );
    let err = scan(&mut src).expect_err("unknown topic").to_string();
    assert!(err.contains("nope.dlq"), "{err}");
}

#[test]
fn unreachable_broker_fails_in_bounded_time() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut src = KafkaSource::new(vec!["127.0.0.1:1".into()], vec!["t".into()], Vec::new());
        let _ = tx.send(scan(&mut src).map(|v| v.len()).map_err(|e| e.to_string()));
    });
    // Liveness, not performance: a hang would otherwise block the suite forever.
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("scan returned instead of hanging");
    let err = result.expect_err("nothing listens on port 1");
    assert!(err.contains("cannot reach Kafka at 127.0.0.1:1"), "{err}");
}

#[test]
fn bad_client_properties_are_reported() {
    let mut src = KafkaSource::new(
        vec!["127.0.0.1:1".into()],
        vec!["t".into()],
        vec![("no.such.property".into(), "1".into())],
    );
    let err = scan(&mut src).expect_err("bad property").to_string();
    assert!(err.contains("no.such.property"), "{err}");
    // librdkafka quotes a rejected value: a secret one never reaches the message.
    let mut src = KafkaSource::new(
        vec!["127.0.0.1:1".into()],
        vec!["t".into()],
        vec![
            ("sasl.mechanism".into(), "hunter2-not-a-mechanism".into()),
            ("ssl.key.password".into(), "hunter2-not-a-mechanism".into()),
        ],
    );
    let err = scan(&mut src).expect_err("bad value").to_string();
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn tail_picks_up_new_letters_after_the_scan() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("live.dlq", 2, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    produce_all(&bootstrap, &letters("live.dlq", 10, 2)).expect("seeded");
    let mut src = KafkaSource::new(vec![bootstrap.clone()], vec!["live.dlq".into()], Vec::new());
    assert_eq!(scan(&mut src).expect("scan").len(), 10);
    // New arrivals while tailing.
    let later: Vec<RawLetter> = letters("live.dlq", 16, 2).into_iter().skip(10).collect();
    let b2 = bootstrap.clone();
    let producer = std::thread::spawn(move || produce_all(&b2, &later));
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    src.tail(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            got.extend(b);
        }
        if got.len() == 6 || started.elapsed() > std::time::Duration::from_secs(60) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .expect("tail");
    producer.join().expect("producer thread").expect("produced");
    let mut ids: Vec<String> = got
        .iter()
        .filter_map(|l| l.header("x-message-id").and_then(|v| v.as_nonempty_text()))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        vec!["m-10", "m-11", "m-12", "m-13", "m-14", "m-15"],
        "only new letters, each once"
    );
}

#[test]
fn fetch_one_letter_by_offset_and_publish_with_confirmation() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("f.dlq", 2, 1).expect("topic");
    cluster.create_topic("orders", 3, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    let sent = letters("f.dlq", 20, 2);
    produce_all(&bootstrap, &sent).expect("seeded");
    let mut src = KafkaSource::new(vec![bootstrap.clone()], vec!["f.dlq".into()], Vec::new());
    let got = src
        .fetch(&Coords::Kafka {
            topic: "f.dlq".into(),
            partition: 1,
            offset: 3,
        })
        .expect("fetched");
    // Partition 1 holds odd letters in order: offset 3 is letter 7.
    assert_eq!(
        got.header("x-message-id")
            .and_then(|v| v.as_nonempty_text())
            .as_deref(),
        Some("m-7")
    );
    assert_eq!(got.payload, sent[7].payload);
    let missing = src
        .fetch(&Coords::Kafka {
            topic: "f.dlq".into(),
            partition: 0,
            offset: 999,
        })
        .expect_err("past the end");
    // Past the end is said as such, not as removed by retention.
    assert!(
        missing
            .to_string()
            .contains("f.dlq/0/999 does not exist: partition 0 ends at offset 9"),
        "{missing}"
    );

    use dlq_core::ports::{Outgoing, Publisher, Target};
    use dlq_kafka::KafkaPublisher;
    let mut publisher = KafkaPublisher::new(
        std::slice::from_ref(&bootstrap),
        &[],
        std::time::Duration::from_secs(10),
    )
    .expect("publisher");
    publisher.claim("rp-1").expect("the replay's producer");
    let msg = Outgoing {
        target: Target::Kafka {
            topic: "orders".into(),
        },
        key: Some(b"cus-8812".to_vec()),
        headers: vec![Header::new("x-dlq-replay-id", HeaderValue::text("rp-1"))],
        properties: vec![],
        payload: b"{\"amount\":1500}".to_vec(),
    };
    let first = publisher.publish(&msg).expect("confirmed");
    let second = publisher.publish(&msg).expect("confirmed");
    let loc = |c: &dlq_core::ports::Confirmed| c.location.clone().expect("location");
    let (l1, l2) = (loc(&first), loc(&second));
    // Same key, same partition (murmur2), consecutive offsets.
    let part = |l: &str| l.rsplit('/').nth(1).map(str::to_string);
    assert_eq!(part(&l1), part(&l2), "{l1} {l2}");
    let mut check = KafkaSource::new(vec![bootstrap], vec!["orders".into()], Vec::new());
    let back = scan(&mut check).expect("scan orders");
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].key.as_deref(), Some(&b"cus-8812"[..]));
    assert_eq!(
        back[0]
            .header("x-dlq-replay-id")
            .and_then(|v| v.as_nonempty_text())
            .as_deref(),
        Some("rp-1")
    );
}

#[test]
fn publish_to_a_downed_broker_is_a_failure_not_a_success() {
    use dlq_core::ports::{Outgoing, Publisher, Target};
    use dlq_kafka::KafkaPublisher;
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("orders", 1, 1).expect("topic");
    let mut publisher = KafkaPublisher::new(
        &[cluster.bootstrap_servers()],
        &[],
        std::time::Duration::from_secs(3),
    )
    .expect("publisher");
    publisher.claim("rp-2").expect("the replay's producer");
    let msg = Outgoing {
        target: Target::Kafka {
            topic: "orders".into(),
        },
        key: None,
        headers: vec![],
        properties: vec![],
        payload: b"x".to_vec(),
    };
    publisher.publish(&msg).expect("first publish confirmed");
    cluster.broker_down(1).expect("broker down");
    let err = publisher
        .publish(&msg)
        .expect_err("no broker, no confirmation")
        .to_string();
    assert!(
        err.contains("not confirmed") || err.contains("no delivery report"),
        "{err}"
    );
}

#[test]
fn broker_down_mid_scan_is_a_clear_error_not_a_hang() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("big.dlq", 2, 1).expect("topic");
    produce_all(&cluster.bootstrap_servers(), &letters("big.dlq", 2000, 2)).expect("seeded");
    let mut src = KafkaSource::new(
        vec![cluster.bootstrap_servers()],
        vec!["big.dlq".into()],
        vec![
            ("message.max.bytes".into(), "1000".into()),
            ("fetch.max.bytes".into(), "1024".into()),
            ("max.partition.fetch.bytes".into(), "1024".into()),
            ("queued.min.messages".into(), "1".into()),
            ("queued.max.messages.kbytes".into(), "1".into()),
        ],
    )
    .with_stall_timeout(std::time::Duration::from_secs(3));
    let mut seen = 0;
    let result = src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            let before = seen;
            seen += b.len();
            if before < 10 && seen >= 10 {
                let _ = cluster.broker_down(1);
            }
        }
        ControlFlow::Continue(())
    });
    // Either it had already fetched everything before the broker went away, or it stops
    // with a message naming the problem; it must not hang or panic.
    match result {
        Ok(()) => assert_eq!(seen, 2000),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("no progress reading `big.dlq`"), "{msg}");
            // All 2000 may have arrived in librdkafka's prefetch before the broker went
            // away while one partition's end was never confirmed: still incomplete.
            assert!((10..=2000).contains(&seen), "{seen}");
        }
    }
}

#[test]
fn demo_consumer_dead_letters_failed_replays_again_with_the_same_id() {
    use dlq_core::conventions::extract;
    use dlq_core::ports::{Outgoing, Publisher, Target};
    use dlq_kafka::demo::scenario::{consumer_verdict, Scale, INVOICES_DLQ};
    use dlq_kafka::demo::{Demo, Simulator};
    use dlq_kafka::KafkaPublisher;

    let demo = Demo::start(3, Utc::now(), Scale(0.05)).expect("demo");
    let _sim = Simulator::start(demo.bootstrap(), 3, None).expect("simulator");
    let mut dlq = KafkaSource::new(
        vec![demo.bootstrap()],
        vec![INVOICES_DLQ.into()],
        Vec::new(),
    );
    let before: Vec<_> = scan(&mut dlq)
        .expect("scan")
        .into_iter()
        .map(|r| extract(r, &[]))
        .collect();
    let pick = |reason: &str, ok: bool| {
        before
            .iter()
            .find(|d| d.reason_code() == reason && consumer_verdict(&d.raw).is_ok() == ok)
            .cloned()
            .unwrap_or_else(|| panic!("a {reason} letter"))
    };
    let bad = pick("amount_not_a_number", false);
    let good = pick("customer_tax_profile_missing", true);
    let mut publisher =
        KafkaPublisher::new(&[demo.bootstrap()], &[], std::time::Duration::from_secs(10))
            .expect("publisher");
    publisher.claim("rp-3").expect("the replay's producer");
    for d in [&bad, &good] {
        publisher
            .publish(&Outgoing {
                target: Target::Kafka {
                    topic: "invoices".into(),
                },
                key: d.raw.key.clone(),
                headers: d.raw.headers.clone(),
                properties: vec![],
                payload: d.raw.payload.clone(),
            })
            .expect("replay confirmed");
    }
    let count = |letters: &[dlq_core::model::DeadLetter], id: &str| {
        letters.iter().filter(|d| d.id.value.0 == id).count()
    };
    let started = std::time::Instant::now();
    loop {
        let now: Vec<_> = scan(&mut dlq)
            .expect("scan")
            .into_iter()
            .map(|r| extract(r, &[]))
            .collect();
        if count(&now, &bad.id.value.0) == 2 {
            assert_eq!(
                count(&now, &good.id.value.0),
                1,
                "a successful replay must not come back"
            );
            let again = now
                .iter()
                .filter(|d| d.id.value == bad.id.value)
                .max_by_key(|d| d.failure.attempt.as_ref().map(|a| a.value))
                .expect("copy");
            assert_eq!(again.failure.attempt.as_ref().map(|a| a.value), Some(5));
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "failed replay never came back to the DLQ"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The picker and `topics` find the cluster's DLQ topics by name, with their counts.
#[test]
fn dlq_topics_are_discovered_with_their_counts() {
    use dlq_app::brokers::discovery::{discover, DEFAULT_PATTERNS};
    use dlq_app::brokers::OpenOptions;
    use dlq_core::source::SourceRef;

    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("orders.dlq", 2, 1).expect("topic");
    cluster.create_topic("orders", 1, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    produce_all(&bootstrap, &letters("orders.dlq", 7, 2)).expect("seeded");
    let base = SourceRef::Kafka {
        brokers: vec![bootstrap],
        topics: vec!["_".into()],
    };
    let patterns: Vec<String> = DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect();
    let found = discover(&base, &OpenOptions::default(), &patterns, false).expect("discover");
    let names: Vec<(&str, Option<u64>)> =
        found.iter().map(|c| (c.name.as_str(), c.count)).collect();
    assert_eq!(names, [("orders.dlq", Some(7))]);
    assert!(
        matches!(&found[0].source, SourceRef::Kafka { topics, .. } if topics == &["orders.dlq"])
    );
    let all = discover(&base, &OpenOptions::default(), &patterns, true).expect("discover");
    assert!(all.iter().any(|c| c.name == "orders" && !c.looks_like_dlq));
}

/// `watch` keeps a Kafka DLQ open: letters that arrive after the scan are counted at the
/// next evaluation, and the breach is printed then (not only at start).
#[test]
fn watch_sees_letters_that_arrive_while_it_watches() {
    use std::io::BufRead;
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("w.dlq", 2, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    let all = letters("w.dlq", 12, 2);
    produce_all(&bootstrap, &all[..10]).expect("seeded");
    let dir = tempfile::tempdir().expect("tmp");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"))
        .args([
            "--ledger",
            dir.path().join("l.db").to_str().expect("utf-8"),
            "watch",
            &format!("kafka://{bootstrap}/w.dlq"),
            "--rule",
            "count > 5",
            "--every",
            "1s",
            "--json",
        ])
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("watching ") {
        line.clear();
        assert!(
            err.read_line(&mut line).expect("stderr") > 0,
            "watch ended early"
        );
    }
    // Five letters a reason: quiet.
    assert!(rx.recv_timeout(std::time::Duration::from_secs(2)).is_err());
    produce_all(&bootstrap, &all[10..]).expect("two more");
    let mut groups = Vec::new();
    let started = std::time::Instant::now();
    while groups.len() < 2 && started.elapsed() < std::time::Duration::from_secs(30) {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(500)) {
            let v: serde_json::Value = serde_json::from_str(&l).expect("a JSON line");
            assert_eq!(v["event"], "breach", "{l}");
            assert_eq!(v["count"], 6, "{l}");
            groups.push(v["group"].as_str().unwrap_or("").to_string());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    groups.sort();
    assert_eq!(groups, ["even", "odd"]);
}

/// librdkafka's mock cluster does not answer DescribeConfigs: the retention is said to
/// be unknown (in bounded time), groups carry no clock, and nothing is guessed.
#[test]
fn a_broker_that_does_not_describe_configs_gives_retention_unknown() {
    let cluster = MockCluster::new(1).expect("mock");
    cluster.create_topic("kept.dlq", 1, 1).expect("topic");
    produce_all(&cluster.bootstrap_servers(), &letters("kept.dlq", 5, 1)).expect("produce");
    let mut src = KafkaSource::new(
        vec![cluster.bootstrap_servers()],
        vec!["kept.dlq".into()],
        Vec::new(),
    );
    let started = std::time::Instant::now();
    let rules = src.retention();
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(rules.len(), 1);
    let (topic, rule) = &rules[0];
    assert_eq!(topic, "kept.dlq");
    assert!(
        matches!(rule, dlq_core::retention::Retention::Unknown(_)),
        "{rule:?}"
    );
    assert!(
        rule.describe().starts_with("retention unknown"),
        "{}",
        rule.describe()
    );
    let home = tempfile::tempdir().expect("tmp");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"))
        .args([
            "summary",
            &format!("kafka://{}/kept.dlq", cluster.bootstrap_servers()),
            "--json",
        ])
        .env("XDG_STATE_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(doc["retention"][0]["rule"]
        .as_str()
        .expect("rule")
        .starts_with("retention unknown"));
    assert!(doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .all(|g| g["expires_in_s"].is_null()));
}

/// What librdkafka's mock cluster (the tests' and the demo's broker) does when a second
/// producer initialises a transactional id another producer has an open transaction
/// under — a replay's takeover. A Kafka broker bumps the epoch, aborts the open
/// transaction and answers the old producer's commit `ProducerFenced`. This pins what the
/// mock does instead, so the README's statement of it stays checked: if a librdkafka
/// upgrade makes the mock fence, this fails and the README (and the frozen-holder tests,
/// which could then count the broker's fence) change with it.
#[test]
fn the_mock_cluster_lets_a_superseded_transactional_producer_commit() {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::Message;
    let cluster = MockCluster::new(1).expect("mock");
    cluster.create_topic("fenced", 1, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    let producer = || -> BaseProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("transactional.id", "dlq-triage-replay-r-fence")
            .create()
            .expect("producer")
    };
    let wait = std::time::Duration::from_secs(10);
    let old = producer();
    old.init_transactions(wait).expect("old init");
    old.begin_transaction().expect("old begin");
    old.send(
        BaseRecord::<str, str>::to("fenced")
            .key("k")
            .payload("from the old holder"),
    )
    .expect("old send");
    old.flush(wait).expect("old flush");
    let new = producer();
    new.init_transactions(wait).expect("the taker's init");
    let old_commit = old.commit_transaction(wait);
    new.begin_transaction().expect("new begin");
    new.send(
        BaseRecord::<str, str>::to("fenced")
            .key("k")
            .payload("from the taker"),
    )
    .expect("new send");
    new.commit_transaction(wait).expect("new commit");
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "fence-check")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    reader.subscribe(&["fenced"]).expect("subscribe");
    let mut read = Vec::new();
    let started = std::time::Instant::now();
    while read.len() < 2 && started.elapsed() < std::time::Duration::from_secs(20) {
        if let Some(Ok(m)) = reader.poll(std::time::Duration::from_millis(200)) {
            read.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string());
        }
    }
    // A broker: Err(ProducerFenced), and a read_committed reader sees only the taker's.
    assert!(
        old_commit.is_ok(),
        "the mock now fences the old producer ({old_commit:?}): update the README"
    );
    assert_eq!(
        read,
        vec![
            "from the old holder".to_string(),
            "from the taker".to_string()
        ],
        "the mock's read_committed reader"
    );
}

/// Who a replay to a topic reaches: the groups with committed offsets on it, each with
/// its lag, looked up without joining any. The mock cluster does not answer ListGroups,
/// so only the groups named are checked, and that is said.
#[test]
fn the_groups_that_read_a_topic_are_found_with_their_lag() {
    use dlq_core::ports::OriginLog;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("orders", 2, 1).expect("topic");
    cluster.create_topic("other", 1, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    produce_all(&bootstrap, &letters("orders", 10, 2)).expect("seeded");
    // `billing` has read 3 of partition 0's 5 records and all 5 of partition 1's.
    let billing: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "billing")
        .create()
        .expect("consumer");
    let mut at = TopicPartitionList::new();
    at.add_partition_offset("orders", 0, Offset::Offset(3))
        .expect("tp");
    at.add_partition_offset("orders", 1, Offset::Offset(5))
        .expect("tp");
    billing.commit(&at, CommitMode::Sync).expect("committed");
    // `audit` reads only `other`.
    let audit: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "audit")
        .create()
        .expect("consumer");
    let mut at = TopicPartitionList::new();
    at.add_partition_offset("other", 0, Offset::Offset(0))
        .expect("tp");
    audit.commit(&at, CommitMode::Sync).expect("committed");

    let mut log = dlq_kafka::KafkaOriginLog::new(&[bootstrap], &[]);
    let named = ["billing".to_string(), "audit".into(), "nobody".into()];
    let r = log.readers("orders", &named).expect("readers");
    assert_eq!(r.groups, vec![("billing".to_string(), Some(2))]);
    assert!(!r.listed, "the mock cluster does not list groups");
    assert_eq!((r.checked, r.unchecked), (3, 0));
    let none = log
        .readers("other", &["billing".to_string()])
        .expect("readers");
    assert!(none.groups.is_empty());
}

/// `why`'s baseline from the origin topic: the records around the failed offsets, read
/// by assignment (nothing committed, no group joined) and bounded, the failed records
/// themselves left out — so the difference is the failing letters' own.
#[test]
fn the_origin_records_around_the_failed_offsets_are_the_baseline() {
    use dlq_core::ports::OriginLog;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("orders", 1, 1).expect("topic");
    cluster.create_topic("orders.dlq", 1, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    let failed: Vec<i64> = (1..=10).map(|i| i * 5).collect();
    let record = |offset: i64, amount: serde_json::Value, headers: Vec<Header>| RawLetter {
        coords: Some(Coords::Kafka {
            topic: if headers.is_empty() {
                "orders"
            } else {
                "orders.dlq"
            }
            .into(),
            partition: 0,
            offset,
        }),
        key: Some(format!("k-{offset}").into_bytes()),
        headers,
        payload: serde_json::json!({"amount": amount, "currency": "EUR"})
            .to_string()
            .into_bytes(),
        ..RawLetter::default()
    };
    // The origin: 200 records, the failed ones with the amount as text.
    let origin: Vec<RawLetter> = (0..200)
        .map(|o| {
            let amount = if failed.contains(&o) {
                serde_json::json!("1,500.00")
            } else {
                serde_json::json!(12.5 + o as f64)
            };
            record(o, amount, Vec::new())
        })
        .collect();
    produce_all(&bootstrap, &origin).expect("origin");
    let letters: Vec<RawLetter> = failed
        .iter()
        .map(|o| {
            let h = |n: &'static str, v: &str| Header::new(n, HeaderValue::text(v));
            let headers = vec![
                h("x-reason-code", "amount_not_a_number"),
                h("x-original-topic", "orders"),
                h("x-original-partition", "0"),
                h("x-original-offset", &o.to_string()),
            ];
            record(*o, serde_json::json!("1,500.00"), headers)
        })
        .collect();
    produce_all(&bootstrap, &letters).expect("dlq");

    let masker = dlq_core::masking::Masker::with_key(vec![7]);
    let mut catalog = dlq_core::catalog::Catalog::new(masker.clone(), Vec::new());
    let mut kept = std::collections::HashMap::new();
    let mut src = KafkaSource::new(
        vec![bootstrap.clone()],
        vec!["orders.dlq".into()],
        Vec::new(),
    );
    for raw in scan(&mut src).expect("scan") {
        let (dl, preview) = dlq_core::catalog::prepare_letter(&masker, &[], raw);
        let row = catalog.store.push(&dl, &preview);
        kept.insert(row, std::sync::Arc::new(dl));
    }
    let rows: Vec<u32> = kept.keys().copied().collect();
    let mut log = dlq_kafka::KafkaOriginLog::new(std::slice::from_ref(&bootstrap), &[]);
    let w = dlq_app::insight::group_insight_with(
        &catalog,
        &rows,
        &|r| kept.get(&r).cloned(),
        dlq_core::access::Role::Operator,
        1_764_000_000_000,
        8,
        Some(&mut log as &mut dyn OriginLog),
    );
    let p = w.payloads.expect("compared");
    assert!(
        p.baseline
            .starts_with("records of orders around the failed offsets"),
        "{}",
        p.baseline
    );
    // Within 10 of a failed offset (5..=50): offsets 0..=60, the 10 failed ones left
    // out — 51 records.
    assert_eq!(p.baseline_read, 51, "{p:#?}");
    assert_eq!(
        p.differences[0].line,
        "/amount: string \"1,500.00\"-like in 10 of 10; number in 51 of 51 baseline letters"
    );
    assert!(p.suggestion.is_some());
    // Bounded: a budget of 5 reads 5.
    let few = log.around("orders", 0, &failed, 10, 5).expect("read");
    assert_eq!(few.len(), 5);
    // Nothing was committed for the reader's group, and no group joined.
    let browse_group = format!("dlq-triage-browse-{}", std::process::id());
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &browse_group)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("orders", 0);
    let committed = probe
        .committed_offsets(tpl, std::time::Duration::from_secs(10))
        .expect("offsets");
    assert!(committed
        .elements()
        .iter()
        .all(|e| e.offset() == Offset::Invalid));
}

/// #57: a share group's DLQ record without a value (KIP-1191's default) is read with its
/// source record's value and key — by assignment, never joining a group — and says where
/// they came from; one whose source record is not there says why and stays empty (the
/// plan leaves it out). A record with its own value is left as it is.
#[test]
fn value_less_share_group_letters_get_their_source_record() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("payments", 1, 1).expect("topic");
    cluster.create_topic("dlq.payments", 1, 1).expect("topic");
    let bootstrap = cluster.bootstrap_servers();
    let source: Vec<RawLetter> = (0..10)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "payments".into(),
                partition: 0,
                offset: i,
            }),
            key: Some(format!("pay-{i}").into_bytes()),
            payload: format!("{{\"payment\":{i}}}").into_bytes(),
            ..RawLetter::default()
        })
        .collect();
    produce_all(&bootstrap, &source).expect("source");
    let shared = |i: i64, source_offset: i64, value: &[u8]| {
        let h = |n: &'static str, v: &str| Header::new(n, HeaderValue::text(v));
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
                h("__dlq.errors.offset", &source_offset.to_string()),
                h("__dlq.errors.group", "payments-share"),
                h("__dlq.errors.message", "Offset rejected by client."),
            ],
            payload: value.to_vec(),
            ..RawLetter::default()
        }
    };
    let dlq = vec![
        shared(0, 3, b""),
        shared(1, 7, b""),
        shared(2, 99, b""),
        shared(3, 4, br#"{"copied":true}"#),
    ];
    produce_all(&bootstrap, &dlq).expect("dlq");
    let mut src = KafkaSource::new(
        vec![bootstrap.clone()],
        vec!["dlq.payments".into()],
        Vec::new(),
    );
    let got = scan(&mut src).expect("scan");
    let source_of = |l: &RawLetter| {
        l.header(dlq_kafka::share_source::SOURCE_HEADER)
            .and_then(|v| v.as_nonempty_text())
    };
    assert_eq!(got.len(), 4);
    assert_eq!(got[0].payload, br#"{"payment":3}"#);
    assert_eq!(got[0].key.as_deref(), Some(&b"pay-3"[..]));
    assert_eq!(
        source_of(&got[0]).as_deref(),
        Some("source record payments/0/3")
    );
    assert_eq!(got[1].payload, br#"{"payment":7}"#);
    assert!(got[2].payload.is_empty());
    assert_eq!(
        source_of(&got[2]).as_deref(),
        Some("source record payments/0/99 not read: the source partition ends at offset 9")
    );
    assert_eq!(got[3].payload, br#"{"copied":true}"#);
    assert_eq!(
        source_of(&got[3]),
        None,
        "its own value: not read from the source"
    );
    // Fetching one letter again gives the same.
    let again = src
        .fetch(&Coords::Kafka {
            topic: "dlq.payments".into(),
            partition: 0,
            offset: 1,
        })
        .expect("fetched");
    assert_eq!(again.payload, br#"{"payment":7}"#);
    // Discovery names the share group whose DLQ a topic is; a plain topic has none.
    let brokers = [bootstrap];
    assert_eq!(
        dlq_kafka::share_group(&brokers, &[], "dlq.payments").as_deref(),
        Some("payments-share")
    );
    assert_eq!(dlq_kafka::share_group(&brokers, &[], "payments"), None);
}

/// #57: the letters the 2026 brokers and libraries write, header for header as they
/// write them, on the mock cluster: a share group's broker-written DLQ (value-less, two
/// reasons), Kafka Streams (KIP-1034), Karafka and Watermill. `summary --json` groups
/// each by its own reason and consumer — and reads the share group's reasons from the
/// headers without fetching a single source record.
#[test]
fn the_2026_conventions_group_by_their_own_reason_and_consumer() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    for t in [
        "orders",
        "dlq.orders",
        "orders-enricher-dlq",
        "dead_messages",
        "poison_queue",
    ] {
        cluster.create_topic(t, 1, 1).expect("topic");
    }
    let bootstrap = cluster.bootstrap_servers();
    let at = |topic: &str, offset: i64| {
        Some(Coords::Kafka {
            topic: topic.into(),
            partition: 0,
            offset,
        })
    };
    let text = |n: &'static str, v: &str| Header::new(n, HeaderValue::text(v));
    let record = |topic: &str, offset: i64, headers: Vec<Header>, value: &[u8]| RawLetter {
        coords: at(topic, offset),
        headers,
        payload: value.to_vec(),
        timestamp: Some(
            DateTime::parse_from_rfc3339("2026-12-05T09:00:00Z")
                .expect("t")
                .into(),
        ),
        ..RawLetter::default()
    };
    let source: Vec<RawLetter> = (0..4)
        .map(|i| {
            record(
                "orders",
                i,
                Vec::new(),
                format!("{{\"order\":{i}}}").as_bytes(),
            )
        })
        .collect();
    produce_all(&bootstrap, &source).expect("source");
    // KIP-1191: the broker writes UTF-8 text headers and, by default, no key or value.
    let share = |offset: i64, source_offset: i64, count: &str, message: &str| {
        record(
            "dlq.orders",
            offset,
            vec![
                text("__dlq.errors.topic", "orders"),
                text("__dlq.errors.partition", "0"),
                text("__dlq.errors.offset", &source_offset.to_string()),
                text("__dlq.errors.group", "orders-share"),
                text("__dlq.errors.delivery.count", count),
                text("__dlq.errors.message", message),
            ],
            b"",
        )
    };
    // KIP-1034: the exception class, its message and stack trace, the input record's
    // coordinates, as UTF-8 text.
    let streams = |offset: i64| {
        record(
            "orders-enricher-dlq",
            offset,
            vec![
                text(
                    "__streams.errors.exception",
                    "org.apache.kafka.common.errors.SerializationException",
                ),
                text(
                    "__streams.errors.message",
                    "Size of data received by IntegerDeserializer is not 4",
                ),
                text("__streams.errors.stacktrace", "org.apache.kafka.common.errors.SerializationException: Size of data received by IntegerDeserializer is not 4\n\tat org.apache.kafka.common.serialization.IntegerDeserializer.deserialize(IntegerDeserializer.java:30)"),
                text("__streams.errors.topic", "orders"),
                text("__streams.errors.partition", "0"),
                text("__streams.errors.offset", &offset.to_string()),
            ],
            br#"{"order":"ord-9"}"#,
        )
    };
    // Karafka's dispatch to the DLQ: the source coordinates and group as text, no reason.
    let karafka = record(
        "dead_messages",
        0,
        vec![
            text("source_topic", "orders_states"),
            text("source_partition", "2"),
            text("source_offset", "3141"),
            text("source_consumer_group", "example_app_group"),
            text("source_attempts", "3"),
        ],
        br#"{"order_id":4}"#,
    );
    // Watermill's poison queue middleware: its metadata as text headers.
    let watermill =
        record(
            "poison_queue",
            0,
            vec![
            text("_watermill_message_uuid", "a3c1e2f4-0b5d-4e6f-8a9b-1c2d3e4f5a6b"),
            text(
                "reason_poisoned",
                "could not handle message: invalid character 'x' looking for beginning of value",
            ),
            text("topic_poisoned", "orders.created"),
            text("handler_poisoned", "orders-projector"),
            text("subscriber_poisoned", "kafka.Subscriber"),
        ],
            br#"x{"order": 1}"#,
        );
    let mut all = vec![
        share(0, 1, "1", "Offset rejected by client."),
        share(1, 2, "1", "Offset rejected by client."),
        share(2, 3, "5", "Offset delivery count exceeded the threshold."),
        streams(0),
        streams(1),
        karafka,
        watermill,
    ];
    all.iter_mut().for_each(|l| l.properties.clear());
    produce_all(&bootstrap, &all).expect("dlq records");

    let cli = dlq_testkit::cli::Cli::new(env!("CARGO_BIN_EXE_dlq-triage"));
    let uri =
        format!("kafka://{bootstrap}/dlq.orders,orders-enricher-dlq,dead_messages,poison_queue");
    let out = cli.run(&["summary", "--json", "--group-by", "reason,consumer", &uri]);
    let doc: serde_json::Value =
        serde_json::from_str(&dlq_testkit::cli::exited(&out, 0)).expect("json");
    let mut groups: Vec<(String, String, u64)> = doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["reason_code"].as_str().unwrap_or("?").to_string(),
                g["consumer"].as_str().unwrap_or("?").to_string(),
                g["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    groups.sort();
    let own = |r: &str, c: &str, n: u64| (r.to_string(), c.to_string(), n);
    assert_eq!(
        groups,
        vec![
            // Streams: the exception class before its message, numbers fingerprinted;
            // KIP-1034 writes no application id, so no consumer.
            own(
                "SerializationException: Size of data received by IntegerDeserializer is not <n>",
                "",
                2
            ),
            // Watermill: the handler's error fingerprinted, the handler as consumer.
            own(
                "could not handle message: invalid character <str> looking for beginning of value",
                "orders-projector",
                1
            ),
            own("delivery-limit-reached", "orders-share", 1),
            own("rejected-by-consumer", "orders-share", 2),
            // Karafka writes no reason: its group and attempts only.
            own("unknown", "example_app_group", 1),
        ],
        "{doc:#}"
    );

    // A scan that reads headers only (what `summary` asks) leaves the share group's
    // letters as the broker wrote them: no source record read, no note added. A scan
    // that wants payloads reads them, three in one batch.
    let source_of = |l: &RawLetter| l.header(dlq_kafka::share_source::SOURCE_HEADER).is_some();
    let mut src = KafkaSource::new(
        vec![bootstrap.clone()],
        vec!["dlq.orders".into()],
        Vec::new(),
    );
    src.want_payloads(false);
    let got = scan(&mut src).expect("scan");
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|l| l.payload.is_empty() && !source_of(l)));
    src.want_payloads(true);
    let got = scan(&mut src).expect("scan");
    let payloads: Vec<&[u8]> = got.iter().map(|l| l.payload.as_slice()).collect();
    assert_eq!(
        payloads,
        [&br#"{"order":1}"#[..], br#"{"order":2}"#, br#"{"order":3}"#]
    );
}

/// #70, 2: `--since` never answers a reassuring nothing because the broker's time lookup
/// said "nothing since" (librdkafka's mock answers every lookup with End): the answer is
/// checked against each partition's newest record, and the letters of the last hour are
/// found — exactly those `list` dates within it.
#[test]
fn since_finds_the_last_hours_letters_on_the_mock_cluster() {
    use dlq_kafka::demo::scenario::Scale;
    let now = Utc::now();
    let demo = dlq_kafka::demo::Demo::start(11, now, Scale(0.1)).expect("demo");
    let cli = dlq_testkit::cli::Cli::new(env!("CARGO_BIN_EXE_dlq-triage"))
        .with("DLQ_TRIAGE_NOW", now.to_rfc3339());
    let uri = format!("kafka://{}/invoices.dlq,payments.dlq", demo.bootstrap());
    let since = cli.run(&["list", &uri, "--since", "1h", "--json", "--limit", "0"]);
    assert!(
        since.status.success(),
        "{}",
        String::from_utf8_lossy(&since.stderr)
    );
    let since: serde_json::Value = serde_json::from_slice(&since.stdout).expect("json");
    let all = cli.run(&["list", &uri, "--json", "--limit", "0"]);
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).expect("json");
    let hour_ago = now - Duration::hours(1);
    let within = all["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| {
            l["dead_lettered_at"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t.with_timezone(&Utc) >= hour_ago)
        })
        .count();
    assert!(within > 0, "the demo has letters of the last hour");
    assert_eq!(
        since["total"].as_u64(),
        Some(within as u64),
        "{}",
        since["total"]
    );
}
