//! Replays to Kafka: one transactional producer per replay (`acks=all`, idempotent),
//! a transaction per engine batch, delivery reports by ticket.

use super::*;

/// Delivery reports, by ticket, back to the publisher.
struct Confirmations;

/// A delivery's partition and offset, or why not and whether it may still have been
/// written (in doubt) rather than refused.
type Delivery = Result<(i32, i64), (String, bool)>;

/// A delivery report for one ticket.
type Report = (u64, Delivery);

/// Errors after which the record may be in the log all the same: a timeout, a lost
/// connection, records purged while in flight, a write the replicas did not all take.
fn in_doubt(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::MessageTimedOut
                | C::RequestTimedOut
                | C::PurgeInflight
                | C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::NetworkException
                | C::NotEnoughReplicasAfterAppend
                | C::OperationTimedOut
        )
    )
}

impl ClientContext for Confirmations {}

impl ProducerContext for Confirmations {
    type DeliveryOpaque = Box<(u64, mpsc::Sender<Report>)>;

    fn delivery(&self, result: &DeliveryResult<'_>, reply: Self::DeliveryOpaque) {
        let r = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err((e.to_string(), in_doubt(e))),
        };
        let (ticket, tx) = *reply;
        let _ = tx.send((ticket, r));
    }
}

/// The transactional id of replay `replay_id`'s producer: one per replay, so that
/// whoever takes a replay over fences whoever held it before.
pub fn transactional_id(replay_id: &str) -> String {
    format!("dlq-triage-replay-{replay_id}")
}

/// Publishes a replay in Kafka transactions (`acks=all`, idempotent): the letters sent
/// between two calls of `confirmations` are one transaction, and a letter counts as
/// confirmed only when its transaction is committed — so a `read_committed` reader sees
/// each letter once even when a frozen holder wakes after its replay was taken over
/// (the taker's [`Publisher::claim`] fenced it; its open transaction was aborted).
/// Keys partition like the Java client (murmur2), so a replayed letter lands where its
/// producer would have put it.
pub struct KafkaPublisher {
    /// The client settings without a transactional id; each claim adds its own.
    cfg: ClientConfig,
    timeout: Duration,
    producer: Option<BaseProducer<Confirmations>>,
    tx: mpsc::Sender<Report>,
    rx: mpsc::Receiver<Report>,
    /// Topic of each ticket in flight, for the location and the error message.
    topics: HashMap<u64, String>,
    /// Tickets sent in the open transaction, in order.
    open: Vec<u64>,
    /// Why this producer may send no more (fenced by a taker): every later send fails.
    fenced: Option<String>,
}

impl KafkaPublisher {
    /// `timeout` bounds each delivery (`message.timeout.ms`) and each commit: past it, a
    /// publish is reported as not confirmed (in doubt) rather than waited on forever.
    pub fn new(
        brokers: &[String],
        props: &[(String, String)],
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", brokers.join(","))
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "1")
            .set("message.timeout.ms", timeout.as_millis().to_string())
            // Longer than a commit may take, short enough that a dead holder's open
            // transaction does not hold `read_committed` readers of the target for long
            // when nobody fences it.
            .set("transaction.timeout.ms", "60000")
            .set("client.id", "dlq-triage-replay");
        for (k, v) in props {
            cfg.set(k, v);
        }
        let (tx, rx) = mpsc::channel();
        Ok(KafkaPublisher {
            cfg,
            timeout,
            producer: None,
            tx,
            rx,
            topics: HashMap::new(),
            open: Vec::new(),
            fenced: None,
        })
    }

    /// A producer with replay `replay_id`'s transactional id, initialised: the broker has
    /// bumped the id's epoch and aborted what an earlier producer of it had open.
    fn transactional(&self, replay_id: &str) -> Result<BaseProducer<Confirmations>, SourceError> {
        let mut cfg = self.cfg.clone();
        cfg.set("transactional.id", transactional_id(replay_id));
        let producer: BaseProducer<Confirmations> = cfg
            .create_with_context(Confirmations)
            .map_err(|e| SourceError::unavailable_by("cannot create a Kafka producer", e))?;
        producer.init_transactions(self.timeout).map_err(|e| {
            SourceError::unavailable_by(
                format!(
                    "cannot take replay {replay_id}'s transactional id `{}` on the broker",
                    transactional_id(replay_id)
                ),
                e,
            )
        })?;
        Ok(producer)
    }

    /// Commit the open transaction and report each of its letters: confirmed when the
    /// commit succeeded; refused when the transaction was aborted (a `read_committed`
    /// reader never sees its records); in doubt when the outcome is unknown (a commit
    /// that timed out) or this producer was fenced (the taker reads the target back).
    fn commit(&mut self, out: &mut Vec<dlq_core::ports::Outcome>) {
        let tickets = std::mem::take(&mut self.open);
        let Some(producer) = self.producer.as_ref() else {
            return;
        };
        let result = producer.commit_transaction(self.timeout);
        let mut reports: HashMap<u64, Delivery> = HashMap::new();
        while let Ok((ticket, r)) = self.rx.try_recv() {
            reports.insert(ticket, r);
        }
        let verdict: Result<(), (String, bool)> = match result {
            Ok(()) => Ok(()),
            Err(e) => Err(self.after_failed_commit(&e)),
        };
        for ticket in tickets {
            let topic = self.topics.remove(&ticket).unwrap_or_default();
            let report = reports.remove(&ticket);
            let outcome = match (&verdict, report) {
                (Ok(()), Some(Ok((p, o)))) => Ok(Confirmed {
                    location: Some(format!("{topic}/{p}/{o}")),
                }),
                (Ok(()), _) => Ok(Confirmed { location: None }),
                (Err((why, true)), _) => Err(SourceError::InDoubt(format!(
                    "publishing to `{topic}` was not confirmed: {why}"
                ))),
                (Err((why, false)), Some(Err((e, _)))) => Err(SourceError::failed(format!(
                    "publishing to `{topic}` was refused: {e} (its transaction was aborted: {why})"
                ))),
                (Err((why, false)), _) => Err(SourceError::failed(format!(
                    "publishing to `{topic}` was not committed: its transaction was aborted ({why})"
                ))),
            };
            out.push((ticket, outcome));
        }
    }

    /// After a commit failed: abort where the transaction can be aborted (its letters
    /// are then refused, not in doubt); otherwise say why it is unknown, and stop
    /// sending when fenced. Returns why and whether the letters are in doubt.
    fn after_failed_commit(&mut self, e: &KafkaError) -> (String, bool) {
        let why = e.to_string();
        let Some(producer) = self.producer.as_ref() else {
            return (why, true);
        };
        let fenced = matches!(
            e.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::Fenced
                    | RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
            )
        ) || matches!(e, KafkaError::Transaction(t) if t.is_fatal());
        if fenced {
            let said = format!(
                "the broker fenced this replay's producer — another process took the replay over ({why}); nothing more is sent from here"
            );
            self.fenced = Some(said.clone());
            return (said, true);
        }
        let abortable = matches!(e, KafkaError::Transaction(t) if t.txn_requires_abort());
        if abortable && producer.abort_transaction(self.timeout).is_ok() {
            return (why, false);
        }
        // A commit that timed out may have been written: in doubt, and no more sends
        // until a resume reads the target back.
        self.fenced = Some(format!("a commit's outcome is unknown ({why})"));
        (why, true)
    }
}

