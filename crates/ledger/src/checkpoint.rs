//! The verified checkpoint: where the last clean verification ended and what the tables
//! held then, MAC'd under the chain's key. A write verifies only what was written since
//! (`verify_recent`), so a ledger of millions of entries is checked in milliseconds.
//!
//! What an incremental check covers: every entry after the checkpoint (chain and MAC),
//! the entry at the checkpoint unchanged (so the log was neither truncated nor rewritten
//! up to it), every row written or changed by those entries, every replay they name
//! (its whole journal), the row counts of each table, and each other replay's state and
//! unfinished letters (an edit that would make a resume send a settled letter again).
//! What it does not: an in-place edit of an older row that changes none of those (a
//! decision's reason, a revision's payload — revisions are checked when read). A full
//! `verify` (`audit verify`, the TUI at open) walks everything.

use super::*;
use crate::LOCK_WAIT;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};

const META_KEY: &str = "verified";
/// Set while the last full walk failed.
const WALK_FAILED: &str = "walk-failed";

/// Up to this many entries a write walks the whole ledger (about 0.1 s).
pub const FULL_WALK_UP_TO: i64 = 50_000;

/// What the row checks cover: every row (a full verification), or the rows written after
/// a checkpoint's entry and the replays named since (an incremental one).
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) since: i64,
    pub(crate) replays: Option<&'a HashSet<String>>,
}

impl Scope<'_> {
    pub(crate) const ALL: Scope<'static> = Scope {
        since: 0,
        replays: None,
    };
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Checkpoint {
    seq: i64,
    hash: String,
    decisions: i64,
    revisions: i64,
    replay_items: i64,
    replays: BTreeMap<String, Mark>,
    #[serde(default)]
    mac: String,
}

/// One replay as it stood: its state, its letters and its unfinished (planned or
/// sending) letters.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Mark {
    state: String,
    items: i64,
    open: i64,
}

impl Checkpoint {
    pub(crate) fn head(&self) -> Head {
        Head {
            seq: self.seq,
            hash: self.hash.clone(),
        }
    }

    /// What its MAC covers: everything but the MAC.
    fn unsigned(&self) -> String {
        let unsigned = Checkpoint {
            mac: String::new(),
            ..self.clone()
        };
        serde_json::to_string(&unsigned).unwrap_or_default()
    }
}

/// Why a quick check hands over to the full walk (which names the row).
struct Suspect;

impl Checkpoint {
    /// Whether `now` is this checkpoint plus what `window`'s entries after it added:
    /// decisions and revisions by their entries, replay letters by the replays named.
    fn followed_by(
        &self,
        window: &[AuditEntry],
        touched: &HashSet<String>,
        now: &Checkpoint,
    ) -> bool {
        let new = window.iter().filter(|e| e.seq > self.seq);
        let added = |action: &str| new.clone().filter(|e| e.action == action).count() as i64;
        let mut expected = self.clone();
        expected.decisions += added("discard") + added("replay");
        expected.revisions += added("edit");
        for id in touched {
            let (old, mark) = (self.replays.get(id), now.replays.get(id));
            expected.replay_items += mark.map_or(0, |m| m.items) - old.map_or(0, |m| m.items);
            if let Some(m) = mark {
                expected.replays.insert(id.clone(), m.clone());
            }
        }
        expected.decisions == now.decisions
            && expected.revisions == now.revisions
            && expected.replay_items == now.replay_items
            && expected.replays == now.replays
    }
}

type Quick = Result<Result<(Verification, Checkpoint), Suspect>, JournalError>;

impl Ledger {
    /// Verify what changed since the last verified checkpoint (see the module doc); with
    /// no valid checkpoint, or anything out of place, the full `verify` runs and names
    /// the problem. A clean result moves the checkpoint to the head.
    ///
    /// A ledger of up to `FULL_WALK_UP_TO` entries is walked whole every time (a tenth of
    /// a second): the incremental check's blind spot (an older row edited in place) is
    /// only accepted where a full walk would be slow.
    pub fn verify_recent(&self) -> Result<Verification, JournalError> {
        let big = self.head()?.is_some_and(|h| h.seq > FULL_WALK_UP_TO);
        match big.then(|| self.verify_since_checkpoint()).transpose()? {
            Some(Some(v)) => Ok(v),
            _ => self.verify(None),
        }
    }

    /// The incremental check alone: `Some` (clean, checkpoint moved) when everything
    /// since the checkpoint checks out, `None` when it cannot vouch for the ledger (no
    /// valid checkpoint, or something out of place — the full walk says what).
    pub fn verify_since_checkpoint(&self) -> Result<Option<Verification>, JournalError> {
        self.db.begin_read().map_err(|e| self.err(e))?;
        let out = self.verify_recent_snapshot();
        let _ = self.db.commit();
        Ok(match out? {
            Ok((v, c)) => {
                self.store_checkpoint(&c);
                Some(v)
            }
            Err(Suspect) => None,
        })
    }

