//! The embedded demo: librdkafka's in-process mock cluster seeded with the incident of
//! `scenario`, read through the real Kafka adapter. No broker needed.

use crate::KafkaSource;
use dlq_core::model::{Coords, RawLetter};
use dlq_core::ports::{DlqSource, ScanEvent, SourceError, SourceInfo};
pub mod scenario;

use chrono::{DateTime, Utc};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DefaultProducerContext, DeliveryResult, Producer, ProducerContext,
};
use rdkafka::ClientContext;
use scenario::{incident, Scale, DLQ_PARTITIONS, INVOICES_DLQ, PAYMENTS_DLQ};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Origin topics the simulated consumer reads (replays go there).
pub const ORIGIN_TOPICS: [(&str, i32); 3] =
    [("invoices", 6), ("payments", 4), ("ledger-postings", 4)];

/// Counts failed deliveries so seeding can tell a partial load from a full one.
#[derive(Clone, Default)]
struct Deliveries {
    failed: Arc<AtomicU64>,
    last_error: Arc<std::sync::Mutex<Option<String>>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut last) = self.last_error.lock() {
                *last = Some(e.to_string());
            }
        }
    }
}

/// More of the demo that this crate does not build itself (the app's schema-encoded
/// topic): topics to create, which of them are DLQs to read, and their letters.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub topics: Vec<(String, i32)>,
    pub dlqs: Vec<String>,
    pub letters: Vec<RawLetter>,
}

/// A running mock cluster with the incident in it.
pub struct Demo {
    cluster: MockCluster<'static, DefaultProducerContext>,
    pub topics: Vec<String>,
    pub seeded: usize,
}

impl Demo {
    pub fn start(seed: u64, now: DateTime<Utc>, scale: Scale) -> Result<Demo, SourceError> {
        Self::start_with(seed, now, scale, Extra::default())
    }

    /// [`Demo::start`] with more topics and letters.
    pub fn start_with(
        seed: u64,
        now: DateTime<Utc>,
        scale: Scale,
        extra: Extra,
    ) -> Result<Demo, SourceError> {
        let fail = |what: &str, e: KafkaError| SourceError::failed_by(format!("demo: {what}"), e);
        let cluster = MockCluster::new(1).map_err(|e| fail("starting the mock cluster", e))?;
        for t in [INVOICES_DLQ, PAYMENTS_DLQ] {
            cluster
                .create_topic(t, DLQ_PARTITIONS, 1)
                .map_err(|e| fail("creating topics", e))?;
        }
        for (t, n) in ORIGIN_TOPICS {
            cluster
                .create_topic(t, n, 1)
                .map_err(|e| fail("creating topics", e))?;
        }
        for (t, n) in &extra.topics {
            cluster
                .create_topic(t, *n, 1)
                .map_err(|e| fail("creating topics", e))?;
        }
        let letters = incident(seed, now, scale);
        produce_all(&cluster.bootstrap_servers(), &letters)?;
        produce_all(&cluster.bootstrap_servers(), &extra.letters)?;
        let mut topics = vec![INVOICES_DLQ.to_string(), PAYMENTS_DLQ.to_string()];
        topics.extend(extra.dlqs);
        Ok(Demo {
            topics,
            seeded: letters.len() + extra.letters.len(),
            cluster,
        })
    }

    /// Seed `topic` with `n` realistic letters (the incident's letters, or `templates`,
    /// cycled) spread over `partitions`, produced in chunks so memory stays flat. The
    /// mock keeps about 5 MiB per partition, so large benchmarks need many partitions.
    pub fn seed_bench(
        &self,
        topic: &str,
        n: usize,
        partitions: i32,
        now: DateTime<Utc>,
        templates: Option<&[RawLetter]>,
    ) -> Result<(), SourceError> {
        self.cluster
            .create_topic(topic, partitions, 1)
            .map_err(|e| SourceError::failed_by(format!("demo: creating {topic}"), e))?;
        let templates = match templates {
            Some(t) if !t.is_empty() => t.to_vec(),
            _ => incident(7, now, Scale(1.0)),
        };
        let bootstrap = self.bootstrap();
        let mut i = 0usize;
        while i < n {
            let chunk: Vec<RawLetter> = (i..(i + 50_000).min(n))
                .map(|k| {
                    let mut l = templates[k % templates.len()].clone();
                    scenario::make_distinct(&mut l, k);
                    l.coords = Some(Coords::Kafka {
                        topic: topic.to_string(),
                        partition: (k % partitions as usize) as i32,
                        offset: 0,
                    });
                    l
                })
                .collect();
            i += chunk.len();
            produce_all(&bootstrap, &chunk)?;
        }
        Ok(())
    }

