//! The traits broker adapters implement. Core and the front ends only see these.

use crate::model::{Coords, Header, RawLetter};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// The underlying error a broker client reported.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong with a source. The message says it in the user's terms (and already
/// includes the cause's text, so it can be shown alone); `source()` keeps the client's
/// own error for logs and for code that needs to tell causes apart.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source kind (or this operation on it) is not supported by this build.
    #[error("{0}")]
    Unsupported(String),
    /// Could not connect, authenticate, or find the topic/queue/file/letter.
    #[error("{message}")]
    Unavailable {
        message: String,
        #[source]
        cause: Option<Cause>,
    },
    #[error("{message}")]
    Failed {
        message: String,
        #[source]
        cause: Option<Cause>,
    },
    /// A publish whose outcome is unknown: it may have been written (a delivery timeout,
    /// a connection lost before the confirm). Never a refusal: the letter stays in doubt.
    #[error("{0}")]
    InDoubt(String),
}

impl SourceError {
    pub fn failed(message: impl Into<String>) -> Self {
        SourceError::Failed {
            message: message.into(),
            cause: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        SourceError::Unavailable {
            message: message.into(),
            cause: None,
        }
    }

    /// `context: cause`, keeping the cause.
    pub fn failed_by(
        context: impl std::fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError::Failed {
            message: format!("{context}: {cause}"),
            cause: Some(Box::new(cause)),
        }
    }

    /// `context: cause`, keeping the cause.
    pub fn unavailable_by(
        context: impl std::fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError::Unavailable {
            message: format!("{context}: {cause}"),
            cause: Some(Box::new(cause)),
        }
    }
}

/// What a scan reports, in order.
#[derive(Debug)]
pub enum ScanEvent {
    /// Letters in the order the source read them, in the batches it read them in
    /// (Kafka: one poll batch; RabbitMQ: what arrived together): the session prepares a
    /// batch as it comes instead of collecting letters one call at a time.
    Letters(Vec<RawLetter>),
    /// A record that could not be decoded, with where it was; the scan goes on.
    Problem { location: String, message: String },
    /// Progress estimate; `total` is a guess (watermarks, file size).
    Progress { done: u64, total: Option<u64> },
    /// Not everything was browsed (a `--max-letters` cap, messages other consumers
    /// hold, or the broker went quiet before the count it gave was held): `browsed` of
    /// `total` in `location`, and `why`, in words.
    Partial {
        location: String,
        browsed: u64,
        total: u64,
        why: String,
    },
    /// Something the operator must know about this browse that is no unreadable
    /// record (another consumer attached, a quorum queue's delivery limit near).
    Notice { location: String, message: String },
}

/// What browsing does to the broker, stated in every front end (README: "What browsing
/// does to the broker").
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub label: String,
    pub browse_effect: String,
}

/// A DLQ that can be scanned from the beginning.
pub trait DlqSource {
    fn info(&self) -> SourceInfo;

    /// Stream every letter to `sink` until the initial scan is complete (or the sink
    /// breaks). Problems with single records are reported as events, not errors.
    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError>;

    /// Whether the front end reads the letters' payloads (`summary` groups from the
    /// headers alone): a source that would fetch a payload from elsewhere — a Kafka
    /// share group's value-less letter, from its source record — may skip that.
    /// Payloads are wanted unless told otherwise.
    fn want_payloads(&mut self, _wanted: bool) {}

    /// After `scan`, stream letters that arrive from now on until the sink breaks.
    fn tail(
        &mut self,
        _sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        Err(SourceError::Unsupported(format!(
            "{} cannot be tailed",
            self.info().label
        )))
    }

    /// Remove one letter from the DLQ where the broker can (RabbitMQ: ack the held
    /// delivery). Kafka, files and streams cannot delete one message: the decision lives
    /// in the ledger only. Call only after the ledger recorded the decision.
    fn settle(&mut self, _coords: &Coords) -> Result<Settled, SourceError> {
        Ok(Settled::LedgerOnly)
    }

    /// A publisher to this source's broker (same address and credentials) and, on Kafka,
    /// a reader of origin partitions: what a replay needs. Files cannot be replayed.
    fn replay_ports(&self) -> Result<ReplayPorts, SourceError> {
        Err(SourceError::Unsupported(format!(
            "{} cannot be replayed: replay from the broker the letters are in",
            self.info().label
        )))
    }

    /// A reader of the origin topics (Kafka), for a baseline of healthy records around
    /// the letters that failed (`why`). None: the source has none.
    fn origin_log(&self) -> Option<Box<dyn OriginLog + Send>> {
        None
    }

