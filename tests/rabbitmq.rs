//! The RabbitMQ adapter against the real server on 127.0.0.1:5672 (guest/guest). Each
//! test declares its own uniquely named queues with real dead-lettering (consumer reject,
//! TTL expiry, max-length), so `x-death` is the broker's own, and deletes them after.
//! Without a server these tests skip with a message, unless DLQ_TRIAGE_REQUIRE_BROKERS=1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_amqp::{AmqpTarget, RabbitPublisher, RabbitSource};
use dlq_core::conventions::extract;
use dlq_core::model::{DeadLetter, Origin, RawLetter};
use dlq_core::ports::{DlqSource, Outgoing, Publisher, ScanEvent, Settled, Target};
use dlq_tui::action::{BrowseEvent, Event as UiEvent, LedgerEvent, ReplayEvent};
use futures_lite::StreamExt;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties, ExchangeKind};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

fn target() -> AmqpTarget {
    AmqpTarget {
        tls: false,
        user: "guest".into(),
        password: "guest".into(),
        host: "127.0.0.1".into(),
        port: 5672,
        vhost: "/".into(),
        tls_files: Default::default(),
    }
}

/// Is the server there? Fails instead of skipping when CI requires brokers.
fn rabbit_available() -> bool {
    let up = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:5672".parse().expect("addr"),
        Duration::from_secs(2),
    )
    .is_ok();
    if !up {
        assert!(
            std::env::var("DLQ_TRIAGE_REQUIRE_BROKERS").as_deref() != Ok("1"),
            "RabbitMQ is required (DLQ_TRIAGE_REQUIRE_BROKERS=1) but nothing listens on 127.0.0.1:5672"
        );
        eprintln!("SKIPPED: RabbitMQ is not running on 127.0.0.1:5672 (start it with `rabbitmq-server -detached`)");
    }
    up
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A work exchange + queue dead-lettering into a DLQ, plus TTL and max-length queues
/// dead-lettering into the same DLQ. Deleted on drop.
struct Topology {
    id: String,
    rt: tokio::runtime::Runtime,
    conn: Connection,
}

impl Topology {
    fn new(tag: &str) -> Self {
        let id = format!(
            "{tag}.{}.{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let rt = rt();
        let conn = rt
            .block_on(Connection::connect(
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                ConnectionProperties::default(),
            ))
            .expect("connect");
        let t = Topology { id, rt, conn };
        t.rt.block_on(async {
            let ch = t.conn.create_channel().await.expect("channel");
            let s = |x: &str| ShortString::from(x);
            let dlx_args = |extra: Vec<(&str, AMQPValue)>| {
                let mut a = FieldTable::default();
                a.insert(
                    s("x-dead-letter-exchange"),
                    AMQPValue::LongString(LongString::from(t.n("dlx").into_bytes())),
                );
                for (k, v) in extra {
                    a.insert(s(k), v);
                }
                a
            };
            ch.exchange_declare(
                s(&t.n("dlx")),
                ExchangeKind::Fanout,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("dlx");
            ch.exchange_declare(
                s(&t.n("orders")),
                ExchangeKind::Direct,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("orders");
            ch.queue_declare(
                s(&t.n("dlq")),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("dlq");
            ch.queue_bind(
                s(&t.n("dlq")),
                s(&t.n("dlx")),
                s(""),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind dlq");
            ch.queue_declare(
                s(&t.n("work")),
                QueueDeclareOptions::default(),
                dlx_args(vec![]),
            )
            .await
            .expect("work");
            ch.queue_bind(
                s(&t.n("work")),
                s(&t.n("orders")),
                s("order.created"),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind work");
            ch.queue_declare(
                s(&t.n("ttl")),
                QueueDeclareOptions::default(),
                dlx_args(vec![("x-message-ttl", AMQPValue::LongInt(1))]),
            )
            .await
            .expect("ttl");
            ch.queue_declare(
                s(&t.n("max")),
                QueueDeclareOptions::default(),
                dlx_args(vec![("x-max-length", AMQPValue::LongInt(1))]),
            )
            .await
            .expect("max");
        });
        t
    }

    fn n(&self, what: &str) -> String {
        format!("{what}.{}", self.id)
    }

    fn bind(&self, queue: &str, exchange: &str, key: &str) {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            ch.queue_bind(
                ShortString::from(queue),
                ShortString::from(exchange),
                ShortString::from(key),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind");
        });
    }

    fn publish(&self, exchange: &str, rk: &str, id: &str, body: &str) {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            let mut h = FieldTable::default();
            h.insert(
                ShortString::from("x-consumer-version"),
                AMQPValue::LongString(LongString::from(b"v1".to_vec())),
            );
            ch.basic_publish(
                ShortString::from(exchange),
                ShortString::from(rk),
                BasicPublishOptions::default(),
                body.as_bytes(),
                BasicProperties::default()
                    .with_message_id(ShortString::from(id))
                    .with_headers(h),
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        });
    }

    /// Consume `n` from the work queue and reject them: the broker dead-letters them.
    fn reject_from_work(&self, n: usize) {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            let mut c = ch
                .basic_consume(
                    ShortString::from(self.n("work")),
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .expect("consume");
            for _ in 0..n {
                let d = tokio::time::timeout(Duration::from_secs(10), c.next())
                    .await
                    .expect("delivery in time")
                    .expect("stream")
                    .expect("delivery");
                d.reject(BasicRejectOptions { requeue: false })
                    .await
                    .expect("reject");
            }
            let _ = ch.close(200, ShortString::from("done")).await;
        });
    }

    fn count(&self, queue: &str) -> u32 {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            let q = ch
                .queue_declare(
                    ShortString::from(queue),
                    QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .expect("passive");
            let _ = ch.close(200, ShortString::from("done")).await;
            q.message_count()
        })
    }

    fn wait_for(&self, queue: &str, n: u32) {
        let started = Instant::now();
        while self.count(queue) < n {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{queue} never reached {n} messages"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.rt.block_on(async {
            if let Ok(ch) = self.conn.create_channel().await {
                for q in ["dlq", "work", "ttl", "max"] {
                    let _ = ch
                        .queue_delete(ShortString::from(self.n(q)), QueueDeleteOptions::default())
                        .await;
                }
                for e in ["dlx", "orders"] {
                    let _ = ch
                        .exchange_delete(
                            ShortString::from(self.n(e)),
                            ExchangeDeleteOptions::default(),
                        )
                        .await;
                }
            }
        });
    }
}

/// The letters of a scan event (none for the others).
fn letters_of(ev: ScanEvent) -> Vec<RawLetter> {
    match ev {
        ScanEvent::Letters(b) => b,
        _ => Vec::new(),
    }
}

fn browse(src: &mut RabbitSource) -> (Vec<DeadLetter>, Vec<String>) {
    let mut letters = Vec::new();
    let mut problems = Vec::new();
    src.scan(&mut |ev| {
        match ev {
            ScanEvent::Letters(b) => letters.extend(b.into_iter().map(|raw| extract(raw, &[]))),
            // Unreadable records are marked: a notice about the browse is not one.
            ScanEvent::Problem { message, .. } => problems.push(format!("problem: {message}")),
            ScanEvent::Notice { message, .. } => problems.push(message),
            ScanEvent::Partial {
                browsed,
                total,
                why,
                ..
            } => problems.push(format!("browsed {browsed} of {total}: {why}")),
            ScanEvent::Progress { .. } => {}
        }
        ControlFlow::Continue(())
    })
    .expect("browse");
    (letters, problems)
}

/// Orders `m-0`… published to the work queue and rejected there by the consumer: the
/// broker dead-letters them with its own `x-death`.
fn rejected_orders(t: &Topology, n: usize, body: impl Fn(usize) -> String) {
    for i in 0..n {
        t.publish(&t.n("orders"), "order.created", &format!("m-{i}"), &body(i));
    }
    t.reject_from_work(n);
}

/// 5 rejected by the consumer, 3 expired by TTL, 2 pushed out by max-length.
fn seeded(tag: &str) -> Topology {
    let t = Topology::new(tag);
    rejected_orders(&t, 5, |i| {
        format!("{{\"order\":{i},\"email\":\"jane{i}@example.com\"}}")
    });
    for i in 0..3 {
        t.publish("", &t.n("ttl"), &format!("t-{i}"), "{}");
    }
    for i in 0..3 {
        t.publish("", &t.n("max"), &format!("x-{i}"), "{}");
    }
    t.wait_for(&t.n("dlq"), 10);
    t
}

#[test]
fn browse_groups_real_dead_letters_by_reason_and_origin_and_releases_them() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("browse");
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")]).expect("source");
    let (letters, problems) = browse(&mut src);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(letters.len(), 10);
    let count = |r: &str| letters.iter().filter(|d| d.reason_code() == r).count();
    assert_eq!(
        (count("rejected"), count("expired"), count("maxlen")),
        (5, 3, 2)
    );
    let rejected = letters
        .iter()
        .find(|d| d.id.value.0 == "m-3")
        .expect("m-3 by its message id");
    assert_eq!(
        rejected.failure.origin.as_ref().map(|o| o.value.clone()),
        Some(Origin::Amqp {
            exchange: t.n("orders"),
            routing_keys: vec!["order.created".into()],
            queue: Some(t.n("work"))
        })
    );
    assert_eq!(
        rejected
            .failure
            .consumer_version
            .as_ref()
            .map(|v| v.value.as_str()),
        Some("v1")
    );
    assert!(rejected.dead_lettered_at.is_some(), "x-death time");
    // While browsed, the messages are held (unacked), not gone; after, all are back.
    drop(src);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        t.count(&t.n("dlq")),
        10,
        "browse-then-exit must leave the DLQ as it was"
    );
}