    pub fn bootstrap(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    /// `kafka://…/invoices.dlq,payments.dlq` for this cluster.
    pub fn uri(&self) -> String {
        format!("kafka://{}/{}", self.bootstrap(), self.topics.join(","))
    }
}

/// Produce letters exactly where their coordinates say (same partition, key, headers,
/// timestamp), idempotently, and fail unless every delivery was confirmed.
pub fn produce_all(bootstrap: &str, letters: &[RawLetter]) -> Result<(), SourceError> {
    let (producer, ctx) = producer(bootstrap)?;
    produce_with(&producer, &ctx, letters)
}

/// An idempotent `acks=all` producer and its delivery counter.
fn producer(bootstrap: &str) -> Result<(BaseProducer<Deliveries>, Deliveries), SourceError> {
    let ctx = Deliveries::default();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create_with_context(ctx.clone())
        .map_err(|e| SourceError::failed_by("demo: producer", e))?;
    Ok((producer, ctx))
}

/// Produce `letters` where their coordinates say with `producer`, flush, and fail unless
/// every delivery since `ctx` was made was confirmed.
fn produce_with(
    producer: &BaseProducer<Deliveries>,
    ctx: &Deliveries,
    letters: &[RawLetter],
) -> Result<(), SourceError> {
    for l in letters {
        let Some(Coords::Kafka {
            topic, partition, ..
        }) = &l.coords
        else {
            continue;
        };
        let headers = crate::kafka_headers(&l.headers);
        let mut record = BaseRecord::to(topic)
            .partition(*partition)
            .payload(&l.payload)
            .headers(headers);
        if let Some(k) = &l.key {
            record = record.key(k);
        }
        if let Some(t) = l.timestamp {
            record = record.timestamp(t.timestamp_millis());
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    producer.poll(Duration::from_millis(50));
                    record = r;
                }
                Err((e, _)) => {
                    return Err(SourceError::failed_by(
                        format!("demo: producing to {topic}"),
                        e,
                    ))
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| SourceError::failed_by("demo: flushing", e))?;
    let failed = ctx.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let last = ctx
            .last_error
            .lock()
            .ok()
            .and_then(|l| l.clone())
            .unwrap_or_default();
        return Err(SourceError::failed(format!(
            "demo: {failed} letters were not confirmed by the mock cluster: {last}"
        )));
    }
    Ok(())
}

/// The simulated service's consumer group: the consumer the letters name, so a
/// replay's dry-run finds it reading the origin topics (who a replay reaches).
const DEMO_GROUP: &str = "invoice-worker";

/// The demo's live side, on its own threads with its own clients (the mock cluster
/// itself stays on the thread that owns it): a trickle of new dead letters and the
/// simulated consumer of the origin topics. Stops and joins on drop.
pub struct Simulator {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Simulator {
    /// `trickle_every`: how often a new dead letter arrives (None: no trickle).
    pub fn start(
        bootstrap: String,
        seed: u64,
        trickle_every: Option<Duration>,
    ) -> Result<Self, SourceError> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use std::sync::atomic::AtomicBool;
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        if let Some(every) = trickle_every {
            let (stop, bootstrap) = (stop.clone(), bootstrap.clone());
            handles.push(std::thread::spawn(move || {
                let mut rng = scenario::Rng::new(seed ^ 0x7777);
                let mut waited = Duration::ZERO;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    waited += Duration::from_millis(100);
                    if waited >= every {
                        waited = Duration::ZERO;
                        let letter = scenario::fresh_letter(&mut rng, Utc::now());
                        let _ = produce_all(&bootstrap, &[letter]);
                    }
                }
            }));
        }
        place_group(&bootstrap, DEMO_GROUP)?;
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", DEMO_GROUP)
            .set("auto.offset.reset", "earliest")
            .create()
            .map_err(|e| SourceError::failed_by("demo consumer", e))?;
        let topics: Vec<&str> = ORIGIN_TOPICS.iter().map(|(t, _)| *t).collect();
        consumer
            .subscribe(&topics)
            .map_err(|e| SourceError::failed_by("demo consumer", e))?;
        let stop2 = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut dlq = None;
            while !stop2.load(Ordering::Relaxed) {
                let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) else {
                    continue;
                };
                let raw = crate::to_raw(&msg);
                if let Err(reason) = scenario::consumer_verdict(&raw) {
                    let again = scenario::dead_letter_again(&raw, reason, Utc::now());
                    // One producer for the consumer's life: a new one per failure made
                    // the simulated service lag far behind a fast replay.
                    if dlq.is_none() {
                        dlq = producer(&bootstrap).ok();
                    }
                    if let Some((p, ctx)) = &dlq {
                        let _ = produce_with(p, ctx, &[again]);
                    }
                }
            }
        }));
        Ok(Simulator { stop, handles })
    }
}

