//! The retention clock on the real server: a DLQ with `x-message-ttl` says when each
//! group's first letter is deleted, from when it was dead-lettered, and `watch`'s
//! `expires < D` fires on it.

use crate::prelude::*;

#[test]
fn a_dlq_with_a_message_ttl_shows_when_its_first_letter_is_deleted() {
    if !rabbit_available() || !management_available() {
        return;
    }
    const TTL_MS: i32 = 6 * 3_600_000;
    let t = Topology::new("ttl-clock");
    let q = t.n("clock");
    declare(&t, &q, vec![("x-message-ttl", AMQPValue::LongInt(TTL_MS))]);
    t.rt.block_on(async {
        let ch = t.conn.create_channel().await.expect("channel");
        ch.queue_bind(
            ShortString::from(q.as_str()),
            ShortString::from(t.n("dlx").as_str()),
            ShortString::from(""),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bind");
    });
    for i in 0..3 {
        t.publish(&t.n("orders"), "order.created", &format!("c-{i}"), "{}");
    }
    t.reject_from_work(3);
    let started = Instant::now();
    while t.count(&q) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not dead-lettered"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let out = cli_command(dir.path(), &["summary", &uri, "--json"])
        .output()
        .expect("runs");
    let doc: serde_json::Value =
        serde_json::from_slice(&exited(&out, 0).into_bytes()).expect("json");
    assert_eq!(
        doc["retention"][0]["retention_ms"],
        i64::from(TTL_MS),
        "{doc}"
    );
    let left = doc["groups"][0]["expires_in_s"].as_i64().expect("a clock");
    let want = i64::from(TTL_MS) / 1000;
    assert!(
        (want - 60..=want).contains(&left),
        "expires in {left} s, want ~{want} s: {doc}"
    );
    let watch = |rule: &str| {
        cli_command(dir.path(), &["watch", &uri, "--rule", rule, "--once"])
            .output()
            .expect("runs")
    };
    let fired = watch("expires < 7h");
    let said = exited(&fired, 3);
    assert!(
        said.contains("expires in 5h5") || said.contains("expires in 5h4"),
        "{said}"
    );
    exited(&watch("expires < 5h"), 0);
    delete(&t, &q);
}
