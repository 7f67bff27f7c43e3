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
    if offset < 0 {
        // Not an offset the record could have had: said as it is, never "expired".
        Some(SourceState::Missing(format!(
            "the DLQ record names offset {offset}, which no record has (the broker wrote no source offset)"
        )))
    } else if offset < low {
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
        let mut found = {
            // A poisoned lock only means an earlier fill panicked: its state is a
            // client and watermarks, still good to use.
            let mut reader = self
                .source_reader
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.read_sources(&mut reader, wanted)
        };
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

    /// The source records at `wanted` (offsets per topic and partition), read by
    /// assignment: every partition's first window of nearby offsets at once (one fetch
    /// per round, not a round trip per partition), far windows in later rounds.
    fn read_sources(
        &self,
        reader: &mut SourceReader,
        wanted: BTreeMap<(String, i32), Vec<i64>>,
    ) -> HashMap<(String, i32, i64), SourceState> {
        let mut out = HashMap::new();
        if reader.consumer.is_none() {
            match self.consumer() {
                Ok(c) => reader.consumer = Some(c),
                Err(e) => {
                    for ((t, p), offsets) in &wanted {
                        missing(&mut out, t, *p, offsets, &e.to_string());
                    }
                    return out;
                }
            }
        }
        let SourceReader { consumer, marks } = reader;
        let Some(consumer) = consumer.as_ref() else {
            return out;
        };
        let mut windows: Vec<Window> = Vec::new();
        for ((topic, partition), mut offsets) in wanted {
            offsets.sort_unstable();
            offsets.dedup();
            let key = (topic, partition);
            // Watermarks as last read, asked again only for an offset at or past the
            // known end: the low watermark only rises, so below it stays below it.
            let known = marks
                .get(&key)
                .filter(|(_, high)| offsets.last().is_none_or(|o| o < high));
            let (low, high) = match known {
                Some(w) => *w,
                None => match consumer.fetch_watermarks(&key.0, partition, METADATA_TIMEOUT) {
                    Ok(w) => {
                        marks.insert(key.clone(), w);
                        w
                    }
                    Err(e) => {
                        let why = format!("watermarks of {}/{partition}: {e}", key.0);
                        missing(&mut out, &key.0, partition, &offsets, &why);
                        continue;
                    }
                },
            };
            let mut readable = Vec::new();
            for o in offsets {
                match before_reading(o, low, high) {
                    Some(state) => {
                        out.insert((key.0.clone(), partition, o), state);
                    }
                    None => readable.push(o),
                }
            }
            let mut i = 0;
            while i < readable.len() {
                let mut j = i;
                while j + 1 < readable.len() && readable[j + 1] - readable[i] <= SPAN_MAX {
                    j += 1;
                }
                windows.push((key.clone(), readable[i..=j].to_vec()));
                i = j + 1;
            }
        }
        while !windows.is_empty() {
            let mut round = Vec::new();
            let mut later = Vec::new();
            let mut taken = HashSet::new();
            for w in windows {
                if taken.insert(w.0.clone()) {
                    round.push(w);
                } else {
                    later.push(w);
                }
            }
            windows = later;
            self.read_round(consumer, &round, &mut out);
        }
        // Assigned partitions would go on being fetched into memory between batches.
        let _ = consumer.unassign();
        out
    }

    /// One window per partition, assigned together and read until each has passed its
    /// last wanted offset (or ends, or stalls).
    fn read_round(
        &self,
        consumer: &BaseConsumer,
        round: &[Window],
        out: &mut HashMap<(String, i32, i64), SourceState>,
    ) {
        let mut tpl = TopicPartitionList::new();
        // Windows that could not be assigned are said so, and not waited for.
        let mut open: HashSet<usize> = HashSet::new();
        for (i, ((topic, partition), offsets)) in round.iter().enumerate() {
            match tpl.add_partition_offset(topic, *partition, Offset::Offset(offsets[0])) {
                Ok(()) => {
                    open.insert(i);
                }
                Err(e) => {
                    let why = format!("assigning {topic}/{partition}: {e}");
                    missing(out, topic, *partition, offsets, &why);
                }
            }
        }
        if let Err(e) = consumer.assign(&tpl) {
            for ((topic, partition), offsets) in round {
                let why = format!("assigning {topic}/{partition}: {e}");
                missing(out, topic, *partition, offsets, &why);
            }
            return;
        }
        // Which window a record belongs to, by its topic and partition.
        let index: HashMap<(&str, i32), usize> = round
            .iter()
            .enumerate()
            .map(|(i, ((t, p), _))| ((t.as_str(), *p), i))
            .collect();
        let mut last_progress = Instant::now();
        while !open.is_empty() && last_progress.elapsed() < self.stall_timeout {
            match consumer.poll(POLL) {
                Some(Ok(m)) => {
                    let Some(&i) = index.get(&(m.topic(), m.partition())) else {
                        continue;
                    };
                    last_progress = Instant::now();
                    let ((topic, partition), offsets) = &round[i];
                    if offsets.binary_search(&m.offset()).is_ok() {
                        let value = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
                        out.insert(
                            (topic.clone(), *partition, m.offset()),
                            SourceState::Read(m.key().map(<[u8]>::to_vec), value),
                        );
                    }
                    if offsets.last().is_some_and(|last| m.offset() >= *last) {
                        open.remove(&i);
                    }
                }
                // The error names the partition only: every open window of it is done.
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    open.retain(|i| round[*i].0 .1 != p);
                }
                Some(Err(_)) | None => {}
            }
        }
        for ((topic, partition), offsets) in round {
            for o in offsets {
                out.entry((topic.clone(), *partition, *o))
                    .or_insert_with(|| {
                        SourceState::Missing("compacted away, or not read in time".into())
                    });
            }
        }
    }
}

/// Every one of `offsets` of `topic`/`partition` not read, and why.
fn missing(
    out: &mut HashMap<(String, i32, i64), SourceState>,
    topic: &str,
    partition: i32,
    offsets: &[i64],
    why: &str,
) {
    for o in offsets {
        out.insert(
            (topic.to_string(), partition, *o),
            SourceState::Missing(why.to_string()),
        );
    }
}

/// Offsets of one source partition read in one pass.
type Window = ((String, i32), Vec<i64>);

/// What a scan keeps to read source records: one client (a client per batch cost its
/// connection and metadata every time) and the partitions' watermarks as last read.
#[derive(Default)]
pub(crate) struct SourceReader {
    consumer: Option<BaseConsumer>,
    marks: HashMap<(String, i32), (i64, i64)>,
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
        // −1 is no offset at all: said as it is, not "expired".
        assert!(matches!(
            before_reading(-1, 0, 20),
            Some(SourceState::Missing(why)) if why.contains("offset -1")
        ));
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
