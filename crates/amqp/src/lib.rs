//! RabbitMQ DLQ queues through lapin.
//!
//! Classic and quorum queues are browsed by consuming with manual ack and a bounded
//! prefetch: what is shown is what this client holds unacked. Nothing is acked by
//! browsing; closing the connection (on exit, or when the source is dropped) hands every
//! held message back to the queue. Quorum queues count that as a redelivery. Settling a
//! letter acks exactly that delivery. Publishing uses publisher confirms and `mandatory`,
//! so an unroutable message is a failure, never a silent success.

pub mod mgmt;

use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
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

/// Where and how to connect.
#[derive(Clone)]
pub struct AmqpTarget {
    pub tls: bool,
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub vhost: String,
    /// amqps://: a CA beside the system's store, a client certificate and key.
    pub tls_files: TlsFiles,
}

impl AmqpTarget {
    fn uri(&self) -> String {
        let enc = dlq_core::source::pct_encode;
        let scheme = if self.tls { "amqps" } else { "amqp" };
        format!(
            "{scheme}://{}:{}@{}:{}/{}",
            enc(&self.user),
            enc(&self.password),
            self.host,
            self.port,
            enc(&self.vhost)
        )
    }

    fn display(&self) -> String {
        let scheme = if self.tls { "amqps" } else { "amqp" };
        let vh = if self.vhost == "/" {
            "%2f".to_string()
        } else {
            self.vhost.clone()
        };
        format!(
            "{scheme}://{}:***@{}:{}/{vh}",
            self.user, self.host, self.port
        )
    }
}

/// A runtime with its own worker thread, so lapin's I/O loop keeps running between our
/// calls: heartbeats go out while a browse sits open in the TUI, and a connection or
/// channel closed by the server is noticed at once (a current-thread runtime would only
/// run it inside `block_on`, and an ack on a dead channel would look like success).
fn runtime() -> Result<tokio::runtime::Runtime, SourceError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("dlq-triage-amqp")
        .enable_all()
        .build()
        .map_err(|e| SourceError::failed_by("starting the AMQP runtime", e))
}

