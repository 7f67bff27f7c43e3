//! One decision per letter on the file ledger: what the ledger holds of a letter, read
//! inside the write transaction that records the next decision, judged by core's table
//! (`dlq_core::journal::follows`). The team ledger judges by the same rows on the server
//! (`dlq_private.may_follow`, written from the table by the migration).
//!
//! A letter is its id and its binding (the exact record), **whatever source string named
//! it**: `kafka://127.0.0.1:9092/payments.dlq`, `kafka://localhost:9092/payments.dlq,
//! invoices.dlq` and a config alias are three keys for one letter, and a decision under
//! one binds the others. (Two clusters with a letter of the same id at the same topic,
//! partition and offset would bind each other too: refused, never acted on twice.)

use super::Ledger;
use crate::db::Db;
use crate::lease::Lease;
use crate::p;
use dlq_core::journal::follows::{may_follow, Conflict, Standing, Step};
use dlq_core::journal::{JournalError, NewRevision, Withdrawn};

impl Ledger {
    /// Why letter (`letter_id`, `binding`; any binding of the id when `None`) may not take `step` now, if it may
    /// not: a live replay holds it, a stopped one may have sent it, or it was replayed
    /// (a discard that comes second is `AlreadyDecided`, said by the caller). Read in the
    /// caller's write transaction, so nothing can come between the check and the record.
    pub(crate) fn conflict(
        &self,
        tx: &Db,
        letter_id: &str,
        binding: Option<&str>,
        step: Step,
    ) -> Result<Option<Conflict>, JournalError> {
        let holds: Vec<(String, String, String, String, Lease)> = tx
            .map(
                "SELECT r.id, r.state, r.actor, i.state, r.lease_pid, r.lease_host, r.heartbeat_at \
                 FROM replay_items i JOIN replays r ON r.id = i.replay_id \
                 WHERE i.letter_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR i.binding = CAST(?2 AS TEXT)) \
                 AND i.state IN ('planned', 'sending')",
                p![letter_id, binding],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        Lease::from_row(&r, 4)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        let now = self.lease_clock(tx)?;
        for (replay, state, actor, item, lease) in holds {
            let live = state == "running" && self.alive(tx, &replay, &lease)?;
            // In doubt while a resume can still find out (Kafka reads its target back);
            // once its replay is abandoned or completed without finding out (RabbitMQ's
            // may-have-been-sent), the letter is the operator's to decide again.
            let resumable =
                dlq_core::journal::ReplayState::parse(&state).is_some_and(|s| s.resumable());
            let standing = match (live, item.as_str()) {
                (true, _) => Standing::Held,
                (false, "sending") if resumable => Standing::InDoubt,
                // Planned in a replay that stopped: its resume withdraws it.
                _ => continue,
            };
            if may_follow(standing, step) {
                continue;
            }
            let (by, then) = if live {
                (
                    format!(
                        "replay {replay} ({})",
                        lease.running_words(&actor, Some(now))
                    ),
                    "stop it first (K in its TUI, Ctrl-C in its CLI) or wait for it to end; \
                     the letters it has not sent go back to open"
                        .to_string(),
                )
            } else {
                (
                    format!("replay {replay} by {actor}, {state}, had it `sending` when it stopped"),
                    format!(
                        "`dlq-triage replay SOURCE --resume {replay}` finds out whether it was sent \
                         (Kafka reads its target back; RabbitMQ lists it as may-have-been-sent)"
                    ),
                )
            };
            return Ok(Some(Conflict {
                letter_id: letter_id.to_string(),
                standing,
                by,
                then,
            }));
        }
        if let (Step::Discard, Some(binding)) = (step, binding) {
            let replayed: Option<(String, String)> = tx
                .opt(
                    "SELECT reason, at FROM decisions WHERE letter_id = ?1 AND binding = ?2 AND kind = 'replay' LIMIT 1",
                    p![letter_id, binding],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| self.err(e))?;
            if let Some((reason, at)) = replayed.filter(|_| !may_follow(Standing::Replayed, step)) {
                return Ok(Some(Conflict {
                    letter_id: letter_id.to_string(),
                    standing: Standing::Replayed,
                    by: format!("{reason}, confirmed by the broker at {at}"),
                    then: "it is in its target already; nothing to discard".into(),
                }));
            }
        }
        Ok(None)
    }

    /// Why a discard of (`letter_id`, `binding`) may not be recorded: discarded already,
    /// under any source string (`AlreadyDecided`, naming who first), or what `conflict`
    /// finds (`Decided`). The file ledger's check, and the team ledger client's own
    /// before the server's.
    pub(crate) fn refuse_discard(
        &self,
        tx: &Db,
        letter_id: &str,
        binding: &str,
    ) -> Result<(), JournalError> {
        let first: Option<(String, String, String)> = tx
            .opt(
                "SELECT actor, at, reason FROM decisions WHERE letter_id = ?1 AND binding = ?2 AND kind = 'discard' LIMIT 1",
                p![letter_id, binding],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.err(e))?;
        if let Some((actor, at, reason)) = first {
            return Err(JournalError::AlreadyDecided {
                letter_id: letter_id.into(),
                kind: dlq_core::journal::DecisionKind::Discard,
                actor,
                at,
                reason,
            });
        }
        match self.conflict(tx, letter_id, Some(binding), Step::Discard)? {
            Some(c) => Err(JournalError::Decided { conflicts: vec![c] }),
            None => Ok(()),
        }
    }

    /// A batch of revisions is recorded whole or not at all: `Decided`, naming every
    /// letter a live replay holds or a stopped one may have sent (it would send what its
    /// plan chose, not the new revision).
    pub(crate) fn refuse_revisions(
        &self,
        tx: &Db,
        batch: &[NewRevision],
    ) -> Result<(), JournalError> {
        let conflicts = batch
            .iter()
            .map(|rev| self.conflict(tx, &rev.letter_id, None, Step::Revise))
            .filter_map(Result::transpose)
            .collect::<Result<Vec<_>, _>>()?;
        if conflicts.is_empty() {
            Ok(())
        } else {
            Err(JournalError::Decided { conflicts })
        }
    }

    /// Replay `id`'s batch `seqs` screened in one read, in the transaction that journals
    /// it `sending`: the seqs to send; those withdrawn — discarded, or replayed by another
    /// replay, since the plan (journaled `withdrawn` there, never published); and those
    /// skipped — unknown, or no longer in a state a letter is sent from (not journaled).
    pub(crate) fn screen_batch(
        &self,
        tx: &Db,
        id: &str,
        seqs: &[u32],
    ) -> Result<Screened, JournalError> {
        type Rowed = (
            u32,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let list = serde_json::to_string(seqs).unwrap_or_else(|_| "[]".into());
        let rows: Vec<Rowed> = tx
            .map(
                "SELECT i.seq, i.state, d.kind, d.actor, d.at, d.reason FROM replay_items i \
                 LEFT JOIN decisions d ON d.letter_id = i.letter_id AND d.binding = i.binding \
                 AND (d.kind = 'discard' OR d.reason != 'replay ' || ?1) \
                 WHERE i.replay_id = ?1 AND i.seq IN (SELECT value FROM json_each(?2)) ORDER BY i.seq, d.id",
                p![id, list],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .map_err(|e| self.err(e))?;
        // Each seq's fate, from its first row: its state first, then its letter's first
        // decision (a letter with none is sent).
        let mut fate: std::collections::HashMap<u32, Fate> = std::collections::HashMap::new();
        for (seq, state, kind, actor, at, reason) in rows {
            let f = if !matches!(
                state.as_str(),
                "planned" | "sending" | "held-back" | "refused"
            ) {
                Fate::Skip(format!("already {state} in this replay: not sent again"))
            } else {
                match kind.as_deref() {
                    None => Fate::Send,
                    Some("discard") if !may_follow(Standing::Discarded, Step::Send) => {
                        Fate::Withdraw(format!(
                            "discarded by {} at {} since the plan (reason: {})",
                            actor.as_deref().unwrap_or("?"),
                            at.as_deref().unwrap_or("?"),
                            reason.as_deref().unwrap_or("")
                        ))
                    }
                    Some(k) if k != "discard" && !may_follow(Standing::Replayed, Step::Send) => {
                        Fate::Withdraw(format!(
                            "replayed since the plan ({}, confirmed at {})",
                            reason.as_deref().unwrap_or("?"),
                            at.as_deref().unwrap_or("?")
                        ))
                    }
                    Some(_) => Fate::Send,
                }
            };
            fate.entry(seq).or_insert(f);
        }
        let (mut sent, mut withdrawn, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for &seq in seqs {
            let w = |why: String| Withdrawn {
                seq,
                why: dlq_core::sanitize::clean(&why),
            };
            match fate.remove(&seq) {
                Some(Fate::Send) => sent.push(seq),
                Some(Fate::Withdraw(why)) => withdrawn.push(w(why)),
                Some(Fate::Skip(why)) => skipped.push(w(why)),
                None => skipped.push(w("not in this replay's plan".into())),
            }
        }
        Ok(Screened {
            sent,
            withdrawn,
            skipped,
        })
    }
}

/// A batch about to be journaled `sending`, screened (see `Ledger::screen_batch`).
pub(crate) struct Screened {
    pub sent: Vec<u32>,
    pub withdrawn: Vec<Withdrawn>,
    pub skipped: Vec<Withdrawn>,
}

/// What becomes of one letter of a batch about to be journaled `sending`.
enum Fate {
    Send,
    /// Decided since the plan: journaled `withdrawn`, never published.
    Withdraw(String),
    /// Not in a state a letter is sent from (or not in the plan): neither.
    Skip(String),
}
