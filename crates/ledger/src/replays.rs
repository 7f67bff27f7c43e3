//! The replay journal: a replay's plan, each letter's state and the stop reason, every
//! step in the audit chain. A letter is `planned`, then `sending` (written before the
//! publish starts), then `confirmed` (the broker confirmed it: a `replay` decision binds
//! the DLQ copy) and `settled` (RabbitMQ acked it; Kafka: in the ledger at once), or
//! `refused` (the broker would not take it: the DLQ copy stays), `held-back` (an earlier
//! letter of its key was not replayed) or `failed-again` (it came back to the DLQ).

use super::{Ledger, RowProblem};
use crate::db::{DbError, Row};
use crate::p;
use dlq_core::journal::{
    AuditEntry, ConfirmedLetter, Decision, DecisionKind, ItemState, JournalError, LatestRevision,
    PlannedItem, ReplayItemRow, ReplayRow, ReplayState, Withdrawn,
};
use std::collections::HashMap;

impl Ledger {
    /// Record a replay's start: its row, every planned letter, the `replay-start` entry
    /// and this process's lease, in one transaction — after checking, in the same
    /// transaction, that no other live replay holds any of its letters (`Claimed`,
    /// nothing written): two replays of one group started at once send each letter once.
    pub fn replay_start(
        &mut self,
        id: &str,
        source: &str,
        target: &str,
        detail: &serde_json::Value,
        items: &[PlannedItem<'_>],
    ) -> Result<AuditEntry, JournalError> {
        if self.db.is_pg() {
            return self.pg_replay_start(id, source, target, detail, items);
        }
        self.write(|l, tx| {
            let letters = items
                .iter()
                .map(|(_, id, binding, _)| (id.to_string(), binding.to_string()));
            l.refuse_taken(tx, id, letters, detail)?;
            for (seq, letter_id, binding, location) in items {
                tx.execute(
                    "INSERT INTO replay_items (replay_id, seq, letter_id, binding, location, state) VALUES (?1, ?2, ?3, ?4, ?5, 'planned')",
                    p![id, seq, letter_id, binding, location],
                )
                .map_err(|e| l.err(e))?;
            }
            // The planned letters are in the chain by their digest: `audit verify` names
            // a row added, removed or re-addressed later.
            let entry = l
                .audit_in(tx, "replay-start", id, &with_digest(l, tx, id, detail)?)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "INSERT INTO replays (id, source, target, actor, started_at, state, detail) VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6)",
                p![id, source, target, l.actor, entry.at, detail.to_string()],
            )
            .map_err(|e| l.err(e))?;
            l.take_lease(tx, id)?;
            Ok(entry)
        })
    }

