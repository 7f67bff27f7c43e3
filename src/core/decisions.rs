//! Applying decisions: ledger first, then the broker — one implementation for the CLI and
//! the TUI.

use crate::core::ledger::{Ledger, LedgerError};
use crate::core::model::Coords;
use crate::core::ports::{DlqSource, Settled};

/// What became of one discard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discarded {
    /// Recorded, and the broker removed the letter.
    Removed,
    /// Recorded; the broker cannot delete one record (Kafka, streams, files).
    LedgerOnly,
    /// Recorded, but the broker did not confirm: applied on the next browse.
    Pending(String),
}

/// Where a letter is, for settling and for the record.
pub struct Target<'a> {
    pub letter_id: &'a str,
    /// What the broker needs to settle (RabbitMQ); `None` where nothing can be settled.
    pub coords: Option<&'a Coords>,
    /// Where it sits, for the record, when there are no `coords` (Kafka `topic/p/o`).
    pub location: Option<&'a str>,
}

/// Record the decision durably, then settle on the broker, then mark it applied.
/// `after_record` runs between the two (tests use it to crash exactly there).
pub fn discard(
    ledger: &mut Ledger,
    src: &mut dyn DlqSource,
    source_key: &str,
    target: Target<'_>,
    reason: &str,
    after_record: &mut dyn FnMut(),
) -> Result<Discarded, LedgerError> {
    let Target {
        letter_id,
        coords,
        location,
    } = target;
    let recorded = coords
        .map(ToString::to_string)
        .or_else(|| location.map(str::to_string));
    let decision = ledger.record_discard(source_key, letter_id, recorded.as_deref(), reason)?;
    after_record();
    let settled = match coords {
        Some(c) => src.settle(c),
        None => Ok(Settled::LedgerOnly),
    };
    match settled {
        Ok(s) => {
            ledger.mark_applied(decision.id)?;
            Ok(match s {
                Settled::Removed => Discarded::Removed,
                Settled::LedgerOnly => Discarded::LedgerOnly,
            })
        }
        Err(e) => Ok(Discarded::Pending(e.to_string())),
    }
}

/// Apply decisions recorded but never confirmed (a crash, a dropped connection) to the
/// letters this browse holds — each once. Returns a line per attempt for the user.
pub fn reconcile(
    ledger: &mut Ledger,
    src: &mut dyn DlqSource,
    source_key: &str,
    coords_of: &dyn Fn(&str) -> Vec<Coords>,
) -> Result<Vec<String>, LedgerError> {
    let mut notes = Vec::new();
    for d in ledger.pending(source_key)? {
        for c in coords_of(&d.letter_id) {
            match src.settle(&c) {
                Ok(_) => {
                    ledger.mark_applied(d.id)?;
                    notes.push(format!(
                        "reconciled: a recorded discard ({c}) was applied to the broker now"
                    ));
                    break;
                }
                Err(e) => notes.push(format!(
                    "warning: a recorded discard could not be applied yet ({c}): {e}"
                )),
            }
        }
    }
    Ok(notes)
}
