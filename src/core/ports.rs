//! The traits broker adapters implement. Core and the front ends only see these.

use crate::core::model::{Coords, Header, RawLetter};
use std::ops::ControlFlow;

/// The underlying error a broker client reported.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

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
}

impl SourceError {
    pub fn failed(message: impl Into<String>) -> Self {
        SourceError::Failed {
            message: message.into(),
            cause: None,
        }
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        SourceError::Unavailable {
            message: message.into(),
            cause: None,
        }
    }

    /// `context: cause`, keeping the cause.
    pub(crate) fn failed_by(
        context: impl std::fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError::Failed {
            message: format!("{context}: {cause}"),
            cause: Some(Box::new(cause)),
        }
    }

    /// `context: cause`, keeping the cause.
    pub(crate) fn unavailable_by(
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
    Letter(RawLetter),
    /// A record that could not be decoded, with where it was; the scan goes on.
    Problem {
        location: String,
        message: String,
    },
    /// Progress estimate; `total` is a guess (watermarks, file size).
    Progress {
        done: u64,
        total: Option<u64>,
    },
    /// Not everything was browsed (a `--max-letters` cap, or the broker went quiet
    /// before the count it gave was held): `browsed` of `total` in `location`.
    Partial {
        location: String,
        browsed: u64,
        total: u64,
    },
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

    /// One letter's full bytes by its coordinates (payloads are not kept after a scan).
    fn fetch(&mut self, coords: &Coords) -> Result<RawLetter, SourceError> {
        Err(SourceError::Unsupported(format!(
            "{} cannot fetch {coords}",
            self.info().label
        )))
    }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Kafka {
        topic: String,
    },
    Amqp {
        exchange: String,
        routing_key: String,
    },
}

/// A message to publish: key, headers and payload exactly as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub target: Target,
    pub key: Option<Vec<u8>>,
    pub headers: Vec<Header>,
    pub payload: Vec<u8>,
}

/// The broker's confirmation of one publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// Where it landed (`topic/partition/offset`), when the broker says.
    pub location: Option<String>,
}

/// Publishes and waits for the broker's confirmation: a message counts as published only
/// once confirmed (Kafka `acks=all`, RabbitMQ publisher confirms + mandatory).
pub trait Publisher {
    fn publish(&mut self, msg: &Outgoing) -> Result<Confirmed, SourceError>;
}
