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
        let holds: Vec<(String, String, String, String, i64, Lease)> = tx
            .map(
                "SELECT r.id, r.state, r.actor, i.state, i.seq, r.lease_pid, r.lease_host, r.heartbeat_at \
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
                        r.get(4)?,
                        Lease::from_row(&r, 5)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        let now = self.lease_clock(tx)?;
        for (replay, state, actor, item, _seq, lease) in holds {
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
                    format!("replay {replay} ({})", lease.running_words(&actor, now)),
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

    /// Of replay `id`'s batch `seqs`, the letters in a state a letter is sent from
    /// (planned, in doubt, held back or refused before), and the others — unknown, or
    /// already confirmed, withdrawn — as not to be sent.
    pub(crate) fn sendable(
        &self,
        tx: &Db,
        id: &str,
        seqs: &[u32],
    ) -> Result<(Vec<u32>, Vec<Withdrawn>), JournalError> {
        let list = serde_json::to_string(seqs).unwrap_or_else(|_| "[]".into());
        let states: std::collections::HashMap<u32, String> = tx
            .map(
                "SELECT seq, state FROM replay_items WHERE replay_id = ?1 AND seq IN (SELECT value FROM json_each(?2))",
                p![id, list],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?
            .into_iter()
            .collect();
        let mut ok = Vec::new();
        let mut not = Vec::new();
        for &seq in seqs {
            match states.get(&seq).map(String::as_str) {
                Some("planned" | "sending" | "held-back" | "refused") => ok.push(seq),
                Some(state) => not.push(Withdrawn {
                    seq,
                    why: format!("already {state} in this replay: not sent again"),
                }),
                None => not.push(Withdrawn {
                    seq,
                    why: "not in this replay's plan".into(),
                }),
            }
        }
        Ok((ok, not))
    }

    /// The letters of replay `id`'s batch `seqs` that were decided since its plan —
    /// discarded, or replayed by another replay — read in the transaction that journals
    /// the batch `sending`: they are journaled `withdrawn` there instead, and the engine
    /// never publishes them.
    pub(crate) fn withdrawn_at_send(
        &self,
        tx: &Db,
        id: &str,
        seqs: &[u32],
    ) -> Result<Vec<Withdrawn>, JournalError> {
        let list = serde_json::to_string(seqs).unwrap_or_else(|_| "[]".into());
        let decided: Vec<(u32, String, String, String, String)> = tx
            .map(
                "SELECT i.seq, d.kind, d.actor, d.at, d.reason FROM replay_items i \
                 JOIN decisions d ON d.letter_id = i.letter_id AND d.binding = i.binding \
                 WHERE i.replay_id = ?1 AND i.seq IN (SELECT value FROM json_each(?2)) \
                 AND (d.kind = 'discard' OR d.reason != 'replay ' || ?1) ORDER BY i.seq, d.id",
                p![id, list],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .map_err(|e| self.err(e))?;
        let mut out: Vec<Withdrawn> = Vec::new();
        for (seq, kind, actor, at, reason) in decided {
            let standing = if kind == "discard" {
                Standing::Discarded
            } else {
                Standing::Replayed
            };
            if may_follow(standing, Step::Send) || out.last().is_some_and(|w| w.seq == seq) {
                continue;
            }
            let why = match standing {
                Standing::Discarded => {
                    format!("discarded by {actor} at {at} since the plan (reason: {reason})")
                }
                _ => format!("replayed since the plan ({reason}, confirmed at {at})"),
            };
            out.push(Withdrawn {
                seq,
                why: dlq_core::sanitize::clean(&why),
            });
        }
        Ok(out)
    }
}
