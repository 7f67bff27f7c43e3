//! Kafka DLQ topics through librdkafka.
//!
//! Browsing is read-only: partitions are `assign()`ed (the DLQ's consumer groups are never
//! joined), auto-commit is off and nothing is ever committed. The initial scan is
//! complete when every partition reports end-of-partition, as `kcat -e` does; watermarks
//! only estimate progress (transaction markers and compaction make them overcount, and
//! some Kafka-compatible brokers report them wrongly), so they never end a partition
//! early. One consumer per topic, because librdkafka's EOF event names only the partition.

use crate::core::model::{Coords, Header, HeaderValue, RawLetter};
use crate::core::ports::{DlqSource, ScanEvent, SourceError, SourceInfo};
use chrono::DateTime;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// How long to wait for cluster metadata before calling the broker unreachable.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// A scan with no message and no end-of-partition for this long is failed, not hung.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

pub struct KafkaSource {
    brokers: Vec<String>,
    topics: Vec<String>,
    /// librdkafka properties from `-X key=value` and config, applied last.
    props: Vec<(String, String)>,
}

impl KafkaSource {
    pub fn new(brokers: Vec<String>, topics: Vec<String>, props: Vec<(String, String)>) -> Self {
        KafkaSource {
            brokers,
            topics,
            props,
        }
    }

    fn consumer(&self) -> Result<BaseConsumer, SourceError> {
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
            .set("client.id", "dlq-triage");
        for (k, v) in &self.props {
            cfg.set(k, v);
        }
        cfg.create().map_err(|e| {
            SourceError::Unavailable(format!(
                "cannot create a Kafka client: {e} (check -X properties)"
            ))
        })
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
            SourceError::Unavailable(format!(
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
                SourceError::Unavailable(format!("topic `{topic}` not in the cluster's metadata"))
            })?;
        if let Some(err) = t.error() {
            return Err(SourceError::Unavailable(format!(
                "topic `{topic}`: {} (does it exist? names are case-sensitive)",
                rdkafka::error::RDKafkaErrorCode::from(err)
            )));
        }
        let parts: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
        if parts.is_empty() {
            return Err(SourceError::Unavailable(format!(
                "topic `{topic}` has no partitions (does it exist?)"
            )));
        }
        Ok(parts)
    }

    fn scan_topic(
        &self,
        topic: &str,
        done: &mut u64,
        total: &mut u64,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        let consumer = self.consumer()?;
        let parts = self.partitions(&consumer, topic)?;
        let mut tpl = TopicPartitionList::new();
        for p in &parts {
            // Progress estimate only.
            if let Ok((lo, hi)) = consumer.fetch_watermarks(topic, *p, Duration::from_secs(5)) {
                *total += u64::try_from(hi - lo).unwrap_or(0);
            }
            tpl.add_partition_offset(topic, *p, Offset::Beginning)
                .map_err(|e| SourceError::Failed(format!("assigning {topic}/{p}: {e}")))?;
        }
        consumer
            .assign(&tpl)
            .map_err(|e| SourceError::Failed(format!("assigning partitions of `{topic}`: {e}")))?;
        let mut pending: HashSet<i32> = parts.into_iter().collect();
        let mut last_progress = Instant::now();
        let mut last_error: Option<KafkaError> = None;
        while !pending.is_empty() {
            match consumer.poll(POLL) {
                Some(Ok(msg)) => {
                    last_progress = Instant::now();
                    *done += 1;
                    if sink(ScanEvent::Letter(to_raw(&msg))).is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                    if *done % 50_000 == 0
                        && sink(ScanEvent::Progress {
                            done: *done,
                            total: Some(*total),
                        })
                        .is_break()
                    {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    last_progress = Instant::now();
                    pending.remove(&p);
                }
                Some(Err(e)) => {
                    // librdkafka retries transport errors itself; remember for the report.
                    last_error = Some(e);
                }
                None => {}
            }
            if last_progress.elapsed() > STALL_TIMEOUT {
                let mut left: Vec<i32> = pending.iter().copied().collect();
                left.sort_unstable();
                return Err(SourceError::Failed(format!(
                    "no progress reading `{topic}` for {}s (partitions {left:?} unfinished){}",
                    STALL_TIMEOUT.as_secs(),
                    last_error
                        .map(|e| format!("; last error: {e}"))
                        .unwrap_or_default()
                )));
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// An owned letter from a Kafka message. Header values are bytes or null.
pub fn to_raw<M: Message>(msg: &M) -> RawLetter {
    let headers = msg
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    Header::new(
                        h.key,
                        match h.value {
                            Some(v) => HeaderValue::Bytes(v.to_vec()),
                            None => HeaderValue::Null,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: msg.topic().to_string(),
            partition: msg.partition(),
            offset: msg.offset(),
        }),
        key: msg.key().map(<[u8]>::to_vec),
        headers,
        properties: Vec::new(),
        payload: msg.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        timestamp: msg
            .timestamp()
            .to_millis()
            .and_then(DateTime::from_timestamp_millis),
    }
}

impl DlqSource for KafkaSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: self.label(),
            browse_effect: "Kafka: browsing is read-only — partitions are assigned, no group is joined, nothing is committed".into(),
        }
    }

    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        let mut done = 0u64;
        let mut total = 0u64;
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
}
