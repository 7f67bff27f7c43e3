//! RabbitMQ DLQ queues through lapin.
//!
//! Classic and quorum queues are browsed by consuming with manual ack and a bounded
//! prefetch: what is shown is what this client holds unacked. Nothing is acked by
//! browsing; closing the connection (on exit, or when the source is dropped) hands every
//! held message back to the queue. Quorum queues count that as a redelivery. Settling a
//! letter acks exactly that delivery. Publishing uses publisher confirms and `mandatory`,
//! so an unroutable message is a failure, never a silent success.

mod ack;
pub mod awaiting;
mod connect;
pub mod mgmt;
mod probe;
mod publisher;
mod queue;
mod stream;
mod values;

use connect::*;
pub use connect::{read_tls_file, AmqpTarget, PRIVATE_CA};
use probe::*;
pub use publisher::RabbitPublisher;
use queue::*;
use stream::*;
use values::*;
pub use values::{from_amqp, to_amqp};

use dlq_core::model::{Coords, HeaderValue, RawLetter};
use dlq_core::ports::{
    Confirmed, DlqSource, Outgoing, Publisher, ScanEvent, Settled, SourceError, SourceInfo, Target,
};
use dlq_core::source::TlsFiles;
use futures_lite::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::Duration;

/// How long a connection (TCP, TLS and the AMQP handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A stream read (streams report no count) ends when this long passes without a new
/// delivery.
const IDLE: Duration = Duration::from_millis(1500);
/// How long a queue browse waits for the next of the letters the broker counted before it
/// settles for what it holds (and says "browsed N of M"). The first letter gets the
/// same wait: the count says it exists, and a broker busy dead-lettering a flood (the
/// incident itself) was seen to take over 1.5 s to deliver it.
const STALL: Duration = Duration::from_secs(10);
/// Letters received ahead of the one being prepared.
const PIPELINE: usize = 8192;
/// How long a tail waits on one queue before letting the caller look at its requests.
const TAIL_POLL: Duration = Duration::from_millis(100);

/// Browsing RabbitMQ DLQ queues.
pub struct RabbitSource {
    target: AmqpTarget,
    queues: Vec<String>,
    /// Browse at most this many messages per queue (`--max-letters`); the whole queue
    /// by default.
    max_letters: u64,
    rt: tokio::runtime::Runtime,
    conn: Option<Connection>,
    /// Channels holding browsed deliveries unacked, per queue.
    held: HashMap<String, Channel>,
    /// The browsing consumers, kept open: new dead letters keep arriving on them (tail).
    consumers: HashMap<String, lapin::Consumer>,
    /// Queues of `consumers` that are streams (their deliveries are acked for credit and
    /// addressed by offset).
    streams: HashSet<String>,
    /// The next browse position per queue.
    next_position: HashMap<String, u64>,
    /// Delivery tag of every browsed letter.
    tags: Tags,
    connection_name: String,
    /// Queue types and limits, when the management API is reachable.
    management: Option<crate::mgmt::Management>,
    /// The queue type the operator stated (`--queue-type`), when the API cannot say.
    stated_type: Option<String>,
    /// Browse quorum queues with a delivery limit anyway (`--allow-redelivery`).
    allow_redelivery: bool,
    /// Whether handing a browse back leaves quorum queues' delivery counts as they were
    /// (RabbitMQ ≥ 4.3, see `probe::returns_uncounted`), once asked.
    uncounted: Option<bool>,
}

impl RabbitSource {
    pub fn new(target: AmqpTarget, queues: Vec<String>) -> Result<Self, SourceError> {
        Ok(RabbitSource {
            target,
            queues,
            max_letters: u64::MAX,
            rt: runtime()?,
            conn: None,
            held: HashMap::new(),
            consumers: HashMap::new(),
            streams: HashSet::new(),
            next_position: HashMap::new(),
            tags: Tags::default(),
            connection_name: format!("dlq-triage browse (pid {})", std::process::id()),
            management: None,
            stated_type: None,
            allow_redelivery: false,
            uncounted: None,
        })
    }