/// The simulated service has committed where it stands (the start of the empty origin
/// topics), as a running service has — before `start` returns, so a replay's dry-run
/// planned after it finds the group reading them, every time. A commit outside the
/// group's membership, which Kafka accepts while the group has no members.
fn place_group(bootstrap: &str, group: &str) -> Result<(), SourceError> {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .map_err(|e| SourceError::failed_by("demo consumer", e))?;
    let mut at = rdkafka::TopicPartitionList::new();
    for (topic, partitions) in ORIGIN_TOPICS {
        for p in 0..partitions {
            at.add_partition_offset(topic, p, rdkafka::Offset::Offset(0))
                .map_err(|e| SourceError::failed_by("demo consumer", e))?;
        }
    }
    c.commit(&at, CommitMode::Sync)
        .map_err(|e| SourceError::failed_by("demo consumer's first commit", e))
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// The `demo` source: a fresh seeded cluster read through the Kafka adapter.
pub struct DemoSource {
    // Field order matters: the simulator and the consumer side are dropped before the
    // cluster they talk to.
    simulator: Option<Simulator>,
    kafka: KafkaSource,
    demo: Demo,
}

impl DemoSource {
    pub fn start(now: DateTime<Utc>, extra: Extra) -> Result<Self, SourceError> {
        let demo = Demo::start_with(42, now, Scale(1.0), extra)?;
        let kafka = KafkaSource::new(vec![demo.bootstrap()], demo.topics.clone(), Vec::new());
        Ok(DemoSource {
            simulator: None,
            kafka,
            demo,
        })
    }

    /// Start the live side (trickle of new letters, simulated consumer): for the TUI,
    /// where the incident should keep moving.
    pub fn go_live(&mut self) -> Result<(), SourceError> {
        if self.simulator.is_none() {
            self.simulator = Some(Simulator::start(
                self.demo.bootstrap(),
                42,
                Some(Duration::from_secs(4)),
            )?);
        }
        Ok(())
    }
}

impl DlqSource for DemoSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: format!("demo · {}", self.demo.uri()),
            browse_effect: "Demo: an in-process Kafka mock cluster; browsing is read-only, nothing is committed".into(),
        }
    }

    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        self.kafka.scan(sink)
    }

    /// Tailing the demo brings it to life: new letters trickle in and replays are
    /// processed by the simulated consumer.
    fn tail(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        self.go_live()?;
        self.kafka.tail(sink)
    }

    fn fetch(&mut self, coords: &Coords) -> Result<RawLetter, SourceError> {
        self.kafka.fetch(coords)
    }

    fn want_payloads(&mut self, wanted: bool) {
        self.kafka.want_payloads(wanted);
    }

    /// The mock cluster keeps no topic configs (it does not answer DescribeConfigs): the
    /// demo's topics are given the retention a real deployment of its story has, so
    /// its clock shows — 36 hours on payments.dlq, whose oldest timeouts are ~30 h old.
    fn retention(&mut self) -> Vec<(String, dlq_core::retention::Retention)> {
        let rule = |h: i64| dlq_core::retention::Retention::After {
            ms: h * 3_600_000,
            basis: format!("retention.ms={} (the demo's setting)", h * 3_600_000),
        };
        vec![
            ("invoices.dlq".into(), rule(7 * 24)),
            ("payments.dlq".into(), rule(36)),
            ("payouts.dlq".into(), rule(7 * 24)),
        ]
    }

    fn origin_log(&self) -> Option<Box<dyn dlq_core::ports::OriginLog + Send>> {
        self.kafka.origin_log()
    }

    fn replay_ports(&self) -> Result<dlq_core::ports::ReplayPorts, SourceError> {
        self.kafka.replay_ports()
    }
}
