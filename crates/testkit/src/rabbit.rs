//! RabbitMQ on 127.0.0.1:5672 (guest/guest) as the tests use it: a uniquely named
//! topology that dead-letters for real (consumer reject, TTL expiry, max-length), so
//! `x-death` is the broker's own, deleted on drop; queues declared beside it; and
//! connections closed from the server side, as a consumer timeout or an operator would.

use dlq_amqp::AmqpTarget;
use futures_lite::StreamExt;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties, ExchangeKind};
use std::time::{Duration, Instant};

pub fn target() -> AmqpTarget {
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

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A work exchange + queue dead-lettering into a DLQ, plus TTL and max-length queues
/// dead-lettering into the same DLQ. Deleted on drop.
pub struct Topology {
    pub id: String,
    pub rt: tokio::runtime::Runtime,
    pub conn: Connection,
}

impl Topology {
    pub fn new(tag: &str) -> Self {
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

    pub fn n(&self, what: &str) -> String {
        format!("{what}.{}", self.id)
    }

    /// The DLQ as a source URI (guest, classic queue on the default vhost).
    pub fn dlq_uri(&self) -> String {
        format!(
            "amqp://guest:guest@127.0.0.1:5672/%2f?queue={}",
            self.n("dlq")
        )
    }

    /// Declare an exchange of this kind (the test deletes it, or it is left behind).
    pub fn exchange(&self, name: &str, kind: ExchangeKind) {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            ch.exchange_declare(
                ShortString::from(name),
                kind,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("exchange");
        });
    }

    pub fn bind(&self, queue: &str, exchange: &str, key: &str) {
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

    pub fn publish(&self, exchange: &str, rk: &str, id: &str, body: &str) {
        self.publish_headers(exchange, rk, id, body, &[("x-consumer-version", "v1")]);
    }

    /// Publish with these headers (long strings) and nothing else: a letter as a client
    /// or a RabbitMQ 4 broker (which drops a client's `x-death`) leaves it.
    pub fn publish_headers(
        &self,
        exchange: &str,
        rk: &str,
        id: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) {
        self.rt.block_on(async {
            let ch = self.conn.create_channel().await.expect("channel");
            let mut h = FieldTable::default();
            for (k, v) in headers {
                h.insert(
                    ShortString::from(*k),
                    AMQPValue::LongString(LongString::from(v.as_bytes().to_vec())),
                );
            }
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
    pub fn reject_from_work(&self, n: usize) {
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

    pub fn count(&self, queue: &str) -> u32 {
        self.counts(queue).0
    }

    /// Wait until `queue` has no consumer: a killed process's browse is gone, and the
    /// broker requeued the deliveries it held as it removed it (one step of the queue's,
    /// so no consumer means they are back). Bounded at 30 s, then it says so. The same
    /// state as [`wait_connections_gone`] waits for, read over AMQP: no `rabbitmqctl`
    /// needed, so tests that only need the server can use it.
    pub fn wait_no_consumers(&self, queue: &str) {
        let started = Instant::now();
        while self.counts(queue).1 > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{queue} still has a consumer"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ready messages and consumers, as a passive declare reports them.
    fn counts(&self, queue: &str) -> (u32, u32) {
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
            (q.message_count(), q.consumer_count())
        })
    }

    /// The queue's ready count once it is `want` — what the broker does after a process
    /// exits (requeues, dead-lettering of rejected copies) takes its own time; this waits
    /// for the state, not a time. After 30 s, the count as it is, for the caller's
    /// assertion to show.
    pub fn count_becomes(&self, queue: &str, want: u32) -> u32 {
        let started = Instant::now();
        loop {
            let n = self.count(queue);
            if n == want || started.elapsed() > Duration::from_secs(30) {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_for(&self, queue: &str, n: u32) {
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

/// Orders `m-0`… published to the work queue and rejected there by the consumer: the
/// broker dead-letters them with its own `x-death`.
pub fn rejected_orders(t: &Topology, n: usize, body: impl Fn(usize) -> String) {
    for i in 0..n {
        t.publish(&t.n("orders"), "order.created", &format!("m-{i}"), &body(i));
    }
    t.reject_from_work(n);
}

/// 5 rejected by the consumer, 3 expired by TTL, 2 pushed out by max-length.
pub fn seeded(tag: &str) -> Topology {
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

/// Close one named client connection from the server side, as a consumer timeout, an
/// operator or a broker restart would.
pub fn server_closes(connection_name: &str) {
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

/// Close, from the server side and at once, every client connection whose name holds
/// `marker` (`(pid N)`: all of one process's, as a broker restart closes them). Listed
/// once, then closed one after another; a connection already gone by its turn (its
/// process closed it on the first close) is not an error. The number found.
pub fn server_closes_every(marker: &str) -> usize {
    let pids = connections_named(marker);
    for pid in &pids {
        let _ = std::process::Command::new("rabbitmqctl")
            .args(["close_connection", pid, "closed by the dlq-triage test"])
            .status();
    }
    pids.len()
}

/// The server's ids of the client connections whose name holds `marker`.
pub fn connections_named(marker: &str) -> Vec<String> {
    let out = std::process::Command::new("rabbitmqctl")
        .args(["list_connections", "pid", "client_properties"])
        .output()
        .expect("rabbitmqctl runs (it ships with the server)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(marker))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Wait until the server lists no connection whose name holds `marker` (its process
/// is gone and the broker has handed back what it held). A state, not a time: the bound
/// only keeps a broken build from hanging the suite.
pub fn wait_connections_gone(marker: &str) {
    let started = Instant::now();
    while !connections_named(marker).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{marker}: its connections never closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub const MGMT: &str = "http://127.0.0.1:15672";

pub fn declare(t: &Topology, name: &str, args: Vec<(&str, AMQPValue)>) {
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

pub fn delete(t: &Topology, name: &str) {
    t.rt.block_on(async {
        if let Ok(ch) = t.conn.create_channel().await {
            let _ = ch
                .queue_delete(ShortString::from(name), QueueDeleteOptions::default())
                .await;
        }
    });
}

/// Delete an exchange a test declared (gone already is fine).
pub fn delete_exchange(t: &Topology, name: &str) {
    t.rt.block_on(async {
        if let Ok(ch) = t.conn.create_channel().await {
            let _ = ch
                .exchange_delete(ShortString::from(name), ExchangeDeleteOptions::default())
                .await;
        }
    });
}

/// A stream queue `sdlq` holding `n` letters `s-0`…, published straight to it.
pub fn seeded_stream(t: &Topology, n: usize) -> String {
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

pub fn dead_orders(tag: &str) -> Topology {
    let t = Topology::new(tag);
    rejected_orders(&t, 20, |i| {
        format!("{{\"order\":{i},\"bad\":{}}}", i % 10 == 3)
    });
    t.wait_for(&t.n("dlq"), 20);
    t
}

/// Close, from the server side, the connection whose channel consumes `queue` (as a
/// consumer timeout or an operator would). rabbitmqctl answers at once, where the
/// management API's consumer list lags by its stats interval.
pub fn server_closes_consumer_of(queue: &str) {
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
