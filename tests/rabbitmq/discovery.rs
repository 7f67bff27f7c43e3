//! Which queues are DLQs: the `queues` command and the picker, through the management API.

use crate::prelude::*;

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
        exited(&out, 0);
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

/// Who a replay to an exchange reaches, from the management API's bindings: a topic
/// exchange's matching patterns, a direct exchange's key, the default exchange's queue.
#[test]
fn the_queues_an_exchange_routes_a_key_to_are_named() {
    use dlq_core::ports::{Reach, Reached};
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = Topology::new("reach");
    let (ex, a, b, c) = (t.n("events"), t.n("billing"), t.n("audit"), t.n("payments"));
    t.exchange(&ex, ExchangeKind::Topic);
    for q in [&a, &b, &c] {
        declare(&t, q, vec![]);
    }
    t.bind(&a, &ex, "orders.*");
    t.bind(&b, &ex, "#");
    t.bind(&c, &ex, "payments.*");
    let mgmt = dlq_amqp::mgmt::Management::new(
        "http://127.0.0.1:15672",
        "guest",
        "guest",
        &Default::default(),
    );
    let mut reach = dlq_amqp::mgmt::MgmtReach {
        mgmt,
        vhost: "/".into(),
    };
    let target = Target::Amqp {
        exchange: ex.clone(),
        routing_key: "orders.created".into(),
    };
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(
        reach.reaches(&target, &[]).expect("bindings"),
        Reached::Queues {
            exchange_type: "topic".into(),
            queues: want,
            exchanges: Vec::new(),
        }
    );
    // The default exchange: the queue named by the key, and only it.
    let only = Target::Amqp {
        exchange: String::new(),
        routing_key: c.clone(),
    };
    assert_eq!(
        reach.reaches(&only, &[]).expect("default"),
        Reached::Queues {
            exchange_type: "default".into(),
            queues: vec![c.clone()],
            exchanges: Vec::new(),
        }
    );
    for q in [&a, &b, &c] {
        delete(&t, q);
    }
    delete_exchange(&t, &ex);
}