    fn verify_recent_snapshot(&self) -> Quick {
        if self.walk_failed()? {
            return Ok(Err(Suspect));
        }
        let Some(cp) = self.load_checkpoint()? else {
            return Ok(Err(Suspect));
        };
        // The checkpoint's own entry (unchanged, MAC and all) and everything after it.
        let read = Self::entries_in(&self.db, cp.seq).map_err(|e| self.err(e))?;
        let Some(at_checkpoint) = read
            .first()
            .filter(|e| e.seq == cp.seq && e.hash == cp.hash)
        else {
            return Ok(Err(Suspect));
        };
        if self
            .walk(&read, cp.seq, &at_checkpoint.prev_hash)?
            .is_some()
        {
            return Ok(Err(Suspect));
        }
        let Some(touched) = self.replays_named(&read[1..])? else {
            return Ok(Err(Suspect));
        };
        // Every entry of each named replay: from the oldest one's start.
        let Some(from) = self.first_start(&touched, cp.seq + 1)? else {
            return Ok(Err(Suspect));
        };
        let window = if from <= cp.seq {
            Self::entries_in(&self.db, from).map_err(|e| self.err(e))?
        } else {
            read
        };
        let scope = Scope {
            since: cp.seq,
            replays: Some(&touched),
        };
        if self.check_rows(&window, scope)?.is_some() {
            return Ok(Err(Suspect));
        }
        let head = window.last().map_or_else(
            || cp.head(),
            |e| Head {
                seq: e.seq,
                hash: e.hash.clone(),
            },
        );
        let now = self.checkpoint_of(head, Some((&cp, &touched)))?;
        if !cp.followed_by(&window, &touched, &now) {
            return Ok(Err(Suspect));
        }
        let v = Verification {
            ok: true,
            entries: now.seq,
            first_bad_seq: None,
            problem: None,
        };
        Ok(Ok((v, now)))
    }

