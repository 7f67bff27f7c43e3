//! What one Kafka transaction costs on librdkafka's mock cluster (the broker of the tests,
//! the benches and the demo): 40 transactions of 20 records on 20 keys, the mean time of
//! `begin`, the sends and `commit` each. `cargo run --release --example txn_probe [KEY=VALUE…]`
//! takes librdkafka properties to try. A replay commits a transaction per engine batch,
//! so a key's next letter waits for its previous one's commit: this is the figure that
//! caps a hot-key replay (docs/performance-history.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test, bench or example may stop on a broken fixture

use rdkafka::config::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::time::{Duration, Instant};

fn main() {
    let cluster = MockCluster::new(1).expect("mock");
    cluster.create_topic("t", 4, 1).expect("topic");
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", cluster.bootstrap_servers())
        .set("transactional.id", "probe")
        .set("linger.ms", "1")
        .set("acks", "all");
    for arg in std::env::args().skip(1) {
        if let Some((k, v)) = arg.split_once('=') {
            cfg.set(k, v);
        }
    }
    let p: BaseProducer = cfg.create().expect("producer");
    p.init_transactions(Duration::from_secs(10)).expect("init");
    let (mut begin, mut send, mut commit) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let n = 40;
    for i in 0..n {
        let t0 = Instant::now();
        p.begin_transaction().expect("begin");
        let t1 = Instant::now();
        for k in 0..20 {
            let key = format!("k{k}");
            let payload = i.to_string();
            p.send(BaseRecord::<str, str>::to("t").key(&key).payload(&payload))
                .expect("send");
        }
        let t2 = Instant::now();
        p.commit_transaction(Duration::from_secs(10))
            .expect("commit");
        let t3 = Instant::now();
        begin += t1 - t0;
        send += t2 - t1;
        commit += t3 - t2;
    }
    println!(
        "per transaction: begin {:?}, 20 sends {:?}, commit {:?}",
        begin / n,
        send / n,
        commit / n
    );
}
