//! The replay journal checked against the chain: each replay's set of planned letters
//! against the digest its start (or latest resume) entry recorded, each letter's state
//! against the state its audit entries lead to, and each replay's state against its
//! last start, resume or stop. An edit, insert or delete of any journal row is named.

use super::verify::{Log, RowProblem};
use super::Ledger;
use crate::chain::hex;
use crate::db::{Db, DbError};
use crate::p;
use dlq_core::journal::{AuditEntry, JournalError};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

/// The digest of a replay's planned letters (seq, letter id, binding, location, in seq
/// order), recorded in its `replay-start` and `replay-resume` entries.
pub(crate) fn items_digest(tx: &Db, replay: &str) -> Result<String, DbError> {
    let mut h = Sha256::new();
    let rows = tx.query(
        "SELECT seq, letter_id, binding, location FROM replay_items WHERE replay_id = ?1 ORDER BY seq",
        p![replay],
    )?;
    for r in &rows {
        let (seq, id, binding, location): (u32, String, String, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        for field in [seq.to_string(), id, binding, location] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
    }
    Ok(hex(&h.finalize()))
}

/// One replay as its audit entries describe it.
#[derive(Default)]
struct Told {
    /// The digest of its letters after its latest start or resume (older ledgers: none).
    digest: Option<String>,
    state: String,
    /// Each letter's state by seq, as the entries lead to it.
    items: HashMap<u32, &'static str>,
    /// The entry that last spoke of it.
    last_seq: i64,
    /// It has a `replay-start` entry.
    started: bool,
}

impl Ledger {
    /// See the module doc. Old replays (journaled before digests) are checked for their
    /// states only.
    /// `only`: these replays (their entries are all in `entries`), else every one.
    pub(crate) fn check_replay_journal(
        &self,
        entries: &[AuditEntry],
        log: &Log<'_>,
        only: Option<&HashSet<String>>,
    ) -> Result<Option<RowProblem>, JournalError> {
        let mut told = told(entries, log);
        if let Some(only) = only {
            told.retain(|id, _| only.contains(id));
        }
        let rows: Vec<(String, String)> = self
            .db
            .map("SELECT id, state FROM replays", p![], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(|e| self.err(e))?
            .into_iter()
            .filter(|(id, _)| only.is_none_or(|o| o.contains(id)))
            .collect();
        let have: HashSet<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
        let mut gone: Vec<(&String, &Told)> = told
            .iter()
            .filter(|(id, t)| t.started && !have.contains(id.as_str()))
            .collect();
        gone.sort_by_key(|(_, t)| t.last_seq);
        if let Some((id, t)) = gone.first() {
            return Ok(Some(RowProblem(t.last_seq, format!("replay {id} is in the audit log but not in the replays table (its row was deleted)"))));
        }
        for (id, state) in rows {
            let Some(t) = told.get(&id) else {
                if only.is_some() {
                    return Ok(Some(RowProblem(
                        0,
                        format!("replay {id} has no audit entry (the replays table was edited)"),
                    )));
                }
                continue; // a replay row without a start entry: check_replay_rows names it
            };
            if t.state != state {
                return Ok(Some(RowProblem(t.last_seq, format!("replay {id} is `{state}` but its audit entries say `{}` (the replays table was edited)", t.state))));
            }
            if let Some(d) = &t.digest {
                if *d != items_digest(&self.db, &id).map_err(|e| self.err(e))? {
                    return Ok(Some(RowProblem(t.last_seq, format!("replay {id}'s planned letters differ from those its audit entry recorded (a replay_items row was inserted, deleted or re-addressed)"))));
                }
            }
            let items: Vec<(u32, String)> = self
                .db
                .map(
                    "SELECT seq, state FROM replay_items WHERE replay_id = ?1",
                    p![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| self.err(e))?;
            for (seq, state) in items {
                let want = t.items.get(&seq).copied().unwrap_or("planned");
                if state != want {
                    return Ok(Some(RowProblem(t.last_seq, format!("replay {id} letter {seq} is `{state}` but its audit entries say `{want}` (the replay_items table was edited)"))));
                }
            }
        }
        Ok(None)
    }
}

/// Every replay's story, from its entries in chain order.
fn told<'a>(entries: &'a [AuditEntry], log: &Log<'a>) -> HashMap<String, Told> {
    let mut told: HashMap<String, Told> = HashMap::new();
    // `replay` entries (confirmations) by their seq, for `replay-applied` (which names
    // the decision's entry).
    let mut confirmation: HashMap<i64, (String, u32)> = HashMap::new();
    for e in entries {
        let field = |k: &str| log.field(e, k);
        let seq_of = |v: &serde_json::Value| v.as_u64().and_then(|s| u32::try_from(s).ok());
        let (replay, item_state): (Option<String>, Option<(&'static str, Vec<u32>)>) =
            match e.action.as_str() {
                "replay-start" | "replay-resume" => {
                    let t = told.entry(e.target.clone()).or_default();
                    t.state = "running".into();
                    t.started |= e.action == "replay-start";
                    if let Some(d) = field("items_sha256").as_str() {
                        t.digest = Some(d.to_string());
                    }
                    (Some(e.target.clone()), None)
                }
                "replay-stop" => {
                    let t = told.entry(e.target.clone()).or_default();
                    t.state = field("state").as_str().unwrap_or("?").to_string();
                    (Some(e.target.clone()), None)
                }
                "replay-send" => {
                    let seqs = field("seqs")
                        .as_array()
                        .map(|a| a.iter().filter_map(seq_of).collect())
                        .unwrap_or_default();
                    // Withdrawn in the same entry: decided elsewhere since the plan.
                    let withdrawn: Vec<u32> = field("withdrawn")
                        .as_array()
                        .map(|a| a.iter().filter_map(|w| seq_of(&w[0])).collect())
                        .unwrap_or_default();
                    if !withdrawn.is_empty() {
                        let t = told.entry(e.target.clone()).or_default();
                        for s in withdrawn {
                            t.items.insert(s, "withdrawn");
                        }
                    }
                    (Some(e.target.clone()), Some(("sending", seqs)))
                }
                "replay" => {
                    let r = field("replay").as_str().map(str::to_string);
                    let s = seq_of(field("seq"));
                    if let (Some(r), Some(s)) = (&r, s) {
                        confirmation.insert(e.seq, (r.clone(), s));
                    }
                    (r, s.map(|s| ("confirmed", vec![s])))
                }
                "replay-applied" => {
                    match field("decision")
                        .as_i64()
                        .and_then(|d| confirmation.get(&d))
                    {
                        Some((r, s)) => (Some(r.clone()), Some(("settled", vec![*s]))),
                        None => (None, None),
                    }
                }
                a @ ("replay-failed-again"
                | "replay-refused"
                | "replay-held-back"
                | "replay-planned") => {
                    let state = match a {
                        "replay-failed-again" => "failed-again",
                        "replay-refused" => "refused",
                        "replay-held-back" => "held-back",
                        _ => "planned",
                    };
                    let r = field("replay").as_str().map(str::to_string);
                    (r, seq_of(field("seq")).map(|s| (state, vec![s])))
                }
                _ => (None, None),
            };
        let Some(replay) = replay else { continue };
        let t = told.entry(replay).or_default();
        t.last_seq = e.seq;
        if let Some((state, seqs)) = item_state {
            for s in seqs {
                let now = t.items.entry(s).or_insert("planned");
                // A copy back in the DLQ before its confirm was read stays failed-again
                // (the journal's own rule).
                if !(*now == "failed-again" && matches!(state, "confirmed" | "settled")) {
                    *now = state;
                }
            }
        }
    }
    told
}