impl Publisher for KafkaPublisher {
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError> {
        let Target::Kafka { topic } = &msg.target else {
            return Err(SourceError::Unsupported(
                "a Kafka publisher publishes to Kafka topics only".into(),
            ));
        };
        if let Some(why) = &self.fenced {
            return Err(SourceError::failed(format!("not sent: {why}")));
        }
        let Some(producer) = self.producer.as_ref() else {
            return Err(SourceError::failed(
                "no replay claimed: a replay's producer is taken with Publisher::claim",
            ));
        };
        if self.open.is_empty() {
            producer
                .begin_transaction()
                .map_err(|e| SourceError::failed_by("beginning a Kafka transaction", e))?;
        }
        let headers = kafka_headers(&msg.headers);
        let mut record = BaseRecord::with_opaque_to(topic, Box::new((ticket, self.tx.clone())))
            .payload(&msg.payload)
            .headers(headers);
        if let Some(k) = &msg.key {
            record = record.key(k);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    producer.poll(Duration::from_millis(10));
                    record = r;
                }
                Err((e, _)) => {
                    return Err(SourceError::failed_by(
                        format!("publishing to `{topic}`"),
                        e,
                    ))
                }
            }
        }
        self.topics.insert(ticket, topic.clone());
        self.open.push(ticket);
        Ok(())
    }

    /// Commits what was sent since the last call (one transaction per engine batch) and
    /// reports it; with nothing open, waits a little for the caller's pace.
    fn confirmations(&mut self, wait: Duration) -> Vec<dlq_core::ports::Outcome> {
        let mut out = Vec::new();
        if !self.open.is_empty() {
            self.commit(&mut out);
        } else if !wait.is_zero() {
            std::thread::sleep(wait.min(Duration::from_millis(5)));
        }
        out
    }

    /// A transaction is written whole or not at all, in send order per partition (the
    /// idempotent producer), and a key always maps to one partition.
    fn keeps_key_order(&self) -> bool {
        true
    }

    fn claim(&mut self, replay_id: &str) -> Result<(), SourceError> {
        if !self.open.is_empty() {
            return Err(SourceError::failed(
                "a replay's producer is claimed before anything is sent for it",
            ));
        }
        self.producer = Some(self.transactional(replay_id)?);
        self.fenced = None;
        Ok(())
    }

    fn fence(&mut self, replay_id: &str) -> Result<(), SourceError> {
        self.transactional(replay_id).map(drop)
    }
}

impl Drop for KafkaPublisher {
    /// An open transaction is aborted (its letters were never reported confirmed, and
    /// the engine has already awaited the ones it counts), not left for the broker's
    /// transaction timeout to hold `read_committed` readers of the target.
    fn drop(&mut self) {
        if let Some(p) = self.producer.as_ref() {
            if !self.open.is_empty() {
                let _ = p.abort_transaction(Duration::from_secs(5));
            }
        }
    }
}
