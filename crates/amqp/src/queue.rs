//! Browsing a classic or quorum queue: consume with manual ack, stream deliveries to
//! the sink as they arrive, hold them unacked, say "browsed N of M" and why.

use super::*;

impl RabbitSource {
    pub(crate) fn browse(
        &mut self,
        queue: &str,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        self.release_held(queue);
        let q = self.facts(queue)?;
        let notice = |sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>, message: String| {
            sink(ScanEvent::Notice {
                location: format!("queue {queue}"),
                message,
            })
        };
        if let Some(line) = q.others_line() {
            if notice(sink, line).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        if q.kind.as_deref() == Some("stream") {
            // AMQP's declare reports 0 for streams and the management API's counts are
            // sampled (stale for seconds): read until idle, up to the limit.
            let cap = u32::try_from(self.max_letters).unwrap_or(u32::MAX);
            return self.browse_stream(queue, cap, sink);
        }
        let limit = match &q.info {
            Some(i) => i.delivery_limit().map_or(Limit::Unlimited, Limit::Known),
            None => Limit::Unknown,
        };
        if let Some(line) = self.quorum_guard(queue, q.kind.as_deref(), limit, &q.probed)? {
            if notice(sink, line).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        let want = u64::from(q.count).min(self.max_letters);
        let (ch, consumer) = self.consume(queue, want)?;
        let (got, consumer) = self.stream_deliveries(queue, consumer, want, sink)?;
        self.keep_open(queue, ch, consumer, got.browsed, false);
        let counted = !self.returns_uncounted();
        if let (Limit::Known(limit), Some("quorum"), true) = (limit, q.kind.as_deref(), counted) {
            // On release each message has one more delivery than its header says.
            let left = limit - (got.most_delivered + 1);
            let line = format!(
                "quorum queue delivery-limit {limit}: after this browse the most-redelivered message has {} deliveries; {} browse(s) left before messages are dead-lettered or dropped",
                got.most_delivered + 1,
                left.max(0)
            );
            if notice(sink, line).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        let hidden = q.hidden.unwrap_or(0);
        let total = u64::from(q.count) + hidden;
        if got.flow.is_continue() && got.browsed < total {
            let why = partial_why(
                got.browsed,
                u64::from(q.count),
                self.max_letters,
                hidden,
                q.consumers,
            );
            return Ok(sink(ScanEvent::Partial {
                location: format!("queue {queue}"),
                browsed: got.browsed,
                total,
                why,
            }));
        }
        Ok(got.flow)
    }

    /// A re-browse first hands back what the last one holds (the close waits for the
    /// requeue): counted before, those messages were missing from the count and our
    /// own consumer was reported as another client's.
    fn release_held(&mut self, queue: &str) {
        if let Some(old) = self.held.remove(queue) {
            let consumer = self.consumers.remove(queue);
            self.streams.remove(queue);
            self.tags.forget(queue);
            self.rt.block_on(async {
                // Cancelled first: a nack to a live consumer would be delivered to it
                // again, and the close would return (and count) it a second time.
                if let Some(c) = consumer {
                    let _ = old
                        .basic_cancel(c.tag(), BasicCancelOptions::default())
                        .await;
                }
                crate::ack::hand_back(&old).await;
                let _ = old.close(200, ShortString::from("re-browse")).await;
            });
        }
    }

    /// What is known of a queue before it is consumed: its count and consumers, the
    /// management API's view, its type (stated, reported or probed).
    fn facts(&mut self, queue: &str) -> Result<QueueFacts, SourceError> {
        let (count, consumers) = self.count(queue)?;
        // The API is asked when the operator did not say what the queue is, or said
        // quorum (its delivery limit is only known there).
        let info = self
            .management
            .as_ref()
            .filter(|_| self.stated_type.as_deref().is_none_or(|t| t == "quorum"))
            .and_then(|m| m.queue(&self.target.vhost, queue).ok());
        let mut kind = info
            .as_ref()
            .map(|i| i.kind.clone())
            .or_else(|| self.stated_type.clone());
        let probed = if kind.is_none() {
            self.probe(queue)?
        } else {
            Probe::NotAsked
        };
        kind = kind.or_else(|| probed.kind());
        // Another client (a stuck consumer, a second dlq-triage) may hold messages
        // unacked: they are invisible here, and an "empty" DLQ may not be. Counted
        // (the management API's last sample), they make the browse partial.
        let hidden = if consumers > 0 {
            info.as_ref().and_then(|i| i.messages_unacknowledged)
        } else {
            Some(0)
        };
        Ok(QueueFacts {
            count,
            consumers,
            info,
            kind,
            probed,
            hidden,
        })
    }

    /// Consume with manual ack. Unlimited prefetch (0) for a whole-queue browse, as a
    /// plain consumer does: the broker streams every message and new arrivals keep
    /// coming (tail). A cap is the prefetch, so nothing beyond it is held unseen.
    fn consume(
        &mut self,
        queue: &str,
        want: u64,
    ) -> Result<(Channel, lapin::Consumer), SourceError> {
        let prefetch = if self.max_letters == u64::MAX {
            0
        } else {
            u16::try_from(want.max(1)).unwrap_or(0)
        };
        let ch = self.fresh_channel()?;
        let consumer = self.rt.block_on(async {
            ch.basic_qos(prefetch, BasicQosOptions::default())
                .await
                .map_err(|e| SourceError::failed_by(format!("basic.qos on `{queue}`"), e))?;
            ch.basic_consume(
                ShortString::from(queue),
                ShortString::from(""),
                BasicConsumeOptions {
                    no_ack: false,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| SourceError::failed_by(format!("consuming `{queue}`"), e))
        })?;
        Ok((ch, consumer))
    }

    /// Hand deliveries to the sink as they arrive, until `want` are held, the broker goes
    /// quiet for STALL, or the sink stops. Receiving runs as a task on the AMQP runtime,
    /// a bounded queue ahead of the sink: the broker keeps streaming while letters are
    /// prepared, so a browse takes the longer of the two, not their sum. Returns the
    /// consumer, which stays open for the tail.
    pub(crate) fn stream_deliveries(
        &mut self,
        queue: &str,
        consumer: lapin::Consumer,
        want: u64,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(Streamed, lapin::Consumer), SourceError> {
        // Deliveries cross to this thread in batches of what has already arrived: one
        // wake-up per batch, not per message (on 2 cores the wake-ups were the cost).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Received>>(PIPELINE / BATCH);
        let receiver = self.rt.spawn(receive(
            consumer,
            want,
            self.target.vhost.clone(),
            queue.to_string(),
            tx,
        ));
        let mut got = Streamed {
            browsed: 0,
            most_delivered: 0,
            flow: ControlFlow::Continue(()),
        };
        let mut error = None;
        while let Some(batch) = rx.blocking_recv() {
            let before = got.browsed;
            let mut letters = Vec::with_capacity(batch.len());
            for item in batch {
                let (tag, raw) = match item {
                    Ok(x) => x,
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                };
                got.browsed += 1;
                self.tags.set(queue, got.browsed, tag);
                if let Some(n) = raw
                    .header("x-delivery-count")
                    .and_then(HeaderValue::as_i64_lenient)
                {
                    got.most_delivered = got.most_delivered.max(n);
                }
                letters.push(raw);
            }
            // What arrived together goes on together (letters before an error too).
            if !letters.is_empty() {
                got.flow = sink(ScanEvent::Letters(letters));
            }
            if got.flow.is_continue() && got.browsed / 5_000 > before / 5_000 {
                got.flow = sink(ScanEvent::Progress {
                    done: got.browsed,
                    total: Some(want),
                });
            }
            if got.flow.is_break() || error.is_some() {
                break;
            }
        }
        drop(rx);
        let consumer = self
            .rt
            .block_on(receiver)
            .map_err(|e| SourceError::failed_by(format!("browsing `{queue}`"), e))?;
        if let Some(e) = error {
            return Err(SourceError::failed(format!("browsing `{queue}`: {e}")));
        }
        Ok((got, consumer))
    }
}

/// The receiving task: deliveries from the broker in batches of what has arrived, as
/// raw letters with their tags, until `want`, a quiet STALL, an error or the end.
/// Returns the consumer, which stays open for the tail.
async fn receive(
    mut consumer: lapin::Consumer,
    want: u64,
    vhost: String,
    q: String,
    tx: tokio::sync::mpsc::Sender<Vec<Received>>,
) -> lapin::Consumer {
    let mut n = 0u64;
    'receiving: while n < want {
        let mut next = tokio::select! {
            r = tokio::time::timeout(STALL, consumer.next()) => r.ok(),
            // The sink stopped: no need to wait out the broker.
            () = tx.closed() => break,
        };
        let mut batch = Vec::with_capacity(BATCH);
        let mut last = false;
        loop {
            match next {
                Some(Some(Ok(d))) => {
                    n += 1;
                    let tag = d.delivery_tag;
                    batch.push(Ok((tag, to_raw(d, &vhost, &q, n))));
                }
                Some(Some(Err(e))) => {
                    batch.push(Err(e.to_string()));
                    last = true;
                    break;
                }
                Some(None) | None => {
                    last = true;
                    break;
                }
            }
            if n >= want || batch.len() >= BATCH {
                break;
            }
            // Take what is already here without waiting for more.
            match futures_lite::future::poll_once(consumer.next()).await {
                Some(item) => next = Some(item),
                None => break,
            }
        }
        let drained = batch.len() < BATCH;
        if (!batch.is_empty() && tx.send(batch).await.is_err()) || last {
            break 'receiving;
        }
        if drained {
            // Everything that had arrived is taken: let the next ones gather for a
            // moment instead of waking this task (and the lapin thread's handoff) per
            // delivery. Those wake-ups take CPU from the broker on the same machine:
            // system time halves, and the batch is a millisecond late at most.
            tokio::time::sleep(GATHER).await;
        }
    }
    consumer
}

/// Most deliveries handed over at once.
pub(crate) const BATCH: usize = 256;
/// How long deliveries gather once the receiver has taken all that had arrived.
pub(crate) const GATHER: Duration = Duration::from_millis(1);

/// What the receiving task hands over: a delivery tag and its letter, or why it stopped.
pub(crate) type Received = Result<(u64, RawLetter), String>;

/// Delivery tags of held letters: per queue, indexed by browse position (1-based); 0 is
/// "not held" (settled). 8 bytes a letter, for a million held letters.
#[derive(Default)]
pub(crate) struct Tags(HashMap<String, Vec<u64>>);

impl Tags {
    pub(crate) fn set(&mut self, queue: &str, position: u64, tag: u64) {
        let Some(i) = position
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return;
        };
        let v = match self.0.get_mut(queue) {
            Some(v) => v,
            None => self.0.entry(queue.to_string()).or_default(),
        };
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        v[i] = tag;
    }

    pub(crate) fn get(&self, queue: &str, position: u64) -> Option<u64> {
        let i = usize::try_from(position.checked_sub(1)?).ok()?;
        self.0
            .get(queue)
            .and_then(|v| v.get(i))
            .copied()
            .filter(|t| *t != 0)
    }

    pub(crate) fn forget(&mut self, queue: &str) {
        self.0.remove(queue);
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// Why a browse held less than the queue has, in words for "browsed N of M — why":
/// the operator's cap, messages other consumers hold, or a queue that went quiet first.
pub(crate) fn partial_why(
    browsed: u64,
    ready: u64,
    max_letters: u64,
    hidden: u64,
    consumers: u32,
) -> String {
    let mut why = Vec::new();
    if browsed >= max_letters {
        why.push(format!(
            "--max-letters {max_letters} (raise or drop it, or settle some)"
        ));
    } else if browsed < ready {
        why.push("the queue went quiet before its count was held".to_string());
    }
    if hidden > 0 {
        why.push(format!(
            "{hidden} held unacked by {consumers} other consumer(s) (close them to see those)"
        ));
    }
    why.join("; ")
}

/// A queue as known before browsing it.
pub(crate) struct QueueFacts {
    count: u32,
    consumers: u32,
    info: Option<crate::mgmt::QueueInfo>,
    kind: Option<String>,
    probed: Probe,
    /// Messages other consumers hold unacked (`None`: unknown without the API).
    hidden: Option<u64>,
}

impl QueueFacts {
    /// What other consumers attached to the queue mean for this browse.
    fn others_line(&self) -> Option<String> {
        if self.consumers == 0 {
            return None;
        }
        let held = self
            .hidden
            .map(|n| format!("{n} message(s) are held unacked by them and not shown"))
            .unwrap_or_else(|| {
                "messages they hold unacked are not shown (the management API would say how many)"
                    .into()
            });
        Some(format!(
            "{} other consumer(s) attached; {held}; the broker reports {} ready",
            self.consumers, self.count
        ))
    }
}
