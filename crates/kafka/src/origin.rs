//! The origin partitions, read for the stale-key check.

use super::*;
use std::collections::BTreeSet;

/// Reads origin partitions for the stale-key check, with its own short-lived consumer.
pub struct KafkaOriginLog {
    src: KafkaSource,
}

impl KafkaOriginLog {
    /// Whether `topic` exists: the cluster's metadata names it with partitions and no
    /// "unknown topic" error (the consumer never asks the broker to create it).
    fn topic_exists(&self, topic: &str) -> Result<bool, SourceError> {
        let consumer = self.src.consumer()?;
        let md = consumer
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .map_err(|e| SourceError::unavailable_by(format!("the metadata of {topic}"), e))?;
        Ok(md.topics().iter().any(|t| {
            t.name() == topic
                && !t.partitions().is_empty()
                && t.error().is_none_or(|e| {
                    rdkafka::error::RDKafkaErrorCode::from(e)
                        != rdkafka::error::RDKafkaErrorCode::UnknownTopicOrPartition
                })
        }))
    }

    pub fn new(brokers: &[String], props: &[(String, String)]) -> Self {
        KafkaOriginLog {
            src: KafkaSource::new(brokers.to_vec(), Vec::new(), props.to_vec()),
        }
    }
}

impl dlq_core::ports::Reach for KafkaOriginLog {
    fn reaches(
        &mut self,
        target: &dlq_core::ports::Target,
        named: &[String],
    ) -> Result<dlq_core::ports::Reached, SourceError> {
        use dlq_core::ports::{OriginLog, Reached, Target};
        match target {
            Target::Kafka { topic } if !self.topic_exists(topic)? => Ok(Reached::Missing),
            Target::Kafka { topic } => Ok(Reached::Groups(self.readers(topic, named)?)),
            Target::Amqp { .. } => Err(SourceError::Unsupported(
                "a Kafka cluster does not route to RabbitMQ".into(),
            )),
        }
    }
}

/// A partition's (low, high) watermarks, or why not.
fn watermarks(c: &BaseConsumer, topic: &str, partition: i32) -> Result<(i64, i64), SourceError> {
    c.fetch_watermarks(topic, partition, METADATA_TIMEOUT)
        .map_err(|e| SourceError::unavailable_by(format!("watermarks of {topic}/{partition}"), e))
}

/// Groups whose committed offsets are read for one plan, at most (one OffsetFetch each).
const READERS_CHECKED: usize = 100;

impl KafkaOriginLog {
    /// `group`'s committed offsets on `topic` (OffsetFetch, without joining the group):
    /// None when it has none there; else its lag, when every partition's end is known.
    fn committed_lag(
        &self,
        group: &str,
        topic: &str,
        partitions: &[i32],
        ends: &HashMap<i32, i64>,
    ) -> Result<Option<Option<i64>>, SourceError> {
        let mut cfg = self.src.config();
        cfg.set("group.id", group);
        let c: BaseConsumer = cfg
            .create()
            .map_err(|e| SourceError::unavailable(format!("cannot create a Kafka client: {e}")))?;
        let mut tpl = TopicPartitionList::new();
        for p in partitions {
            tpl.add_partition(topic, *p);
        }
        let committed = match c.committed_offsets(tpl, METADATA_TIMEOUT) {
            Ok(c) => c,
            // A group whose offsets cannot be read is not named as a reader.
            Err(_) => return Ok(None),
        };
        let mut lag = Some(0i64);
        let mut reads = false;
        for e in committed.elements() {
            if let Offset::Offset(o) = e.offset() {
                reads = true;
                lag = match (lag, ends.get(&e.partition())) {
                    (Some(l), Some(end)) => Some(l + (end - o).max(0)),
                    _ => None,
                };
            }
        }
        Ok(reads.then_some(lag))
    }
}

