//! A Kafka share group's DLQ record (KIP-1191) carries no key and no value by default
//! (`errors.deadletterqueue.copy.record.enable=false`): the message is the source record
//! at `__dlq.errors.topic`/`partition`/`offset`. The scan reads those source records —
//! batched per partition, by assignment with the adapter's throwaway group, so the share
//! group is never joined and no delivery count is raised — and gives each letter its
//! source's value and key, saying where they came from in the `x-dlq-triage-source`
//! header. A source record below the partition's low watermark was deleted by retention:
//! the letter says `payload expired` there and keeps no payload (it can be discarded, not
//! replayed).

use super::*;
use std::collections::BTreeMap;

/// The header the scan adds to say where a share-group letter's payload came from.
pub const SOURCE_HEADER: &str = "x-dlq-triage-source";

/// Source records read per partition and batch, at most (a wider spread of offsets is
/// read letter by letter).
const SPAN_MAX: i64 = 5_000;

/// The source (topic, partition, offset) a value-less share-group letter stands for.
pub fn share_source(l: &RawLetter) -> Option<(String, i32, i64)> {
    if !l.payload.is_empty() {
        return None;
    }
    let text = |n: &str| l.header(n).and_then(|v| v.as_nonempty_text());
    let topic = text("__dlq.errors.topic")?;
    let partition = text("__dlq.errors.partition")?.trim().parse().ok()?;
    let offset = text("__dlq.errors.offset")?.trim().parse().ok()?;
    Some((topic, partition, offset))
}

/// What became of a letter's source record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceState {
    /// Read: its value and key.
    Read(Option<Vec<u8>>, Vec<u8>),
    /// Below the low watermark: retention deleted it.
    Expired { low: i64 },
    /// Not there (past the end, compacted away, or the read failed): why.
    Missing(String),
}

/// Where an offset stands against a partition's watermarks, before reading.
pub fn before_reading(offset: i64, low: i64, high: i64) -> Option<SourceState> {
    if offset < low {
        Some(SourceState::Expired { low })
    } else if offset >= high {
        Some(SourceState::Missing(format!(
            "the source partition ends at offset {}",
            high - 1
        )))
    } else {
        None
    }
}

impl KafkaSource {
    /// Give every value-less share-group letter of `letters` its source record.
    pub(crate) fn fill_from_source(&self, letters: &mut [RawLetter]) {
        if !self.fill_from_source {
            return;
        }
        let mut wanted: BTreeMap<(String, i32), Vec<i64>> = BTreeMap::new();
        for l in letters.iter() {
            if let Some((t, p, o)) = share_source(l) {
                wanted.entry((t, p)).or_default().push(o);
            }
        }
        if wanted.is_empty() {
            return;
        }
        let mut found: HashMap<(String, i32, i64), SourceState> = HashMap::new();
        for ((topic, partition), offsets) in wanted {
            for (o, state) in self.read_source(&topic, partition, offsets) {
                found.insert((topic.clone(), partition, o), state);
            }
        }
        for l in letters.iter_mut() {
            let Some(at) = share_source(l) else { continue };
            let said = format!("{}/{}/{}", at.0, at.1, at.2);
            let note = match found.remove(&at) {
                Some(SourceState::Read(key, value)) => {
                    if l.key.is_none() {
                        l.key = key;
                    }
                    l.payload = value;
                    format!("source record {said}")
                }
                Some(SourceState::Expired { low }) => format!(
                    "payload expired: {said} is below the source's low watermark {low} (retention deleted it)"
                ),
                Some(SourceState::Missing(why)) => format!("source record {said} not read: {why}"),
                None => format!("source record {said} not read"),
            };
            l.headers
                .push(Header::new(SOURCE_HEADER, HeaderValue::text(&note)));
        }
    }

