//! Browsing a real DLQ: grouping, settling exactly one letter, caps, refusals in words, connections and acks the server broke, hostile headers, 100,000 letters.

use crate::prelude::*;

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
    assert_eq!(
        t.count_becomes(&t.n("dlq"), 10),
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
    assert_eq!(t.count_becomes(&t.n("dlq"), 9), 9);
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
    exited(&out, 0);
    // From a private credentials file.
    let file = dir.path().join("dlq-triage/credentials.toml");
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&file, "[amqp]\n\"guest@127.0.0.1\" = \"guest\"\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let out = run(&[]);
    exited(&out, 0);
    // A file others can read is refused, and says how to fix it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
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
    exited(&out, 0);
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