#[test]
fn settle_removes_exactly_that_letter() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("settle");
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")]).expect("source");
    let (letters, _) = browse(&mut src);
    let victim = letters.iter().find(|d| d.id.value.0 == "m-2").expect("m-2");
    src.settle(victim.raw.coords.as_ref().expect("coords"))
        .expect("acked");
    // Settling something not held is refused, not guessed.
    let bogus = dlq_core::model::Coords::Amqp {
        vhost: "/".into(),
        queue: t.n("dlq"),
        position: 999,
        stream_offset: None,
    };
    assert!(src.settle(&bogus).is_err());
    drop(src);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.count(&t.n("dlq")), 9);
    let mut again = RabbitSource::new(target(), vec![t.n("dlq")]).expect("source");
    let (after, _) = browse(&mut again);
    let ids: Vec<&str> = after.iter().map(|d| d.id.value.0.as_str()).collect();
    assert!(!ids.contains(&"m-2") && ids.contains(&"m-1"), "{ids:?}");
}

#[test]
fn a_max_letters_cap_is_reported_not_silent() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("limit");
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")])
        .expect("source")
        .with_max_letters(Some(4));
    let (letters, problems) = browse(&mut src);
    assert_eq!(letters.len(), 4);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("browsed 4 of 10: --max-letters 4")),
        "{problems:?}"
    );
    drop(src);
    t.wait_for(&t.n("dlq"), 10);
}

#[test]
fn publish_is_confirmed_and_unroutable_is_a_failure() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("publish");
    let mut p = RabbitPublisher::new(&target()).expect("publisher");
    let msg = |rk: &str| Outgoing {
        target: Target::Amqp {
            exchange: t.n("orders"),
            routing_key: rk.into(),
        },
        key: None,
        headers: vec![dlq_core::model::Header::new(
            "x-dlq-replay-id",
            dlq_core::model::HeaderValue::text("rp-1"),
        )],
        properties: vec![("message_id".into(), "m-7".into())],
        payload: b"{}".to_vec(),
    };
    let err = p
        .publish(&msg("nowhere"))
        .expect_err("unroutable")
        .to_string();
    assert!(err.contains("unroutable"), "{err}");
    p.publish(&msg("order.created")).expect("confirmed");
    t.wait_for(&t.n("work"), 1);
}

#[test]
fn missing_queue_and_bad_credentials_are_clear() {
    if !rabbit_available() {
        return;
    }
    let mut src =
        RabbitSource::new(target(), vec!["no.such.queue.dlq-triage".into()]).expect("source");
    let err = src
        .scan(&mut |_| ControlFlow::Continue(()))
        .expect_err("missing queue")
        .to_string();
    assert!(
        err.contains("no.such.queue.dlq-triage") && err.contains("does it exist"),
        "{err}"
    );
    let bad = AmqpTarget {
        password: "wrong".into(),
        ..target()
    };
    let mut src = RabbitSource::new(bad, vec!["q".into()]).expect("source");
    let err = src
        .scan(&mut |_| ControlFlow::Continue(()))
        .expect_err("bad password")
        .to_string();
    assert!(
        err.contains("guest") && !err.contains("wrong"),
        "names the user, never the password: {err}"
    );

    // A port that answers in HTTP (a proxy, the management port behind one): said in
    // words, not as the frame parser's debug dump.
    let http = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = http.local_addr().expect("addr").port();
    let answer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = http.accept() {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
        }
    });
    let mut src =
        RabbitSource::new(AmqpTarget { port, ..target() }, vec!["q".into()]).expect("source");
    let err = src
        .scan(&mut |_| ControlFlow::Continue(()))
        .expect_err("not AMQP")
        .to_string();
    assert!(err.contains("answered, but not in AMQP 0-9-1"), "{err}");
    assert!(!err.contains("Nom("), "{err}");
    let _ = answer.join();
}

/// Close one named client connection from the server side, as a consumer timeout, an
/// operator or a broker restart would.
fn server_closes(connection_name: &str) {
    let out = std::process::Command::new("rabbitmqctl")
        .args(["list_connections", "pid", "client_properties"])
        .output()
        .expect("rabbitmqctl runs (it ships with the server)");
    let listing = String::from_utf8_lossy(&out.stdout);
    let pid = listing
        .lines()
        .find(|l| l.contains(connection_name))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("connection {connection_name} not listed:\n{listing}"))
        .to_string();
    let status = std::process::Command::new("rabbitmqctl")
        .args(["close_connection", &pid, "closed by the dlq-triage test"])
        .status()
        .expect("rabbitmqctl runs");
    assert!(status.success());
}

/// `rabbitmqctl` ships with the server; a RabbitMQ in a container has none on the host.
fn rabbitmqctl_available() -> bool {
    let ok = std::process::Command::new("rabbitmqctl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("DLQ_TRIAGE_REQUIRE_BROKERS").as_deref() != Ok("1"),
            "rabbitmqctl is required (DLQ_TRIAGE_REQUIRE_BROKERS=1) to close a connection from the server side"
        );
        eprintln!("SKIPPED: rabbitmqctl not available to close a connection from the server side");
    }
    ok
}

#[test]
fn a_connection_closed_by_the_server_mid_browse_loses_nothing() {
    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = seeded("closed");
    let name = format!("dlq-triage test browse {}", t.id);
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")])
        .expect("source")
        .with_connection_name(&name);
    let (letters, _) = browse(&mut src);
    assert_eq!(letters.len(), 10);
    assert_eq!(
        t.count(&t.n("dlq")),
        0,
        "browsed messages are held unacked (not ready)"
    );
    server_closes(&name);
    t.wait_for(&t.n("dlq"), 10);
    // The old browse is gone: acting on it is refused, never guessed.
    let held = letters[0].raw.coords.clone().expect("coords");
    assert!(
        src.settle(&held).is_err(),
        "a settle on a closed browse must fail"
    );
    // The next browse reconnects and sees every letter again, once.
    let (again, _) = browse(&mut src);
    let mut ids: Vec<String> = again.iter().map(|d| d.id.value.0.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "{ids:?}");
    drop(src);
    t.wait_for(&t.n("dlq"), 10);
}

/// A relay between dlq-triage and the broker that can stop passing the broker's bytes
/// on (and never closes the client's side): the state where the server has closed the
/// connection and requeued, but our client has not read that yet.
struct Relay {
    port: u16,
    mute: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    fn start() -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mute = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let muted = mute.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect("127.0.0.1:5672") else {
                    continue;
                };
                let (mut c_in, mut s_out) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = c_in.read(&mut buf) {
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
                let (mut s_in, mut c_out, muted) = (server, client, muted.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = s_in.read(&mut buf) {
                        if !muted.load(Ordering::SeqCst) && c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    // Muted: the client's socket stays open, as if the close were late.
                    while muted.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                });
            }
        });
        Relay { port, mute }
    }
}

/// The ack's race, made certain: the server closes the connection (and requeues) while
/// our client cannot see it, so the channel still looks open. An ack then goes nowhere:
/// `settle` must not report it done (the ledger would mark the discard applied while
/// the letter is back in the queue). Before the confirming round trip it said Ok.
#[test]
fn an_ack_the_broker_never_took_is_not_reported_done() {
    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = seeded("unseen-close");
    let relay = Relay::start();
    let name = format!("dlq-triage test unseen close {}", t.id);
    let mut src = RabbitSource::new(
        AmqpTarget {
            port: relay.port,
            ..target()
        },
        vec![t.n("dlq")],
    )
    .expect("source")
    .with_connection_name(&name);
    let (letters, _) = browse(&mut src);
    assert_eq!(letters.len(), 10);
    relay.mute.store(true, std::sync::atomic::Ordering::SeqCst);
    server_closes(&name);
    t.wait_for(&t.n("dlq"), 10);
    let held = letters[0].raw.coords.clone().expect("coords");
    let settled = src.settle(&held);
    assert!(
        settled.is_err(),
        "an ack on a connection the server closed was reported as {settled:?}"
    );
    relay.mute.store(false, std::sync::atomic::Ordering::SeqCst);
    drop(src);
    assert_eq!(t.count(&t.n("dlq")), 10, "every letter is still in the DLQ");
}

const MGMT: &str = "http://127.0.0.1:15672";

/// The management API is optional for users but required in CI (it detects quorum
/// delivery limits and streams).
fn management_available() -> bool {
    let up = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:15672".parse().expect("addr"),
        Duration::from_secs(2),
    )
    .is_ok();
    if !up {
        assert!(
            std::env::var("DLQ_TRIAGE_REQUIRE_BROKERS").as_deref() != Ok("1"),
            "the RabbitMQ management API is required in CI: rabbitmq-plugins enable rabbitmq_management"
        );
        eprintln!("SKIPPED: RabbitMQ management API not on :15672 (rabbitmq-plugins enable rabbitmq_management)");
    }
    up
}

