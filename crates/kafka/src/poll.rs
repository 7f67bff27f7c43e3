//! The poller: a thread of its own reads a topic's partitions to their ends and hands
//! owned batches over a bounded channel, so librdkafka and the per-letter work overlap
//! instead of taking turns; a watermark estimate of the total beside it.

use super::*;

/// Watermark sums of a topic's partitions, filled in by a thread of its own.
pub(crate) fn spawn_estimate(probe: BaseConsumer, topic: &str, parts: Vec<i32>) -> Arc<AtomicU64> {
    let estimate = Arc::new(AtomicU64::new(0));
    let (out, topic) = (estimate.clone(), topic.to_string());
    std::thread::spawn(move || {
        for p in parts {
            if let Ok((lo, hi)) = probe.fetch_watermarks(&topic, p, Duration::from_secs(5)) {
                out.fetch_add(u64::try_from(hi - lo).unwrap_or(0), Ordering::Relaxed);
            }
        }
    });
    estimate
}

/// The polling thread of one topic's scan: owned batches to the scan until every
/// partition reported end-of-partition, the scan stops it, or it stalls.
pub(crate) struct Poll {
    pub(crate) consumer: BaseConsumer,
    pub(crate) pending: HashSet<i32>,
    pub(crate) topic: String,
    pub(crate) stall_timeout: Duration,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) tx: mpsc::SyncSender<Result<Vec<RawLetter>, SourceError>>,
}

impl Poll {
    /// Returns the next offset of every partition a letter was read from.
    pub(crate) fn run(mut self) -> HashMap<i32, i64> {
        let mut next: HashMap<i32, i64> = HashMap::new();
        let mut last_progress = Instant::now();
        let mut last_error: Option<KafkaError> = None;
        // A full batch is replaced by an empty one of the same capacity: grown from
        // nothing, each batch reallocated (and moved) ~10 times.
        let fresh = || Vec::with_capacity(POLL_BATCH);
        let mut batch = fresh();
        while !self.pending.is_empty() && !self.stop.load(Ordering::Relaxed) {
            let wait = if batch.is_empty() {
                POLL
            } else {
                Duration::ZERO
            };
            match self.consumer.poll(wait) {
                Some(Ok(msg)) => {
                    // Progress is stamped once per batch sent, not per letter.
                    if batch.is_empty() {
                        last_progress = Instant::now();
                    }
                    next.insert(msg.partition(), msg.offset() + 1);
                    batch.push(to_raw(&msg));
                    if batch.len() >= POLL_BATCH
                        && self
                            .tx
                            .send(Ok(std::mem::replace(&mut batch, fresh())))
                            .is_err()
                    {
                        return next;
                    }
                    continue;
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    last_progress = Instant::now();
                    self.pending.remove(&p);
                }
                // librdkafka retries transport errors itself; remember for the report.
                Some(Err(e)) => last_error = Some(e),
                None => {}
            }
            if !batch.is_empty()
                && self
                    .tx
                    .send(Ok(std::mem::replace(&mut batch, fresh())))
                    .is_err()
            {
                return next;
            }
            if last_progress.elapsed() > self.stall_timeout {
                self.stalled(last_error);
                return next;
            }
        }
        if !batch.is_empty() {
            let _ = self.tx.send(Ok(batch));
        }
        next
    }

    fn stalled(&self, last_error: Option<KafkaError>) {
        let mut left: Vec<i32> = self.pending.iter().copied().collect();
        left.sort_unstable();
        let _ = self.tx.send(Err(SourceError::failed(format!(
            "no progress reading `{}` for {}s (partitions {left:?} unfinished){}",
            self.topic,
            self.stall_timeout.as_secs(),
            last_error
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default()
        ))));
    }
}