/// Connect with a bounded wait and a message that says what to check. The connection is
/// named, so operators can see (and close) it in the management UI and `rabbitmqctl`.
fn connect(
    rt: &tokio::runtime::Runtime,
    t: &AmqpTarget,
    name: &str,
) -> Result<Connection, SourceError> {
    let uri = t.uri();
    let props = ConnectionProperties::default()
        .with_connection_name(LongString::from(name.as_bytes().to_vec()));
    let tls = tls_config(&t.tls_files)?;
    let res = rt.block_on(async {
        let connecting = async {
            match tls {
                None => Connection::connect(&uri, props).await,
                Some(tls) => {
                    lapin::DefaultConnectionBuilder::new()?
                        .with_uri_str(uri.clone())
                        .with_properties(props)
                        .with_tls_config(tls)
                        .connect()
                        .await
                }
            }
        };
        tokio::time::timeout(CONNECT_TIMEOUT, connecting).await
    });
    match res {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => {
            let mut msg = e.to_string();
            // A peer that answers in something else (an HTTP port, a proxy) surfaces as
            // the frame parser's debug dump: say what it means instead.
            if msg.contains("Parsing Error") || msg.contains("failed to parse") {
                msg = format!(
                    "{}:{} answered, but not in AMQP 0-9-1 (an HTTP port or a proxy? AMQP listens on 5672, AMQPS on 5671, the management API on 15672)",
                    t.host, t.port
                );
            }
            let hint = if let Some(why) = tls_hint(&msg, t) {
                why
            } else if msg.contains("ACCESS_REFUSED") || msg.to_lowercase().contains("auth") {
                format!("RabbitMQ refused the credentials for user `{}`", t.user)
            } else if msg.contains("NOT_ALLOWED") || msg.contains("vhost") {
                format!(
                    "vhost `{}` does not exist or user `{}` may not use it",
                    t.vhost, t.user
                )
            } else {
                "check the address, port and TLS (amqps://)".to_string()
            };
            Err(SourceError::unavailable(format!(
                "cannot connect to {}: {msg}. {hint}",
                t.display()
            )))
        }
        Err(_) => Err(SourceError::unavailable(format!(
            "cannot connect to {} within {}s: check the address and network",
            t.display(),
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// The files an amqps:// URI names, read now so a missing or unreadable one is said by
/// its parameter's name; `None` when it names none (the system's store, no client
/// certificate).
fn tls_config(files: &TlsFiles) -> Result<Option<lapin::tcp::OwnedTLSConfig>, SourceError> {
    if files.is_empty() {
        return Ok(None);
    }
    let read = read_tls_file;
    let cert_chain = match &files.ca {
        Some(p) => Some(String::from_utf8(read("cacertfile", p)?).map_err(|_| {
            SourceError::failed(format!("cacertfile={} is not a PEM file", p.display()))
        })?),
        None => None,
    };
    let identity = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(lapin::tcp::OwnedIdentity::PKCS8 {
            pem: read("certfile", cert)?,
            key: read("keyfile", key)?,
        }),
        _ => None,
    };
    Ok(Some(lapin::tcp::OwnedTLSConfig {
        identity,
        cert_chain,
    }))
}

/// One of an amqps:// URI's files, or why not, named by its parameter (`keyfile=PATH`):
/// missing, or not the PEM it must be (a key given as the certificate, a DER file), said
/// here rather than as a TLS library's parse error or, for a CA file with no
/// certificate in it, as an untrusted server later.
pub fn read_tls_file(param: &str, path: &std::path::Path) -> Result<Vec<u8>, SourceError> {
    let bytes = std::fs::read(path)
        .map_err(|e| SourceError::failed(format!("reading {param}={}: {e}", path.display())))?;
    let (marker, what) = if param == "keyfile" {
        ("PRIVATE KEY-----", "a PEM private key")
    } else {
        ("-----BEGIN CERTIFICATE-----", "a PEM certificate")
    };
    if !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()) {
        return Err(SourceError::failed(format!(
            "{param}={} is not {what}: no `{marker}` in it",
            path.display()
        )));
    }
    Ok(bytes)
}

/// What to do about a certificate from a CA outside the system's store: the URI's
/// `cacertfile` serves AMQP and the management API alike; SSL_CERT_FILE (read by rustls,
/// which lapin uses, and by OpenSSL, which the API's client uses) replaces the store.
pub const PRIVATE_CA: &str =
    "for a private CA, add &cacertfile=PATH (its PEM file) to the amqps:// URI, or set SSL_CERT_FILE, or add it to the system's store";

/// What a failed TLS connection means, in words an operator can act on; rustls' own
/// text (`invalid peer certificate: UnknownIssuer`) stays in the message before it.
fn tls_hint(msg: &str, t: &AmqpTarget) -> Option<String> {
    if !t.tls {
        return None;
    }
    let why = if msg.contains("UnknownIssuer") {
        format!(
            "the server's certificate is signed by a CA this machine does not trust: {PRIVATE_CA}"
        )
    } else if msg.contains("not valid for name") || msg.contains("NotValidForName") {
        format!(
            "the server's certificate does not name `{}`: connect by a name the certificate carries",
            t.host
        )
    } else if msg.contains("certificate expired")
        || msg.contains("not valid yet")
        || msg.contains("Expired")
        || msg.contains("NotValidYet")
    {
        "the server's certificate is outside its validity period (or this machine's clock is wrong)"
            .to_string()
    } else if msg.contains("InvalidContentType") || msg.contains("corrupt message") {
        format!(
            "{}:{} did not answer in TLS: is it the plain AMQP port? (amqp:// listens on 5672, amqps:// on 5671)",
            t.host, t.port
        )
    } else if msg.contains("CertificateRequired")
        || msg.contains("alert: BadCertificate")
        || msg.contains("alert: UnknownCA")
    {
        "the server requires a client certificate it trusts: add &certfile=PATH&keyfile=PATH (PEM) to the amqps:// URI".to_string()
    } else if msg.contains("invalid peer certificate") {
        "the server's certificate was refused".to_string()
    } else {
        return None;
    };
    Some(why)
}

/// Typed AMQP field value → our header value, faithfully (tables stay tables).
pub fn from_amqp(v: &AMQPValue) -> HeaderValue {
    match v {
        AMQPValue::Boolean(b) => HeaderValue::Bool(*b),
        AMQPValue::ShortShortInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortShortUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongLongInt(i) => HeaderValue::Int(*i),
        AMQPValue::Float(f) => HeaderValue::Float(f64::from(*f)),
        AMQPValue::Double(f) => HeaderValue::Float(*f),
        AMQPValue::DecimalValue(d) => HeaderValue::Bytes(format!("{d:?}").into_bytes()),
        AMQPValue::ShortString(s) => HeaderValue::Bytes(s.as_str().as_bytes().to_vec()),
        AMQPValue::LongString(s) => HeaderValue::Bytes(s.as_bytes().to_vec()),
        AMQPValue::FieldArray(a) => {
            HeaderValue::Array(a.as_slice().iter().map(from_amqp).collect())
        }
        AMQPValue::Timestamp(t) => HeaderValue::Timestamp(*t),
        AMQPValue::FieldTable(t) => HeaderValue::Table(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), from_amqp(v)))
                .collect(),
        ),
        AMQPValue::ByteArray(b) => HeaderValue::Bytes(b.as_slice().to_vec()),
        AMQPValue::Void => HeaderValue::Null,
    }
}

