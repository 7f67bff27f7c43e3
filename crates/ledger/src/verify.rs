//! Verification: the chain walked entry by entry, every bound row checked against its entry.

use super::*;
use std::collections::{HashMap, HashSet};

impl Ledger {
    /// Walk the chain (sequence without gaps, each `prev_hash` the previous `hash`, each
    /// MAC recomputed under the key), then check every decision and revision row against
    /// the entry that recorded it, and the anchor if one is given. Names the first
    /// problem.
    pub fn verify(&self, expect_head: Option<&Head>) -> Result<Verification, JournalError> {
        // One read transaction: the chain and every table from one snapshot, so another
        // process's commit between two reads is not taken for an edit.
        self.conn
            .execute_batch("BEGIN DEFERRED")
            .map_err(|e| self.err(e))?;
        let out = self.verify_snapshot(expect_head);
        let _ = self.conn.execute_batch("COMMIT");
        out
    }

    fn verify_snapshot(&self, expect_head: Option<&Head>) -> Result<Verification, JournalError> {
        let entries = self.audit_entries()?;
        let n = entries.len() as i64;
        let bad = |seq: i64, why: String| Verification {
            ok: false,
            entries: n,
            first_bad_seq: Some(seq),
            problem: Some(why),
        };
        let mut prev = GENESIS.to_string();
        for (expected_seq, e) in (1i64..).zip(entries.iter()) {
            if e.seq != expected_seq {
                return Ok(bad(
                    e.seq,
                    format!(
                    "expected entry {expected_seq}, found {} (an entry was deleted or reordered)",
                    e.seq
                ),
                ));
            }
            if e.prev_hash != prev {
                return Ok(bad(e.seq, "its prev_hash does not match the previous entry (an entry was removed, inserted or reordered)".into()));
            }
            if entry_hash(&self.key, &e.prev_hash, &canonical(e)) != e.hash {
                return Ok(bad(
                    e.seq,
                    "its content does not match its MAC (the entry was edited, or the chain was rewritten without the key)".into(),
                ));
            }
            prev = e.hash.clone();
        }
        if let Some(problem) = self.check_rows(&entries)? {
            return Ok(problem.into_verification(n));
        }
        if let Some(h) = expect_head {
            match entries.get(usize::try_from(h.seq - 1).unwrap_or(usize::MAX)) {
                None => {
                    return Ok(bad(h.seq, format!(
                        "the anchor names entry {} but the log ends at {n} (entries were removed from the end)",
                        h.seq
                    )))
                }
                Some(e) if e.hash != h.hash => {
                    return Ok(bad(h.seq, "the entry differs from the anchor (the log was rewritten)".into()))
                }
                Some(_) => {}
            }
        }
        Ok(Verification {
            ok: true,
            entries: n,
            first_bad_seq: None,
            problem: None,
        })
    }

    /// Every decision and revision row must match the entry that recorded it, and every
    /// entry that records one must still have its row.
    pub(crate) fn check_rows(
        &self,
        entries: &[AuditEntry],
    ) -> Result<Option<RowProblem>, JournalError> {
        let log = Log::of(entries);
        if let Some(p) = self.check_decisions(&log)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_revisions(&log)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_replay_rows(entries)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_replay_journal(entries, &log)? {
            return Ok(Some(p));
        }
        self.check_replay_items(entries, &log.details)
    }

    /// Decision rows against the entries that recorded them, and no recorded discard
    /// or replay without its row.
    fn check_decisions(&self, log: &Log<'_>) -> Result<Option<RowProblem>, JournalError> {
        let mut st = self
            .conn
            .prepare("SELECT id, source, letter_id, binding, kind, reason, actor, at, applied_at, audit_seq FROM decisions ORDER BY id")
            .map_err(|e| self.err(e))?;
        type Row = (
            i64,
            String,
            String,
            Option<String>,
            String,
            String,
            String,
            String,
            Option<String>,
            i64,
        );
        let rows: Vec<Row> = st
            .query_map([], |r| Row::try_from(r))
            .and_then(|rs| rs.collect())
            .map_err(|e| self.err(e))?;
        let mut decided_seqs = HashSet::new();
        let applied: HashSet<i64> = log
            .entries
            .iter()
            .filter(|e| e.action.ends_with("-applied"))
            .filter_map(|e| log.field(e, "decision").as_i64())
            .collect();
        for (id, source, letter_id, binding, kind, reason, actor, at, applied_at, seq) in rows {
            let matches = log.by_seq.get(&seq).is_some_and(|e| {
                e.action == kind
                    && e.target == letter_id
                    && e.actor == actor
                    && e.at == at
                    && log.field(e, "source").as_str() == Some(source.as_str())
                    && log.field(e, "reason").as_str() == Some(reason.as_str())
                    && log.details.get(&e.seq).and_then(expected_binding) == binding
            });
            if !matches {
                return Ok(Some(RowProblem(seq, format!("decision row {id} does not match the audit entry that recorded it (the decisions table was edited)"))));
            }
            if applied_at.is_some() != applied.contains(&seq) {
                return Ok(Some(RowProblem(seq, format!("decision row {id}'s applied state differs from the audit log (the decisions table was edited)"))));
            }
            decided_seqs.insert(seq);
        }
        Ok([
            (
                "discard",
                "this discard has no decision row (the decisions table was edited)",
            ),
            (
                "replay",
                "this replayed letter has no decision row (the decisions table was edited)",
            ),
        ]
        .into_iter()
        .find_map(|(action, why)| log.orphan(action, &decided_seqs, why)))
    }

