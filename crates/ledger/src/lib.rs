//! The ledger: durable decisions and a tamper-evident audit log, in a SQLite file (WAL)
//! or on a PostgreSQL server (the team ledger, `server`).
//!
//! Ledger first, broker second: a decision is committed here before the broker is
//! touched, and marked applied only after the broker confirmed. A crash in between leaves
//! a pending decision, which the next browse applies — once.
//!
//! Audit entries form a keyed hash chain: `hash = HMAC-SHA256(key, prev_hash ‖ canonical
//! entry)` with a key kept outside the database (`<ledger>.key`, 0600), so an edited,
//! deleted or reordered row breaks the chain at that row and cannot be re-chained without
//! the key. Every decision and revision row is bound to its audit entry and checked
//! against it by `verify`; truncation at the end is caught with an anchor (`head`).
//!
//! Which store: `Ledger::open_at(&Location)` — a path is a SQLite file, a `postgres://`
//! URL the team's server (`server.rs`). On the server the chain key is in
//! `dlq_private`, which only the ledger's owner reads, and every write that binds a row
//! is a SECURITY DEFINER function of `dlq` (`team_schema`, `team_writes`): the team's
//! role writes no table.

use chrono::{SecondsFormat, Utc};
use db::{Db, DbError};
use dlq_core::journal::{
    AuditEntry, Decision, DecisionKind, Head, JournalError, NewRevision, Verification,
};
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub struct Ledger {
    db: Db,
    path: PathBuf,
    actor: String,
    chain: Chain,
    /// A server ledger's connection string (for a second connection that listens).
    server: Option<String>,
    /// On a server: `os-user@host` of this process, recorded beside the role.
    client: String,
    /// `--read-only`: verifications keep no checkpoint (nothing at all is written).
    read_only: bool,
    /// The replays this process sends: their lease epochs and holder locks.
    holding: std::cell::RefCell<std::collections::HashMap<String, holder::Holding>>,
}

/// How long a write waits for another writer (a replay journaling from another terminal).
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a team ledger's server lets a session sit inside a transaction before it
/// ends it (and so frees what a stopped client held). Shorter than [`LOCK_WAIT`], so a
/// writer waiting behind a stopped one gets the lock before it gives up.
pub(crate) const IDLE_IN_TRANSACTION: std::time::Duration = std::time::Duration::from_secs(5);