    /// One letter's full bytes by its coordinates (payloads are not kept after a scan).
    /// How long the broker keeps each container's letters (`retention.ms`, a message
    /// TTL), read once per browse. Empty: the source has no such rule (a file).
    fn retention(&mut self) -> Vec<(String, crate::retention::Retention)> {
        Vec::new()
    }

    /// A reader of the dead letters the broker holds outside this DLQ on their way to
    /// it (RabbitMQ quorum queues with at-least-once dead-lettering), asked again on
    /// every refresh. None: the broker has no such place, or it cannot be read.
    fn backlog(&self) -> Option<Box<dyn Backlog>> {
        None
    }

    fn fetch(&mut self, coords: &Coords) -> Result<RawLetter, SourceError> {
        Err(SourceError::Unsupported(format!(
            "{} cannot fetch {coords}",
            self.info().label
        )))
    }
}

/// Dead letters on their way to the DLQ but held elsewhere (see `awaiting`).
pub trait Backlog: Send {
    /// What each source queue holds for this DLQ now.
    fn awaiting(&mut self) -> Result<Vec<crate::awaiting::Awaiting>, SourceError>;
}

/// What a replay publishes and reads with.
pub struct ReplayPorts {
    pub publisher: Box<dyn Publisher + Send>,
    /// Kafka: the origin partitions, for the stale-key check.
    pub origin_log: Option<Box<dyn OriginLog + Send>>,
    /// Who a target reaches (consumer groups, bound queues), for the dry-run.
    pub reach: Option<Box<dyn Reach>>,
    /// The broker's kind: targets must be on it.
    pub kafka: bool,
}

/// What settling did to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Gone from the DLQ (acked).
    Removed,
    /// The broker keeps it; the ledger's decision is what counts.
    LedgerOnly,
}

/// Where a message is published.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Kafka {
        topic: String,
    },
    Amqp {
        exchange: String,
        routing_key: String,
    },
}

/// A message to publish: key, headers, AMQP properties and payload exactly as given.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outgoing {
    pub target: Target,
    pub key: Option<Vec<u8>>,
    pub headers: Vec<Header>,
    /// AMQP basic properties by name (`message_id`, `correlation_id`, `content_type`,
    /// `type`, `app_id`, `timestamp`); Kafka has none and ignores them.
    pub properties: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

impl Default for Target {
    fn default() -> Self {
        Target::Kafka {
            topic: String::new(),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Kafka { topic } => write!(f, "kafka topic {topic}"),
            Target::Amqp {
                exchange,
                routing_key,
            } if exchange.is_empty() => write!(f, "amqp default exchange, rk {routing_key}"),
            Target::Amqp {
                exchange,
                routing_key,
            } => write!(f, "amqp exchange {exchange}, rk {routing_key}"),
        }
    }
}

/// The broker's confirmation of one publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// Where it landed (`topic/partition/offset`), when the broker says.
    pub location: Option<String>,
}

/// One publish's outcome, by the ticket it was sent with.
pub type Outcome = (u64, Result<Confirmed, SourceError>);

/// Publishes and reports the broker's confirmation: a message counts as published only
/// once confirmed (Kafka: its transaction committed, `acks=all`; RabbitMQ: publisher
/// confirms + `mandatory`). Sends are pipelined — the replay engine keeps several in
/// flight and sets the pace — so a confirmation round trip does not cap the rate.
pub trait Publisher {
    /// Start one publish and return; its outcome arrives from `confirmations` under
    /// `ticket`. An error here means it was not sent at all.
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError>;

    /// Outcomes that have arrived; waits up to `wait` when none is ready yet.
    fn confirmations(&mut self, wait: Duration) -> Vec<Outcome>;

    /// Whether letters handed over in order are written in that order or not at all
    /// (Kafka: the letters between two `confirmations` are one transaction on one
    /// partition per key). Then a key's next letter may go before the previous one is
    /// confirmed — the engine otherwise waits for each confirm, one letter per key in
    /// flight, so that a refused letter is never overtaken by a later one of its key.
    fn keeps_key_order(&self) -> bool {
        false
    }

    /// Take replay `replay_id`'s identity on the broker, after its lease and before
    /// anything is read back or sent for it. On Kafka: the transactional producer
    /// `dlq-triage-replay-<id>`, whose initialisation has the broker bump the epoch,
    /// abort what an earlier holder (frozen, then taken over) had open and fence that
    /// holder's next send or commit. Brokers without such a fence (RabbitMQ) do nothing.
    fn claim(&mut self, _replay_id: &str) -> Result<(), SourceError> {
        Ok(())
    }

    /// Fence replay `replay_id`'s producers without sending for it: done before a plan
    /// reads back what a stopped replay had in doubt, so nothing it still had open can
    /// be committed after the read.
    fn fence(&mut self, _replay_id: &str) -> Result<(), SourceError> {
        Ok(())
    }

