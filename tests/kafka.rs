//! The Kafka adapter against librdkafka's in-process mock cluster (real protocol, real
//! TCP ports). No external broker is needed, so these never skip.

use chrono::{DateTime, Duration, Utc};
use dlq_triage::brokers::demo::produce_all;
use dlq_triage::brokers::kafka::KafkaSource;
use dlq_triage::core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_triage::core::ports::{DlqSource, ScanEvent, SourceError};
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
        if let ScanEvent::Letter(l) = ev {
            got.push(l);
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
}
