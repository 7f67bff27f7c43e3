//! The team ledger's writes: each one call to the server function that writes the rows
//! and their audit entries together and checks the caller (see `team_schema`). The
//! client's own checks (a lease it knows it lost, letters another replay claims) run
//! before, in the same transaction, for the clear message; the server's are the ones an
//! engineer with `psql` cannot skip. The file ledger writes the same rows itself (one
//! engineer's file has no one to enforce against).

use super::*;
use crate::db::{Row, Value};
use crate::p;
use dlq_core::journal::{
    Approval, ApprovalState, ConfirmedLetter, ItemState, PlannedItem, ReplayState, Withdrawn,
};

/// The columns of an audit entry returned by a function (`dlq.audit` rows).
const ENTRY: &str = "seq, at, actor, action, target, detail, prev_hash, hash";

/// A plan's letters as the functions take them: seqs, ids, bindings, locations.
fn item_arrays(items: &[PlannedItem<'_>]) -> [Value; 4] {
    [
        Value::array(items.iter().map(|i| i.0)),
        Value::array(items.iter().map(|i| i.1)),
        Value::array(items.iter().map(|i| i.2)),
        Value::array(items.iter().map(|i| i.3)),
    ]
}

impl Ledger {
    /// `Chain::Server`'s append of an entry that binds no row (`dlq.audit` refuses one
    /// that does).
    pub(crate) fn pg_audit(
        tx: &Db,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, DbError> {
        tx.one(
            &format!("SELECT {ENTRY} FROM dlq.audit(?1, ?2, ?3)"),
            p![action, target, detail],
            entry_row,
        )
    }

    pub(crate) fn pg_record_discard(
        &mut self,
        source: &str,
        letter_id: &str,
        binding: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> Result<Decision, JournalError> {
        self.write(|l, tx| {
            // The client's check first, for the message (the server's is the one `psql`
            // cannot skip: `dlq.discard` refuses the same under its lock).
            l.refuse_discard(tx, letter_id, binding)?;
            let (id, seq, at, actor, first_reason, fresh): (i64, i64, String, String, String, bool) = tx
                .one(
                    "SELECT o_id, o_seq, o_at, o_actor, o_reason, o_fresh FROM dlq.discard(?1, ?2, ?3, ?4, ?5, ?6)",
                    p![source, letter_id, binding, coords, reason, l.client],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
                )
                .map_err(|e| l.err(e))?;
            if !fresh {
                return Err(JournalError::AlreadyDecided {
                    letter_id: letter_id.into(),
                    kind: DecisionKind::Discard,
                    actor,
                    at,
                    reason: first_reason,
                });
            }
            let recorded = Recorded { id, actor, at, seq };
            Ok(recorded.discard(source, letter_id, binding, coords, reason))
        })
    }

    pub(crate) fn pg_record_revisions(
        &mut self,
        source: &str,
        batch: &[NewRevision],
    ) -> Result<Vec<i64>, JournalError> {
        self.write(|l, tx| {
            l.refuse_revisions(tx, batch)?;
            batch
                .iter()
                .map(|rev| {
                    let paths = serde_json::to_string(&rev.changed_paths).unwrap_or_default();
                    tx.one(
                        "SELECT dlq.revise(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        p![
                            source,
                            rev.letter_id,
                            rev.reason,
                            paths,
                            rev.sha256_before,
                            rev.after,
                            rev.program,
                            l.client
                        ],
                        |r| r.get(0),
                    )
                    .map_err(|e| l.err(e))
                })
                .collect()
        })
    }

    /// A decision applied: by reconciliation (`replay` None) or by the replay that
    /// sends it (its lease epoch and the letter's seq).
    pub(crate) fn pg_applied(
        &mut self,
        decision: &Decision,
        how: &str,
        replay: Option<(&str, u32)>,
    ) -> Result<(), JournalError> {
        self.write(|l, tx| {
            let (epoch, seq) = match replay {
                Some((id, seq)) => {
                    l.fence(tx, id)?;
                    (l.held_epoch(id), Some(seq))
                }
                None => (None, None),
            };
            tx.one(
                "SELECT dlq.applied(?1, ?2, ?3, ?4, ?5)",
                p![decision.id, how, epoch, seq, l.client],
                |r| r.get::<String>(0),
            )
            .map(|_| ())
            .map_err(|e| l.err(e))
        })
    }

    pub(crate) fn pg_replay_start(
        &mut self,
        id: &str,
        source: &str,
        target: &str,
        detail: &serde_json::Value,
        items: &[PlannedItem<'_>],
    ) -> Result<AuditEntry, JournalError> {
        self.write(|l, tx| {
            let letters = items
                .iter()
                .map(|(_, id, binding, _)| (id.to_string(), binding.to_string()));
            l.refuse_taken(tx, id, letters, detail)?;
            let [seqs, ids, bindings, locations] = item_arrays(items);
            let entry = tx
                .one(
                    &format!(
                        "SELECT {ENTRY} FROM dlq.replay_start(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    ),
                    p![
                        id,
                        source,
                        target,
                        detail.to_string(),
                        seqs,
                        ids,
                        bindings,
                        locations,
                        l.client
                    ],
                    entry_row,
                )
                .map_err(|e| l.err(e))?;
            l.take_lease(tx, id)?;
            Ok(entry)
        })
    }

    pub(crate) fn pg_replay_resume(
        &mut self,
        id: &str,
        detail: &serde_json::Value,
        added: &[PlannedItem<'_>],
    ) -> Result<(), JournalError> {
        self.write(|l, tx| {
            l.take_for_resume(tx, id, detail, added)?;
            let [seqs, ids, bindings, locations] = item_arrays(added);
            tx.execute(
                "SELECT dlq.replay_resume(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                p![
                    id,
                    l.held_epoch(id),
                    detail.to_string(),
                    seqs,
                    ids,
                    bindings,
                    locations,
                    l.client
                ],
            )
            .map_err(|e| l.err(e))?;
            Ok(())
        })
    }

    /// `take_lease` on the server: the function takes the holder lock on this session
    /// and bumps the epoch; this process keeps what it took.
    pub(crate) fn pg_take_lease(&self, tx: &Db, id: &str) -> Result<(), JournalError> {
        let Some((lease, actor, _, _)) = Self::lease_of(tx, id).map_err(|e| self.err(e))? else {
            return Err(self.other(format!("replay {id} is not in the ledger")));
        };
        if self.held_by_another(tx, id, &lease)? {
            return Err(self.lease_refusal(tx, lease, id, actor));
        }
        let epoch: Option<i64> = tx
            .one(
                "SELECT dlq.take_lease(?1, ?2, ?3)",
                p![id, std::process::id(), crate::host::this_host()],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        match epoch {
            Some(epoch) => {
                self.record_hold(tx, id, epoch);
                Ok(())
            }
            None => Err(self.lease_refusal(tx, lease, id, actor)),
        }
    }

    /// `--take-over` (see [`dlq_core::journal::Journal::replay_take_over`]): the server
    /// decides, on its clock, and ends the stale sender's session itself.
    pub fn replay_take_over(&mut self, id: &str) -> Result<String, JournalError> {
        if !self.db.is_pg() {
            return Err(self.other(format!(
                "--take-over is for a team ledger, whose sender may be on another bastion; a file \
                 ledger's sender runs on this host: `dlq-triage replays show {}` names its pid — \
                 `kill -CONT PID` lets it go on, `kill PID` ends it, and then --resume takes over",
                dlq_core::sanitize::clean(id)
            )));
        }
        let said = self.write(|l, tx| {
            tx.one(
                "SELECT dlq.replay_take_over(?1, ?2)",
                p![id, l.client],
                |r| r.get::<String>(0),
            )
            .map_err(|e| l.err(e))
        });
        match said {
            Err(JournalError::Storage { source, path }) => {
                let fresh = source
                    .downcast_ref::<DbError>()
                    .is_some_and(DbError::is_in_use);
                if fresh {
                    Err(JournalError::LeaseHeld {
                        replay_id: id.to_string(),
                        holder: dlq_core::sanitize::clean(&source.to_string()),
                        actor: String::new(),
                        heartbeat_at: String::new(),
                    })
                } else {
                    Err(JournalError::Storage { source, path })
                }
            }
            other => other.map(|s| dlq_core::sanitize::clean(&s)),
        }
    }

    /// The server withdraws letters decided since the plan in the same call (schema 8):
    /// read back, in the same transaction, which.
    pub(crate) fn pg_replay_sending(
        &mut self,
        id: &str,
        seqs: &[u32],
    ) -> Result<Vec<Withdrawn>, JournalError> {
        self.write(|l, tx| {
            l.fence(tx, id)?;
            let seqs = Value::array(seqs.iter().copied());
            tx.execute(
                "SELECT dlq.replay_send(?1, ?2, ?3, ?4)",
                p![id, l.held_epoch(id), seqs.clone(), l.client],
            )
            .map_err(|e| l.err(e))?;
            // Published is only what the journal says is `sending` now.
            tx.map(
                "SELECT seq::int8, state, coalesce(error, '') FROM replay_items WHERE replay_id = ?1 AND seq = ANY (?2) AND state <> 'sending' ORDER BY seq",
                p![id, seqs],
                |r| {
                    let seq: i64 = r.get(0)?;
                    let (state, error): (String, String) = (r.get(1)?, r.get(2)?);
                    let why = if state == "withdrawn" {
                        error
                    } else {
                        format!("already {state} in this replay: not sent again")
                    };
                    Ok(Withdrawn {
                        seq: u32::try_from(seq).unwrap_or(u32::MAX),
                        why: dlq_core::sanitize::clean(&why),
                    })
                },
            )
            .map_err(|e| l.err(e))
        })
    }

    /// A batch of confirmed letters in one call.
    pub(crate) fn pg_replay_confirmed(
        &mut self,
        id: &str,
        source: &str,
        letters: &[ConfirmedLetter<'_>],
    ) -> Result<Vec<Decision>, JournalError> {
        self.write(|l, tx| {
            let reason = l.confirming(tx, id, letters.len())?;
            let rows = tx
                .query(
                    "SELECT o_seq, o_id, o_entry, o_at, o_applied, o_letter, o_binding, o_location \
                     FROM dlq.replay_confirmed(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    p![
                        id,
                        l.held_epoch(id),
                        source,
                        Value::array(letters.iter().map(|c| c.seq)),
                        Value::array(letters.iter().map(|c| c.published)),
                        Value::array(letters.iter().map(|c| c.ledger_only)),
                        l.client
                    ],
                )
                .map_err(|e| l.err(e))?;
            rows.iter()
                .map(|r: &Row| {
                    Ok(Decision {
                        id: r.get(1)?,
                        source: source.into(),
                        letter_id: r.get(5)?,
                        coords: Some(r.get(7)?),
                        binding: Some(r.get(6)?),
                        kind: DecisionKind::Replay,
                        reason: reason.clone(),
                        actor: l.actor.clone(),
                        at: r.get(3)?,
                        applied_at: r.get(4)?,
                        audit_seq: r.get(2)?,
                    })
                })
                .collect::<Result<Vec<_>, DbError>>()
                .map_err(|e| l.err(e))
        })
    }

    pub(crate) fn pg_replay_item(
        &mut self,
        id: &str,
        seq: u32,
        state: ItemState,
        note: Option<&str>,
    ) -> Result<(), JournalError> {
        self.write(|l, tx| {
            l.fence(tx, id)?;
            tx.execute(
                "SELECT dlq.replay_item(?1, ?2, ?3, ?4, ?5, ?6)",
                p![id, l.held_epoch(id), seq, state.as_str(), note, l.client],
            )
            .map(|_| ())
            .map_err(|e| l.err(e))
        })
    }

    pub(crate) fn pg_replay_finish(
        &mut self,
        id: &str,
        state: ReplayState,
        outcome: &serde_json::Value,
    ) -> Result<(), JournalError> {
        self.write(|l, tx| {
            let epoch = l.held_epoch(id);
            if epoch.is_some() {
                l.fence(tx, id)?;
            } else if let Some((lease, actor, _, _)) =
                Self::lease_of(tx, id).map_err(|e| l.err(e))?
            {
                if l.held_by_another(tx, id, &lease)? {
                    return Err(l.lease_refusal(tx, lease, id, actor));
                }
            }
            tx.execute(
                "SELECT dlq.replay_finish(?1, ?2, ?3, ?4, ?5)",
                p![id, epoch, state.as_str(), outcome.to_string(), l.client],
            )
            .map_err(|e| l.err(e))?;
            l.release(tx, id);
            Ok(())
        })
    }

    /// Renewed while this session holds the lease.
    pub(crate) fn pg_heartbeat(&self, id: &str) -> Result<bool, JournalError> {
        let Some(epoch) = self.held_epoch(id) else {
            return Ok(false);
        };
        self.db
            .one("SELECT dlq.replay_heartbeat(?1, ?2)", p![id, epoch], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))
    }

    pub(crate) fn pg_request_approval(&mut self, a: &Approval) -> Result<Approval, JournalError> {
        self.write(|l, tx| {
            let entry = tx
                .one(
                    &format!("SELECT {ENTRY} FROM dlq.approval_request(?1, ?2, ?3, ?4, ?5, ?6)"),
                    // The facts, which the server binds and renders for the approver;
                    // the author's text is not what anyone approves.
                    p![
                        a.id,
                        a.source,
                        a.digest,
                        a.letters as i64,
                        a.facts.as_deref().unwrap_or(&a.plan),
                        l.client
                    ],
                    entry_row,
                )
                .map_err(|e| l.err(e))?;
            Ok(Approval {
                author: entry.actor,
                requested_at: entry.at,
                state: ApprovalState::Awaiting,
                approver: None,
                decided_at: None,
                note: None,
                ..a.clone()
            })
        })
    }

    pub(crate) fn pg_decide_approval(
        &mut self,
        a: &Approval,
        approve: bool,
        note: &str,
    ) -> Result<Approval, JournalError> {
        if a.author == self.actor {
            return Err(self.other(format!(
                "{} planned this replay and cannot approve it: a second operator must",
                dlq_core::sanitize::clean(&a.author)
            )));
        }
        self.write(|l, tx| {
            let entry = tx
                .one(
                    &format!("SELECT {ENTRY} FROM dlq.approval_decide(?1, ?2, ?3, ?4)"),
                    p![a.id, approve, note, l.client],
                    entry_row,
                )
                .map_err(|e| l.err(e))?;
            Ok(Approval {
                state: if approve {
                    ApprovalState::Approved
                } else {
                    ApprovalState::Rejected
                },
                approver: Some(entry.actor),
                decided_at: Some(entry.at),
                note: Some(note.to_string()),
                ..a.clone()
            })
        })
    }

    pub(crate) fn pg_use_approval(&mut self, id: &str) -> Result<(), JournalError> {
        self.write(|l, tx| {
            tx.execute("SELECT dlq.approval_use(?1, ?2)", p![id, l.client])
                .map(|_| ())
                .map_err(|e| l.err(e))
        })
    }

    /// Set (or, `None`, clear) one of the team's policy values (a privileged role).
    pub fn set_team_policy(&mut self, key: &str, value: Option<&str>) -> Result<(), JournalError> {
        if !self.db.is_pg() {
            return Err(self.other("the team's policy is kept on the team's ledger (--ledger postgres://…); on one host it is the config file".into()));
        }
        self.write(|l, tx| {
            tx.execute("SELECT dlq.set_policy(?1, ?2)", p![key, value])
                .map(|_| ())
                .map_err(|e| l.err(e))
        })
    }

    /// Whether this session's role (not the ledger's owner, not a superuser) may create
    /// objects in the database's `public` schema — where a planted function waits for a
    /// session that searches it.
    pub fn public_writable(&self) -> Result<bool, JournalError> {
        if !self.db.is_pg() {
            return Ok(false);
        }
        self.db
            .one(
                "SELECT pg_catalog.to_regnamespace('public') IS NOT NULL \
                 AND pg_catalog.has_schema_privilege('public', 'CREATE') \
                 AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) \
                 AND current_user <> (SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c \
                                      WHERE c.oid = 'dlq.audit'::pg_catalog.regclass)",
                p![],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// The team's policy (key → value) on a server ledger; `None` on a file.
    pub fn team_policy(&self) -> Result<Option<Vec<(String, String)>>, JournalError> {
        if !self.db.is_pg() {
            return Ok(None);
        }
        self.db
            .map("SELECT key, value FROM policy ORDER BY key", p![], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map(Some)
            .map_err(|e| self.err(e))
    }
}