    /// Publish one message and wait for its outcome.
    fn publish(&mut self, msg: &Outgoing) -> Result<Confirmed, SourceError> {
        const ONE: u64 = u64::MAX;
        self.send(ONE, msg)?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            for (ticket, outcome) in self.confirmations(Duration::from_millis(50)) {
                if ticket == ONE {
                    return outcome;
                }
            }
        }
        Err(SourceError::failed(
            "the broker did not confirm the publish within 120 s",
        ))
    }
}

/// Reads an origin Kafka partition to tell whether a key has moved on (stale-key check
/// before a replay).
pub trait OriginLog {
    /// From `from` (inclusive), the newest offset of each of `keys` in `topic`/`partition`
    /// other than the offsets in `ignore`, reading at most `budget` records. `complete` is false when the budget ran out
    /// before the partition's end.
    fn newest_by_key(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
        keys: &std::collections::HashSet<Vec<u8>>,
        ignore: &std::collections::HashSet<i64>,
        budget: u64,
    ) -> Result<KeyScan, SourceError>;

    /// The consumer groups that read `topic` (committed offsets on it), looked up among
    /// the groups the broker lists and `named` (the consumers the letters name), without
    /// joining any. Default: the source cannot tell.
    fn readers(&mut self, topic: &str, named: &[String]) -> Result<Readers, SourceError> {
        let _ = named;
        Err(SourceError::Unsupported(format!(
            "who reads {topic} is not known to this source"
        )))
    }

    /// Records of `topic`/`partition` near `offsets` (within `span` of one), the offsets
    /// themselves left out, at most `budget`: a baseline of what the origin topic held
    /// around the letters that failed. Read by assignment with the adapter's throwaway
    /// group — nothing is committed, no group is joined. Default: cannot.
    fn around(
        &mut self,
        topic: &str,
        partition: i32,
        offsets: &[i64],
        span: i64,
        budget: usize,
    ) -> Result<Vec<RawLetter>, SourceError> {
        let _ = (partition, offsets, span, budget);
        Err(SourceError::Unsupported(format!(
            "{topic} cannot be read around offsets by this source"
        )))
    }

    /// Where each partition of `topic` ends now (partition, next offset): recorded with
    /// a replay's plan, so that its copies can be read back from there.
    fn ends(&mut self, topic: &str) -> Result<Vec<(i32, i64)>, SourceError>;

    /// Every record of `topic` stamped `x-dlq-replay-id: replay_id`, each partition read
    /// from `from` (its end when the replay was planned; unknown: the beginning) to its
    /// end: how a resume tells whether a letter in flight when a replay stopped reached
    /// the broker (never by guessing).
    fn replayed(
        &mut self,
        topic: &str,
        from: &std::collections::HashMap<i32, i64>,
        replay_id: &str,
    ) -> Result<Vec<Landed>, SourceError>;
}

/// Who reads a topic: the consumer groups with committed offsets on it, and how far
/// behind each is (what a replay to the topic reaches, and how soon).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readers {
    /// (group, lag in records across the topic's partitions; None when a partition's end
    /// was not read).
    pub groups: Vec<(String, Option<i64>)>,
    /// The broker listed its groups (ListGroups). False: only the groups the letters
    /// name were checked — others may read the topic too.
    pub listed: bool,
    /// Groups checked, of those listed and named (a cluster with more is checked up to a
    /// bound, said by the caller).
    pub checked: usize,
    pub unchecked: usize,
}

/// What a replay to a target reaches beyond the consumer that failed its letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reached {
    /// Kafka: the consumer groups reading the topic.
    Groups(Readers),
    /// RabbitMQ: the queues the exchange routes the routing key to (and exchanges bound
    /// to it, not followed), by the exchange's type.
    Queues {
        exchange_type: String,
        queues: Vec<String>,
        exchanges: Vec<String>,
    },
    /// The target does not exist (Kafka: no such topic): a replay would create it where
    /// the broker auto-creates topics, with the broker's defaults — never unasked.
    Missing,
}

/// Looks up who a target reaches (the broker's own view: group offsets, bindings).
pub trait Reach: Send {
    /// `named`: the consumers the letters name (checked where the broker cannot list).
    fn reaches(&mut self, target: &Target, named: &[String]) -> Result<Reached, SourceError>;
}

/// A replayed record found in its target: where it was replayed from (its DLQ
/// location, `x-dlq-replayed-from`) and where it landed (`topic/partition/offset`).
pub type Landed = (String, String);

/// What an [`OriginLog`] read found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyScan {
    pub newest: std::collections::HashMap<Vec<u8>, i64>,
    pub complete: bool,
}
