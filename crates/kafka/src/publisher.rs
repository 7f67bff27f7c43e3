//! Replays to Kafka: the idempotent producer with `acks=all`, delivery reports by ticket.

use super::*;

/// Delivery reports, by ticket, back to the publisher.
struct Confirmations;

/// A delivery's partition and offset, or why not and whether it may still have been
/// written (in doubt) rather than refused.
type Report = (u64, Result<(i32, i64), (String, bool)>);

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

/// Publishes with `acks=all` and the idempotent producer (which keeps a key's records in
/// order even with several in flight). Keys partition like the Java client (murmur2),
/// so a replayed letter lands where its producer would have put it.
pub struct KafkaPublisher {
    producer: BaseProducer<Confirmations>,
    tx: mpsc::Sender<Report>,
    rx: mpsc::Receiver<Report>,
    /// Topic of each ticket in flight, for the location and the error message.
    topics: HashMap<u64, String>,
}

impl KafkaPublisher {
    /// `timeout` bounds each delivery (`message.timeout.ms`): past it, a publish is
    /// reported as not confirmed rather than waited on forever.
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
            .set("client.id", "dlq-triage-replay");
        for (k, v) in props {
            cfg.set(k, v);
        }
        let producer = cfg
            .create_with_context(Confirmations)
            .map_err(|e| SourceError::unavailable_by("cannot create a Kafka producer", e))?;
        let (tx, rx) = mpsc::channel();
        Ok(KafkaPublisher {
            producer,
            tx,
            rx,
            topics: HashMap::new(),
        })
    }

    fn drain(&mut self, out: &mut Vec<dlq_core::ports::Outcome>) {
        while let Ok((ticket, r)) = self.rx.try_recv() {
            let topic = self.topics.remove(&ticket).unwrap_or_default();
            out.push((
                ticket,
                match r {
                    Ok((p, o)) => Ok(Confirmed {
                        location: Some(format!("{topic}/{p}/{o}")),
                    }),
                    Err((e, true)) => Err(SourceError::InDoubt(format!(
                        "publishing to `{topic}` was not confirmed: {e}"
                    ))),
                    Err((e, false)) => Err(SourceError::failed(format!(
                        "publishing to `{topic}` was refused: {e}"
                    ))),
                },
            ));
        }
    }
}

impl Publisher for KafkaPublisher {
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError> {
        let Target::Kafka { topic } = &msg.target else {
            return Err(SourceError::Unsupported(
                "a Kafka publisher publishes to Kafka topics only".into(),
            ));
        };
        let headers = kafka_headers(&msg.headers);
        let mut record = BaseRecord::with_opaque_to(topic, Box::new((ticket, self.tx.clone())))
            .payload(&msg.payload)
            .headers(headers);
        if let Some(k) = &msg.key {
            record = record.key(k);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    self.producer.poll(Duration::from_millis(10));
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
        Ok(())
    }

    fn confirmations(&mut self, wait: Duration) -> Vec<dlq_core::ports::Outcome> {
        let mut out = Vec::new();
        self.producer.poll(Duration::ZERO);
        self.drain(&mut out);
        if out.is_empty() && !wait.is_zero() && !self.topics.is_empty() {
            self.producer.poll(wait);
            self.drain(&mut out);
        } else if out.is_empty() && !wait.is_zero() {
            std::thread::sleep(wait.min(Duration::from_millis(5)));
        }
        out
    }
}

impl Drop for KafkaPublisher {
    /// Wait (boundedly) for outstanding deliveries so none is reported lost by a hurried
    /// exit; the engine has already awaited the ones it counts.
    fn drop(&mut self) {
        let _ = self.producer.flush(Duration::from_secs(5));
    }
}