impl dlq_core::ports::OriginLog for KafkaOriginLog {
    fn newest_by_key(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
        keys: &HashSet<Vec<u8>>,
        ignore: &HashSet<i64>,
        budget: u64,
    ) -> Result<dlq_core::ports::KeyScan, SourceError> {
        let consumer = self.src.consumer()?;
        let (_, high) = watermarks(&consumer, topic, partition)?;
        let mut scan = dlq_core::ports::KeyScan::default();
        if from >= high {
            scan.complete = true;
            return Ok(scan);
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(from))
            .map_err(|e| SourceError::failed_by(format!("assigning {topic}/{partition}"), e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| SourceError::failed_by(format!("assigning {topic}/{partition}"), e))?;
        let (mut read, mut last) = (0u64, Instant::now());
        loop {
            match consumer.poll(POLL) {
                Some(Ok(m)) => {
                    last = Instant::now();
                    read += 1;
                    if let Some(k) = m
                        .key()
                        .filter(|k| keys.contains(*k) && !ignore.contains(&m.offset()))
                    {
                        let e = scan.newest.entry(k.to_vec()).or_insert(m.offset());
                        *e = (*e).max(m.offset());
                    }
                    if m.offset() + 1 >= high {
                        scan.complete = true;
                        return Ok(scan);
                    }
                    if read >= budget {
                        return Ok(scan);
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    scan.complete = true;
                    return Ok(scan);
                }
                Some(Err(e)) => {
                    return Err(SourceError::failed_by(
                        format!("reading {topic}/{partition}"),
                        e,
                    ))
                }
                None if last.elapsed() > STALL_TIMEOUT => {
                    return Err(SourceError::failed(format!(
                        "reading {topic}/{partition}: nothing for {}s",
                        STALL_TIMEOUT.as_secs()
                    )))
                }
                None => {}
            }
        }
    }

    fn readers(
        &mut self,
        topic: &str,
        named: &[String],
    ) -> Result<dlq_core::ports::Readers, SourceError> {
        let consumer = self.src.consumer()?;
        // ListGroups (+ DescribeGroups): every group the cluster knows. Brokers that do
        // not answer it (librdkafka's mock cluster) leave the groups the letters name.
        let (mut groups, listed) = match consumer.fetch_group_list(None, METADATA_TIMEOUT) {
            Ok(list) => (
                list.groups()
                    .iter()
                    .map(|g| g.name().to_string())
                    .filter(|g| !g.is_empty() && !g.starts_with("dlq-triage-"))
                    .collect::<BTreeSet<String>>(),
                true,
            ),
            Err(_) => (BTreeSet::new(), false),
        };
        groups.extend(named.iter().filter(|n| !n.is_empty()).cloned());
        let partitions = self.src.partitions(&consumer, topic)?;
        let ends: HashMap<i32, i64> = partitions
            .iter()
            .filter_map(|p| {
                let (_, high) = consumer
                    .fetch_watermarks(topic, *p, METADATA_TIMEOUT)
                    .ok()?;
                Some((*p, high))
            })
            .collect();
        let mut out = dlq_core::ports::Readers {
            listed,
            unchecked: groups.len().saturating_sub(READERS_CHECKED),
            ..Default::default()
        };
        for g in groups.into_iter().take(READERS_CHECKED) {
            out.checked += 1;
            if let Some(lag) = self.committed_lag(&g, topic, &partitions, &ends)? {
                out.groups.push((g, lag));
            }
        }
        Ok(out)
    }

    fn around(
        &mut self,
        topic: &str,
        partition: i32,
        offsets: &[i64],
        span: i64,
        budget: usize,
    ) -> Result<Vec<RawLetter>, SourceError> {
        let mut offsets: Vec<i64> = offsets.iter().copied().filter(|o| *o >= 0).collect();
        offsets.sort_unstable();
        offsets.dedup();
        let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
            return Ok(Vec::new());
        };
        let consumer = self.src.consumer()?;
        let (low, high) = watermarks(&consumer, topic, partition)?;
        let (from, to) = ((first - span).max(low), (last + span + 1).min(high));
        if from >= to {
            return Ok(Vec::new());
        }
        let near = |o: i64| {
            let i = offsets.partition_point(|x| *x < o);
            let d = |j: usize| offsets.get(j).map_or(i64::MAX, |x| (x - o).abs());
            d(i) != 0 && d(i).min(if i > 0 { d(i - 1) } else { i64::MAX }) <= span
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(from))
            .map_err(|e| SourceError::failed_by(format!("assigning {topic}/{partition}"), e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| SourceError::failed_by(format!("assigning {topic}/{partition}"), e))?;
        let (mut out, mut last_read) = (Vec::new(), Instant::now());
        while out.len() < budget {
            match consumer.poll(POLL) {
                Some(Ok(m)) => {
                    last_read = Instant::now();
                    if m.offset() >= to {
                        break;
                    }
                    if near(m.offset()) {
                        out.push(crate::to_raw(&m));
                    }
                    if m.offset() + 1 >= to {
                        break;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => break,
                Some(Err(e)) => {
                    return Err(SourceError::failed_by(
                        format!("reading {topic}/{partition}"),
                        e,
                    ))
                }
                None if last_read.elapsed() > STALL_TIMEOUT => break,
                None => {}
            }
        }
        Ok(out)
    }

    fn ends(&mut self, topic: &str) -> Result<Vec<(i32, i64)>, SourceError> {
        let consumer = self.src.consumer()?;
        let mut out = Vec::new();
        for p in self.src.partitions(&consumer, topic)? {
            let (_, high) = watermarks(&consumer, topic, p)?;
            out.push((p, high));
        }
        Ok(out)
    }

    fn replayed(
        &mut self,
        topic: &str,
        from: &HashMap<i32, i64>,
        replay_id: &str,
    ) -> Result<Vec<dlq_core::ports::Landed>, SourceError> {
        // The scan's own reader: every partition from `from` to its end, batched.
        let mut src = KafkaSource::new(
            self.src.brokers.clone(),
            vec![topic.to_string()],
            self.src.props.clone(),
        )
        .with_start_offsets(from.clone());
        let mut found = Vec::new();
        src.scan(&mut |ev| {
            if let ScanEvent::Letters(batch) = ev {
                for l in batch {
                    let h = |n: &str| l.header(n).and_then(|v| v.as_nonempty_text());
                    if h("x-dlq-replay-id").as_deref() == Some(replay_id) {
                        if let (Some(from), Some(at)) = (h("x-dlq-replayed-from"), &l.coords) {
                            found.push((from, at.to_string()));
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        })?;
        Ok(found)
    }
}
