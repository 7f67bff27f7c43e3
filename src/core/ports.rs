//! The traits broker adapters implement. Core and the front ends only see these.

use crate::core::model::RawLetter;
use std::ops::ControlFlow;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source kind is recognised but this build cannot read it yet.
    #[error("{0}")]
    Unsupported(String),
    /// Could not connect, authenticate, or find the topic/queue/file.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
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
}

/// What browsing does to the broker, stated in every front end (DESIGN §11).
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
}