    /// Revision rows (and their payloads' digests) against their entries.
    fn check_revisions(&self, log: &Log<'_>) -> Result<Option<RowProblem>, JournalError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT source, letter_id, number, sha256_after, payload, audit_seq FROM revisions",
            )
            .map_err(|e| self.err(e))?;
        type RevRow = (String, String, i64, String, Vec<u8>, Option<i64>);
        let revs: Vec<RevRow> = st
            .query_map([], |r| RevRow::try_from(r))
            .and_then(|rs| rs.collect())
            .map_err(|e| self.err(e))?;
        let mut revised = HashSet::new();
        for (source, letter_id, number, sha_after, payload, seq) in revs {
            let seq = seq.unwrap_or(0);
            let ok = log.by_seq.get(&seq).is_some_and(|e| {
                e.action == "edit"
                    && e.target == letter_id
                    && log.field(e, "source").as_str() == Some(source.as_str())
                    && log.field(e, "revision").as_i64() == Some(number)
                    && log.field(e, "sha256_after").as_str() == Some(sha_after.as_str())
            }) && sha256_hex(&payload) == sha_after;
            if !ok {
                return Ok(Some(RowProblem(seq, format!("revision {number} of {letter_id} does not match the audit entry that recorded it (the revisions table was edited)"))));
            }
            revised.insert(seq);
        }
        Ok(log.orphan(
            "edit",
            &revised,
            "this revision has no row (the revisions table was edited)",
        ))
    }

    /// Each replay row must have its start entry.
    fn check_replay_rows(
        &self,
        entries: &[AuditEntry],
    ) -> Result<Option<RowProblem>, JournalError> {
        let replay_ids: Vec<String> = self
            .conn
            .prepare("SELECT id FROM replays")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| self.err(e))?;
        Ok(replay_ids
            .into_iter()
            .find(|id| {
                !entries
                    .iter()
                    .any(|e| e.action == "replay-start" && &e.target == id)
            })
            .map(|id| {
                RowProblem(
                    0,
                    format!("replay {id} has no audit entry (the replays table was edited)"),
                )
            }))
    }
}

/// The audit log as the row checks read it: entries by seq, each detail parsed once
/// (rows are checked against several of its fields).
/// Actions whose entries record a row (a decision, a revision, the replay journal).
fn binds_rows(action: &str) -> bool {
    matches!(action, "discard" | "replay" | "edit")
        || action.ends_with("-applied")
        || action.starts_with("replay-")
}

pub(crate) struct Log<'a> {
    entries: &'a [AuditEntry],
    by_seq: HashMap<i64, &'a AuditEntry>,
    pub(crate) details: HashMap<i64, serde_json::Value>,
}

impl<'a> Log<'a> {
    fn of(entries: &'a [AuditEntry]) -> Log<'a> {
        Log {
            entries,
            by_seq: entries.iter().map(|e| (e.seq, e)).collect(),
            // Only the entries a row is checked against are parsed (unmasks, exports and
            // refusals bind no row): most of a big ledger's memory was parsed details.
            details: entries
                .iter()
                .filter(|e| binds_rows(&e.action))
                .map(|e| {
                    let v = serde_json::from_str(&e.detail).unwrap_or(serde_json::Value::Null);
                    (e.seq, v)
                })
                .collect(),
        }
    }

    pub(crate) fn field(&self, e: &AuditEntry, k: &str) -> &serde_json::Value {
        static NULL: serde_json::Value = serde_json::Value::Null;
        self.details
            .get(&e.seq)
            .and_then(|v| v.get(k))
            .unwrap_or(&NULL)
    }

    /// An entry recording a row whose row is gone.
    fn orphan(&self, action: &str, rows: &HashSet<i64>, why: &str) -> Option<RowProblem> {
        self.entries
            .iter()
            .find(|e| e.action == action && !rows.contains(&e.seq))
            .map(|e| RowProblem(e.seq, why.to_string()))
    }
}

/// The binding an audit entry recorded for its decision. Entries from schema 1 have none:
/// there it is derived as the upgrade did (Kafka coordinates), else absent.
pub(crate) fn expected_binding(detail: &serde_json::Value) -> Option<String> {
    if let Some(b) = detail.get("binding") {
        return b.as_str().map(str::to_string);
    }
    detail
        .get("coords")
        .and_then(serde_json::Value::as_str)
        .filter(|c| c.split('/').filter(|p| !p.is_empty()).count() == 3)
        .map(|c| format!("at:{c}"))
}

/// A table row that disagrees with the chain: the entry it points at, and why.
pub(crate) struct RowProblem(pub(crate) i64, pub(crate) String);

impl RowProblem {
    pub(crate) fn into_verification(self, entries: i64) -> Verification {
        Verification {
            ok: false,
            entries,
            first_bad_seq: Some(self.0),
            problem: Some(self.1),
        }
    }
}
