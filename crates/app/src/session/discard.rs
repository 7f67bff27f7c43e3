//! Discard: letters chosen by the front end, each recorded in the ledger with its reason
//! before the broker lets it go (RabbitMQ: the held delivery acked), and what happened
//! to each in words.

use super::*;

/// A letter to discard, as the front end knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscardTarget {
    pub letter_id: String,
    /// `LetterStore::binding` of its row.
    pub binding: String,
    /// Where it sits (`LetterStore::coords_label`), for the record.
    pub location: String,
}

impl DiscardTarget {
    /// A row of the store as a discard names it.
    pub fn of(store: &dlq_core::store::LetterStore, row: dlq_core::store::RowId) -> Option<Self> {
        let r = store.row(row)?;
        Some(DiscardTarget {
            letter_id: store.id(r).to_string(),
            binding: store.binding(row)?,
            location: store.coords_label(r),
        })
    }
}

/// What a discard did, letter by letter.
#[derive(Debug, Default)]
pub struct DiscardReport {
    /// Indexes into the targets that are now discarded in the ledger.
    pub done: Vec<usize>,
    pub removed: u64,
    pub ledger_only: u64,
    /// Recorded but not applied to the broker (applied on the next browse).
    pub pending: Vec<(String, String)>,
    /// Already decided by someone else (a concurrent run): who and when.
    pub already: Vec<String>,
    /// Refused by the ledger: a live replay holds them, a stopped one may have sent
    /// them, or they were replayed (see `journal::follows`) — who, and what frees them.
    pub refused: Vec<String>,
}

impl DiscardReport {
    /// One line for the user; `from` names the source.
    pub fn summary(&self, from: Option<&str>) -> String {
        let mut s = format!(
            "discarded {}{}: {} removed from the DLQ, {} recorded in the ledger only",
            dlq_core::words::letters(self.done.len()),
            from.map(|f| format!(" from {f}")).unwrap_or_default(),
            self.removed,
            self.ledger_only
        );
        if !self.pending.is_empty() {
            s.push_str(&format!(
                ", {} pending (applied on the next browse)",
                self.pending.len()
            ));
        }
        if !self.already.is_empty() {
            s.push_str(&format!(", {} already decided", self.already.len()));
        }
        if !self.refused.is_empty() {
            s.push_str(&format!(
                ", {} refused (a replay holds them or may have sent them)",
                self.refused.len()
            ));
        }
        s
    }
}

impl Session {
    /// Held letters by id, for the ids that have a decision (few).
    pub(super) fn held_by_id(&self) -> HashMap<String, Vec<Held>> {
        self.held.by_ids(&self.decided_ids)
    }

    /// Discard letters: each decision in the ledger first, then the broker (RabbitMQ:
    /// ack of the held delivery; elsewhere ledger-only). Needs the Discard permission
    /// (checked and audited here). `after_record` runs between ledger and broker.
    pub fn discard(
        &mut self,
        targets: &[DiscardTarget],
        reason: &str,
        after_record: &mut dyn FnMut(),
    ) -> Result<DiscardReport, SessionError> {
        self.settings
            .principal
            .require(Permission::Discard, &self.settings.source_key)?;
        let mut ledger = self.settings.principal.ledger_to_write()?;
        self.discard_gate(&mut *ledger, targets, reason)?;
        let mut report = DiscardReport::default();
        for (i, t) in targets.iter().enumerate() {
            let coords = self.held.first(&t.binding, &t.letter_id);
            let location = (!t.location.is_empty()).then_some(t.location.as_str());
            let outcome = decisions::discard(
                &mut *ledger,
                self.src.as_mut(),
                &self.settings.source_key,
                Target {
                    letter_id: &t.letter_id,
                    binding: &t.binding,
                    coords: coords.as_ref(),
                    location,
                },
                reason,
                after_record,
            );
            match outcome {
                Ok(Discarded::Removed) => report.removed += 1,
                Ok(Discarded::LedgerOnly) => report.ledger_only += 1,
                Ok(Discarded::Pending(e)) => report.pending.push((t.letter_id.clone(), e)),
                Err(e @ JournalError::AlreadyDecided { .. }) => {
                    report.already.push(e.to_string());
                    continue;
                }
                Err(e @ JournalError::Decided { .. }) => {
                    report.refused.push(e.to_string());
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            if coords.is_some() {
                self.held.settled_first(&t.binding);
            }
            report.done.push(i);
        }
        // Later browses of this session see these decisions too.
        self.load_decisions()?;
        Ok(report)
    }
}
