//! Kafka DLQ topics through librdkafka.
//!
//! Browsing is read-only: partitions are `assign()`ed (the DLQ's consumer groups are never
//! joined), auto-commit is off and nothing is ever committed. The initial scan is
//! complete when every partition reports end-of-partition, as `kcat -e` does; watermarks
//! only estimate progress (transaction markers and compaction make them overcount, and
//! some Kafka-compatible brokers report them wrongly), so they never end a partition
//! early. One consumer per topic, because librdkafka's EOF event names only the partition.

#[cfg(feature = "demo")]
pub mod demo;
mod origin;
mod poll;
mod records;
pub mod share_source;
use poll::{spawn_estimate, Poll};
pub use records::{kafka_headers, to_raw};
mod publisher;
pub mod retention;

pub use origin::KafkaOriginLog;
pub use publisher::KafkaPublisher;

use chrono::{DateTime, Utc};
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_core::ports::{
    Confirmed, DlqSource, Outgoing, Publisher, ScanEvent, SourceError, SourceInfo, Target,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KHeader, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long to wait for cluster metadata before calling the broker unreachable.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// A scan with no message and no end-of-partition for this long is failed, not hung.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
/// Letters the poller hands over at once.
const POLL_BATCH: usize = 1024;

/// Where to start reading each partition.
pub trait OffsetLookup {
    /// First offset at or after `since` per partition (`Offset::End` when none).
    fn offsets_for_time(
        &self,
        topic: &str,
        partitions: &[i32],
        since: DateTime<Utc>,
    ) -> Result<Vec<(i32, Offset)>, SourceError>;

    /// The broker timestamp (ms) of `partition`'s newest record; `None` when it is
    /// empty or the record could not be read in time.
    fn newest_timestamp(&self, topic: &str, partition: i32) -> Option<i64>;
}

impl OffsetLookup for BaseConsumer {
    fn offsets_for_time(
        &self,
        topic: &str,
        partitions: &[i32],
        since: DateTime<Utc>,
    ) -> Result<Vec<(i32, Offset)>, SourceError> {
        let mut tpl = TopicPartitionList::new();
        for p in partitions {
            tpl.add_partition_offset(topic, *p, Offset::Offset(since.timestamp_millis()))
                .map_err(|e| SourceError::failed_by(format!("--since on {topic}/{p}"), e))?;
        }
        let res = self.offsets_for_times(tpl, METADATA_TIMEOUT).map_err(|e| {
            SourceError::failed_by(format!("looking up offsets for --since on `{topic}`"), e)
        })?;
        Ok(res
            .elements_for_topic(topic)
            .iter()
            .map(|e| (e.partition(), e.offset()))
            .collect())
    }

    fn newest_timestamp(&self, topic: &str, partition: i32) -> Option<i64> {
        let (low, high) = self
            .fetch_watermarks(topic, partition, METADATA_TIMEOUT)
            .ok()?;
        if high <= low {
            return None;
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(high - 1))
            .ok()?;
        self.assign(&tpl).ok()?;
        let deadline = std::time::Instant::now() + METADATA_TIMEOUT;
        while std::time::Instant::now() < deadline {
            match self.poll(POLL) {
                Some(Ok(m)) => return m.timestamp().to_millis(),
                Some(Err(_)) => return None,
                None => {}
            }
        }
        None
    }
}

/// Start offsets for a scan: the beginning, or the lookup's answer for `--since`. A
/// partition the lookup did not answer for is read from the beginning (never skipped:
/// reading too much is safe, missing letters is not). An answer of "nothing since" (End)
/// is checked against the partition's newest record: a broker that answers End while
/// its newest record is newer than `--since` (librdkafka's mock cluster does) is not
/// believed — the partition is read from the beginning and the scan's own time filter
/// keeps the letters since. Never a reassuring empty answer from a wrong lookup.
pub fn start_offsets(
    lookup: &dyn OffsetLookup,
    topic: &str,
    partitions: &[i32],
    since: Option<DateTime<Utc>>,
) -> Result<Vec<(i32, Offset)>, SourceError> {
    let Some(since) = since else {
        return Ok(partitions.iter().map(|p| (*p, Offset::Beginning)).collect());
    };
    let found: HashMap<i32, Offset> = lookup
        .offsets_for_time(topic, partitions, since)?
        .into_iter()
        .collect();
    let since_ms = since.timestamp_millis();
    Ok(partitions
        .iter()
        .map(|p| {
            let o = match found.get(p) {
                Some(o @ Offset::Offset(_)) => *o,
                Some(Offset::End) => match lookup.newest_timestamp(topic, *p) {
                    Some(newest) if newest >= since_ms => Offset::Beginning,
                    _ => Offset::End,
                },
                _ => Offset::Beginning,
            };
            (*p, o)
        })
        .collect())
}

pub struct KafkaSource {
    brokers: Vec<String>,
    topics: Vec<String>,
    /// librdkafka properties from `-X key=value` and config, applied last.
    props: Vec<(String, String)>,
    since: Option<DateTime<Utc>>,
    /// Where to start each partition instead (partitions not named: the beginning).
    from: Option<HashMap<i32, i64>>,
    stall_timeout: Duration,
    /// Next offset per (topic, partition) after the scan, where `tail` continues.
    positions: Vec<(String, i32, Offset)>,
    /// The topics' retention, asked for when the first scan starts and read after it: a
    /// broker that does not answer DescribeConfigs costs its timeout beside the scan,
    /// not after it (3 s added to every 1,000,000-letter `summary` on the mock cluster).
    /// Asked once: a second browse (`R`) does not ask again.
    retention: Option<RetentionAsk>,
    /// Value-less share-group letters get their source record (see `share_source`);
    /// not while a scan reads headers only.
    fill_from_source: bool,
    source_reader: std::sync::Mutex<share_source::SourceReader>,
}

type Rules = Vec<(String, dlq_core::retention::Retention)>;

/// The retention question: under way, or answered.
enum RetentionAsk {
    Asked(std::thread::JoinHandle<Rules>),
    Known(Rules),
}

impl KafkaSource {
    pub fn new(brokers: Vec<String>, topics: Vec<String>, props: Vec<(String, String)>) -> Self {
        KafkaSource {
            brokers,
            topics,
            props,
            since: None,
            from: None,
            stall_timeout: STALL_TIMEOUT,
            positions: Vec::new(),
            retention: None,
            fill_from_source: true,
            source_reader: Default::default(),
        }
    }

    /// Only letters dead-lettered at or after `since` (by broker timestamp).
    pub fn with_since(mut self, since: Option<DateTime<Utc>>) -> Self {
        self.since = since;
        self
    }

    /// Start each partition at an offset (a replay's origin read back from where its
    /// partitions ended when it was planned); partitions not named from the beginning.
    pub fn with_start_offsets(mut self, from: HashMap<i32, i64>) -> Self {
        self.from = Some(from);
        self
    }

    pub fn with_stall_timeout(mut self, t: Duration) -> Self {
        self.stall_timeout = t;
        self
    }

    /// The consumer settings every scan uses (with the `-X` properties over them):
    /// public so `examples/scan_only` measures the client floor with exactly these.
    pub fn config(&self) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", self.brokers.join(","))
            // assign() needs a group.id but never joins the group: use a throwaway one.
            .set(
                "group.id",
                format!("dlq-triage-browse-{}", std::process::id()),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "earliest")
            .set("socket.timeout.ms", "10000")
            // librdkafka 2.x postpones a partition's next fetch when its local queue is
            // over the thresholds below: by a full second by default, which stalls whole
            // scans. Even 10 ms held a bare 1,000,000-letter scan of 256 partitions to
            // 7-9 s; at 1 ms it reads as fast as kcat (2.3-2.8 s, `examples/scan_only`).
            // The limits below still bound memory; the backoff only sets how soon a
            // drained partition is fetched again.
            .set("fetch.queue.backoff.ms", "1")
            // End-of-partition is known only after an empty fetch; don't wait long for it.
            .set("fetch.wait.max.ms", "100")
            // librdkafka prefetches per partition (by default up to 64 MiB or 100,000
            // messages each): on a 256-partition DLQ that held most of the topic twice
            // over. 1 MiB a partition keeps a scan as fast (measured at 1,000,000
            // letters: 10.0 s either way; 256 KiB slows it to 14.5 s) and the peak RSS
            // of `summary` from ~420 MB to ~270 MB. `-X` overrides both.
            .set("queued.max.messages.kbytes", "1024")
            .set("queued.min.messages", "1000")
            .set("client.id", "dlq-triage");
        for (k, v) in &self.props {
            cfg.set(k, v);
        }
        cfg
    }

    fn consumer(&self) -> Result<BaseConsumer, SourceError> {
        self.config().create().map_err(|e| {
            SourceError::unavailable(format!(
                "cannot create a Kafka client: {} (check -X properties)",
                self.scrub(&e.to_string())
            ))
        })
    }

    /// librdkafka quotes property values in its errors: take out every secret one.
    fn scrub(&self, text: &str) -> String {
        scrub_secrets(text, &self.props)
    }

    fn label(&self) -> String {
        format!(
            "kafka://{}/{}",
            self.brokers.join(","),
            self.topics.join(",")
        )
    }

    /// Partitions of a topic, or why not.
    fn partitions(&self, consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>, SourceError> {
        let md = consumer.fetch_metadata(Some(topic), METADATA_TIMEOUT).map_err(|e| {
            SourceError::unavailable(format!(
                "cannot reach Kafka at {} within {}s: {e}. Check the address and network, and -X security.protocol / sasl.* for secured clusters",
                self.brokers.join(","),
                METADATA_TIMEOUT.as_secs()
            ))
        })?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| {
                SourceError::unavailable(format!("topic `{topic}` not in the cluster's metadata"))
            })?;
        if let Some(err) = t.error() {
            return Err(SourceError::unavailable(format!(
                "topic `{topic}`: {} (does it exist? names are case-sensitive)",
                rdkafka::error::RDKafkaErrorCode::from(err)
            )));
        }
        let parts: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
        if parts.is_empty() {
            return Err(SourceError::unavailable(format!(
                "topic `{topic}` has no partitions (does it exist?)"
            )));
        }
        Ok(parts)
    }

    /// Where each partition's read starts: where a resumed tail left off, else the
    /// beginning, or the first offset at `--since`.
    fn starts(
        &self,
        consumer: &BaseConsumer,
        topic: &str,
        parts: &[i32],
    ) -> Result<Vec<(i32, Offset)>, SourceError> {
        match &self.from {
            Some(from) => Ok(parts
                .iter()
                .map(|p| {
                    let at = from
                        .get(p)
                        .map_or(Offset::Beginning, |o| Offset::Offset(*o));
                    (*p, at)
                })
                .collect()),
            None => start_offsets(consumer, topic, parts, self.since),
        }
    }

    /// Read one topic to end-of-partition. Polling runs on its own thread and hands
    /// owned batches over a bounded channel, so librdkafka and our per-letter work
    /// (conventions, masking, indexing in the sink) overlap instead of taking turns.
    fn scan_topic(
        &mut self,
        topic: &str,
        done: &mut u64,
        total: &mut u64,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        let consumer = self.consumer()?;
        let parts = self.partitions(&consumer, topic)?;
        let starts = self.starts(&consumer, topic, &parts)?;
        // The total is only a progress estimate: it is computed off the scan's path
        // (two round trips per partition add up on topics with hundreds of them).
        let estimate = spawn_estimate(self.consumer()?, topic, parts.clone());
        assign(&consumer, topic, &starts)?;
        let (tx, rx) = mpsc::sync_channel::<Result<Vec<RawLetter>, SourceError>>(8);
        let stop = Arc::new(AtomicBool::new(false));
        let poll = Poll {
            consumer,
            pending: parts.iter().copied().collect(),
            topic: topic.to_string(),
            stall_timeout: self.stall_timeout,
            stop: stop.clone(),
            tx,
        };
        let poller = std::thread::spawn(move || poll.run());
        let mut outcome: Result<ControlFlow<()>, SourceError> = Ok(ControlFlow::Continue(()));
        'recv: for item in rx.iter() {
            match item {
                Ok(mut letters) => {
                    // Share-group letters without a value get their source record.
                    self.fill_from_source(&mut letters);
                    // The poll batch goes on whole; progress when it crossed a 50,000 mark.
                    let before = *done;
                    *done += letters.len() as u64;
                    if sink(ScanEvent::Letters(letters)).is_break()
                        || (*done / 50_000 > before / 50_000
                            && sink(ScanEvent::Progress {
                                done: *done,
                                total: Some(*total + estimate.load(Ordering::Relaxed)),
                            })
                            .is_break())
                    {
                        outcome = Ok(ControlFlow::Break(()));
                        break 'recv;
                    }
                }
                Err(e) => {
                    outcome = Err(e);
                    break 'recv;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        *total += estimate.load(Ordering::Relaxed);
        let next = poller
            .join()
            .map_err(|_| SourceError::failed(format!("the reader of `{topic}` crashed")))?;
        if matches!(outcome, Ok(ControlFlow::Continue(()))) {
            // Where tail continues: after the last letter seen, else where the scan
            // started (an empty partition, or one --since skipped entirely).
            for (p, start) in starts {
                let o = next.get(&p).map_or(start, |n| Offset::Offset(*n));
                self.positions.push((topic.to_string(), p, o));
            }
        }
        outcome
    }
}

/// Read `topic`'s partitions from their starts: assigned, never subscribed (the
/// throwaway group is never joined, and auto-commit is off: nothing is committed).
fn assign(
    consumer: &BaseConsumer,
    topic: &str,
    starts: &[(i32, Offset)],
) -> Result<(), SourceError> {
    let mut tpl = TopicPartitionList::new();
    for (p, start) in starts {
        tpl.add_partition_offset(topic, *p, *start)
            .map_err(|e| SourceError::failed_by(format!("assigning {topic}/{p}"), e))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| SourceError::failed_by(format!("assigning partitions of `{topic}`"), e))
}

impl DlqSource for KafkaSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: self.label(),
            browse_effect: "Kafka: browsing is read-only — partitions are assigned, no group is joined, nothing is committed".into(),
        }
    }

    fn want_payloads(&mut self, wanted: bool) {
        self.fill_from_source = wanted;
    }

    fn retention(&mut self) -> Rules {
        let rules = match self.retention.take() {
            Some(RetentionAsk::Known(rules)) => rules,
            Some(RetentionAsk::Asked(ask)) => ask
                .join()
                .unwrap_or_else(|_| retention::read(&self.config(), &self.topics)),
            None => retention::read(&self.config(), &self.topics),
        };
        self.retention = Some(RetentionAsk::Known(rules.clone()));
        rules
    }

    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        if self.retention.is_none() {
            let (cfg, topics) = (self.config(), self.topics.clone());
            let ask = std::thread::spawn(move || retention::read(&cfg, &topics));
            self.retention = Some(RetentionAsk::Asked(ask));
        }
        let mut done = 0u64;
        let mut total = 0u64;
        self.positions.clear();
        for topic in self.topics.clone() {
            if self
                .scan_topic(&topic, &mut done, &mut total, sink)?
                .is_break()
            {
                return Ok(());
            }
        }
        let _ = sink(ScanEvent::Progress {
            done,
            total: Some(done),
        });
        Ok(())
    }

    fn origin_log(&self) -> Option<Box<dyn dlq_core::ports::OriginLog + Send>> {
        Some(Box::new(KafkaOriginLog::new(&self.brokers, &self.props)))
    }

    fn replay_ports(&self) -> Result<dlq_core::ports::ReplayPorts, SourceError> {
        Ok(dlq_core::ports::ReplayPorts {
            publisher: Box::new(KafkaPublisher::new(
                &self.brokers,
                &self.props,
                Duration::from_secs(30),
            )?),
            origin_log: Some(Box::new(KafkaOriginLog::new(&self.brokers, &self.props))),
            reach: Some(Box::new(KafkaOriginLog::new(&self.brokers, &self.props))),
            kafka: true,
        })
    }

    fn tail(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        if self.positions.is_empty() {
            return Err(SourceError::failed("tail needs a completed scan first"));
        }
        let mut cfg = self.config();
        cfg.set("enable.partition.eof", "false");
        let consumer: BaseConsumer = cfg.create().map_err(|e| {
            SourceError::unavailable(format!(
                "cannot create a Kafka client: {}",
                self.scrub(&e.to_string())
            ))
        })?;
        let mut tpl = TopicPartitionList::new();
        for (t, p, o) in &self.positions {
            tpl.add_partition_offset(t, *p, *o)
                .map_err(|e| SourceError::failed_by(format!("assigning {t}/{p}"), e))?;
        }
        consumer
            .assign(&tpl)
            .map_err(|e| SourceError::failed_by("assigning for tail", e))?;
        loop {
            match consumer.poll(POLL) {
                Some(Ok(msg)) => {
                    let mut raw = [to_raw(&msg)];
                    self.fill_from_source(&mut raw);
                    let [raw] = raw;
                    if let Some(pos) = self
                        .positions
                        .iter_mut()
                        .find(|(t, p, _)| t == msg.topic() && *p == msg.partition())
                    {
                        pos.2 = Offset::Offset(msg.offset() + 1);
                    }
                    if sink(ScanEvent::Letters(vec![raw])).is_break() {
                        return Ok(());
                    }
                }
                Some(Err(_)) => {}
                // Give the sink a chance to stop even when nothing arrives.
                None => {
                    if sink(ScanEvent::Progress {
                        done: 0,
                        total: None,
                    })
                    .is_break()
                    {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn fetch(&mut self, coords: &Coords) -> Result<RawLetter, SourceError> {
        let Coords::Kafka {
            topic,
            partition,
            offset,
        } = coords
        else {
            return Err(SourceError::Unsupported(format!(
                "{coords} is not a Kafka location"
            )));
        };
        let consumer = self.consumer()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .map_err(|e| SourceError::failed_by(format!("assigning {coords}"), e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| SourceError::failed_by(format!("assigning {coords}"), e))?;
        let started = Instant::now();
        while started.elapsed() < self.stall_timeout {
            match consumer.poll(POLL) {
                Some(Ok(msg)) if msg.offset() == *offset => {
                    let mut raw = [to_raw(&msg)];
                    self.fill_from_source(&mut raw);
                    let [raw] = raw;
                    return Ok(raw);
                }
                // Not there: compaction or retention removed it (the broker skipped
                // ahead), or it was never written (past the partition's end).
                Some(Ok(_)) | Some(Err(KafkaError::PartitionEOF(_))) => {
                    let end = consumer
                        .fetch_watermarks(topic, *partition, METADATA_TIMEOUT)
                        .ok()
                        .map(|(_, high)| high);
                    return Err(SourceError::unavailable(match end {
                        Some(0) => format!(
                            "{coords} does not exist: partition {partition} is empty (list the letters for their coordinates)"
                        ),
                        Some(high) if *offset >= high => format!(
                            "{coords} does not exist: partition {partition} ends at offset {} (list the letters for their coordinates)",
                            high - 1
                        ),
                        _ => format!("{coords} no longer exists (retention or compaction)"),
                    }));
                }
                Some(Err(_)) | None => {}
            }
        }
        Err(SourceError::failed(format!(
            "fetching {coords}: no answer within {}s",
            self.stall_timeout.as_secs()
        )))
    }
}

/// The share group `topic` is the DLQ of, if its records say (KIP-1191).
pub fn share_group(brokers: &[String], props: &[(String, String)], topic: &str) -> Option<String> {
    let src = KafkaSource::new(brokers.to_vec(), Vec::new(), props.to_vec());
    share_source::share_group_of(&src, topic)
}

/// Every topic of a cluster (internal ones left out) with its message count estimated
/// from watermarks (high − low per partition: compaction and transaction markers make it
/// an upper bound).
pub fn topic_counts(
    brokers: &[String],
    props: &[(String, String)],
) -> Result<Vec<(String, u64)>, SourceError> {
    let src = KafkaSource::new(brokers.to_vec(), Vec::new(), props.to_vec());
    let consumer = src.consumer()?;
    let md = consumer
        .fetch_metadata(None, METADATA_TIMEOUT)
        .map_err(|e| {
            SourceError::unavailable(format!(
                "cannot reach Kafka at {} within {}s: {}",
                brokers.join(","),
                METADATA_TIMEOUT.as_secs(),
                src.scrub(&e.to_string())
            ))
        })?;
    let mut out = Vec::new();
    for t in md.topics().iter().filter(|t| !t.name().starts_with("__")) {
        let count = t
            .partitions()
            .iter()
            .filter_map(|p| {
                consumer
                    .fetch_watermarks(t.name(), p.id(), Duration::from_secs(5))
                    .ok()
            })
            .map(|(lo, hi)| u64::try_from(hi - lo).unwrap_or(0))
            .sum();
        out.push((t.name().to_string(), count));
    }
    Ok(out)
}

/// Whether a librdkafka property holds a secret (its value is never shown).
pub fn is_secret_property(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "jaas", "token", "key"]
        .iter()
        .any(|s| k.contains(s))
}

/// `text` with the values of secret properties replaced by `***`.
pub fn scrub_secrets(text: &str, props: &[(String, String)]) -> String {
    props
        .iter()
        .filter(|(k, v)| is_secret_property(k) && !v.is_empty())
        .fold(text.to_string(), |t, (_, v)| t.replace(v.as_str(), "***"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// librdkafka's mock cluster answers offsets_for_times with End (upstream bug), so
    /// the `--since` logic is tested against a fake lookup (answers, newest timestamps).
    struct Fake(Vec<(i32, Offset)>, Vec<(i32, i64)>);

    impl OffsetLookup for Fake {
        fn offsets_for_time(
            &self,
            _: &str,
            _: &[i32],
            _: DateTime<Utc>,
        ) -> Result<Vec<(i32, Offset)>, SourceError> {
            Ok(self.0.clone())
        }

        fn newest_timestamp(&self, _: &str, partition: i32) -> Option<i64> {
            self.1.iter().find(|(p, _)| *p == partition).map(|x| x.1)
        }
    }

    /// An End answer is believed only when the partition's newest record is older than
    /// `--since` (or it is empty): a lookup that says "nothing" of a partition holding a
    /// newer record is wrong, and the partition is read.
    #[test]
    fn an_end_answer_is_checked_against_the_newest_record() {
        let since = DateTime::from_timestamp(1_790_000_000, 0);
        let ms = 1_790_000_000_000;
        let fake = Fake(
            vec![(0, Offset::End), (1, Offset::End), (2, Offset::End)],
            vec![(0, ms + 4_000), (1, ms - 60_000)],
        );
        let got = start_offsets(&fake, "t", &[0, 1, 2], since).expect("lookup");
        assert_eq!(
            got,
            vec![(0, Offset::Beginning), (1, Offset::End), (2, Offset::End)]
        );
    }

    #[test]
    fn since_uses_the_lookup_and_never_skips_unanswered_partitions() {
        let since = DateTime::from_timestamp(1_790_000_000, 0);
        let fake = Fake(
            vec![
                (0, Offset::Offset(42)),
                (1, Offset::End),
                (2, Offset::Invalid),
            ],
            Vec::new(),
        );
        let got = start_offsets(&fake, "t", &[0, 1, 2, 3], since).expect("lookup");
        assert_eq!(
            got,
            vec![
                (0, Offset::Offset(42)),
                (1, Offset::End),
                (2, Offset::Beginning),
                (3, Offset::Beginning)
            ]
        );
        let all = start_offsets(&fake, "t", &[0, 1], None).expect("no lookup");
        assert_eq!(all, vec![(0, Offset::Beginning), (1, Offset::Beginning)]);
    }
}