    /// The earliest of `from` and each named replay's start; `None` when one has no
    /// start entry (the full walk decides).
    fn first_start(
        &self,
        touched: &HashSet<String>,
        mut from: i64,
    ) -> Result<Option<i64>, JournalError> {
        for id in touched {
            let start: Option<i64> = self
                .db
                .opt(
                    "SELECT seq FROM audit WHERE target = ?1 AND action = 'replay-start'",
                    p![id],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            match start {
                Some(s) => from = from.min(s),
                None => return Ok(None),
            }
        }
        Ok(Some(from))
    }

    /// The replays these entries speak of; `None` when one cannot be told (the full
    /// walk decides).
    fn replays_named(
        &self,
        entries: &[AuditEntry],
    ) -> Result<Option<HashSet<String>>, JournalError> {
        let mut named = HashSet::new();
        for e in entries.iter().filter(|e| e.action.starts_with("replay")) {
            if matches!(
                e.action.as_str(),
                "replay-start" | "replay-resume" | "replay-stop" | "replay-send"
            ) {
                named.insert(e.target.clone());
                continue;
            }
            let detail: serde_json::Value =
                serde_json::from_str(&e.detail).unwrap_or(serde_json::Value::Null);
            if let Some(r) = detail.get("replay").and_then(|v| v.as_str()) {
                named.insert(r.to_string());
                continue;
            }
            // A replayed letter applied by a reconciliation names its decision only.
            let Some(decision) = detail.get("decision").and_then(|v| v.as_i64()) else {
                return Ok(None);
            };
            let reason: Option<String> = self
                .db
                .opt(
                    "SELECT reason FROM decisions WHERE audit_seq = ?1",
                    p![decision],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            match reason.as_deref().and_then(|r| r.strip_prefix("replay ")) {
                Some(r) => named.insert(r.to_string()),
                None => return Ok(None),
            };
        }
        Ok(Some(named))
    }

    /// The tables as they are now (in the open snapshot), for a checkpoint at `head`.
    /// With a `base`, the letters of replays not named since it are taken from it (their
    /// total is still counted): counting every replay's letters is a scan of them all.
    pub(crate) fn checkpoint_of(
        &self,
        head: Head,
        base: Option<(&Checkpoint, &HashSet<String>)>,
    ) -> Result<Checkpoint, JournalError> {
        let count = |table: &str| -> Result<i64, JournalError> {
            self.db
                .one(&format!("SELECT count(*) FROM {table}"), p![], |r| r.get(0))
                .map_err(|e| self.err(e))
        };
        let grouped = |sql: &str| -> Result<BTreeMap<String, i64>, JournalError> {
            self.db
                .map(sql, p![], |r| Ok((r.get(0)?, r.get(1)?)))
                .map(|rows| rows.into_iter().collect())
                .map_err(|e| self.err(e))
        };
        let items = match base {
            None => grouped("SELECT replay_id, count(*) FROM replay_items GROUP BY replay_id")?,
            Some((base, named)) => {
                let mut items: BTreeMap<String, i64> = base
                    .replays
                    .iter()
                    .map(|(id, m)| (id.clone(), m.items))
                    .collect();
                for id in named {
                    let n = self
                        .db
                        .one(
                            "SELECT count(*) FROM replay_items WHERE replay_id = ?1",
                            p![id],
                            |r| r.get(0),
                        )
                        .map_err(|e| self.err(e))?;
                    items.insert(id.clone(), n);
                }
                items
            }
        };
        let open = grouped("SELECT replay_id, count(*) FROM replay_items WHERE state IN ('planned', 'sending') GROUP BY replay_id")?;
        let states: BTreeMap<String, String> = self
            .db
            .map("SELECT id, state FROM replays", p![], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map(|rows| rows.into_iter().collect())
            .map_err(|e| self.err(e))?;
        let replays = states
            .into_iter()
            .map(|(id, state)| {
                let mark = Mark {
                    state,
                    items: items.get(&id).copied().unwrap_or(0),
                    open: open.get(&id).copied().unwrap_or(0),
                };
                (id, mark)
            })
            .collect();
        Ok(Checkpoint {
            seq: head.seq,
            hash: head.hash,
            decisions: count("decisions")?,
            revisions: count("revisions")?,
            replay_items: count("replay_items")?,
            replays,
            mac: String::new(),
        })
    }

    /// The stored checkpoint, if its MAC holds (one written without the key is ignored:
    /// the full walk runs instead). A read that fails is an error, not "no checkpoint":
    /// inside a PostgreSQL transaction a swallowed error left every later statement
    /// failing with "current transaction is aborted", which named nothing.
    pub(crate) fn load_checkpoint(&self) -> Result<Option<Checkpoint>, JournalError> {
        self.checkpoint_row().map_err(|e| self.err(e))
    }

    fn checkpoint_row(&self) -> Result<Option<Checkpoint>, crate::db::DbError> {
        let text: Option<String> =
            self.db
                .opt("SELECT value FROM meta WHERE key = ?1", p![META_KEY], |r| {
                    r.get(0)
                })?;
        let Some(c) = text.and_then(|t| serde_json::from_str::<Checkpoint>(&t).ok()) else {
            return Ok(None);
        };
        let holds = if self.db.is_pg() {
            // The server says whether its MAC holds; it never hands one out.
            self.db.one(
                "SELECT dlq.checkpoint_holds(?1, ?2)",
                p![c.unsigned(), c.mac],
                |r| r.get(0),
            )?
        } else {
            self.local_mac("verified checkpoint", &c.unsigned())
                .as_deref()
                == Some(c.mac.as_str())
        };
        Ok(holds.then_some(c))
    }

    /// A full walk failed: no write may trust the checkpoint any more (each walks the
    /// whole ledger, and refuses, until a walk passes again). The checkpoint itself stays:
    /// it is still an anchor against truncation.
    pub(crate) fn mark_walk_failed(&self, seq: i64) {
        if self.db.is_pg() {
            self.meta_write(|| self.db.execute("SELECT dlq.walk_failed(?1)", p![seq]));
            return;
        }
        self.meta_write(|| {
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                p![WALK_FAILED, seq.to_string()],
            )
        });
    }

    /// Whether the last full walk failed (its marker is set).
    fn walk_failed(&self) -> Result<bool, JournalError> {
        self.db
            .opt("SELECT 1 FROM meta WHERE key = ?1", p![WALK_FAILED], |_| {
                Ok(())
            })
            .map(|found| found.is_some())
            .map_err(|e| self.err(e))
    }

    fn meta_write<T>(&self, f: impl FnOnce() -> Result<T, crate::db::DbError>) {
        if self.read_only {
            return;
        }
        self.db.set_lock_wait(std::time::Duration::from_millis(250));
        if self.db.begin_write().is_ok() {
            match f() {
                Ok(_) => {
                    let _ = self.db.commit();
                }
                Err(_) => self.db.rollback(),
            }
        }
        self.db.set_lock_wait(LOCK_WAIT);
    }

    /// Keep `c` (from a clean walk or check) unless a newer one is there already.
    pub(crate) fn store_checkpoint(&self, c: &Checkpoint) {
        if self.db.is_pg() {
            // The server checks the chain up to it itself before it MACs and keeps it: a
            // teammate cannot store one that skips a break.
            self.meta_write(|| {
                self.db
                    .one("SELECT dlq.store_checkpoint(?1)", p![c.unsigned()], |r| {
                        r.get::<bool>(0)
                    })
            });
            return;
        }
        let mut signed = c.clone();
        let Some(mac) = self.local_mac("verified checkpoint", &c.unsigned()) else {
            return;
        };
        signed.mac = mac;
        let Ok(text) = serde_json::to_string(&signed) else {
            return;
        };
        self.meta_write(|| {
            // Read under the write lock: a newer one (another process) is kept.
            if self.checkpoint_row()?.is_some_and(|have| have.seq > c.seq) {
                return Ok(0);
            }
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                p![META_KEY, text],
            )
        });
    }

    /// A full walk passed: writes may check incrementally again.
    pub(crate) fn clear_walk_failed(&self) {
        if self.db.is_pg() {
            self.meta_write(|| {
                self.db
                    .one("SELECT dlq.walk_passed()", p![], |r| r.get::<bool>(0))
            });
            return;
        }
        self.meta_write(|| {
            self.db
                .execute("DELETE FROM meta WHERE key = ?1", p![WALK_FAILED])
        });
    }
}