    /// The records of `topic`/`partition` at `offsets`, read by assignment.
    fn read_source(
        &self,
        topic: &str,
        partition: i32,
        mut offsets: Vec<i64>,
    ) -> Vec<(i64, SourceState)> {
        offsets.sort_unstable();
        offsets.dedup();
        let failed = |offsets: &[i64], why: String| {
            offsets
                .iter()
                .map(|o| (*o, SourceState::Missing(why.clone())))
                .collect::<Vec<_>>()
        };
        let consumer = match self.consumer() {
            Ok(c) => c,
            Err(e) => return failed(&offsets, e.to_string()),
        };
        let (low, high) = match consumer.fetch_watermarks(topic, partition, METADATA_TIMEOUT) {
            Ok(w) => w,
            Err(e) => return failed(&offsets, format!("watermarks of {topic}/{partition}: {e}")),
        };
        let mut out = Vec::new();
        let mut readable = Vec::new();
        for o in offsets {
            match before_reading(o, low, high) {
                Some(state) => out.push((o, state)),
                None => readable.push(o),
            }
        }
        // Windows of nearby offsets are read in one pass; far ones each from its own.
        let mut i = 0;
        while i < readable.len() {
            let mut j = i;
            while j + 1 < readable.len() && readable[j + 1] - readable[i] <= SPAN_MAX {
                j += 1;
            }
            out.extend(self.read_window(&consumer, topic, partition, &readable[i..=j]));
            i = j + 1;
        }
        out
    }

    fn read_window(
        &self,
        consumer: &BaseConsumer,
        topic: &str,
        partition: i32,
        offsets: &[i64],
    ) -> Vec<(i64, SourceState)> {
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        let mut tpl = TopicPartitionList::new();
        let assigned = tpl
            .add_partition_offset(topic, partition, Offset::Offset(first))
            .and_then(|_| consumer.assign(&tpl));
        if let Err(e) = assigned {
            let why = format!("assigning {topic}/{partition}: {e}");
            return offsets
                .iter()
                .map(|o| (*o, SourceState::Missing(why.clone())))
                .collect();
        }
        let want: HashSet<i64> = offsets.iter().copied().collect();
        let mut out = Vec::new();
        let started = Instant::now();
        while started.elapsed() < self.stall_timeout {
            match consumer.poll(POLL) {
                Some(Ok(m)) => {
                    if want.contains(&m.offset()) {
                        let value = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
                        out.push((
                            m.offset(),
                            SourceState::Read(m.key().map(<[u8]>::to_vec), value),
                        ));
                    }
                    if m.offset() >= last {
                        break;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => break,
                Some(Err(_)) | None => {}
            }
        }
        let read: HashSet<i64> = out.iter().map(|(o, _)| *o).collect();
        for o in offsets.iter().filter(|o| !read.contains(o)) {
            out.push((
                *o,
                SourceState::Missing("compacted away, or not read in time".into()),
            ));
        }
        out
    }
}

/// The share group a topic is the DLQ of (KIP-1191), from its newest record's
/// `__dlq.errors.group` header: read by assignment, one record. None for a topic whose
/// records do not carry it (or an empty one).
pub fn share_group_of(src: &KafkaSource, topic: &str) -> Option<String> {
    let consumer = src.consumer().ok()?;
    for p in src.partitions(&consumer, topic).ok()? {
        let Ok((low, high)) = consumer.fetch_watermarks(topic, p, METADATA_TIMEOUT) else {
            continue;
        };
        if high <= low {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, p, Offset::Offset(high - 1))
            .ok()?;
        consumer.assign(&tpl).ok()?;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Some(Ok(m)) = consumer.poll(POLL) {
                let raw = to_raw(&m);
                return raw
                    .header("__dlq.errors.group")
                    .and_then(|v| v.as_nonempty_text());
            }
        }
        return None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_below_the_low_watermark_is_expired_past_the_end_missing() {
        assert_eq!(
            before_reading(3, 10, 20),
            Some(SourceState::Expired { low: 10 })
        );
        assert_eq!(
            before_reading(20, 10, 20),
            Some(SourceState::Missing(
                "the source partition ends at offset 19".into()
            ))
        );
        assert_eq!(before_reading(15, 10, 20), None);
    }

    #[test]
    fn only_value_less_share_group_records_have_a_source() {
        let h = |n: &'static str, v: &str| Header::new(n, HeaderValue::text(v));
        let mut l = RawLetter {
            headers: vec![
                h("__dlq.errors.topic", "payments"),
                h("__dlq.errors.partition", "2"),
                h("__dlq.errors.offset", "41"),
            ],
            ..RawLetter::default()
        };
        assert_eq!(share_source(&l), Some(("payments".into(), 2, 41)));
        l.payload = b"{}".to_vec();
        assert_eq!(share_source(&l), None, "a copied value is the letter's own");
    }
}