/// A letter whose header nests 10,000 arrays deep (RabbitMQ's 128 KiB frame allows about
/// 26,000; a release build was checked at that by hand) is browsed, summarised and shown
/// like any other: lapin's recursive parser overflowed its 2 MiB I/O thread at ~1,000
/// levels and aborted the process, so one hostile letter made the queue unbrowsable.
/// Published through the management API: a client's own recursive encoder would need
/// the stack this test thread does not have.
#[test]
fn a_header_nested_ten_thousand_deep_is_browsed_not_a_crash() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("deep");
    let q = t.n("deep.dlq");
    declare(&t, &q, vec![]);
    let n = 10_000;
    let body = format!(
        r#"{{"properties":{{"headers":{{"deep":{}{},"x-reason-code":"deep"}}}},"routing_key":"{q}","payload":"{{}}","payload_encoding":"string"}}"#,
        "[".repeat(n),
        "]".repeat(n)
    );
    let answer = ureq::post(&format!("{MGMT}/api/exchanges/%2f/amq.default/publish"))
        .set("authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
        .set("content-type", "application/json")
        .send_string(&body)
        .expect("publish")
        .into_string()
        .expect("answer");
    assert!(answer.contains(r#""routed":true"#), "{answer}");
    t.wait_for(&q, 1);
    let dir = tempfile::tempdir().expect("dir");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let at = format!("{q}#1");
    for args in [
        vec!["summary", uri.as_str(), "-g", "reason"],
        vec!["show", uri.as_str(), at.as_str()],
    ] {
        let out = cli_command(dir.path(), &args).output().expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("deep"), "{text}");
        t.wait_for(&q, 1);
    }
    delete(&t, &q);
}

fn declare(t: &Topology, name: &str, args: Vec<(&str, AMQPValue)>) {
    t.rt.block_on(async {
        let ch = t.conn.create_channel().await.expect("channel");
        let mut a = FieldTable::default();
        for (k, v) in args {
            a.insert(ShortString::from(k), v);
        }
        ch.queue_declare(
            ShortString::from(name),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            a,
        )
        .await
        .expect("declare");
    });
}

fn delete(t: &Topology, name: &str) {
    t.rt.block_on(async {
        if let Ok(ch) = t.conn.create_channel().await {
            let _ = ch
                .queue_delete(ShortString::from(name), QueueDeleteOptions::default())
                .await;
        }
    });
}

#[test]
fn browsing_a_quorum_dlq_never_pushes_messages_past_the_delivery_limit() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("quorum");
    let q = t.n("qdlq");
    declare(
        &t,
        &q,
        vec![
            (
                "x-queue-type",
                AMQPValue::LongString(LongString::from(b"quorum".to_vec())),
            ),
            ("x-delivery-limit", AMQPValue::LongInt(1)),
        ],
    );
    for i in 0..10 {
        t.publish("", &q, &format!("q-{i}"), "{}");
    }
    t.wait_for(&q, 10);
    // Browsing again and again (what dropped all 10 before) is refused without
    // consuming anything: nothing is lost.
    for _ in 0..3 {
        let mut src = RabbitSource::new(target(), vec![q.clone()])
            .expect("source")
            .with_management(MGMT);
        let mut n = 0;
        let err = src
            .scan(&mut |ev| {
                if let ScanEvent::Letters(b) = ev {
                    n += b.len();
                }
                ControlFlow::Continue(())
            })
            .expect_err("refused");
        assert_eq!(n, 0);
        assert!(err.to_string().contains("delivery-limit 1"), "{err}");
    }
    t.wait_for(&q, 10);
    // Allowed: one browse, which says how many are left (none).
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_management(MGMT)
        .with_queue_policy(None, true);
    let (letters, problems) = browse(&mut src);
    assert_eq!(letters.len(), 10);
    assert!(
        problems.iter().any(|p| p.contains("0 browse(s) left")),
        "{problems:?}"
    );
    drop(src);
    t.wait_for(&q, 10);
    delete(&t, &q);
}

/// A stream queue `sdlq` holding `n` letters `s-0`…, published straight to it.
fn seeded_stream(t: &Topology, n: usize) -> String {
    let q = t.n("sdlq");
    declare(
        t,
        &q,
        vec![(
            "x-queue-type",
            AMQPValue::LongString(LongString::from(b"stream".to_vec())),
        )],
    );
    for i in 0..n {
        t.publish("", &q, &format!("s-{i}"), "{}");
    }
    // Stream appends become readable asynchronously.
    std::thread::sleep(Duration::from_millis(500));
    q
}