/// Our header value → AMQP (for publishing replays).
pub fn to_amqp(v: &HeaderValue) -> AMQPValue {
    match v {
        HeaderValue::Null => AMQPValue::Void,
        HeaderValue::Bytes(b) => AMQPValue::LongString(LongString::from(b.clone())),
        HeaderValue::Int(i) => AMQPValue::LongLongInt(*i),
        HeaderValue::Float(f) => AMQPValue::Double(*f),
        HeaderValue::Bool(b) => AMQPValue::Boolean(*b),
        HeaderValue::Timestamp(t) => AMQPValue::Timestamp(*t),
        HeaderValue::Array(items) => AMQPValue::FieldArray(FieldArray::from(
            items.iter().map(to_amqp).collect::<Vec<_>>(),
        )),
        HeaderValue::Table(fields) => {
            AMQPValue::FieldTable(table(fields.iter().map(|(k, v)| (k.as_str(), v))))
        }
    }
}

fn table<'a>(fields: impl Iterator<Item = (&'a str, &'a HeaderValue)>) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in fields {
        t.insert(ShortString::from(k), to_amqp(v));
    }
    t
}

/// A delivery as a raw letter at `position` in our browse of `queue`. The delivery is
/// taken: its body becomes the letter's payload without a copy.
fn to_raw(d: Delivery, vhost: &str, queue: &str, position: u64) -> RawLetter {
    let p = &d.properties;
    let mut properties = Vec::new();
    let mut prop = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            properties.push((name.to_string(), v));
        }
    };
    prop(
        "message_id",
        p.message_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop(
        "correlation_id",
        p.correlation_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop("type", p.kind().as_ref().map(|s| s.as_str().to_string()));
    prop(
        "app_id",
        p.app_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop(
        "content_type",
        p.content_type().as_ref().map(|s| s.as_str().to_string()),
    );
    prop("timestamp", p.timestamp().map(|t| t.to_string()));
    prop("exchange", Some(d.exchange.as_str().to_string()));
    prop("routing_key", Some(d.routing_key.as_str().to_string()));
    let headers = p
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(k, v)| Header::named(k.as_str(), from_amqp(v)))
                .collect()
        })
        .unwrap_or_default();
    RawLetter {
        coords: Some(Coords::Amqp {
            vhost: vhost.to_string(),
            queue: queue.to_string(),
            position,
            stream_offset: None,
        }),
        key: None,
        headers,
        properties,
        payload: d.data,
        // AMQP has no broker timestamp of the DLQ record: the dead-lettering time comes
        // from x-death (the publish-time property is kept above as `timestamp`).
        timestamp: None,
    }
}

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

    /// Never push a message past its delivery limit. Quorum queues count every return of
    /// a browsed message as a delivery and dead-letter (or drop) a message returned more
    /// than `delivery-limit` times, so: a quorum queue with a limit is browsed only when
    /// the operator allows it, and never when the head message has no browse to spare; a
    /// queue of unknown type whose head message carries `x-delivery-count` is not browsed
    /// (learning that costs the head one delivery: give the type to avoid it).
    /// Returns a line for the user when browsing goes ahead with a limit.
    fn quorum_guard(
        &mut self,
        queue: &str,
        kind: Option<&str>,
        limit: Option<i64>,
        probed: &Probe,
    ) -> Result<Option<String>, SourceError> {
        match (kind, limit) {
            (Some("quorum"), Some(limit)) => {
                if !self.allow_redelivery {
                    return Err(SourceError::failed(format!(
                        "refusing to browse quorum queue `{queue}`: it has delivery-limit {limit}, every browse returns each message once (counted as a delivery), and a message returned more than {limit} times is dead-lettered or dropped. Browse anyway with --allow-redelivery (each message takes at most {} browse(s) if nothing else redelivered it)",
                        (limit - 1).max(0)
                    )));
                }
                // No probe: delivering even one message could push it over. The counts
                // are read from this browse and reported after it.
                Ok(Some(format!(
                    "quorum queue with delivery-limit {limit}: this browse counts one delivery per message (--allow-redelivery)"
                )))
            }
            (Some("quorum"), None) => Ok(Some(
                "quorum queue without a delivery limit: each browse counts one redelivery per message".into(),
            )),
            (None, _) => match probed {
                Probe::Head(Some(count)) if !self.allow_redelivery => Err(SourceError::failed(format!(
                    "refusing to browse `{queue}`: its messages carry x-delivery-count ({count}), so it is a quorum queue, and its delivery limit is unknown without the management API. Give --management-url, or check the limit and pass --queue-type quorum --allow-redelivery"
                ))),
                _ => Ok(None),
            },
            _ => Ok(None),
        }
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

    /// What a queue of unknown type is, from one `basic.get` on a short-lived channel:
    /// streams refuse it; any other queue hands over its head message (or nothing), which
    /// the closing channel gives back — its `x-delivery-count` tells a quorum queue that
    /// redelivered it. (AMQP's declare-ok alone cannot tell: it may count 0 or N for a
    /// stream.) On a quorum queue this costs the head one delivery.
    fn probe(&mut self, queue: &str) -> Result<Probe, SourceError> {
        let ch = self.fresh_channel()?;
        self.rt.block_on(async {
            let got = ch
                .basic_get(
                    ShortString::from(queue),
                    lapin::options::BasicGetOptions { no_ack: false },
                )
                .await;
            let probe = match &got {
                Err(e) if e.to_string().contains("stream") => Probe::Stream,
                Ok(Some(m)) => Probe::Head(
                    m.delivery
                        .properties
                        .headers()
                        .as_ref()
                        .and_then(|h| {
                            h.inner()
                                .iter()
                                .find(|(k, _)| k.as_str() == "x-delivery-count")
                        })
                        .and_then(|(_, v)| from_amqp(v).as_i64_lenient()),
                ),
                _ => Probe::Empty,
            };
            let _ = ch.close(200, ShortString::from("probe done")).await;
            Ok(probe)
        })
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

    fn browse(
        &mut self,
        queue: &str,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        // A re-browse first hands back what the last one holds (the close waits for the
        // requeue): counted before, those messages were missing from the count and our
        // own consumer was reported as another client's.
        if let Some(old) = self.held.remove(queue) {
            self.consumers.remove(queue);
            self.streams.remove(queue);
            self.tags.forget(queue);
            self.rt.block_on(async {
                let _ = old.close(200, ShortString::from("re-browse")).await;
            });
        }
        let (count, consumers) = self.count(queue)?;
        // The API is asked only when the operator did not say what the queue is.
        let info = self
            .management
            .as_ref()
            .filter(|_| self.stated_type.is_none())
            .and_then(|m| m.queue(&self.target.vhost, queue).ok());
        let mut kind = info
            .as_ref()
            .map(|i| i.kind.clone())
            .or_else(|| self.stated_type.clone());
        let probed = if kind.is_none() {
            self.probe(queue)?
        } else {
            Probe::Empty
        };
        if probed == Probe::Stream {
            kind = Some("stream".into());
        }
        // Another client (a stuck consumer, a second dlq-triage) may hold messages
        // unacked: they are invisible here, and an "empty" DLQ may not be. Counted
        // (the management API's last sample), they make the browse partial.
        let hidden = if consumers > 0 {
            info.as_ref().and_then(|i| i.messages_unacknowledged)
        } else {
            Some(0)
        };
        if consumers > 0 {
            let held = hidden
                .map(|n| format!("{n} message(s) are held unacked by them and not shown"))
                .unwrap_or_else(|| "messages they hold unacked are not shown (the management API would say how many)".into());
            let flow = sink(ScanEvent::Notice {
                location: format!("queue {queue}"),
                message: format!(
                    "{consumers} other consumer(s) attached; {held}; the broker reports {count} ready"
                ),
            });
            if flow.is_break() {
                return Ok(flow);
            }
        }
        if kind.as_deref() == Some("stream") {
            // AMQP's declare reports 0 for streams and the management API's counts are
            // sampled (stale for seconds): read until idle, up to the limit.
            let cap = u32::try_from(self.max_letters).unwrap_or(u32::MAX);
            return self.browse_stream(queue, cap, sink);
        }
        let limit = info.as_ref().and_then(|i| i.delivery_limit());
        if let Some(line) = self.quorum_guard(queue, kind.as_deref(), limit, &probed)? {
            let flow = sink(ScanEvent::Notice {
                location: format!("queue {queue}"),
                message: line,
            });
            if flow.is_break() {
                return Ok(flow);
            }
        }
        let want = u64::from(count).min(self.max_letters);
        // Unlimited prefetch (0) for a whole-queue browse, as a plain consumer does: the
        // broker streams every message and new arrivals keep coming (tail). A cap is
        // the prefetch, so nothing beyond it is held unseen.
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
        let (got, consumer) = self.stream_deliveries(queue, consumer, want, sink)?;
        self.keep_open(queue, ch, consumer, got.browsed, false);
        if let (Some(limit), Some("quorum")) = (limit, kind.as_deref()) {
            // On release each message has one more delivery than its header says.
            let left = limit - (got.most_delivered + 1);
            let flow = sink(ScanEvent::Notice {
                location: format!("queue {queue}"),
                message: format!(
                    "quorum queue delivery-limit {limit}: after this browse the most-redelivered message has {} deliveries; {} browse(s) left before messages are dead-lettered or dropped",
                    got.most_delivered + 1,
                    left.max(0)
                ),
            });
            if flow.is_break() {
                return Ok(flow);
            }
        }
        let hidden = hidden.unwrap_or(0);
        let total = u64::from(count) + hidden;
        if got.flow.is_continue() && got.browsed < total {
            let why = partial_why(
                got.browsed,
                u64::from(count),
                self.max_letters,
                hidden,
                consumers,
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

    /// Hand deliveries to the sink as they arrive, until `want` are held, the broker goes
    /// quiet for STALL, or the sink stops. Receiving runs as a task on the AMQP runtime,
    /// a bounded queue ahead of the sink: the broker keeps streaming while letters are
    /// prepared, so a browse takes the longer of the two, not their sum. Returns the
    /// consumer, which stays open for the tail.
    fn stream_deliveries(
        &mut self,
        queue: &str,
        consumer: lapin::Consumer,
        want: u64,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(Streamed, lapin::Consumer), SourceError> {
        // Deliveries cross to this thread in batches of what has already arrived: one
        // wake-up per batch, not per message (on 2 cores the wake-ups were the cost).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Received>>(PIPELINE / BATCH);
        let vhost = self.target.vhost.clone();
        let q = queue.to_string();
        let receiver = self.rt.spawn(async move {
            let mut consumer = consumer;
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
                    // Everything that had arrived is taken: let the next ones gather for
                    // a moment instead of waking this task (and the lapin thread's
                    // handoff) per delivery. Those wake-ups take CPU from the broker on
                    // the same machine: system time halves, and the batch is a
                    // millisecond late at most.
                    tokio::time::sleep(GATHER).await;
                }
            }
            consumer
        });
        let mut got = Streamed {
            browsed: 0,
            most_delivered: 0,
            flow: ControlFlow::Continue(()),
        };
        let mut error = None;
        'batches: while let Some(batch) = rx.blocking_recv() {
            for item in batch {
                let (tag, raw) = match item {
                    Ok(x) => x,
                    Err(e) => {
                        error = Some(e);
                        break 'batches;
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
                got.flow = sink(ScanEvent::Letter(raw));
                if got.flow.is_continue() && got.browsed % 5_000 == 0 {
                    got.flow = sink(ScanEvent::Progress {
                        done: got.browsed,
                        total: Some(want),
                    });
                }
                if got.flow.is_break() {
                    break 'batches;
                }
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

/// Most deliveries handed over at once.
const BATCH: usize = 256;
/// How long deliveries gather once the receiver has taken all that had arrived.
const GATHER: Duration = Duration::from_millis(1);

/// What the receiving task hands over: a delivery tag and its letter, or why it stopped.
type Received = Result<(u64, RawLetter), String>;

/// Delivery tags of held letters: per queue, indexed by browse position (1-based); 0 is
/// "not held" (settled). 8 bytes a letter, for a million held letters.
#[derive(Default)]
struct Tags(HashMap<String, Vec<u64>>);

impl Tags {
    fn set(&mut self, queue: &str, position: u64, tag: u64) {
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

    fn get(&self, queue: &str, position: u64) -> Option<u64> {
        let i = usize::try_from(position.checked_sub(1)?).ok()?;
        self.0
            .get(queue)
            .and_then(|v| v.get(i))
            .copied()
            .filter(|t| *t != 0)
    }

    fn forget(&mut self, queue: &str) {
        self.0.remove(queue);
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// Why a browse held less than the queue has, in words for "browsed N of M — why":
/// the operator's cap, messages other consumers hold, or a queue that went quiet first.
fn partial_why(browsed: u64, ready: u64, max_letters: u64, hidden: u64, consumers: u32) -> String {
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

/// What a `basic.get` probe learned of a queue of unknown type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Stream,
    /// The head message's `x-delivery-count`, if it carries one.
    Head(Option<i64>),
    Empty,
}

/// What a browse streamed.
struct Streamed {
    browsed: u64,
    /// The highest `x-delivery-count` seen (quorum queues).
    most_delivered: i64,
    flow: ControlFlow<()>,
}

impl RabbitSource {
    /// Streams are read by offset from the start, without consuming: acks on a stream
    /// only grant credit, the messages stay. Nothing is held.
    fn browse_stream(
        &mut self,
        queue: &str,
        count: u32,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        let vhost = self.target.vhost.clone();
        let ch = self.fresh_channel()?;
        let want = count;
        let (deliveries, consumer) = self.rt.block_on(async {
            ch.basic_qos(500, BasicQosOptions::default())
                .await
                .map_err(|e| SourceError::failed_by(format!("basic.qos on `{queue}`"), e))?;
            let mut args = FieldTable::default();
            args.insert(
                ShortString::from("x-stream-offset"),
                AMQPValue::LongString(LongString::from(b"first".to_vec())),
            );
            let mut consumer = ch
                .basic_consume(
                    ShortString::from(queue),
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    args,
                )
                .await
                .map_err(|e| SourceError::failed_by(format!("reading stream `{queue}`"), e))?;
            let mut got = Vec::new();
            while (got.len() as u32) < want {
                match tokio::time::timeout(IDLE, consumer.next()).await {
                    Ok(Some(Ok(d))) => {
                        let _ = d.ack(BasicAckOptions::default()).await;
                        got.push(d);
                    }
                    Ok(Some(Err(e))) => {
                        return Err(SourceError::failed_by(
                            format!("reading stream `{queue}`"),
                            e,
                        ))
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            Ok::<_, SourceError>((got, consumer))
        })?;
        if deliveries.len() as u64 >= u64::from(want) {
            // Stopped by --max-letters: what follows is the rest of the stream, not new
            // letters, so the consumer is not kept to be tailed.
            self.rt.block_on(async {
                let _ = ch.close(200, ShortString::from("stream read")).await;
            });
        } else {
            // The consumer stays open, positioned after what was read: letters appended
            // later (new dead letters, replayed letters failing again) arrive on it —
            // the tail, as on a queue. Nothing is held: a stream's acks only grant credit.
            self.keep_open(queue, ch, consumer, deliveries.len() as u64, true);
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            if sink(ScanEvent::Letter(stream_letter(
                d,
                &vhost,
                queue,
                i as u64 + 1,
            )))
            .is_break()
            {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// A stream message as a letter: addressed by its offset, which is stable (positions are
/// only the order of this browse).
fn stream_letter(d: Delivery, vhost: &str, queue: &str, position: u64) -> RawLetter {
    let mut raw = to_raw(d, vhost, queue, position);
    let offset = raw
        .header("x-stream-offset")
        .and_then(HeaderValue::as_i64_lenient);
    if let Some(Coords::Amqp { stream_offset, .. }) = raw.coords.as_mut() {
        *stream_offset = offset;
    }
    raw
}

impl DlqSource for RabbitSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: format!("{}?queue={}", self.target.display(), self.queues.join(",")),
            browse_effect: "RabbitMQ: browsed messages are held unacked while open and requeued on exit (quorum queues count a redelivery; streams are read by offset, nothing held)".into(),
        }
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
                            ScanEvent::Letter(stream_letter(d, &vhost, &q, position))
                        } else {
                            self.tags.set(&q, position, d.delivery_tag);
                            ScanEvent::Letter(to_raw(d, &vhost, &q, position))
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

impl RabbitSource {
    /// Ack exactly the held delivery of this letter.
    fn ack_letter(&mut self, coords: &Coords) -> Result<(), SourceError> {
        if let Coords::Amqp {
            stream_offset: Some(_),
            ..
        } = coords
        {
            return Err(SourceError::Unsupported(
                "a stream cannot delete one message (it is append-only): a discard is recorded in the ledger only".into(),
            ));
        }
        let Coords::Amqp {
            queue, position, ..
        } = coords
        else {
            return Err(SourceError::Unsupported(format!(
                "{coords} is not a RabbitMQ letter"
            )));
        };
        let tag = self.tags.get(queue, *position).ok_or_else(|| {
            SourceError::unavailable(format!(
                "{coords} is not held by this browse (re-browse first)"
            ))
        })?;
        let ch = self.held.get(queue).ok_or_else(|| {
            SourceError::unavailable(format!("queue `{queue}` is not being browsed"))
        })?;
        // basic.ack has no reply: on a dead channel it would "succeed" while the broker
        // has already requeued the message. Refuse unless the delivery is still ours.
        let alive =
            self.conn.as_ref().is_some_and(|c| c.status().connected()) && ch.status().connected();
        if !alive {
            return Err(SourceError::unavailable(format!(
                "{coords}: the browse holding it was closed (by the broker, a timeout or a restart); the letter is back in the queue — re-browse, nothing was acked"
            )));
        }
        self.rt
            .block_on(ch.basic_ack(tag, BasicAckOptions::default()))
            .map_err(|e| {
                SourceError::failed(format!(
                    "acking {coords}: {e} (the letter stays in the DLQ)"
                ))
            })?;
        // The check above can pass while the broker's close is still on its way (the
        // server closed the connection and requeued; our client has not read that yet):
        // the ack then went nowhere. A round trip on the same channel after it proves
        // the broker's channel took the ack — frames are handled in order. basic.qos
        // is harmless here: on RabbitMQ it applies to consumers started after it.
        let confirmed = self.rt.block_on(async {
            tokio::time::timeout(
                ACK_CONFIRM_TIMEOUT,
                ch.basic_qos(0, BasicQosOptions::default()),
            )
            .await
        });
        match confirmed {
            Ok(Ok(())) => {
                self.tags.set(queue, *position, 0);
                Ok(())
            }
            Ok(Err(e)) => Err(SourceError::unavailable(format!(
                "{coords}: the ack was not confirmed — the browse holding it was closed ({e}); the decision stays pending and is applied on the next browse if the letter is still in the queue"
            ))),
            Err(_) => Err(SourceError::unavailable(format!(
                "{coords}: the broker did not answer within {}s after the ack; the decision stays pending and is applied on the next browse if the letter is still in the queue",
                ACK_CONFIRM_TIMEOUT.as_secs()
            ))),
        }
    }
}

impl Drop for RabbitSource {
    /// Leaving releases everything held: consumers are cancelled first, then the
    /// connection is closed, and the broker requeues the unacked deliveries as for any
    /// client that leaves (what pika does on close). Cancelling first matters: with a
    /// consumer still attached the broker answers the close only once the requeue is
    /// done (0.9-1.1 s at 100,000 held); after a cancel it answers in milliseconds and
    /// requeues after. Nothing is exposed by not waiting: the queue serves a count or a
    /// consumer after the requeue (a count taken right after exit waited for it and
    /// said 100000). Bounded, so a broker that stops answering cannot hold the exit.
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let (held, consumers) = (&self.held, &self.consumers);
        self.rt.block_on(async {
            let leave = async {
                for (queue, ch) in held {
                    if let Some(c) = consumers.get(queue) {
                        let _ = ch
                            .basic_cancel(c.tag(), BasicCancelOptions::default())
                            .await;
                    }
                }
                let _ = conn.close(200, ShortString::from("bye")).await;
            };
            let _ = tokio::time::timeout(LEAVE_TIMEOUT, leave).await;
        });
    }
}

/// Longest wait for the round trip that confirms an ack (see `ack_letter`).
const ACK_CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for the broker on exit; the socket's close releases everything anyway.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Publishes with publisher confirms and `mandatory`; confirms are awaited on the
/// runtime and reported by ticket, so several publishes can be in flight.
pub struct RabbitPublisher {
    rt: tokio::runtime::Runtime,
    _conn: Connection,
    channel: Channel,
    tx: tokio::sync::mpsc::UnboundedSender<dlq_core::ports::Outcome>,
    rx: tokio::sync::mpsc::UnboundedReceiver<dlq_core::ports::Outcome>,
}

impl RabbitPublisher {
    pub fn new(target: &AmqpTarget) -> Result<Self, SourceError> {
        let rt = runtime()?;
        let conn = connect(
            &rt,
            target,
            &format!("dlq-triage replay (pid {})", std::process::id()),
        )?;
        let channel = rt.block_on(async {
            let ch = conn
                .create_channel()
                .await
                .map_err(|e| SourceError::failed_by("opening a channel", e))?;
            ch.confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| SourceError::failed_by("confirm.select", e))?;
            Ok::<_, SourceError>(ch)
        })?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Ok(RabbitPublisher {
            rt,
            _conn: conn,
            channel,
            tx,
            rx,
        })
    }
}

/// AMQP basic properties from their names (as `to_raw` reads them). Delivery facts of
/// the DLQ copy (`exchange`, `routing_key`) are not properties and are left out.
fn properties_of(props: &[(String, String)]) -> BasicProperties {
    let mut p = BasicProperties::default().with_delivery_mode(2);
    for (k, v) in props {
        let sv = || ShortString::from(v.as_str());
        p = match k.as_str() {
            "message_id" => p.with_message_id(sv()),
            "correlation_id" => p.with_correlation_id(sv()),
            "type" => p.with_type(sv()),
            "app_id" => p.with_app_id(sv()),
            "content_type" => p.with_content_type(sv()),
            "content_encoding" => p.with_content_encoding(sv()),
            "reply_to" => p.with_reply_to(sv()),
            "timestamp" => match v.parse::<u64>() {
                Ok(t) => p.with_timestamp(t),
                Err(_) => p,
            },
            _ => p,
        };
    }
    p
}

impl Publisher for RabbitPublisher {
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError> {
        let Target::Amqp {
            exchange,
            routing_key,
        } = &msg.target
        else {
            return Err(SourceError::Unsupported(
                "a RabbitMQ publisher publishes to exchanges only".into(),
            ));
        };
        let mut props = properties_of(&msg.properties);
        if !msg.headers.is_empty() {
            props = props.with_headers(table(msg.headers.iter().map(|h| (&*h.name, &h.value))));
        }
        let where_ = if exchange.is_empty() {
            "the default exchange".to_string()
        } else {
            format!("exchange `{exchange}`")
        };
        let confirm = self
            .rt
            .block_on(self.channel.basic_publish(
                ShortString::from(exchange.as_str()),
                ShortString::from(routing_key.as_str()),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &msg.payload,
                props,
            ))
            .map_err(|e| SourceError::failed_by(format!("publishing to {where_}"), e))?;
        let (tx, location, rk) = (
            self.tx.clone(),
            format!("{exchange}/{routing_key}"),
            routing_key.clone(),
        );
        self.rt.spawn(async move {
            let outcome = match confirm.await {
                Ok(Confirmation::Ack(None)) => Ok(Confirmed { location: Some(location) }),
                Ok(Confirmation::Ack(Some(_))) => Err(SourceError::failed(format!(
                    "unroutable: no queue is bound to {where_} for routing key `{rk}` (returned by the broker)"
                ))),
                Ok(Confirmation::Nack(_)) => Err(SourceError::failed(format!("the broker refused (nack) the publish to {where_}"))),
                Ok(Confirmation::NotRequested) => Err(SourceError::failed("publisher confirms are not enabled")),
                Err(e) => Err(SourceError::failed_by(format!("publishing to {where_}"), e)),
            };
            let _ = tx.send((ticket, outcome));
        });
        Ok(())
    }

    fn confirmations(&mut self, wait: Duration) -> Vec<dlq_core::ports::Outcome> {
        let mut out = Vec::new();
        while let Ok(o) = self.rx.try_recv() {
            out.push(o);
        }
        if out.is_empty() && !wait.is_zero() {
            let rx = &mut self.rx;
            if let Ok(Some(o)) = self
                .rt
                .block_on(async { tokio::time::timeout(wait, rx.recv()).await })
            {
                out.push(o);
                while let Ok(o) = self.rx.try_recv() {
                    out.push(o);
                }
            }
        }
        out
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