    /// Use the management API to learn queue types and limits (see `plan_url`).
    pub fn with_management(mut self, base_url: &str) -> Self {
        self.management = Some(crate::mgmt::Management::new(
            base_url,
            &self.target.user,
            &self.target.password,
            &self.target.tls_files,
        ));
        self
    }

    /// What the operator knows about the queues: their type, and whether browsing may
    /// count redeliveries on a quorum queue with a delivery limit.
    pub fn with_queue_policy(
        mut self,
        stated_type: Option<String>,
        allow_redelivery: bool,
    ) -> Self {
        self.stated_type = stated_type;
        self.allow_redelivery = allow_redelivery;
        self
    }

    pub fn with_connection_name(mut self, name: &str) -> Self {
        self.connection_name = name.to_string();
        self
    }

    /// Browse at most `n` messages per queue (the rest is reported, never hidden).
    pub fn with_max_letters(mut self, n: Option<u64>) -> Self {
        self.max_letters = n.unwrap_or(u64::MAX).max(1);
        self
    }

    /// (Re)connect if needed. A lost connection loses every held delivery (the broker
    /// requeues them), so their tags are forgotten too.
    /// A new channel on the (re)connected connection: probes and browses each take
    /// their own, so a channel the broker closes on an error takes nothing else down.
    fn fresh_channel(&mut self) -> Result<Channel, SourceError> {
        self.ensure_connected()?;
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| SourceError::failed("no AMQP connection"))?;
        self.rt
            .block_on(conn.create_channel())
            .map_err(|e| SourceError::failed_by("opening a channel", e))
    }

    fn ensure_connected(&mut self) -> Result<(), SourceError> {
        if !self.connected() {
            self.held.clear();
            self.consumers.clear();
            self.streams.clear();
            self.tags.clear();
            self.conn = Some(connect(&self.rt, &self.target, &self.connection_name)?);
        }
        Ok(())
    }

    /// Ready messages and attached consumers of a queue, from a passive declare on a
    /// short-lived channel (a failed declare closes its channel, so never on the
    /// browsing one). Messages other consumers hold unacked are not in the count.
    fn count(&mut self, queue: &str) -> Result<(u32, u32), SourceError> {
        let vhost = self.target.vhost.clone();
        let ch = self.fresh_channel()?;
        self.rt.block_on(async {
            let q = ch
                .queue_declare(
                    ShortString::from(queue),
                    QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|e| {
                    SourceError::unavailable(format!(
                        "queue `{queue}` in vhost `{vhost}`: {e} (does it exist?)"
                    ))
                })?;
            let _ = ch.close(200, ShortString::from("probe done")).await;
            Ok((q.message_count(), q.consumer_count()))
        })
    }

    /// Whether the AMQP connection is up (a missing queue closes only its channel).
    pub fn connected(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.status().connected())
    }

    /// Ready messages of a queue over AMQP: for a listing whose management API has no
    /// count yet (a new queue, or one made before the plugin was enabled).
    pub fn ready_count(&mut self, queue: &str) -> Result<u64, SourceError> {
        self.count(queue).map(|(ready, _)| u64::from(ready))
    }

    /// A browse that stays open for the tail: its channel (what it holds), its
    /// consumer (where new letters arrive) and the position of the next letter. A
    /// re-browse of the queue hands all of it back first (see [`Self::browse`]).
    fn keep_open(
        &mut self,
        queue: &str,
        ch: Channel,
        consumer: lapin::Consumer,
        browsed: u64,
        stream: bool,
    ) {
        self.held.insert(queue.to_string(), ch);
        self.consumers.insert(queue.to_string(), consumer);
        if stream {
            self.streams.insert(queue.to_string());
        }
        self.next_position.insert(queue.to_string(), browsed + 1);
    }
}

