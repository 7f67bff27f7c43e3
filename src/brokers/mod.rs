//! Adapters from real sources to core's ports.

pub mod file;

use crate::core::ports::{DlqSource, SourceError};
use crate::core::source::SourceRef;

/// Open a source for scanning.
pub fn open(source: &SourceRef) -> Result<Box<dyn DlqSource>, SourceError> {
    match source {
        SourceRef::File { path } => Ok(Box::new(file::FileSource::open(path)?)),
        other => Err(SourceError::Unsupported(format!(
            "{} sources are not supported by this build yet; use an exported .ndjson dump for now",
            other.kind()
        ))),
    }
}