#[test]
fn streams_are_read_by_offset_without_consuming() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("stream");
    let q = seeded_stream(&t, 5);
    // Replay from a stream: the letter is published to the target and recorded; the
    // stream keeps its copy (the ledger's decision is what counts), and the open stream
    // consumer is what watches for letters failing again.
    let target_q = t.n("stream-target");
    declare(&t, &target_q, vec![]);
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let out = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "id=s-1",
            "--to",
            &format!("queue:{target_q}"),
            "--canary",
            "0",
            "--watch",
            "1s",
            "--yes",
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    t.wait_for(&target_q, 1);
    assert_eq!(t.count(&target_q), 1, "exactly the one letter was replayed");
    let listed = replay_cli(dir.path(), &["replays", "--json"]);
    let replays: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("replays --json");
    assert_eq!(replays.as_array().map(Vec::len), Some(1), "{replays}");
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_management(MGMT);
    for round in 0..2 {
        let (letters, _) = browse(&mut src);
        assert_eq!(
            letters.len(),
            5,
            "round {round}: a stream keeps its messages"
        );
        let offsets: Vec<Option<i64>> = letters
            .iter()
            .map(|d| match &d.raw.coords {
                Some(dlq_core::model::Coords::Amqp { stream_offset, .. }) => *stream_offset,
                _ => None,
            })
            .collect();
        assert!(offsets.iter().all(Option::is_some), "{offsets:?}");
        let coords = letters[0].raw.coords.clone().expect("coords");
        assert_eq!(
            src.settle(&coords).ok(),
            Some(Settled::LedgerOnly),
            "a stream cannot delete one message"
        );
    }
    // A letter appended after the browse arrives on the open consumer (the tail), with
    // its offset.
    t.publish("", &q, "s-late", "{}");
    let started = Instant::now();
    let mut late = None;
    src.tail(&mut |ev| {
        if let Some(raw) = letters_of(ev).into_iter().next() {
            late = Some(raw);
            return ControlFlow::Break(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })
    .expect("tail");
    let late = late.expect("the appended letter arrived on the tail");
    assert_eq!(late.property("message_id"), Some("s-late"));
    assert!(matches!(
        late.coords,
        Some(dlq_core::model::Coords::Amqp {
            stream_offset: Some(5),
            ..
        })
    ));
    drop(src);
    // A read stopped by --max-letters is not tailed: the rest of the stream would come
    // in as "live" letters.
    let mut capped = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_management(MGMT)
        .with_max_letters(Some(3));
    let (letters, _) = browse(&mut capped);
    assert_eq!(letters.len(), 3);
    assert!(capped
        .tail(&mut |_| ControlFlow::Break(()))
        .is_err_and(|e| e.to_string().contains("browse")));
    drop(capped);
    delete(&t, &q);
    delete(&t, &target_q);
}

/// `queues` says which queues are DLQs the way the picker does: by name, by where other
/// queues' dead letters are routed (here a queue named like nothing, bound to the
/// dead-letter exchange), by the configured patterns; a retry loop's consumer queue,
/// bound to the exchange a TTL queue expires into, is not taken for one.
#[test]
fn queues_command_flags_dead_letter_queues() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("listing");
    // A DLQ made a moment ago: the management API has no count for it yet (its
    // statistics come every 5 s), so the count comes over AMQP.
    let fresh = t.n("fresh.dlq");
    declare(&t, &fresh, vec![]);
    for i in 0..4 {
        t.publish("", &fresh, &format!("f-{i}"), "{}");
    }
    t.wait_for(&fresh, 4);
    let review = t.n("review");
    declare(&t, &review, vec![]);
    t.bind(&review, &t.n("dlx"), "");
    let wait = t.n("wait");
    declare(
        &t,
        &wait,
        vec![
            ("x-message-ttl", AMQPValue::LongInt(60_000)),
            (
                "x-dead-letter-exchange",
                AMQPValue::LongString(LongString::from(t.n("orders").into_bytes())),
            ),
        ],
    );
    let audit = t.n("audit");
    declare(&t, &audit, vec![]);
    let dir = tempfile::tempdir().expect("dir");
    let cfg = dir.path().join("dlq-triage");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    std::fs::write(
        cfg.join("config.toml"),
        "dlq_patterns = [\"audit.listing.*\"]\n",
    )
    .expect("config");
    let listed = |args: &[&str]| -> serde_json::Value {
        let out = cli_command(dir.path(), args).output().expect("binary runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    // The management API's statistics trail the queue by up to its collection interval
    // (5 s by default): a queue published to a moment ago can still read 0. Wait for
    // the broker's own figure before judging what `queues` prints from it.
    let find_in = |doc: &serde_json::Value, name: &str| {
        doc["queues"]
            .as_array()
            .and_then(|qs| qs.iter().find(|q| q["name"] == name).cloned())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let doc = loop {
        let doc = listed(&["queues", "amqp://guest:guest@127.0.0.1:5672/%2f", "--json"]);
        let counted = find_in(&doc, &fresh).is_some_and(|q| q["messages"] == 4);
        if counted || std::time::Instant::now() > deadline {
            break doc;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let find = |name: &str| find_in(&doc, name);
    for (name, dlq) in [
        (t.n("dlq"), true),
        (review.clone(), true),
        (audit.clone(), true),
        (t.n("work"), false),
        (wait.clone(), false),
    ] {
        assert_eq!(
            find(&name).map(|q| q["looks_like_dlq"].clone()),
            Some(serde_json::json!(dlq)),
            "{name}: {doc}"
        );
    }
    assert_eq!(
        find(&fresh).map(|q| q["messages"].clone()),
        Some(serde_json::json!(4)),
        "{doc}"
    );
    // `--dlq` lists exactly the flagged ones.
    let only = listed(&[
        "queues",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        "--dlq",
        "--json",
    ]);
    let names: Vec<&str> = only["queues"]
        .as_array()
        .map(|qs| qs.iter().filter_map(|q| q["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&review.as_str()) && names.contains(&audit.as_str()));
    assert!(!names.contains(&t.n("work").as_str()) && !names.contains(&wait.as_str()));
    for q in [&fresh, &review, &wait, &audit] {
        delete(&t, q);
    }
}

/// A queue deleted between the management API's listing and the AMQP count fill leaves
/// only its own count unknown: the queues after it are still counted.
#[test]
fn a_queue_gone_since_the_listing_does_not_stop_the_count_fill() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("fill");
    let fresh = t.n("fill.dlq");
    declare(&t, &fresh, vec![]);
    for i in 0..3 {
        t.publish("", &fresh, &format!("g-{i}"), "{}");
    }
    t.wait_for(&fresh, 3);
    let listed = |name: &str| -> dlq_amqp::mgmt::QueueInfo {
        serde_json::from_value(serde_json::json!({ "name": name, "type": "classic" }))
            .expect("queue info")
    };
    let mut queues = vec![listed(&t.n("gone.dlq")), listed(&fresh)];
    let base = dlq_core::source::SourceRef::parse("amqp://guest:guest@127.0.0.1:5672/%2f?queue=x")
        .expect("uri");
    dlq_app::brokers::discovery::fill_missing_counts(&base, &mut queues, |_| true);
    assert_eq!(queues[0].messages, None, "the gone queue stays unknown");
    assert_eq!(
        queues[1].messages,
        Some(3),
        "the next queue is still counted"
    );
    delete(&t, &fresh);
}

#[test]
fn a_crash_between_ledger_and_ack_is_applied_exactly_once_later() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("crash");
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let run = |args: &[&str], crash: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"));
        c.args(args)
            .env("DLQ_TRIAGE_LEDGER", &ledger)
            .env("DLQ_TRIAGE_ACTOR", "bob")
            .env("XDG_STATE_HOME", dir.path());
        if crash {
            c.env("DLQ_TRIAGE_TEST_CRASH_AFTER_LEDGER", "1");
        }
        c.output().expect("binary runs")
    };
    // Dies after committing the decision, before the ack.
    let crashed = run(
        &[
            "discard",
            &uri,
            "--filter",
            "id=m-2",
            "--reason",
            "duplicate order",
            "--yes",
        ],
        true,
    );
    assert!(
        !crashed.status.success(),
        "the test hook aborts the process"
    );
    t.wait_for(&t.n("dlq"), 10); // the dead connection released everything: nothing lost
                                 // The next browse applies the recorded decision…
    let summary = run(&["summary", &uri, "--json"], false);
    assert!(
        summary.status.success(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    assert!(
        String::from_utf8_lossy(&summary.stderr).contains("reconciled"),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("json");
    assert_eq!(
        doc["matched"], 9,
        "the discarded letter has left the open view"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.count(&t.n("dlq")), 9, "m-2 acked");
    // …exactly once.
    let again = run(&["summary", &uri, "--json"], false);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("reconciled"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.count(&t.n("dlq")), 9);
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")]).expect("source");
    let (left, _) = browse(&mut src);
    assert!(!left.iter().any(|d| d.id.value.0 == "m-2"));
    drop(src);
    let verify = run(&["audit", "verify"], false);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn an_empty_looking_dlq_says_who_holds_its_messages() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("held");
    let q = t.n("hdlq");
    declare(&t, &q, vec![]);
    for i in 0..3 {
        t.publish("", &q, &format!("h-{i}"), "{}");
    }
    t.wait_for(&q, 3);
    // A stuck consumer (or a second dlq-triage at its prompt) holds all three unacked.
    let holder = t.rt.block_on(async {
        let ch = t.conn.create_channel().await.expect("channel");
        ch.basic_qos(10, BasicQosOptions::default())
            .await
            .expect("qos");
        let mut c = ch
            .basic_consume(
                ShortString::from(q.as_str()),
                ShortString::from("stuck"),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        for _ in 0..3 {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.next()).await;
        }
        (ch, c)
    });
    // Without the management API: the consumer is named, not the count.
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_queue_policy(Some("classic".into()), false);
    let (letters, problems) = browse(&mut src);
    assert!(letters.is_empty());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("1 other consumer(s) attached")),
        "{problems:?}"
    );
    drop(src);
    // With it: how many are held.
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_management(MGMT);
    let mut seen = Vec::new();
    // The API's statistics lag by one collection interval (5 s), more on a loaded broker.
    for _ in 0..60 {
        let (_, problems) = browse(&mut src);
        seen = problems;
        // The API's counts are sampled every few seconds.
        if seen
            .iter()
            .any(|p| p.contains("3 message(s) are held unacked"))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        seen.iter()
            .any(|p| p.contains("3 message(s) are held unacked")),
        "{seen:?}"
    );
    // Counted, the held messages make the browse partial (it said "complete" while
    // all three were hidden), and the notice is no unreadable record.
    assert!(
        seen.iter().any(|p| p
            == "browsed 0 of 3: 3 held unacked by 1 other consumer(s) (close them to see those)"),
        "{seen:?}"
    );
    assert!(!seen.iter().any(|p| p.starts_with("problem:")), "{seen:?}");
    // A re-browse on the same source releases its own consumer before counting: only
    // the holder is another client.
    let (_, again) = browse(&mut src);
    assert!(
        again
            .iter()
            .any(|p| p.contains("1 other consumer(s) attached")),
        "{again:?}"
    );
    drop(src);
    drop(holder);
    t.wait_for(&q, 3);
    delete(&t, &q);
}

#[test]
fn a_stream_without_the_management_api_is_read_as_a_stream() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("stream-noapi");
    let q = seeded_stream(&t, 4);
    // No management API at all: the stream is recognised over AMQP.
    let mut src = RabbitSource::new(target(), vec![q.clone()]).expect("source");
    let (letters, _) = browse(&mut src);
    assert_eq!(letters.len(), 4, "a stream looked empty");
    drop(src);
    delete(&t, &q);
}

#[test]
fn passwords_can_stay_off_the_command_line() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("creds");
    let q = t.n("cdlq");
    declare(&t, &q, vec![]);
    t.publish("", &q, "c-1", "{}");
    t.wait_for(&q, 1);
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest@127.0.0.1:5672/%2f?queue={q}");
    let run = |env: &[(&str, &str)]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"));
        c.args(["summary", &uri, "--json", "--queue-type", "classic"])
            .env("XDG_CONFIG_HOME", dir.path())
            .env("XDG_STATE_HOME", dir.path())
            .env_remove("DLQ_TRIAGE_AMQP_PASSWORD");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("binary runs")
    };
    // From the environment.
    let out = run(&[("DLQ_TRIAGE_AMQP_PASSWORD", "guest")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // From a private credentials file.
    let file = dir.path().join("dlq-triage/credentials.toml");
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&file, "[amqp]\n\"guest@127.0.0.1\" = \"guest\"\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let out = run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A file others can read is refused, and says how to fix it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
    delete(&t, &q);
}

/// The TUI's worker on a RabbitMQ DLQ: a discard a crash left pending is applied to the
/// exact letter when the TUI opens the queue, and the note reaches the screen.
#[test]
fn the_tui_applies_a_pending_discard_and_says_so() {
    use dlq_core::decisions::binding;
    use dlq_core::masking::Masker;
    use dlq_ledger::Ledger;

    use dlq_core::source::SourceRef;
    use dlq_tui::action::Action;

    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = Topology::new("tui-reconcile");
    let q = t.n("tdlq");
    declare(&t, &q, vec![]);
    t.publish("", &q, "m-0", "{\"n\":0}");
    t.publish("", &q, "m-1", "{\"n\":1}");
    t.wait_for(&q, 2);
    // What the operator had decided on before the crash: m-0, this exact letter.
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_queue_policy(Some("classic".into()), false);
    let mut raws = Vec::new();
    src.scan(&mut |ev| {
        raws.extend(letters_of(ev));
        ControlFlow::Continue(())
    })
    .expect("browse");
    drop(src);
    t.wait_for(&q, 2);
    let m0 = raws
        .iter()
        .find(|r| r.property("message_id") == Some("m-0"))
        .expect("m-0");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let source = SourceRef::parse(&uri).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let ledger_path = dir.path().join("ledger.db");
    Ledger::open(&ledger_path, "alice")
        .expect("ledger")
        .record_discard(&source.to_string(), "m-0", &binding(m0), None, "duplicate")
        .expect("pending decision");
    let (rx, _req_tx) = tui_worker(&source, ledger_path.clone(), Masker::with_key(vec![1]));
    let started = Instant::now();
    let mut notes = Vec::new();
    while notes.is_empty() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::Notes(n))))) =
            rx.recv_timeout(Duration::from_millis(200))
        {
            notes = n;
        }
    }
    assert!(
        notes
            .iter()
            .any(|n| n.contains("reconciled") && n.contains("m-0")),
        "{notes:?}"
    );
    // A new dead letter arrives while the TUI is open: the consumer stays open, so it
    // is delivered and shows as live.
    t.publish("", &q, "m-2", "{\"n\":2}");
    let started = Instant::now();
    let mut live = Vec::new();
    while live.is_empty() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Live(b))))) =
            rx.recv_timeout(Duration::from_millis(200))
        {
            live.extend(b.into_iter().map(|p| p.letter.id.value.0.clone()));
        }
    }
    assert_eq!(live, ["m-2"]);
    drop(rx);
    drop(_req_tx);
    // m-0 is gone; m-1 and the live m-2 stay once the worker lets go.
    t.wait_for(&q, 2);
    let l = Ledger::open(&ledger_path, "check").expect("ledger");
    assert!(l.pending(&source.to_string()).expect("pending").is_empty());
    assert!(l.verify(None).expect("verify").ok);
    delete(&t, &q);
}