    /// `--resume`: the replay runs again (audited); letters new to it are added. Its
    /// lease is taken first (`LeaseHeld`, nothing written, while a live process sends
    /// it), and none of the letters it would send may be held by another live replay.
    pub fn replay_resume(
        &mut self,
        id: &str,
        detail: &serde_json::Value,
        added: &[PlannedItem<'_>],
    ) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return self.pg_replay_resume(id, detail, added);
        }
        self.write(|l, tx| {
            l.take_for_resume(tx, id, detail, added)?;
            for (seq, letter_id, binding, location) in added {
                tx.execute(
                    "INSERT INTO replay_items (replay_id, seq, letter_id, binding, location, state) VALUES (?1, ?2, ?3, ?4, ?5, 'planned') ON CONFLICT DO NOTHING",
                    p![id, seq, letter_id, binding, location],
                )
                .map_err(|e| l.err(e))?;
            }
            l.audit_in(tx, "replay-resume", id, &with_digest(l, tx, id, detail)?)
                .map_err(|e| l.err(e))?;
            // The pace may have been changed for the rest of the run: keep the latest.
            let old: String = tx
                .one("SELECT detail FROM replays WHERE id = ?1", p![id], |r| {
                    r.get(0)
                })
                .map_err(|e| l.err(e))?;
            let mut row: serde_json::Value = serde_json::from_str(&old).unwrap_or_default();
            if let (Some(o), Some(opts)) = (row.as_object_mut(), detail.get("options")) {
                o.insert("options".into(), opts.clone());
                o.insert("pid".into(), detail.get("pid").cloned().unwrap_or_default());
            }
            tx.execute(
                "UPDATE replays SET state = 'running', detail = ?2 WHERE id = ?1",
                p![id, row.to_string()],
            )
            .map_err(|e| l.err(e))?;
            Ok(())
        })
    }

    /// A resume's checks, in its transaction: the lease taken (`LeaseHeld` while a live
    /// process sends it), and none of the letters it would send (those still open and
    /// those `added`) held by another live replay (`Claimed`).
    pub(crate) fn take_for_resume(
        &self,
        tx: &crate::db::Db,
        id: &str,
        detail: &serde_json::Value,
        added: &[PlannedItem<'_>],
    ) -> Result<(), JournalError> {
        // A finished replay is never reopened (its letters are decided).
        let state: Option<String> = tx
            .opt("SELECT state FROM replays WHERE id = ?1", p![id], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))?;
        match state.as_deref().and_then(ReplayState::parse) {
            Some(s) if s.resumable() => {}
            Some(s) => {
                return Err(self.other(format!(
                    "replay {id} is {s}: a finished replay is never resumed; plan a new one"
                )))
            }
            None => return Err(self.other(format!("replay {id} is not in the ledger"))),
        }
        self.take_lease(tx, id)?;
        let open: Vec<(String, String)> = tx
            .map("SELECT letter_id, binding FROM replay_items WHERE replay_id = ?1 AND state IN ('planned', 'sending')", p![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        let added_letters = added
            .iter()
            .map(|(_, id, binding, _)| (id.to_string(), binding.to_string()));
        self.refuse_taken(tx, id, open.into_iter().chain(added_letters), detail)
    }

    /// The start of a confirmation's transaction: the seeded freeze point of the tests,
    /// then the lease checked; the reason its decisions carry.
    pub(crate) fn confirming(
        &self,
        tx: &crate::db::Db,
        id: &str,
        letters: usize,
    ) -> Result<String, JournalError> {
        crate::freeze::at(crate::freeze::Point::Inside, letters);
        self.fence(tx, id)?;
        Ok(format!("replay {id}"))
    }

    /// Letters about to be published (written before the publish starts: one still
    /// `sending` after a crash is in doubt, and `--resume` sends it again).
    ///
    /// Each letter is checked first, in the same transaction, against what the ledger
    /// holds of it now (`follows`): one discarded or replayed by another replay since
    /// the plan is journaled `withdrawn` — in the same entry — and returned, not sent.
    pub fn replay_sending(
        &mut self,
        id: &str,
        seqs: &[u32],
    ) -> Result<Vec<Withdrawn>, JournalError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        if self.db.is_pg() {
            let withdrawn = self.pg_replay_sending(id, seqs)?;
            crate::freeze::at(crate::freeze::Point::Sending, seqs.len() - withdrawn.len());
            return Ok(withdrawn);
        }
        let withdrawn = self.write(|l, tx| {
            l.fence(tx, id)?;
            let crate::follows::Screened {
                sent,
                withdrawn,
                mut skipped,
            } = l.screen_batch(tx, id, seqs)?;
            let mut detail = serde_json::json!({"seqs": sent});
            if !withdrawn.is_empty() {
                detail["withdrawn"] = withdrawn.iter().map(|w| serde_json::json!([w.seq, w.why])).collect();
            }
            let entry = l
                .audit_in(tx, "replay-send", id, &detail.to_string())
                .map_err(|e| l.err(e))?;
            for s in &sent {
                tx.execute(
                    "UPDATE replay_items SET state = 'sending', at = ?3 WHERE replay_id = ?1 AND seq = ?2",
                    p![id, s, entry.at],
                )
                .map_err(|e| l.err(e))?;
            }
            for w in &withdrawn {
                tx.execute(
                    "UPDATE replay_items SET state = 'withdrawn', at = ?3, error = ?4 WHERE replay_id = ?1 AND seq = ?2",
                    p![id, w.seq, entry.at, w.why],
                )
                .map_err(|e| l.err(e))?;
            }
            // Not sent either (and not journaled): letters no longer in a state a letter
            // is sent from.
            skipped.extend(withdrawn);
            Ok(skipped)
        })?;
        crate::freeze::at(crate::freeze::Point::Sending, seqs.len() - withdrawn.len());
        Ok(withdrawn)
    }

    /// Letters the broker confirmed: each gets its `replay` decision (binding the DLQ
    /// copy, so no view offers it again) and audit entry; ledger-only ones are applied
    /// at once. Returns the decisions, for settling the rest.
    pub fn replay_confirmed(
        &mut self,
        id: &str,
        source: &str,
        letters: &[ConfirmedLetter<'_>],
    ) -> Result<Vec<Decision>, JournalError> {
        if letters.is_empty() {
            return Ok(Vec::new());
        }
        let written = if self.db.is_pg() {
            self.pg_replay_confirmed(id, source, letters)
        } else {
            self.sqlite_replay_confirmed(id, source, letters)
        };
        if written.is_ok() {
            crate::freeze::at(crate::freeze::Point::Outside, letters.len());
        }
        written
    }

    fn sqlite_replay_confirmed(
        &mut self,
        id: &str,
        source: &str,
        letters: &[ConfirmedLetter<'_>],
    ) -> Result<Vec<Decision>, JournalError> {
        self.write(|l, tx| {
            let reason = l.confirming(tx, id, letters.len())?;
            let mut out = Vec::with_capacity(letters.len());
            for c in letters {
                let detail = serde_json::json!({
                    "source": source, "binding": c.binding, "coords": c.location,
                    "reason": reason, "replay": id, "seq": c.seq, "published": c.published,
                })
                .to_string();
                let entry = l
                    .audit_in(tx, "replay", c.letter_id, &detail)
                    .map_err(|e| l.err(e))?;
                // Ledger-only (Kafka): applied at once, its entry written before the row so
                // the row is inserted applied (one statement fewer per letter).
                let applied = if c.ledger_only {
                    let detail = serde_json::json!({"decision": entry.seq, "source": source, "binding": c.binding, "how": "ledger-only"}).to_string();
                    let applied = l
                        .audit_in(tx, "replay-applied", c.letter_id, &detail)
                        .map_err(|e| l.err(e))?;
                    Some(applied.at)
                } else {
                    None
                };
                let decision_id: i64 = tx
                    .one(
                        "INSERT INTO decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq, applied_at) VALUES (?1, ?2, ?3, ?4, 'replay', ?5, ?6, ?7, ?8, ?9) RETURNING id",
                        p![source, c.letter_id, c.binding, c.location, reason, l.actor, entry.at, entry.seq, applied],
                        |r| r.get(0),
                    )
                    .map_err(|e| l.err(e))?;
                let state = if applied.is_some() {
                    ItemState::Settled
                } else {
                    ItemState::Confirmed
                };
                let d = Decision {
                    id: decision_id,
                    source: source.into(),
                    letter_id: c.letter_id.into(),
                    coords: Some(c.location.into()),
                    binding: Some(c.binding.into()),
                    kind: DecisionKind::Replay,
                    reason: reason.clone(),
                    actor: l.actor.clone(),
                    at: entry.at.clone(),
                    applied_at: applied,
                    audit_seq: entry.seq,
                };
                // A copy can come back to the DLQ before its confirm is read: keep that.
                tx.execute(
                    "UPDATE replay_items SET state = CASE WHEN state = 'failed-again' THEN state ELSE ?3 END, at = ?4, published = ?5 WHERE replay_id = ?1 AND seq = ?2",
                    p![id, c.seq, state.as_str(), entry.at, c.published],
                )
                .map_err(|e| l.err(e))?;
                out.push(d);
            }
            Ok(out)
        })
    }

    /// The broker settled (acked) a confirmed letter's DLQ copy: the decision is applied
    /// and the letter `settled` (unless it already failed again), in one transaction.
    pub fn replay_settled(
        &mut self,
        id: &str,
        seq: u32,
        decision: &Decision,
        how: &str,
    ) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return self.pg_applied(decision, how, Some((id, seq)));
        }
        self.write(|l, tx| {
            l.fence(tx, id)?;
            let detail = serde_json::json!({"decision": decision.audit_seq, "source": decision.source, "binding": decision.binding, "how": how, "replay": id, "seq": seq}).to_string();
            let entry = l
                .audit_in(tx, "replay-applied", &decision.letter_id, &detail)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "UPDATE decisions SET applied_at = ?1 WHERE id = ?2 AND applied_at IS NULL",
                p![entry.at, decision.id],
            )
            .map_err(|e| l.err(e))?;
            tx.execute(
                "UPDATE replay_items SET state = 'settled', at = ?3 WHERE replay_id = ?1 AND seq = ?2 AND state = 'confirmed'",
                p![id, seq, entry.at],
            )
            .map_err(|e| l.err(e))?;
            Ok(())
        })
    }

    /// One letter's later state (`refused`, `held-back`, `failed-again`, `planned`),
    /// audited as `replay-<state>` with `note` (the broker's error, the new DLQ copy).
    pub fn replay_item(
        &mut self,
        id: &str,
        seq: u32,
        letter_id: &str,
        state: ItemState,
        note: Option<&str>,
    ) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return self.pg_replay_item(id, seq, state, note);
        }
        self.write(|l, tx| {
            l.fence(tx, id)?;
            let detail = serde_json::json!({"replay": id, "seq": seq, "note": note}).to_string();
            let entry = l
                .audit_in(tx, &format!("replay-{state}"), letter_id, &detail)
                .map_err(|e| l.err(e))?;
            let error = state.is_error().then_some(note).flatten();
            tx.execute(
                "UPDATE replay_items SET state = ?3, at = ?4, error = COALESCE(?5, error) WHERE replay_id = ?1 AND seq = ?2",
                p![id, seq, state.as_str(), entry.at, error],
            )
            .map_err(|e| l.err(e))?;
            Ok(())
        })
    }

    /// The replay ended (`completed`, `auto-stopped`, `killed`, `failed`): why, and
    /// its counts.
    pub fn replay_finish(
        &mut self,
        id: &str,
        state: ReplayState,
        outcome: &serde_json::Value,
    ) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return self.pg_replay_finish(id, state, outcome);
        }
        self.write(|l, tx| {
            let row = Self::lease_of(tx, id).map_err(|e| l.err(e))?;
            // A finished replay stays finished (ended again, it would be resumable).
            if let Some((_, _, stored, _)) = &row {
                if matches!(stored.as_str(), "completed" | "abandoned") {
                    return Err(l.other(format!(
                        "replay {id} is {stored} already: a finished replay is not ended again"
                    )));
                }
            }
            // Another live process's replay is not ended from here (`:abandon` of a
            // replay still being sent).
            // Our own run ends only while its lease is still ours.
            if l.held_epoch(id).is_some() {
                l.fence(tx, id)?;
            } else if let Some((lease, actor, _, _)) = row {
                if l.held_by_another(tx, id, &lease)? {
                    return Err(l.lease_refusal(tx, lease, id, actor));
                }
            }
            let detail = serde_json::json!({"state": state, "outcome": outcome}).to_string();
            l.audit_in(tx, "replay-stop", id, &detail)
                .map_err(|e| l.err(e))?;
            let old: String = tx
                .one("SELECT detail FROM replays WHERE id = ?1", p![id], |r| {
                    r.get(0)
                })
                .map_err(|e| l.err(e))?;
            let mut d: serde_json::Value = serde_json::from_str(&old).unwrap_or_default();
            if let Some(o) = d.as_object_mut() {
                o.insert("outcome".into(), outcome.clone());
            }
            // Ended: the lease is given up (its letters are no longer claimed).
            tx.execute(
                "UPDATE replays SET state = ?2, detail = ?3, lease_pid = NULL WHERE id = ?1",
                p![id, state.as_str(), d.to_string()],
            )
            .map_err(|e| l.err(e))?;
            l.release(tx, id);
            Ok(())
        })
    }

    /// A replay row and its lease (`held_by` is filled in by [`Self::with_holder`]).
    fn replay_row(r: Row) -> Result<(ReplayRow, crate::lease::Lease), DbError> {
        let detail: String = r.get(6)?;
        let lease = crate::lease::Lease::from_row(&r, 7)?;
        let row = ReplayRow {
            held_by: None,
            running_on: None,
            id: r.get(0)?,
            source: r.get(1)?,
            target: r.get(2)?,
            actor: r.get(3)?,
            started_at: r.get(4)?,
            state: parsed(&r, 5, ReplayState::parse)?,
            detail: serde_json::from_str(&detail).unwrap_or_default(),
        };
        Ok((row, lease))
    }

    /// The row with who sends it, as the ledger's lock says: `running_on` whoever holds
    /// it (this process too), `held_by` when another process does. Only a running
    /// replay is asked (a lock query or a lock file each): the list holds every replay
    /// ever run.
    fn with_holder(
        &self,
        (mut row, lease): (ReplayRow, crate::lease::Lease),
    ) -> Result<ReplayRow, JournalError> {
        if row.state != ReplayState::Running {
            return Ok(row);
        }
        let ours = self.held_epoch(&row.id).is_some();
        if ours || self.alive(&self.db, &row.id, &lease)? {
            let now = self.lease_clock(&self.db)?;
            row.running_on = Some(lease.running_words(&row.actor, Some(now)));
            if !ours {
                row.held_by = Some(lease.sender_words(&row.actor, Some(now)));
            }
        }
        Ok(row)
    }

    /// Every replay, newest first.
    pub fn replays(&self) -> Result<Vec<ReplayRow>, JournalError> {
        self.db
            .map("SELECT id, source, target, actor, started_at, state, detail, lease_pid, lease_host, heartbeat_at FROM replays ORDER BY started_at DESC, id DESC", p![], Self::replay_row)
            .map_err(|e| self.err(e))?
            .into_iter()
            .map(|r| self.with_holder(r))
            .collect()
    }

    /// One replay and its letters in plan order.
    pub fn replay(
        &self,
        id: &str,
    ) -> Result<Option<(ReplayRow, Vec<ReplayItemRow>)>, JournalError> {
        let row = self
            .db
            .opt(
                "SELECT id, source, target, actor, started_at, state, detail, lease_pid, lease_host, heartbeat_at FROM replays WHERE id = ?1",
                p![id],
                Self::replay_row,
            )
            .map_err(|e| self.err(e))?;
        let Some(row) = row else { return Ok(None) };
        let row = self.with_holder(row)?;
        let items = self
            .db
            .map("SELECT seq, letter_id, binding, location, state, at, published, error FROM replay_items WHERE replay_id = ?1 AND seq BETWEEN 0 AND 4294967295 ORDER BY seq", p![id], |r| {
                Ok(ReplayItemRow {
                    seq: r.get(0)?,
                    letter_id: r.get(1)?,
                    binding: r.get(2)?,
                    location: r.get(3)?,
                    state: parsed(&r, 4, ItemState::parse)?,
                    at: r.get(5)?,
                    published: r.get(6)?,
                    error: r.get(7)?,
                })
            })
            .map_err(|e| self.err(e))?;
        Ok(Some((row, items)))
    }

    /// Confirmed replays of each letter id on a source (the replay-count guard).
    pub fn replay_counts(&self, source: &str) -> Result<HashMap<String, u32>, JournalError> {
        let rows: Vec<(String, u32)> = self
            .db
            .map("SELECT letter_id, COUNT(*) FROM decisions WHERE source = ?1 AND kind = 'replay' GROUP BY letter_id", p![source], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        Ok(rows.into_iter().collect())
    }

    /// The latest revision of each letter that has one.
    pub fn latest_revisions(
        &self,
        source: &str,
    ) -> Result<HashMap<String, LatestRevision>, JournalError> {
        type Read = (String, i64, Vec<u8>, Option<i64>, String);
        let rows: Vec<Read> = self
            .db
            .map("SELECT letter_id, number, payload, audit_seq, actor FROM revisions r WHERE source = ?1 AND number = (SELECT MAX(number) FROM revisions WHERE source = r.source AND letter_id = r.letter_id)", p![source], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .map_err(|e| self.err(e))?;
        rows.into_iter()
            .map(|(id, n, payload, seq, actor)| {
                let detail = self.check_revision_read(source, &id, n, &payload, seq)?;
                let program_sha256 = detail
                    .get("program_sha256")
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
                Ok((
                    id,
                    LatestRevision {
                        number: n,
                        payload,
                        program_sha256,
                        actor,
                    },
                ))
            })
            .collect()
    }

    /// A replay letter numbered outside a plan's range (−1: an older server took any
    /// value from a caller): named here, skipped by every other read, so one such row
    /// fails `audit verify` with its name instead of every command with a parse error.
    pub(super) fn check_item_numbers(&self) -> Result<Option<RowProblem>, JournalError> {
        self.db
            .opt(
                "SELECT replay_id, seq FROM replay_items WHERE seq NOT BETWEEN 0 AND 4294967295 LIMIT 1",
                p![],
                |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)),
            )
            .map(|bad| {
                bad.map(|(replay, seq)| {
                    RowProblem(
                        0,
                        format!(
                            "replay {} has a letter numbered {seq}, which no plan numbers (written by a caller outside the tool); every other read skips it",
                            dlq_core::sanitize::clean(&replay)
                        ),
                    )
                })
            })
            .map_err(|e| self.err(e))
    }

    /// Every journaled letter past `sending` must have the audit entry that recorded it
    /// (of the replays in `only`, else of all).
    pub(super) fn check_replay_items(
        &self,
        entries: &[AuditEntry],
        details: &HashMap<i64, serde_json::Value>,
        only: Option<&std::collections::HashSet<String>>,
    ) -> Result<Option<RowProblem>, JournalError> {
        // A letter no plan can number (an older server let a caller write one) is named by
        // `check_item_numbers`, and read by nothing else.
        let sql = "SELECT replay_id, seq, letter_id, state FROM replay_items WHERE state IN ('confirmed', 'settled', 'failed-again') AND seq BETWEEN 0 AND 4294967295";
        type Item = (String, u32, String, String);
        let read = |sql: &str, p: &[&dyn crate::db::ToValue]| -> Result<Vec<Item>, DbError> {
            self.db
                .map(sql, p, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        };
        let rows = match only {
            None => read(sql, p![]),
            Some(only) => {
                let one = format!("{sql} AND replay_id = ?1");
                only.iter()
                    .map(|id| read(&one, p![id]))
                    .collect::<Result<Vec<Vec<Item>>, DbError>>()
                    .map(|v| v.into_iter().flatten().collect())
            }
        }
        .map_err(|e| self.err(e))?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut recorded = std::collections::HashSet::new();
        for e in entries.iter().filter(|e| e.action == "replay") {
            let d = details.get(&e.seq);
            let replay = d.and_then(|d| d.get("replay")).and_then(|v| v.as_str());
            let seq = d.and_then(|d| d.get("seq")).and_then(|v| v.as_u64());
            if let (Some(r), Some(s)) = (replay, seq) {
                recorded.insert((r.to_string(), s, e.target.clone()));
            }
        }
        for (replay, seq, letter_id, state) in rows {
            if !recorded.contains(&(replay.clone(), u64::from(seq), letter_id.clone())) {
                return Ok(Some(RowProblem(
                    0,
                    format!("replay {replay} letter {seq} ({letter_id}) is {state} without the audit entry that confirmed it (the replay_items table was edited)"),
                )));
            }
        }
        Ok(None)
    }
}

/// `detail` with the digest of replay `id`'s planned letters as they are now.
fn with_digest(
    l: &Ledger,
    tx: &crate::db::Db,
    id: &str,
    detail: &serde_json::Value,
) -> Result<String, JournalError> {
    let digest = crate::verify_replays::items_digest(tx, id).map_err(|e| l.err(e))?;
    let mut d = detail.clone();
    if let Some(o) = d.as_object_mut() {
        o.insert("items_sha256".into(), digest.into());
    }
    Ok(d.to_string())
}

/// A state column read back into its enum: a spelling this build does not know (a newer
/// build wrote it, or the row was edited) is an error that says so, never a guess.
pub(crate) fn parsed<T>(r: &Row, i: usize, parse: fn(&str) -> Option<T>) -> Result<T, DbError> {
    let s: String = r.get(i)?;
    parse(&s).ok_or_else(|| {
        DbError::Value(format!(
            "unknown state `{}` in column {i} (written by a newer build, or edited)",
            s.escape_debug()
        ))
    })
}
