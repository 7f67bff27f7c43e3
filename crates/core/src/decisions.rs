//! Applying decisions: ledger first, then the broker — one implementation for every
//! front end.
//!
//! A decision binds to the exact letter it was made on, not to its id alone: the same
//! message dead-lettered again carries the same id, and acking that new copy because an
//! older one was discarded would drop a letter nobody reviewed.

use crate::journal::{Decision, Journal, JournalError};
use crate::model::Coords;
use crate::ports::{DlqSource, Settled};

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
    /// The exact letter (see [`binding`]).
    pub binding: &'a str,
    /// What the broker needs to settle (RabbitMQ); `None` where nothing can be settled.
    pub coords: Option<&'a Coords>,
    /// Where it sits, for the record, when there are no `coords` (Kafka `topic/p/o`).
    pub location: Option<&'a str>,
}

pub use crate::binding::{binding, content_fp, content_label};

/// Record the decision durably, then settle on the broker, then mark it applied.
/// `after_record` runs between the two (tests use it to crash exactly there).
pub fn discard(
    ledger: &mut dyn Journal,
    src: &mut dyn DlqSource,
    source_key: &str,
    target: Target<'_>,
    reason: &str,
    after_record: &mut dyn FnMut(),
) -> Result<Discarded, JournalError> {
    let Target {
        letter_id,
        binding,
        coords,
        location,
    } = target;
    let recorded = coords
        .map(ToString::to_string)
        .or_else(|| location.map(str::to_string));
    let decision =
        ledger.record_discard(source_key, letter_id, binding, recorded.as_deref(), reason)?;
    after_record();
    let settled = match coords {
        Some(c) => src.settle(c),
        None => Ok(Settled::LedgerOnly),
    };
    match settled {
        Ok(s) => {
            let (how, out) = match s {
                Settled::Removed => ("acked", Discarded::Removed),
                Settled::LedgerOnly => ("ledger-only", Discarded::LedgerOnly),
            };
            ledger.mark_applied(&decision, how)?;
            Ok(out)
        }
        Err(e) => Ok(Discarded::Pending(e.to_string())),
    }
}

/// A letter this browse holds that a pending decision may apply to.
#[derive(Debug, Clone)]
pub struct Held {
    pub coords: Coords,
    pub binding: String,
}

/// Apply decisions recorded but never confirmed (a crash, a dropped connection) to the
/// exact letters they were made on, if this browse holds them — each once, each audited.
/// A held letter with the same id but another binding is left alone and reported.
pub fn reconcile(
    ledger: &mut dyn Journal,
    src: &mut dyn DlqSource,
    source_key: &str,
    held_of: &dyn Fn(&str) -> Vec<Held>,
) -> Result<Vec<String>, JournalError> {
    let mut notes = Vec::new();
    for d in ledger.pending(source_key)? {
        let held = held_of(&d.letter_id);
        let (same, other): (Vec<&Held>, Vec<&Held>) = held
            .iter()
            .partition(|h| Some(h.binding.as_str()) == d.binding.as_deref());
        if same.is_empty() && !other.is_empty() {
            notes.push(format!(
                "note: a recorded {} of {} was not applied: the DLQ holds {} letter(s) with that id that are not the one decided on (dead-lettered again?); they stay in the DLQ",
                d.kind,
                d.letter_id,
                other.len()
            ));
        }
        if let Some(note) = apply_pending(ledger, src, &d, &same)? {
            notes.push(note);
        }
    }
    Ok(notes)
}

fn apply_pending(
    ledger: &mut dyn Journal,
    src: &mut dyn DlqSource,
    d: &Decision,
    held: &[&Held],
) -> Result<Option<String>, JournalError> {
    let mut last_err = None;
    for h in held {
        match src.settle(&h.coords) {
            Ok(_) => {
                ledger.mark_applied(d, "reconciled")?;
                return Ok(Some(format!(
                    "reconciled: the {} of {} recorded by {} at {} was applied to the broker now ({})",
                    d.kind,
                    d.letter_id, d.actor, d.at, h.coords
                )));
            }
            Err(e) => last_err = Some(format!("{}: {e}", h.coords)),
        }
    }
    Ok(last_err.map(|e| {
        format!(
            "warning: a recorded {} of {} could not be applied yet ({e})",
            d.kind, d.letter_id
        )
    }))
}

/// Letters still open (or failed again) in `store` that one of `decided` (by binding)
/// covers take the state it gives them: how a view follows decisions recorded after it
/// was loaded (another engineer's, on a team ledger). Returns who decided, one entry per
/// letter changed.
pub fn apply_to_store(
    store: &mut crate::store::LetterStore,
    decided: &std::collections::HashMap<&str, &Decision>,
) -> Vec<String> {
    use crate::model::TriageState as T;
    if decided.is_empty() {
        return Vec::new();
    }
    let hits: Vec<(crate::store::RowId, T, String)> = store
        .rows()
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.state, T::Open | T::FailedAgain))
        .filter_map(|(i, _)| {
            let row = crate::store::RowId::try_from(i).ok()?;
            let d = decided.get(store.binding(row)?.as_str())?;
            let state = crate::prepared::LetterState::of(Some(d)).state;
            Some((row, state, d.actor.clone()))
        })
        .collect();
    hits.into_iter()
        .map(|(row, state, actor)| {
            store.set_state(row, state);
            actor
        })
        .collect()
}