/// During an incident the DLQ is the big one: 100,000 letters dead-lettered for real (by
/// TTL) are browsed whole by `summary`, and the queue holds all of them afterwards.
#[test]
fn a_100k_letter_dlq_is_browsed_whole_and_left_as_it_was() {
    if !rabbit_available() {
        return;
    }
    const N: u32 = 100_000;
    let t = Topology::new("big");
    let ttl = t.n("ttl");
    t.rt.block_on(async {
        let ch = t.conn.create_channel().await.expect("channel");
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let mut pending = Vec::with_capacity(1000);
        for i in 0..N {
            let body = format!("{{\"n\":{i},\"email\":\"user{i}@example.com\"}}");
            pending.push(
                ch.basic_publish(
                    ShortString::from(""),
                    ShortString::from(ttl.as_str()),
                    BasicPublishOptions::default(),
                    body.as_bytes(),
                    BasicProperties::default().with_message_id(ShortString::from(format!("b-{i}"))),
                )
                .await
                .expect("publish"),
            );
            if pending.len() == 1000 {
                for p in pending.drain(..) {
                    p.await.expect("confirmed");
                }
            }
        }
        for p in pending {
            p.await.expect("confirmed");
        }
    });
    let dlq = t.n("dlq");
    let started = Instant::now();
    while t.count(&dlq) < N {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "dead-lettering stalled"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"))
        .args([
            "summary",
            &format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={dlq}"),
            "--json",
            "--queue-type",
            "classic",
        ])
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .expect("binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        doc["total"],
        u64::from(N),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(doc["coverage"]["complete"], true);
    assert_eq!(doc["groups"][0]["reason_code"], "expired");
    // Browsing consumed nothing.
    let started = Instant::now();
    while t.count(&dlq) < N {
        assert!(started.elapsed() < Duration::from_secs(30), "letters lost");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(t.count(&dlq), N);
}

/// `d` in the TUI on a RabbitMQ DLQ: through the worker, the ledger records the discard
/// and exactly that delivery is acked; the other letters stay in the queue.
#[test]
fn a_tui_discard_acks_exactly_the_discarded_letter() {
    use dlq_app::session::DiscardTarget;
    use dlq_core::masking::Masker;
    use dlq_core::source::SourceRef;
    use dlq_core::store::LetterStore;
    use dlq_tui::action::Action;
    use dlq_tui::worker::Request;
    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = seeded("tui-discard");
    let q = t.n("dlq");
    let source =
        SourceRef::parse(&format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}")).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let (rx, req_tx) = tui_worker(
        &source,
        dir.path().join("ledger.db"),
        Masker::with_key(vec![1]),
    );
    // The UI's store, fed the way the TUI feeds it.
    let mut store = LetterStore::new();
    let started = Instant::now();
    let mut done = false;
    while !done && started.elapsed() < Duration::from_secs(20) {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Letters(b))))) => {
                for p in b {
                    store.push(&p.letter, &p.preview);
                }
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanDone)))) => {
                done = true
            }
            _ => {}
        }
    }
    assert_eq!(store.len(), 10);
    let r = *store.row(0).expect("row");
    let victim = store.id(&r).to_string();
    req_tx
        .send(Request::Discard {
            rows: vec![(
                0,
                DiscardTarget {
                    letter_id: victim.clone(),
                    binding: store.binding(&r),
                    location: store.coords_label(&r),
                },
            )],
            reason: "duplicate".into(),
        })
        .expect("worker");
    let started = Instant::now();
    let mut outcome = None;
    while outcome.is_none() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::DiscardDone {
            rows,
            message,
            ok,
        })))) = rx.recv_timeout(Duration::from_millis(200))
        {
            outcome = Some((rows, message, ok));
        }
    }
    let (rows, message, ok) = outcome.expect("discard answered");
    assert!(
        ok && rows == [0] && message.contains("1 removed from the DLQ"),
        "{message}"
    );
    drop(rx);
    drop(req_tx);
    // Nine left once the worker lets go: exactly the discarded one was acked.
    t.wait_for(&q, 9);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&q), 9);
}

/// The picker finds RabbitMQ DLQs through the management API: named like one, or another
/// queue's dead-letter target.
#[test]
fn dlq_queues_are_discovered_through_the_management_api() {
    use dlq_app::brokers::discovery::{discover, DEFAULT_PATTERNS};
    use dlq_app::brokers::OpenOptions;
    use dlq_core::source::SourceRef;

    if !rabbit_available() || !management_available() {
        return;
    }
    let t = seeded("discover");
    let base = SourceRef::parse("amqp://guest:guest@127.0.0.1:5672/%2f?queue=_").expect("uri");
    let patterns: Vec<String> = DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect();
    let opts = OpenOptions {
        management_url: Some(MGMT.into()),
        ..OpenOptions::default()
    };
    let mut found = Vec::new();
    let started = Instant::now();
    // The API's counts are sampled every few seconds.
    while started.elapsed() < Duration::from_secs(15) {
        found = discover(&base, &opts, &patterns, false).expect("discover");
        if found
            .iter()
            .any(|c| c.name == t.n("dlq") && c.count == Some(10))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let dlq = found
        .iter()
        .find(|c| c.name == t.n("dlq"))
        .expect("the DLQ is offered");
    assert_eq!(dlq.count, Some(10));
    assert!(
        !found.iter().any(|c| c.name == t.n("work")),
        "a work queue is not a DLQ"
    );
}

/// (message id, had x-death, x-dlq-replay-id) of one delivery to the fixed service.
type Seen = (String, bool, Option<String>);
type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// A consumer of the work queue in its own thread, as the fixed service would be:
/// letters whose body says `"bad":true` are rejected (dead-lettered again), the rest
/// acked. Reports (message id, had x-death, replay id) per delivery.
fn work_consumer(queue: String) -> (std::sync::mpsc::Receiver<Seen>, StopFlag) {
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let rt = rt();
        rt.block_on(async {
            let conn = Connection::connect(
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                ConnectionProperties::default(),
            )
            .await
            .expect("connect");
            let ch = conn.create_channel().await.expect("channel");
            let mut c = ch
                .basic_consume(
                    ShortString::from(queue),
                    ShortString::from("fixed-service"),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .expect("consume");
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(Some(Ok(d))) =
                    tokio::time::timeout(Duration::from_millis(100), c.next()).await
                else {
                    continue;
                };
                let headers = d.properties.headers().clone().unwrap_or_default();
                let h = |n: &str| headers.inner().get(n).cloned();
                let replay = h("x-dlq-replay-id").and_then(|v| match v {
                    AMQPValue::LongString(s) => {
                        Some(String::from_utf8_lossy(s.as_bytes()).to_string())
                    }
                    _ => None,
                });
                let id = d
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default();
                let _ = tx.send((id, h("x-death").is_some(), replay));
                if String::from_utf8_lossy(&d.data).contains("\"bad\":true") {
                    d.reject(BasicRejectOptions { requeue: false })
                        .await
                        .expect("reject");
                } else {
                    d.ack(BasicAckOptions::default()).await.expect("ack");
                }
            }
            let _ = conn.close(200, ShortString::from("bye")).await;
        });
    });
    (rx, stop)
}

/// 20 orders rejected by the broken service: the DLQ holds them with x-death.
/// Every rejected order of `t` replayed from `uri` with a canary of 2 and a 5 s watch,
/// as JSON, while the fixed service consumes `t`'s work queue; the system's CA store as
/// it is (no SSL_CERT_FILE from the caller's environment). The run must complete:
/// returns its report and what the service got.
fn replay_rejected(
    t: &Topology,
    dir: &std::path::Path,
    uri: &str,
) -> (serde_json::Value, Vec<Seen>) {
    let (seen, stop) = work_consumer(t.n("work"));
    let out = cli_command(
        dir,
        &[
            "replay",
            uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "2",
            "--canary-rate",
            "20",
            // Long enough for a failure to come back through a broker busy with the
            // other tests (the 100k fill runs beside this one in CI).
            "--watch",
            "5s",
            "--rate",
            "100",
            "--max-failed-ratio",
            "0.5",
            "--yes",
            "--json",
        ],
    )
    .env_remove("SSL_CERT_FILE")
    .env_remove("SSL_CERT_DIR")
    .output()
    .expect("binary runs");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{log}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["state"], "completed", "{report}");
    (report, seen.try_iter().collect())
}

fn dead_orders(tag: &str) -> Topology {
    let t = Topology::new(tag);
    rejected_orders(&t, 20, |i| {
        format!("{{\"order\":{i},\"bad\":{}}}", i % 10 == 3)
    });
    t.wait_for(&t.n("dlq"), 20);
    t
}