/// What a browse streamed.
struct Streamed {
    browsed: u64,
    /// The highest `x-delivery-count` seen (quorum queues).
    most_delivered: i64,
    flow: ControlFlow<()>,
}

impl DlqSource for RabbitSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: format!("{}?queue={}", self.target.display(), self.queues.join(",")),
            browse_effect: "RabbitMQ: browsed messages are held unacked while open and requeued on exit (quorum queues count a redelivery; streams are read by offset, nothing held)".into(),
        }
    }

    /// From the management API (queue arguments and the effective policy); without it,
    /// unknown — AMQP itself does not tell a queue's arguments.
    fn retention(&mut self) -> Vec<(String, dlq_core::retention::Retention)> {
        use dlq_core::retention::Retention;
        self.queues
            .iter()
            .map(|q| {
                let rule = match &self.management {
                    None => Retention::Unknown(
                        "the management API is not reachable: queue arguments and policies cannot be read".into(),
                    ),
                    Some(m) => match m.queue(&self.target.vhost, q) {
                        Ok(info) => info.retention(),
                        Err(e) => Retention::Unknown(e.to_string()),
                    },
                };
                (q.clone(), rule)
            })
            .collect()
    }

    /// The management API's `messages_dlx` of the vhost's quorum queues; without the
    /// API there is nothing to ask.
    fn backlog(&self) -> Option<Box<dyn dlq_core::ports::Backlog>> {
        let mgmt = self.management.clone()?;
        Some(Box::new(awaiting::MgmtBacklog {
            mgmt,
            vhost: self.target.vhost.clone(),
            dlqs: self.queues.clone(),
        }))
    }

    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        for q in self.queues.clone() {
            if self.browse(&q, sink)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// New dead letters arrive on the browsing consumers, which stay open (the whole-queue
    /// browse has no prefetch limit). A consumer the broker ends (a closed connection,
    /// `consumer_timeout`) is an error saying so: its letters went back to the queue.
    fn tail(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        if self.consumers.is_empty() {
            return Err(SourceError::Unsupported(
                "nothing is browsed to tail: browse first".into(),
            ));
        }
        let vhost = self.target.vhost.clone();
        loop {
            for q in self.consumers.keys().cloned().collect::<Vec<_>>() {
                let Some(mut c) = self.consumers.remove(&q) else {
                    continue;
                };
                let next = self
                    .rt
                    .block_on(async { tokio::time::timeout(TAIL_POLL, c.next()).await });
                self.consumers.insert(q.clone(), c);
                let ev = match next {
                    Ok(Some(Ok(d))) => {
                        let pos = self.next_position.entry(q.clone()).or_insert(1);
                        let position = *pos;
                        *pos += 1;
                        if self.streams.contains(&q) {
                            // Credit for the next ones; the message stays in the stream.
                            let _ = self.rt.block_on(d.ack(BasicAckOptions::default()));
                            ScanEvent::Letters(vec![stream_letter(d, &vhost, &q, position)])
                        } else {
                            self.tags.set(&q, position, d.delivery_tag);
                            ScanEvent::Letters(vec![to_raw(d, &vhost, &q, position)])
                        }
                    }
                    Ok(Some(Err(e))) => {
                        self.consumers.remove(&q);
                        return Err(SourceError::unavailable_by(
                            format!("the broker closed the browse of `{q}` (its letters went back to the queue)"),
                            e,
                        ));
                    }
                    Ok(None) => {
                        self.consumers.remove(&q);
                        return Err(SourceError::unavailable(format!(
                            "the broker ended the browse of `{q}` (its letters went back to the queue)"
                        )));
                    }
                    // Give the sink a chance to stop even when nothing arrives.
                    Err(_) => ScanEvent::Progress {
                        done: 0,
                        total: None,
                    },
                };
                if sink(ev).is_break() {
                    return Ok(());
                }
            }
        }
    }

    /// Replay needs the browse's consumers: they are how letters failing again are seen
    /// (and, on classic and quorum queues, held deliveries are how the DLQ copies are
    /// acked; a stream's copies stay, and the ledger's decision is what counts).
    fn replay_ports(&self) -> Result<dlq_core::ports::ReplayPorts, SourceError> {
        if self.consumers.is_empty() {
            return Err(SourceError::Unsupported(
                "nothing is browsed and open to watch for letters failing again (a stream read stopped by --max-letters is not kept open: browse it whole)".into(),
            ));
        }
        Ok(dlq_core::ports::ReplayPorts {
            publisher: Box::new(RabbitPublisher::new(&self.target)?),
            origin_log: None,
            reach: self.management.clone().map(|mgmt| {
                Box::new(crate::mgmt::MgmtReach {
                    mgmt,
                    vhost: self.target.vhost.clone(),
                }) as Box<dyn dlq_core::ports::Reach>
            }),
            kafka: false,
        })
    }

    /// Classic/quorum: ack the held delivery. Streams cannot delete one message.
    fn settle(&mut self, coords: &Coords) -> Result<Settled, SourceError> {
        if let Coords::Amqp {
            stream_offset: Some(_),
            ..
        } = coords
        {
            return Ok(Settled::LedgerOnly);
        }
        self.ack_letter(coords).map(|()| Settled::Removed)
    }
}