fn now() -> String {
    client_now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// This machine's clock. A `test-hooks` build may run it `DLQ_TRIAGE_TEST_CLOCK_SKEW_MS`
/// ahead, as a bastion with a wrong clock would (libfaketime stalls librdkafka's
/// threads, so the lease tests skew the clock here).
pub(crate) fn client_now() -> chrono::DateTime<Utc> {
    let now = Utc::now();
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("DLQ_TRIAGE_TEST_CLOCK_SKEW_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        return now + chrono::Duration::milliseconds(ms);
    }
    now
}

mod approvals;
mod busy;
mod chain;
mod checkpoint;
pub mod db;
mod follows;
/// Test hooks that stop the process at seeded points (no-ops outside `test-hooks` builds).
pub mod freeze;
mod holder;
mod host;
mod journal_impl;
mod lease;
mod replays;
mod schema;
mod server;
mod server_migrate;
mod shared;
mod team_fences;
mod team_follows;
mod team_schema;
mod team_writes;
mod verify;
mod verify_replays;

use chain::*;
pub use chain::{key_path, sha256_hex, GENESIS};
pub use checkpoint::FULL_WALK_UP_TO;
pub use schema::SCHEMA_VERSION;
pub use server::{Location, Migrated};
pub use server_migrate::server_schema_v6_for_tests;
pub use team_fences::{STALLED_AFTER_S, TAKE_OVER_AFTER_S};
use verify::*;

impl Ledger {
    /// Open (creating and migrating as needed) the ledger at `path`.
    pub fn open(path: &Path, actor: &str) -> Result<Ledger, JournalError> {
        let p = path.display().to_string();
        let other = |message: String| JournalError::Other {
            path: p.clone(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| other(format!("creating {}: {e}", dir.display())))?;
        }
        shared::check(path, &key_path(path)).map_err(&other)?;
        let new = !path.exists();
        let conn = rusqlite::Connection::open(path).map_err(|source| JournalError::Storage {
            path: p.clone(),
            source: Box::new(source),
        })?;
        if new {
            // Before its write-ahead files exist: SQLite gives them the database's mode.
            shared::share(path, 0);
        }
        // A keyed ledger (schema 2+) with entries must have its key; a new ledger, or
        // one of schema 1 (unkeyed, re-keyed by its migration), gets one.
        let keyed_entries = conn
            .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
            .and_then(|v| {
                if v < 2 {
                    return Ok(false);
                }
                conn.query_row("SELECT EXISTS (SELECT 1 FROM audit)", [], |r| r.get(0))
            })
            .map_err(|source| JournalError::Storage {
                path: p.clone(),
                source: Box::new(source),
            })?;
        let key = key_of(&conn, path, keyed_entries).map_err(other)?;
        conn.set_prepared_statement_cache_capacity(128);
        let l = Ledger {
            db: Db::Sqlite(conn),
            path: path.to_path_buf(),
            actor: actor.to_string(),
            chain: Chain::Local(key),
            server: None,
            client: String::new(),
            read_only: false,
            holding: Default::default(),
        };
        // The busy timeout first: a reader opening the ledger while a replay journals
        // (`dlq-triage replays` from a second terminal) waits instead of failing.
        if let Db::Sqlite(c) = &l.db {
            c.busy_timeout(LOCK_WAIT)
                .and_then(|_| c.pragma_update(None, "journal_mode", "WAL"))
                .and_then(|_| c.pragma_update(None, "synchronous", "FULL"))
                .map_err(|e| l.err(e))?;
        }
        l.migrate()?;
        Ok(l)
    }

    fn err(&self, source: impl Into<DbError>) -> JournalError {
        JournalError::Storage {
            path: self.location(),
            source: Box::new(source.into()),
        }
    }

    fn other(&self, message: String) -> JournalError {
        JournalError::Other {
            path: self.location(),
            message,
        }
    }

    /// Where the ledger lives, for messages: its file, or its server without credentials.
    pub fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// For `--read-only`: verifying keeps no checkpoint (nothing is written at all).
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// Append an audit entry inside an open transaction.
    fn audit_in(
        &self,
        tx: &Db,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, DbError> {
        let key = match &self.chain {
            Chain::Local(key) => key,
            // The server computes the link inside the insert: a client never holds the key.
            // The actor is the server's (the role); who ran it where is said beside it.
            Chain::Server => {
                return Self::pg_audit(tx, action, target, &self.with_client(detail));
            }
        };
        let last: Option<(i64, String)> = tx.opt(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            p![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let (seq, prev_hash) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, GENESIS.to_string()),
        };
        let at = now();
        let actor = self.actor.as_str();
        let hash = entry_hash(
            key,
            &prev_hash,
            &Canonical {
                seq,
                at: &at,
                actor,
                action,
                target,
                detail,
            },
        );
        tx.execute(
            "INSERT INTO audit (seq, at, actor, action, target, detail, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            p![seq, at, actor, action, target, detail, prev_hash, hash],
        )?;
        Ok(AuditEntry {
            seq,
            at,
            actor: actor.into(),
            action: action.into(),
            target: target.into(),
            detail: detail.into(),
            prev_hash,
            hash,
        })
    }

    /// Run `f` in an immediate (write-locked) transaction and commit.
    /// Immediate: the write lock is taken before the head is read, so two processes
    /// cannot both append entry N or both decide on one letter.
    fn write<T>(
        &mut self,
        f: impl FnOnce(&Self, &Db) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        self.db.begin_write().map_err(|e| self.busy_or(e))?;
        let out = match f(self, &self.db) {
            Ok(out) => self.db.commit().map(|_| out).map_err(|e| self.busy_or(e)),
            Err(e) => {
                self.db.rollback();
                Err(e)
            }
        };
        self.settle_holdings(out.is_ok());
        out
    }

    /// `n` audit entries from `entry(i)` = (action, target, detail), 10,000 to a
    /// transaction: for measuring big ledgers (`examples/ledger_scale.rs`).
    pub fn audit_batch(
        &mut self,
        n: usize,
        entry: impl Fn(usize) -> (String, String, String),
    ) -> Result<(), JournalError> {
        for start in (0..n).step_by(10_000) {
            self.write(|l, tx| {
                for i in start..(start + 10_000).min(n) {
                    let (action, target, detail) = entry(i);
                    l.audit_in(tx, &action, &target, &detail)
                        .map_err(|e| l.err(e))?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Record an audited action (unmask, export, a refused attempt, …).
    pub fn audit(
        &mut self,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, JournalError> {
        self.write(|l, tx| l.audit_in(tx, action, target, detail).map_err(|e| l.err(e)))
    }

    /// Record a discard decision (and its audit entry) durably, bound to the exact letter
    /// (`binding`). Call before touching the broker. A letter already discarded under the
    /// same binding is refused, naming who decided first.
    pub fn record_discard(
        &mut self,
        source: &str,
        letter_id: &str,
        binding: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> Result<Decision, JournalError> {
        if self.db.is_pg() {
            return self.pg_record_discard(source, letter_id, binding, coords, reason);
        }
        self.write(|l, tx| {
            l.refuse_discard(tx, letter_id, binding)?;
            let detail = serde_json::json!({"source": source, "binding": binding, "coords": coords, "reason": reason}).to_string();
            let entry = l
                .audit_in(tx, "discard", letter_id, &detail)
                .map_err(|e| l.err(e))?;
            let id: i64 = tx
                .one(
                    "INSERT INTO decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq) VALUES (?1, ?2, ?3, ?4, 'discard', ?5, ?6, ?7, ?8) RETURNING id",
                    p![source, letter_id, binding, coords, reason, l.actor, entry.at, entry.seq],
                    |r| r.get(0),
                )
                .map_err(|e| l.err(e))?;
            let recorded = Recorded {
                id,
                actor: l.actor.clone(),
                at: entry.at,
                seq: entry.seq,
            };
            Ok(recorded.discard(source, letter_id, binding, coords, reason))
        })
    }

    /// Record the next revision of each letter in `batch` (the original is never
    /// touched), all in one transaction: every revision is an `edit` entry naming its
    /// number, reason, changed paths, digests and (a transform's) program.
    pub fn record_revisions(
        &mut self,
        source: &str,
        batch: &[NewRevision],
    ) -> Result<Vec<i64>, JournalError> {
        if self.db.is_pg() {
            return self.pg_record_revisions(source, batch);
        }
        self.write(|l, tx| {
            l.refuse_revisions(tx, batch)?;
            let mut numbers = Vec::with_capacity(batch.len());
            for rev in batch {
                let number: i64 = tx
                    .one("SELECT COALESCE(MAX(number), 0) + 1 FROM revisions WHERE source = ?1 AND letter_id = ?2", p![source, rev.letter_id], |r| r.get(0))
                    .map_err(|e| l.err(e))?;
                let paths = serde_json::to_string(&rev.changed_paths).unwrap_or_default();
                let sha_after = sha256_hex(&rev.after);
                let mut detail = serde_json::json!({"source": source, "revision": number, "reason": rev.reason, "changed": rev.changed_paths, "sha256_before": rev.sha256_before, "sha256_after": sha_after});
                if let Some(program) = &rev.program {
                    detail["program"] = program.as_str().into();
                    detail["program_sha256"] = sha256_hex(program.as_bytes()).into();
                }
                let entry = l
                    .audit_in(tx, "edit", &rev.letter_id, &detail.to_string())
                    .map_err(|e| l.err(e))?;
                tx.execute(
                    "INSERT INTO revisions (source, letter_id, number, actor, at, reason, changed_paths, sha256_before, sha256_after, payload, audit_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    p![source, rev.letter_id, number, l.actor, entry.at, rev.reason, paths, rev.sha256_before, sha_after, rev.after, entry.seq],
                )
                .map_err(|e| l.err(e))?;
                numbers.push(number);
            }
            Ok(numbers)
        })
    }

    /// The payload of revision `number`, if it exists.
    pub fn revision(
        &self,
        source: &str,
        letter_id: &str,
        number: i64,
    ) -> Result<Option<Vec<u8>>, JournalError> {
        let row: Option<(Vec<u8>, Option<i64>)> = self
            .db
            .opt(
                "SELECT payload, audit_seq FROM revisions WHERE source = ?1 AND letter_id = ?2 AND number = ?3",
                p![source, letter_id, number],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        let Some((payload, seq)) = row else {
            return Ok(None);
        };
        self.check_revision_read(source, letter_id, number, &payload, seq)?;
        Ok(Some(payload))
    }

    /// A revision about to be shown or sent, checked against the entry that recorded it
    /// (its MAC, letter, number and payload digest): a write verifies only what changed
    /// since its checkpoint, so an older revision's payload swapped in place is caught
    /// here, where it would be used.
    pub(crate) fn check_revision_read(
        &self,
        source: &str,
        letter_id: &str,
        number: i64,
        payload: &[u8],
        seq: Option<i64>,
    ) -> Result<serde_json::Value, JournalError> {
        let entry = match seq {
            Some(seq) => self
                .db
                .opt(
                    "SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit WHERE seq = ?1",
                    p![seq],
                    entry_row,
                )
                .map_err(|e| self.err(e))?,
            None => None,
        };
        let mac_holds = match &entry {
            Some(e) => self
                .first_bad_mac(std::slice::from_ref(e))
                .map_err(|err| self.err(err))?
                .is_none(),
            None => false,
        };
        let detail = entry.as_ref().and_then(|e| {
            let d: serde_json::Value = serde_json::from_str(&e.detail).unwrap_or_default();
            let holds = e.action == "edit"
                && e.target == letter_id
                && d.get("source").and_then(|v| v.as_str()) == Some(source)
                && d.get("revision").and_then(|v| v.as_i64()) == Some(number)
                && d.get("sha256_after").and_then(|v| v.as_str())
                    == Some(sha256_hex(payload).as_str());
            holds.then_some(d)
        });
        if let (true, Some(d)) = (mac_holds, detail) {
            return Ok(d);
        }
        Err(self.other(format!(
            "revision {number} of {letter_id} does not match the audit entry that recorded it (the revisions table was edited); nothing was sent — `dlq-triage audit verify` names the row"
        )))
    }

    /// The broker confirmed: the decision is applied. Audited (`discard-applied`), so a
    /// reconciliation after a crash is on the record like the decision itself.
    pub fn mark_applied(&mut self, decision: &Decision, how: &str) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return self.pg_applied(decision, how, None);
        }
        self.write(|l, tx| {
            let detail = serde_json::json!({"decision": decision.audit_seq, "source": decision.source, "binding": decision.binding, "how": how}).to_string();
            let entry = l
                .audit_in(tx, &format!("{}-applied", decision.kind), &decision.letter_id, &detail)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "UPDATE decisions SET applied_at = ?1 WHERE id = ?2 AND applied_at IS NULL",
                p![entry.at, decision.id],
            )
            .map_err(|e| l.err(e))?;
            // A replayed letter acked later (reconciled): its journal says so too.
            if let Some(replay) = decision
                .reason
                .strip_prefix("replay ")
                .filter(|_| decision.kind == DecisionKind::Replay)
            {
                tx.execute(
                    "UPDATE replay_items SET state = 'settled', at = ?1 WHERE replay_id = ?2 AND letter_id = ?3 AND binding = ?4 AND state = 'confirmed'",
                    p![entry.at, replay, decision.letter_id, decision.binding],
                )
                .map_err(|e| l.err(e))?;
            }
            Ok(())
        })
    }

    fn decisions_where(&self, clause: &str, source: &str) -> Result<Vec<Decision>, JournalError> {
        let sql = format!(
            "SELECT id, source, letter_id, coords, binding, kind, reason, actor, at, applied_at, audit_seq FROM decisions WHERE source = ?1 {clause} ORDER BY id"
        );
        self.db
            .map(&sql, p![source], |r| {
                Ok(Decision {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    letter_id: r.get(2)?,
                    coords: r.get(3)?,
                    binding: r.get(4)?,
                    kind: replays::parsed(&r, 5, DecisionKind::parse)?,
                    reason: r.get(6)?,
                    actor: r.get(7)?,
                    at: r.get(8)?,
                    applied_at: r.get(9)?,
                    audit_seq: r.get(10)?,
                })
            })
            .map_err(|e| self.err(e))
    }

    /// Every decision for a source, oldest first.
    pub fn decisions(&self, source: &str) -> Result<Vec<Decision>, JournalError> {
        self.decisions_where("", source)
    }

    /// Decisions recorded but not yet confirmed by the broker.
    pub fn pending(&self, source: &str) -> Result<Vec<Decision>, JournalError> {
        self.decisions_where("AND applied_at IS NULL", source)
    }

    /// Entries from `from` on, in order.
    fn entries_in(db: &Db, from: i64) -> Result<Vec<AuditEntry>, DbError> {
        db.map(
            "SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit WHERE seq >= ?1 ORDER BY seq",
            p![from],
            entry_row,
        )
    }

    /// The audit log in order.
    pub fn audit_entries(&self) -> Result<Vec<AuditEntry>, JournalError> {
        Self::entries_in(&self.db, i64::MIN).map_err(|e| self.err(e))
    }

    /// Audit entries about one letter (its decisions, revisions, unmasks, refusals).
    pub fn history(&self, letter_id: &str) -> Result<Vec<AuditEntry>, JournalError> {
        self.db
            .map("SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit WHERE target = ?1 ORDER BY seq", p![letter_id], entry_row)
            .map_err(|e| self.err(e))
    }

    /// The newest entry, or `None` for an empty log.
    pub fn head(&self) -> Result<Option<Head>, JournalError> {
        self.db
            .opt(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                p![],
                |r| {
                    Ok(Head {
                        seq: r.get(0)?,
                        hash: r.get(1)?,
                    })
                },
            )
            .map_err(|e| self.err(e))
    }
}

/// A decision row as written: its id, and the actor, time and seq of its entry.
pub(crate) struct Recorded {
    pub id: i64,
    pub actor: String,
    pub at: String,
    pub seq: i64,
}

impl Recorded {
    /// The discard decision it recorded.
    pub(crate) fn discard(
        self,
        source: &str,
        letter_id: &str,
        binding: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> Decision {
        Decision {
            id: self.id,
            source: source.into(),
            letter_id: letter_id.into(),
            coords: coords.map(str::to_string),
            binding: Some(binding.into()),
            kind: DecisionKind::Discard,
            reason: reason.into(),
            actor: self.actor,
            at: self.at,
            applied_at: None,
            audit_seq: self.seq,
        }
    }
}

/// An audit row (`seq, at, actor, action, target, detail, prev_hash, hash`).
fn entry_row(mut r: db::Row) -> Result<AuditEntry, DbError> {
    Ok(AuditEntry {
        seq: r.get(0)?,
        at: r.take_text(1)?,
        actor: r.take_text(2)?,
        action: r.take_text(3)?,
        target: r.take_text(4)?,
        detail: r.take_text(5)?,
        prev_hash: r.take_text(6)?,
        hash: r.take_text(7)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::journal::Journal;
    use rusqlite::{params, Connection};

    /// The SQLite connection behind a test ledger, to tamper with it.
    fn conn(l: &Ledger) -> &Connection {
        match &l.db {
            Db::Sqlite(c) => c,
            Db::Pg(_) => panic!("a SQLite ledger"),
        }
    }

    fn ledger() -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().expect("tmp");
        let l = Ledger::open(&dir.path().join("state/ledger.db"), "alice").expect("ledger");
        (dir, l)
    }

    fn chain(l: &mut Ledger, n: usize) {
        for i in 0..n {
            l.audit(
                "unmask",
                &format!("msg-{i}"),
                "{\"reason\":\"incident 42\"}",
            )
            .expect("audit");
        }
    }

    #[test]
    fn a_fresh_chain_verifies_and_reopens() {
        let (dir, mut l) = ledger();
        chain(&mut l, 5);
        let d = l
            .record_discard(
                "kafka://k/t",
                "msg-9",
                "at:t/0/9",
                Some("t/0/9"),
                "duplicate of msg-8",
            )
            .expect("discard");
        assert_eq!(l.pending("kafka://k/t").expect("pending"), vec![d.clone()]);
        l.mark_applied(&d, "ledger-only").expect("applied");
        assert!(l.pending("kafka://k/t").expect("pending").is_empty());
        assert_eq!(
            l.verify(None).expect("verify"),
            Verification {
                ok: true,
                entries: 7,
                first_bad_seq: None,
                problem: None
            }
        );
        drop(l);
        let again = Ledger::open(&dir.path().join("state/ledger.db"), "bob").expect("reopen");
        assert_eq!(again.audit_entries().expect("entries").len(), 7);
        assert_eq!(
            again.decisions("kafka://k/t").expect("decisions")[0].reason,
            "duplicate of msg-8"
        );
    }

    #[test]
    fn tampering_is_detected_at_the_first_bad_entry() {
        for (what, sql, bad_seq) in [
            ("edit", "UPDATE audit SET detail = '{\"reason\":\"nothing to see\"}' WHERE seq = 3", 3),
            ("delete", "DELETE FROM audit WHERE seq = 2", 3),
            (
                "reorder",
                "UPDATE audit SET seq = -2 WHERE seq = 2; UPDATE audit SET seq = 2 WHERE seq = 4; UPDATE audit SET seq = 4 WHERE seq = -2;",
                2,
            ),
            ("forge", "UPDATE audit SET actor = 'mallory', hash = 'x' WHERE seq = 5", 5),
        ] {
            let (_dir, mut l) = ledger();
            chain(&mut l, 5);
            conn(&l).execute_batch(sql).expect(what);
            let v = l.verify(None).expect("verify");
            assert!(!v.ok, "{what} went unnoticed");
            assert_eq!(v.first_bad_seq, Some(bad_seq), "{what}: {v:?}");
        }
    }

    /// The full walk reads the chain a page at a time (three entries under test): an edit
    /// is found on any page, at a page's edge too, and every entry is counted.
    #[test]
    fn the_paged_walk_finds_an_edit_on_any_page_and_counts_every_entry() {
        for seq in 1..=10 {
            let (_dir, mut l) = ledger();
            chain(&mut l, 10);
            conn(&l)
                .execute(
                    "UPDATE audit SET target = 'elsewhere' WHERE seq = ?1",
                    params![seq],
                )
                .expect("edit");
            let v = l.verify(None).expect("verify");
            assert_eq!(
                (v.ok, v.first_bad_seq, v.entries),
                (false, Some(seq), 10),
                "edit of entry {seq}: {v:?}"
            );
        }
        let (_dir, mut l) = ledger();
        chain(&mut l, 9);
        let v = l.verify(None).expect("verify");
        assert_eq!((v.ok, v.entries), (true, 9), "three full pages: {v:?}");
    }

    /// Recompute a chain as someone without the key would: plain sha256, or HMAC under a
    /// key of their own.
    fn rechain(l: &Ledger, key: Option<&[u8]>) {
        let entries = l.audit_entries().expect("entries");
        let mut prev = GENESIS.to_string();
        for (i, e) in entries.iter().enumerate() {
            let mut e = e.clone();
            e.seq = i as i64 + 1;
            let h = match key {
                Some(k) => entry_hash(k, &prev, &canonical(&e)),
                None => legacy_entry_hash(&prev, &canonical(&e)),
            };
            conn(l)
                .execute(
                    "UPDATE audit SET seq = ?1, prev_hash = ?2, hash = ?3 WHERE rowid = (SELECT rowid FROM audit ORDER BY rowid LIMIT 1 OFFSET ?4)",
                    params![e.seq, prev, h, i as i64],
                )
                .expect("rechain");
            prev = h;
        }
    }

    #[test]
    fn a_rechained_log_without_the_key_is_caught() {
        for key in [None, Some(&b"mallory's own key, 32 bytes long!"[..])] {
            // Edit an entry and recompute every later hash.
            let (_d, mut l) = ledger();
            chain(&mut l, 5);
            conn(&l)
                .execute_batch("UPDATE audit SET detail = '{}' WHERE seq = 2")
                .expect("edit");
            rechain(&l, key);
            let v = l.verify(None).expect("verify");
            assert_eq!(v.first_bad_seq, Some(1), "edit+rechain {key:?}: {v:?}");
            // Delete a middle entry and renumber the rest.
            let (_d, mut l) = ledger();
            chain(&mut l, 5);
            conn(&l)
                .execute_batch("DELETE FROM audit WHERE seq = 3")
                .expect("delete");
            rechain(&l, key);
            assert!(
                !l.verify(None).expect("verify").ok,
                "delete+renumber {key:?}"
            );
        }
    }

    #[test]
    fn truncation_is_caught_by_the_anchor() {
        for sql in ["DELETE FROM audit WHERE seq = 5", "DELETE FROM audit"] {
            let (_d, mut l) = ledger();
            chain(&mut l, 5);
            let head = l.head().expect("head").expect("some");
            assert_eq!(head.seq, 5);
            assert!(l.verify(Some(&head)).expect("verify").ok);
            conn(&l).execute_batch(sql).expect(sql);
            // The last verified checkpoint is an anchor the ledger keeps itself…
            let v = l.verify(None).expect("verify");
            assert!(!v.ok, "{sql} went unnoticed by the checkpoint");
            assert!(v.problem.unwrap_or_default().contains("checkpoint"));
            // …that whoever truncates can delete too: then the log still chains…
            conn(&l)
                .execute_batch("DELETE FROM meta WHERE key = 'verified'")
                .expect("drop checkpoint");
            assert!(l.verify(None).expect("verify").ok, "{sql}");
            // …and only an anchor kept elsewhere names the loss.
            let v = l.verify(Some(&head)).expect("verify");
            assert!(!v.ok, "{sql} went unnoticed with the anchor");
            assert!(v
                .problem
                .unwrap_or_default()
                .contains("removed from the end"));
        }
        assert_eq!(
            "5:".to_string() + &"ab".repeat(32),
            "5:".to_string() + &"AB".repeat(32).to_lowercase()
        );
        assert!("x".parse::<Head>().is_err());
        assert!("3:abc".parse::<Head>().is_err());
    }

    #[test]
    fn the_decisions_and_revisions_tables_are_covered_by_the_chain() {
        for (what, sql) in [
            ("reason edited", "UPDATE decisions SET reason = 'nothing to see'"),
            ("decision deleted", "DELETE FROM decisions"),
            ("applied cleared", "UPDATE decisions SET applied_at = NULL"),
            ("decision forged", "INSERT INTO decisions (source, letter_id, binding, kind, reason, actor, at, audit_seq) VALUES ('kafka://k/t', 'msg-1', 'at:t/0/1', 'discard', 'x', 'mallory', 'now', 1)"),
            ("revision payload swapped", "UPDATE revisions SET payload = X'00'"),
            ("revision deleted", "DELETE FROM revisions"),
            ("replay forged", "INSERT INTO replays (id, source, target, actor, started_at, state, detail) VALUES ('r1', 's', 't', 'a', 'now', 'done', '{}')"),
        ] {
            let (_d, mut l) = ledger();
            chain(&mut l, 2);
            let d = l
                .record_discard("kafka://k/t", "msg-9", "at:t/0/9", Some("t/0/9"), "dup")
                .expect("discard");
            l.mark_applied(&d, "ledger-only").expect("applied");
            l.record_revision("kafka://k/t", "msg-9", "fix", &["/a".into()], b"{}", b"{\"a\":1}")
                .expect("revision");
            assert!(l.verify(None).expect("verify").ok, "{what}: clean first");
            conn(&l).execute_batch(sql).expect(what);
            let v = l.verify(None).expect("verify");
            assert!(!v.ok, "{what} went unnoticed");
        }
    }

    #[test]
    fn one_discard_per_letter_and_the_second_writer_learns_who_was_first() {
        let (dir, mut a) = ledger();
        let mut b = Ledger::open(&dir.path().join("state/ledger.db"), "bob").expect("b");
        a.record_discard("s", "msg-1", "sha256:01", None, "alice's reason")
            .expect("first");
        let err = b
            .record_discard("s", "msg-1", "sha256:01", None, "bob's reason")
            .expect_err("second");
        let text = err.to_string();
        assert!(
            text.contains("alice") && text.contains("alice's reason"),
            "{text}"
        );
        // The same id dead-lettered again (another binding) is another letter.
        b.record_discard("s", "msg-1", "sha256:02", None, "bob's reason")
            .expect("another copy");
        assert_eq!(a.decisions("s").expect("d").len(), 2);
        assert!(a.verify(None).expect("verify").ok);
    }

    #[test]
    fn concurrent_discards_record_each_letter_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("ledger.db");
        drop(Ledger::open(&path, "init").expect("create"));
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut l = Ledger::open(&path, &format!("user{t}")).expect("open");
                    (0..50)
                        .filter(|i| {
                            l.record_discard(
                                "s",
                                &format!("m{i}"),
                                &format!("b{i}"),
                                None,
                                &format!("r{t}"),
                            )
                            .is_ok()
                        })
                        .count()
                })
            })
            .collect();
        let won: usize = handles.into_iter().map(|h| h.join().expect("join")).sum();
        let l = Ledger::open(&path, "check").expect("open");
        assert_eq!(won, 50);
        assert_eq!(l.decisions("s").expect("d").len(), 50);
        assert!(l.verify(None).expect("verify").ok);
    }

    #[test]
    fn a_v1_ledger_is_verified_then_rekeyed_and_a_missing_key_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("ledger.db");
        {
            // A schema-1 ledger with a plain sha256 chain, as the previous release wrote.
            let conn = Connection::open(&path).expect("db");
            conn.execute_batch(crate::schema::MIGRATIONS[0])
                .expect("v1");
            conn.pragma_update(None, "user_version", 1).expect("v");
            let mut prev = GENESIS.to_string();
            let discard_k = r#"{"coords":"t/0/9","reason":"dup","source":"kafka://k/t"}"#;
            let discard_r = r#"{"coords":"dlq#3","reason":"dup","source":"amqp://r"}"#;
            for seq in 1..=3i64 {
                let (action, target, detail) = match seq {
                    1 => ("unmask", "m", "{}"),
                    2 => ("discard", "k-1", discard_k),
                    _ => ("discard", "r-1", discard_r),
                };
                let c = Canonical {
                    seq,
                    at: "2026-01-01T00:00:00Z",
                    actor: "a",
                    action,
                    target,
                    detail,
                };
                let h = legacy_entry_hash(&prev, &c);
                conn.execute("INSERT INTO audit (seq, at, actor, action, target, detail, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", params![seq, c.at, c.actor, c.action, c.target, c.detail, prev, h]).expect("insert");
                prev = h;
            }
            // A Kafka discard applied, a RabbitMQ one left pending, as schema 1 wrote them.
            conn.execute_batch(
                "INSERT INTO decisions (source, letter_id, coords, kind, reason, actor, at, applied_at, audit_seq) VALUES ('kafka://k/t', 'k-1', 't/0/9', 'discard', 'dup', 'a', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', 2);
                 INSERT INTO decisions (source, letter_id, coords, kind, reason, actor, at, applied_at, audit_seq) VALUES ('amqp://r', 'r-1', 'dlq#3', 'discard', 'dup', 'a', '2026-01-01T00:00:00Z', NULL, 3);",
            )
            .expect("v1 decisions");
        }
        // The upgrade checks the old chain, creates the key, re-keys every entry, binds
        // the Kafka decision to its position and audits its earlier application.
        let mut l = Ledger::open(&path, "b").expect("migrated");
        let v = l.verify(None).expect("verify");
        assert!(v.ok, "{v:?}");
        assert_eq!(l.audit_entries().expect("e").len(), 4);
        let k = l.decisions("kafka://k/t").expect("d");
        assert_eq!(k[0].binding.as_deref(), Some("at:t/0/9"));
        let r = l.pending("amqp://r").expect("p");
        assert_eq!(r[0].binding, None, "a RabbitMQ position binds nothing");
        l.audit("unmask", "m", "{}").expect("append");
        drop(l);
        // A keyed ledger without its key is refused: a fresh key would let anyone
        // re-chain it.
        std::fs::remove_file(key_path(&path)).expect("rm key");
        let err = Ledger::open(&path, "b")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("audit key") && err.contains("missing"),
            "{err}"
        );
    }

    #[test]
    fn newer_schemas_are_refused() {
        let (dir, l) = ledger();
        conn(&l)
            .pragma_update(None, "user_version", 99)
            .expect("bump");
        drop(l);
        let err = Ledger::open(&dir.path().join("state/ledger.db"), "a")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("newer than this build"), "{err}");
    }
}