/// The ledger's audit chain and rows check out.
fn verified(dir: &std::path::Path) {
    let verify = replay_cli(dir, &["audit", "verify"]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// The binary as alice, with its ledger and config in `dir`.
fn cli_command(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"));
    c.args(args)
        .env("DLQ_TRIAGE_LEDGER", dir.join("ledger.db"))
        .env("DLQ_TRIAGE_ACTOR", "alice")
        .env("XDG_STATE_HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env_remove("DLQ_TRIAGE_ROLES_FILE")
        .stdin(std::process::Stdio::null());
    c
}

fn replay_cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    cli_command(dir, args).output().expect("binary runs")
}

/// A slow replay of every rejected order (4/s, no canary, never auto-stopped) in the
/// background, returned once it has settled three letters.
fn replay_under_way(dir: &tempfile::TempDir, uri: &str) -> std::process::Child {
    let child = cli_command(
        dir.path(),
        &[
            "replay",
            uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "0",
            "--rate",
            "4",
            "--max-failed-ratio",
            "1",
            "--yes",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn");
    let started = Instant::now();
    while settled_so_far(dir) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never got going"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn a_replay_goes_to_the_origin_exchange_acks_confirmed_letters_and_sees_failures_return() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("replay");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let (report, got) = replay_rejected(&t, dir.path(), &uri);
    assert_eq!(report["outcome"]["confirmed"], 20);
    assert_eq!(report["outcome"]["failed_again"], 2, "{report}");
    // The service got each order once, with its message id, without the death headers.
    let id = report["replay_id"].as_str().expect("id");
    assert_eq!(got.len(), 20, "{got:?}");
    let ids: std::collections::HashSet<&str> = got.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(ids.len(), 20);
    assert!(
        got.iter().all(|g| !g.1 && g.2.as_deref() == Some(id)),
        "{got:?}"
    );
    // The 20 originals were acked after their confirms; the 2 bad ones are back.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&t.n("dlq")), 2);
    let shown = replay_cli(dir.path(), &["replays", "show", id, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(shown["by_state"]["settled"], 18, "{shown}");
    assert_eq!(shown["by_state"]["failed-again"], 2, "{shown}");
    verified(dir.path());
}

#[test]
fn an_unroutable_replay_stops_and_leaves_every_dlq_copy() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("unroutable");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let to = format!("amqp:{}/nowhere", t.n("orders"));
    let out = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--to",
            &to,
            "--canary",
            "3",
            "--canary-rate",
            "20",
            "--watch",
            "1s",
            "--yes",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("unroutable"), "{stdout}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&t.n("dlq")), 20, "nothing acked");
    assert_eq!(t.count(&t.n("work")), 0, "nothing delivered");
    let list = replay_cli(dir.path(), &["list", &uri, "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert!(
        rows["letters"]
            .as_array()
            .expect("letters")
            .iter()
            .all(|l| l["state"] == "open"),
        "a refused letter stays open"
    );
}

#[test]
fn a_crash_mid_replay_on_rabbitmq_resumes_and_acks_without_resending() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("resume");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let args = [
        "replay",
        &uri,
        "--filter",
        "reason=rejected",
        "--canary",
        "0",
        "--rate",
        "10",
        "--watch",
        "1s",
        "--max-failed-ratio",
        "0.9",
        "--yes",
    ];
    let crashed = cli_command(dir.path(), &args)
        .env("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED", "5")
        .output()
        .expect("runs");
    assert!(!crashed.status.success(), "the hook aborts");
    let stdout = String::from_utf8_lossy(&crashed.stdout).to_string();
    let id = stdout
        .split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .expect("replay id")
        .to_string();
    let show = |dir: &std::path::Path| -> serde_json::Value {
        let out = replay_cli(dir, &["replays", "show", &id, "--json"]);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let before = show(dir.path());
    assert_eq!(before["state"], "interrupted", "{before}");
    let confirmed: Vec<String> = before["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| {
            matches!(
                l["state"].as_str(),
                Some("settled" | "confirmed" | "failed-again")
            )
        })
        .map(|l| l["letter_id"].as_str().expect("id").to_string())
        .collect();
    assert!(confirmed.len() >= 5, "{before}");
    let acked = before["by_state"]["settled"].as_u64().unwrap_or(0) as u32;
    let in_doubt = before["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| l["state"] == "sending")
        .count();
    // The dead connection gave every held letter back: nothing is lost.
    t.wait_for(&t.n("dlq"), 20 - acked);
    let resumed = replay_cli(dir.path(), &["replay", &uri, "--resume", &id, "--yes"]);
    let log = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{log}");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<_> = seen.try_iter().collect();
    let mut times: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for g in &got {
        *times.entry(g.0.as_str()).or_insert(0) += 1;
    }
    assert_eq!(times.len(), 20, "every order was replayed: {times:?}");
    for c in &confirmed {
        assert_eq!(
            times[c.as_str()],
            1,
            "{c} was confirmed before the crash: never re-sent"
        );
    }
    let dups: usize = times.values().map(|n| n - 1).sum();
    assert!(
        dups <= in_doubt,
        "only letters in doubt may repeat: {dups} > {in_doubt}"
    );
    // Left in the DLQ: exactly the copies of bad orders that failed again.
    let bad = got.iter().filter(|g| g.0 == "m-3" || g.0 == "m-13").count() as u32;
    assert_eq!(t.count(&t.n("dlq")), bad, "originals all acked");
    let after = show(dir.path());
    assert_eq!(after["state"], "completed", "{after}");
    assert!(
        after["by_state"].get("confirmed").is_none(),
        "reconciled acks are journaled: {after}"
    );
    assert!(log.contains("reconciled"), "{log}");
    verified(dir.path());
}

#[test]
fn a_canary_on_a_consumer_that_still_fails_stops_on_rabbitmq() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("stop");
    for i in 0..10 {
        t.publish(
            &t.n("orders"),
            "order.created",
            &format!("b-{i}"),
            "{\"bad\":true}",
        );
    }
    t.reject_from_work(10);
    t.wait_for(&t.n("dlq"), 10);
    let (_seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let out = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "5",
            "--canary-rate",
            "5",
            "--watch",
            "3s",
            "--yes",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("failed again"), "{stdout}");
    // Never past the canary; the rest were not sent and are still in the DLQ.
    assert_eq!(t.count(&t.n("work")), 0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        t.count(&t.n("dlq")),
        10,
        "5+ unsent originals + the copies that failed again"
    );
}

#[test]
fn ctrl_c_stops_a_rabbitmq_replay_and_every_publish_is_journaled() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("kill");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let child = replay_under_way(&dir, &uri);
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = child.wait_with_output().expect("exits");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let delivered = seen.try_iter().count();
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert_eq!(rows[0]["state"], "killed");
    let o = &rows[0]["outcome"];
    assert_eq!(o["in_doubt"], 0, "confirms in flight were awaited: {o}");
    assert_eq!(
        o["sent"].as_u64(),
        Some(delivered as u64),
        "every publish journaled, none after the kill: {o}"
    );
    assert!(delivered < 20);
    // The DLQ keeps every letter not replayed (confirmed ones were acked), plus the
    // copies that failed again.
    let confirmed = o["confirmed"].as_u64().expect("confirmed") as u32;
    let failed = o["failed_again"].as_u64().expect("failed") as u32;
    assert_eq!(t.count(&t.n("dlq")), 20 - confirmed + failed, "{o}");
    verified(dir.path());
}

/// Letters the replay in `dir` has journaled as settled so far.
fn settled_so_far(dir: &tempfile::TempDir) -> usize {
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap_or_default();
    let Some(id) = rows[0]["id"].as_str() else {
        return 0;
    };
    let out = replay_cli(dir.path(), &["replays", "show", id, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    shown["by_state"]["settled"].as_u64().unwrap_or(0) as usize
}

#[test]
fn a_browse_closed_by_the_server_mid_replay_stops_it_and_loses_nothing() {
    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = dead_orders("closed");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let child = replay_under_way(&dir, &uri);
    server_closes(&format!("dlq-triage browse (pid {})", child.id()));
    let out = child.wait_with_output().expect("exits");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("could not be watched"), "{stdout}");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<_> = seen.try_iter().collect();
    let delivered = got.len() as u32;
    // Bad orders the service rejected again: their copies are back in the DLQ, seen by
    // the replay or not (the watch was gone).
    let bad = got.iter().filter(|g| g.0 == "m-3" || g.0 == "m-13").count() as u32;
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert_eq!(rows[0]["state"], "failed");
    let o = &rows[0]["outcome"];
    let confirmed = o["confirmed"].as_u64().expect("confirmed") as u32;
    assert_eq!(
        delivered, confirmed,
        "no publish after the watch was lost: {o}"
    );
    // The closed browse gave its letters back, including confirmed ones not yet acked;
    // the next browse acks those (reconciled), once, and replays none of them again.
    let summary = replay_cli(dir.path(), &["summary", &uri, "--json"]);
    let notes = String::from_utf8_lossy(&summary.stderr).to_string();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&t.n("dlq")), 20 - confirmed + bad, "{o}\n{notes}");
    let again = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--dry-run",
            "--json",
        ],
    );
    let plan: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json");
    assert_eq!(
        plan["planned"].as_u64(),
        Some(u64::from(20 - confirmed + bad)),
        "replayed letters are not offered again: {plan}"
    );
    verified(dir.path());
}

/// Close, from the server side, the connection whose channel consumes `queue` (as a
/// consumer timeout or an operator would). rabbitmqctl answers at once, where the
/// management API's consumer list lags by its stats interval.
fn server_closes_consumer_of(queue: &str) {
    let ctl = |args: &[&str]| {
        let out = std::process::Command::new("rabbitmqctl")
            .args(args)
            .output()
            .expect("rabbitmqctl runs");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let started = Instant::now();
    let channel = loop {
        let consumers = ctl(&["list_consumers", "-q", "queue_name", "channel_pid"]);
        if let Some(pid) = consumers
            .lines()
            .find(|l| l.split('\t').next() == Some(queue))
            .and_then(|l| l.split('\t').nth(1))
        {
            break pid.trim().to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no consumer on {queue}:\n{consumers}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let channels = ctl(&["list_channels", "-q", "pid", "connection"]);
    let conn = channels
        .lines()
        .find(|l| l.split('\t').next().map(str::trim) == Some(channel.as_str()))
        .and_then(|l| l.split('\t').nth(1))
        .unwrap_or_else(|| panic!("channel {channel} not listed:\n{channels}"))
        .trim()
        .to_string();
    let status = std::process::Command::new("rabbitmqctl")
        .args(["close_connection", &conn, "closed by the dlq-triage test"])
        .status()
        .expect("rabbitmqctl runs");
    assert!(status.success());
}

/// The TUI's worker on a RabbitMQ DLQ when the broker closes the browse: the screen
/// says so, the held letters are back in the queue, `R` browses again on a new
/// connection — the same letters, once, not twice — and a discard after it acks
/// exactly that letter.
#[test]
fn the_tui_says_when_the_broker_closes_the_browse_and_r_browses_again() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

    use dlq_app::session::DiscardTarget;
    use dlq_core::catalog::Catalog;
    use dlq_core::masking::Masker;
    use dlq_core::ports::SourceInfo;
    use dlq_core::source::SourceRef;
    use dlq_tui::action::Action;
    use dlq_tui::state::AppState;
    use dlq_tui::worker::Request;
    use dlq_tui::{action_for_event, update::update, AppEvent};

    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = Topology::new("tui-lost");
    let q = t.n("ldlq");
    declare(&t, &q, vec![]);
    for i in 0..10 {
        t.publish("", &q, &format!("m-{i}"), &format!("{{\"n\":{i}}}"));
    }
    t.wait_for(&q, 10);
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let source = SourceRef::parse(&uri).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let masker = Masker::with_key(vec![1]);
    let (rx, req_tx) = tui_worker(&source, dir.path().join("ledger.db"), masker.clone());
    let size = (160, 40);
    let mut s = AppState::new(
        SourceInfo {
            label: q.clone(),
            browse_effect: String::new(),
        },
        Catalog::new(masker, Vec::new()),
        chrono::Utc::now().timestamp_millis(),
        1 << 20,
    );
    let mut rebrowsed = false;
    let mut pump = |s: &mut AppState, what: &str, until: &dyn Fn(&AppState, bool) -> bool| {
        let started = Instant::now();
        while !until(s, rebrowsed) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{what}: not within 30 s"
            );
            if let Ok(AppEvent::Action(a)) = rx.recv_timeout(Duration::from_millis(100)) {
                rebrowsed |= matches!(a, Action::Event(UiEvent::Scan(BrowseEvent::Rebrowsing)));
                for c in update(s, a, size) {
                    if let Ok(r) = Request::for_command(c) {
                        req_tx.send(r).expect("worker alive");
                    }
                }
            }
        }
    };
    pump(&mut s, "the first browse", &|s, _| s.scan.complete);
    assert_eq!(s.catalog.store.len(), 10);
    assert_eq!(t.count(&q), 0, "browsed letters are held unacked");
    server_closes_consumer_of(&q);
    pump(&mut s, "the loss is reported", &|s, _| {
        s.scan.lost.is_some()
    });
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(size.0, size.1))
        .expect("terminal");
    let theme = dlq_tui::theme::Theme::load(Some("mono")).expect("theme");
    term.draw(|f| dlq_tui::views::render(f, &s, &theme))
        .expect("draw");
    let screen: String = term
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(
        screen.contains("browse closed by the broker · R browses again"),
        "{screen}"
    );
    t.wait_for(&q, 10);
    // `R`, through the keymap.
    let r = action_for_event(
        &s,
        &Event::Key(KeyEvent::new(KeyCode::Char('R'), KeyModifiers::NONE)),
    )
    .expect("R is bound");
    for c in update(&mut s, r, size) {
        req_tx
            .send(Request::for_command(c).expect("a worker request"))
            .expect("worker alive");
    }
    pump(&mut s, "the second browse", &|s, again| {
        again && s.scan.complete
    });
    assert_eq!(s.catalog.store.len(), 10, "the same letters, once");
    assert!(s.scan.lost.is_none());
    assert_eq!(t.count(&q), 0, "held again by the new browse");
    // A discard on the new browse acks exactly that letter.
    let store = &s.catalog.store;
    let (at, r) = store
        .rows()
        .iter()
        .enumerate()
        .find(|(_, r)| store.id(r) == "m-3")
        .expect("m-3");
    let target = DiscardTarget {
        letter_id: "m-3".into(),
        binding: store.binding(r),
        location: store.coords_label(r),
    };
    req_tx
        .send(Request::Discard {
            rows: vec![(at as u32, target)],
            reason: "duplicate".into(),
        })
        .expect("worker alive");
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::DiscardDone {
                rows,
                message,
                ok,
            })))) => {
                assert!(ok, "{message}");
                assert_eq!(rows, [at as u32]);
                break;
            }
            _ => assert!(
                started.elapsed() < Duration::from_secs(20),
                "no discard answer"
            ),
        }
    }
    drop(req_tx);
    drop(rx);
    // The worker ends its browse: the nine others go back, m-3 was acked.
    t.wait_for(&q, 9);
    delete(&t, &q);
}