#[cfg(test)]
mod tests {
    use super::{partial_why, tls_hint, AmqpTarget, TlsFiles};

    /// rustls' certificate refusals become what to do; plain AMQP and other failures get
    /// no TLS hint.
    #[test]
    fn a_refused_certificate_is_said_in_words() {
        let t = AmqpTarget {
            tls: true,
            user: "u".into(),
            password: "p".into(),
            host: "rabbit.internal".into(),
            port: 5671,
            vhost: "/".into(),
            tls_files: TlsFiles::default(),
        };
        let hint = |msg: &str| tls_hint(msg, &t).unwrap_or_default();
        assert!(hint("invalid peer certificate: UnknownIssuer").contains("SSL_CERT_FILE"));
        assert!(hint("invalid peer certificate: certificate not valid for name \"x\"; certificate is only valid for y").contains("does not name `rabbit.internal`"));
        assert!(hint("invalid peer certificate: certificate expired: verification time 2 (UNIX), but certificate is not valid after 1 (1 seconds ago)").contains("validity period"));
        assert!(hint("received corrupt message of type InvalidContentType")
            .contains("did not answer in TLS"));
        assert!(hint("invalid peer certificate: BadSignature").contains("was refused"));
        assert!(hint("received fatal alert: CertificateRequired").contains("&certfile="));
        assert_eq!(tls_hint("connection refused", &t), None);
        let plain = AmqpTarget {
            tls: false,
            ..t.clone()
        };
        assert_eq!(
            tls_hint("invalid peer certificate: UnknownIssuer", &plain),
            None
        );
    }

    /// Each cause is named, and only causes that hold: a cap reached, a queue that went
    /// quiet short of its count, messages other consumers hold.
    #[test]
    fn a_partial_browse_says_why() {
        assert_eq!(
            partial_why(4, 10, 4, 0, 0),
            "--max-letters 4 (raise or drop it, or settle some)"
        );
        assert_eq!(
            partial_why(6, 10, u64::MAX, 0, 0),
            "the queue went quiet before its count was held"
        );
        assert_eq!(
            partial_why(0, 0, u64::MAX, 7, 1),
            "7 held unacked by 1 other consumer(s) (close them to see those)"
        );
        assert_eq!(
            partial_why(4, 10, 4, 7, 2),
            "--max-letters 4 (raise or drop it, or settle some); 7 held unacked by 2 other consumer(s) (close them to see those)"
        );
    }
}