/// `watch --once` on a RabbitMQ DLQ filled by real dead-lettering: a breach for the
/// group over the threshold (exit 3), and the DLQ holds every message afterwards.
#[test]
fn watch_once_on_a_rabbitmq_dlq_alerts_and_leaves_it_as_it_was() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("watch");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let out = cli_command(
        dir.path(),
        &[
            "watch",
            &uri,
            "--once",
            "--json",
            "--rule",
            "count > 3",
            "--queue-type",
            "classic",
        ],
    )
    .output()
    .expect("binary runs");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["group"], "rejected");
    assert_eq!(lines[0]["count"], 5);
    t.wait_for(&t.n("dlq"), 10);
}

/// The TUI's worker on a classic RabbitMQ queue, as bob (operator), with this ledger:
/// its events, and the channel for its requests.
fn tui_worker(
    source: &dlq_core::source::SourceRef,
    ledger: std::path::PathBuf,
    masker: dlq_core::masking::Masker,
) -> (
    std::sync::mpsc::Receiver<dlq_tui::AppEvent>,
    std::sync::mpsc::Sender<dlq_tui::worker::Request>,
) {
    use dlq_app::session::{Principal, Settings};
    use dlq_core::access::Role;
    let (tx, rx) = std::sync::mpsc::channel();
    let (req_tx, req_rx) = std::sync::mpsc::channel();
    dlq_tui::worker::spawn(
        source.clone(),
        dlq_app::brokers::OpenOptions {
            queue_type: Some("classic".into()),
            ..dlq_app::brokers::OpenOptions::default()
        },
        Settings {
            source_key: source.to_string(),
            principal: Principal {
                actor: "bob".into(),
                role: Role::Operator,
                read_only: false,
                ledger_path: Some(ledger),
            },
            masker,
            mappings: Vec::new(),
            since: None,
        },
        tx,
        req_rx,
    );
    (rx, req_tx)
}

/// Replay from the TUI on RabbitMQ: the worker that holds the browsed deliveries plans
/// and runs the replay, so each confirmed letter's DLQ copy is acked on that same
/// browse; letters that fail again come back as live letters and are reported.
#[test]
fn a_replay_from_the_tui_acks_through_the_worker_that_holds_the_deliveries() {
    use dlq_app::session::Picked;
    use dlq_core::replay::{Control, Options};
    use dlq_tui::action::Action;
    use dlq_tui::worker::Request;
    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = dead_orders("tui-replay");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={}", t.n("dlq"));
    let source = dlq_core::source::SourceRef::parse(&uri).expect("uri");
    let (rx, req) = tui_worker(
        &source,
        dir.path().join("ledger.db"),
        dlq_core::masking::Masker::with_key(vec![1]),
    );
    let recv = |what: &str, want: &dyn Fn(&Action) -> bool| -> Action {
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what}: no answer"
            );
            if let Ok(AppEvent::Action(a)) = rx.recv_timeout(Duration::from_millis(200)) {
                if want(&a) {
                    return a;
                }
            }
        }
    };
    // The UI holds the letters' bytes from the browse, as the TUI's cache does.
    let mut picked = Vec::new();
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(30), "no scan");
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Letters(b))))) => {
                picked.extend(b.into_iter().map(|p| Picked::Held(p.letter, p.preview)))
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanDone)))) => break,
            _ => {}
        }
    }
    assert_eq!(picked.len(), 20);
    req.send(Request::PlanReplay {
        picked,
        opts: Options {
            canary: 2,
            canary_rate: 20.0,
            rate: 100.0,
            // Room for a failure to come back through a broker busy with other tests.
            watch: Duration::from_secs(5),
            max_failed_ratio: 0.5,
            ..Options::default()
        },
        resume: None,
    })
    .expect("worker");
    let Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanned(view))) = recv("the plan", &|a| {
        matches!(
            a,
            Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanned(_)))
                | Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanFailed(_)))
        )
    }) else {
        panic!("no plan");
    };
    assert_eq!(view.planned, 20, "{:?}", view.lines);
    req.send(Request::RunReplay {
        id: view.id.clone(),
        control: Control::default(),
    })
    .expect("worker");
    // Every letter's outcome reaches the UI; the run's end says how it went.
    let mut back = std::collections::HashSet::new();
    let started = Instant::now();
    let (state, summary) =
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the replay never ended"
            );
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(AppEvent::Action(Action::Event(UiEvent::Replay(
                    ReplayEvent::ReplayLetters(c),
                )))) => back.extend(
                    c.into_iter()
                        .filter(|(_, o)| *o == dlq_core::replay::LetterOutcome::FailedAgain)
                        .map(|(id, _)| id),
                ),
                Ok(AppEvent::Action(Action::Event(UiEvent::Replay(
                    ReplayEvent::ReplayEnded { state, summary, .. },
                )))) => break (state, summary),
                _ => {}
            }
        };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        state,
        Some(dlq_core::journal::ReplayState::Completed),
        "{summary}"
    );
    assert!(
        summary.contains("20 of 20 confirmed, 2 failed again"),
        "{summary}"
    );
    assert_eq!(back.len(), 2, "{back:?}");
    assert_eq!(seen.try_iter().count(), 20);
    // Acked on the worker's browse: only the 2 that failed again are in the DLQ once
    // the TUI lets go of what it holds.
    drop(req);
    drop(rx);
    t.wait_for(&t.n("dlq"), 2);
}

/// TLS listeners in front of the real server's `upstreams` ports (AMQP, the management
/// API), one each, their certificate issued by one private CA for `names` (the shape of
/// most production amqps listeners). The runtime that serves them lives as long as the
/// value.
struct TlsFront {
    ports: Vec<u16>,
    ca_pem: String,
    /// A client certificate and its key (PEM) from the same CA, for `mutual` fronts.
    client_pem: String,
    client_key_pem: String,
    _rt: tokio::runtime::Runtime,
}

impl TlsFront {
    /// The CA, client certificate and key written to `dir`, as an amqps:// URI's
    /// `cacertfile=…&certfile=…&keyfile=…`.
    fn files_in(&self, dir: &std::path::Path) -> String {
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path.display().to_string()
        };
        format!(
            "cacertfile={}&certfile={}&keyfile={}",
            file("ca.pem", &self.ca_pem),
            file("client.pem", &self.client_pem),
            file("client.key", &self.client_key_pem)
        )
    }
}

/// With `mutual`, the front also requires a client certificate from its CA.
fn tls_front(names: &[&str], upstreams: &[u16], mutual: bool) -> TlsFront {
    use tokio_rustls::rustls;
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "dlq-triage test CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let leaf = rcgen::CertificateParams::new(names)
        .expect("leaf params")
        .signed_by(&leaf_key, &ca)
        .expect("leaf");
    let client_key = rcgen::KeyPair::generate().expect("client key");
    let mut client_params =
        rcgen::CertificateParams::new(vec!["dlq-triage-client".to_string()]).expect("params");
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client = client_params
        .signed_by(&client_key, &ca)
        .expect("client certificate");
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).expect("CA root");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut ports = Vec::new();
    for &upstream in upstreams {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("listener");
        ports.push(listener.local_addr().expect("addr").port());
        let acceptor = acceptor.clone();
        rt.spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake here.
                    let Ok(mut tls) = acceptor.accept(inbound).await else {
                        return;
                    };
                    let Ok(mut plain) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    }
    TlsFront {
        ports,
        ca_pem: ca.pem(),
        client_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
        _rt: rt,
    }
}

/// amqps end to end on the binary: a listener whose certificate comes from a private CA
/// is browsed whole once SSL_CERT_FILE names that CA, and left as it was; without it, or
/// under a name the certificate does not carry, or on the plain port, the refusal says
/// what to do, and never shows the password.
#[test]
fn amqps_with_a_private_ca_is_browsed_and_refusals_say_why() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("tls");
    let dlq = t.n("dlq");
    // AMQP and the management API behind one private CA: one SSL_CERT_FILE serves both.
    let front = tls_front(&["localhost"], &[5672, 15672], false);
    let (amqps, https) = (front.ports[0], front.ports[1]);
    let dir = tempfile::tempdir().expect("tmp");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &front.ca_pem).expect("CA file");
    let summary = |host: &str, port: u16, ca: Option<&std::path::Path>| {
        let mut c = cli_command(
            dir.path(),
            &[
                "summary",
                &format!("amqps://guest:guest@{host}:{port}/%2f?queue={dlq}"),
                "--json",
                "--queue-type",
                "classic",
            ],
        );
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        if let Some(ca) = ca {
            c.env("SSL_CERT_FILE", ca);
        }
        c.output().expect("binary runs")
    };

    let out = summary("localhost", amqps, Some(&ca));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["total"], 10, "{stderr}");
    assert_eq!(doc["coverage"]["complete"], true, "{stderr}");
    t.wait_for(&dlq, 10);

    let refused = |out: std::process::Output| {
        assert!(!out.status.success(), "connected where it must not");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!err.contains("guest:guest"), "password shown: {err}");
        err
    };
    let err = refused(summary("localhost", amqps, None));
    assert!(
        err.contains("UnknownIssuer") && err.contains("SSL_CERT_FILE"),
        "an untrusted CA names the fix: {err}"
    );
    let err = refused(summary("127.0.0.1", amqps, Some(&ca)));
    assert!(
        err.contains("does not name `127.0.0.1`"),
        "a name the certificate lacks is said: {err}"
    );
    let err = refused(summary("127.0.0.1", 5672, Some(&ca)));
    assert!(
        err.contains("did not answer in TLS"),
        "amqps to the plain port is said: {err}"
    );
    assert_eq!(t.count(&dlq), 10, "no letter consumed");

    if !management_available() {
        return;
    }
    let queues = |ca: Option<&std::path::Path>| {
        let mut c = cli_command(
            dir.path(),
            &[
                "queues",
                &format!("amqps://guest:guest@localhost:{amqps}/%2f"),
                "--management-url",
                &format!("https://localhost:{https}"),
                "--json",
            ],
        );
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        if let Some(ca) = ca {
            c.env("SSL_CERT_FILE", ca);
        }
        c.output().expect("binary runs")
    };
    let out = queues(Some(&ca));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let listed = doc["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == dlq.as_str()).cloned());
    assert_eq!(
        listed.map(|q| q["looks_like_dlq"].clone()),
        Some(serde_json::json!(true)),
        "{doc}"
    );
    let err = refused(queues(None));
    assert!(
        err.contains("certificate") && err.contains("SSL_CERT_FILE"),
        "{err}"
    );
}

/// A broker that requires a client certificate (mutual TLS), behind a private CA named by
/// the URI alone (`cacertfile`, no SSL_CERT_FILE): browsed whole with `certfile` and
/// `keyfile`, its management API listed with the same files; without the certificate, or
/// with a key file that is not there, the refusal says what to add.
#[test]
fn amqps_with_a_client_certificate_from_the_uri() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("mtls");
    let dlq = t.n("dlq");
    let front = tls_front(&["localhost"], &[5672, 15672], true);
    let (amqps, https) = (front.ports[0], front.ports[1]);
    let dir = tempfile::tempdir().expect("tmp");
    let files = front.files_in(dir.path());
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (ca, cert) = (path("ca.pem"), path("client.pem"));
    let run = |args: &[&str]| {
        let mut c = cli_command(dir.path(), args);
        c.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
        c.output().expect("binary runs")
    };
    let base = format!("amqps://guest:guest@localhost:{amqps}/%2f");
    let summary = |query: &str| {
        run(&[
            "summary",
            &format!("{base}?queue={dlq}{query}"),
            "--json",
            "--queue-type",
            "classic",
        ])
    };

    let out = summary(&format!("&{files}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["total"], 10, "{stderr}");
    t.wait_for(&dlq, 10);

    let out = summary(&format!("&cacertfile={ca}"));
    assert!(
        !out.status.success(),
        "connected without a client certificate"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("&certfile="), "{err}");
    let out = summary(&format!(
        "&cacertfile={ca}&certfile={cert}&keyfile=/nonexistent/client.key"
    ));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("keyfile=/nonexistent/client.key"),
        "the missing file is named: {err}"
    );
    // A CA file with no certificate in it is said as such, not as an untrusted server.
    let out = summary(&format!("&cacertfile={cert}x"));
    assert!(!out.status.success());
    std::fs::write(format!("{cert}x"), b"\x00\x01 not PEM").expect("junk");
    let out = summary(&format!("&cacertfile={cert}x"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not a PEM certificate"),
        "{err}"
    );
    // The same key in SEC1 form (`BEGIN EC PRIVATE KEY`): rustls takes it for AMQP, so a
    // browse that does not call the management API works; the API's client needs
    // PKCS#8, which is said when it is called.
    let sec1 = dir.path().join("client-sec1.key");
    let key = openssl::pkey::PKey::private_key_from_pem(front.client_key_pem.as_bytes())
        .expect("key")
        .ec_key()
        .expect("EC key")
        .private_key_to_pem()
        .expect("SEC1 PEM");
    std::fs::write(&sec1, key).expect("write");
    let sec1_files = format!("cacertfile={ca}&certfile={cert}&keyfile={}", sec1.display());
    let out = summary(&format!("&{sec1_files}"));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "a SEC1 key over AMQP: {stderr}");
    t.wait_for(&dlq, 10);
    assert_eq!(t.count(&dlq), 10, "no letter consumed");

    if !management_available() {
        return;
    }
    let out = run(&[
        "queues",
        &format!("{base}?{sec1_files}"),
        "--management-url",
        &format!("https://localhost:{https}"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("PKCS#8"), "{err}");
    let out = run(&[
        "queues",
        &format!("{base}?{files}"),
        "--management-url",
        &format!("https://localhost:{https}"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        doc["queues"]
            .as_array()
            .is_some_and(|qs| qs.iter().any(|q| q["name"] == dlq.as_str())),
        "{doc}"
    );
}

/// A replay over mutual TLS: the publisher and the acks of the DLQ copies go through the
/// same certificate files as the browse (the publisher opens its own connection).
#[test]
fn a_replay_over_mutual_tls_publishes_and_acks() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("replay-tls");
    let front = tls_front(&["localhost"], &[5672], true);
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!(
        "amqps://guest:guest@localhost:{}/%2f?queue={}&{}",
        front.ports[0],
        t.n("dlq"),
        front.files_in(dir.path())
    );
    let (report, seen) = replay_rejected(&t, dir.path(), &uri);
    assert_eq!(report["outcome"]["confirmed"], 20, "{report}");
    assert_eq!(seen.len(), 20, "the service got each order once");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        t.count(&t.n("dlq")),
        2,
        "the 20 originals acked after their confirms; the 2 bad ones back"
    );
    verified(dir.path());
}
