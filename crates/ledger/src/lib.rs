//! The ledger: durable decisions and a tamper-evident audit log in SQLite (WAL).
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

use chrono::{SecondsFormat, Utc};
use dlq_core::journal::{AuditEntry, Decision, Head, JournalError, Verification};
use hmac::{Hmac, Mac};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The schema version this build writes; older ledgers are migrated forward.
pub const SCHEMA_VERSION: i64 = 3;

const MIGRATIONS: [&str; 3] = [
    r#"
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    letter_id TEXT NOT NULL,
    coords TEXT,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    applied_at TEXT,
    audit_seq INTEGER NOT NULL
);
CREATE INDEX decisions_by_letter ON decisions (source, letter_id);
CREATE TABLE revisions (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    letter_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    reason TEXT NOT NULL,
    changed_paths TEXT NOT NULL,
    sha256_before TEXT NOT NULL,
    sha256_after TEXT NOT NULL,
    payload BLOB NOT NULL
);
CREATE TABLE replays (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    actor TEXT NOT NULL,
    started_at TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE TABLE replay_items (
    replay_id TEXT NOT NULL,
    letter_id TEXT NOT NULL,
    state TEXT NOT NULL,
    confirmed_at TEXT,
    location TEXT,
    PRIMARY KEY (replay_id, letter_id)
);
"#,
    r#"
-- Decisions bind to the exact letter they were made on (not just its id), and a letter
-- can carry one discard only: a second writer is told who decided first.
ALTER TABLE decisions ADD COLUMN binding TEXT;
-- Schema 1 recorded where a letter sat: for Kafka (topic/partition/offset) that is its
-- exact identity. RabbitMQ positions were per browse: those keep no binding.
UPDATE decisions SET binding = 'at:' || coords
    WHERE binding IS NULL AND coords LIKE '%_/%_/%_';
CREATE UNIQUE INDEX one_discard_per_letter ON decisions (source, letter_id, binding)
    WHERE kind = 'discard' AND binding IS NOT NULL;
ALTER TABLE revisions ADD COLUMN audit_seq INTEGER;
UPDATE revisions SET audit_seq = (
    SELECT seq FROM audit WHERE action = 'edit' AND target = revisions.letter_id
      AND json_extract(detail, '$.source') = revisions.source
      AND json_extract(detail, '$.revision') = revisions.number);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"#,
    r#"
-- Replay journal: one row per planned letter, keyed by its place in the plan (the same
-- id can be in a DLQ twice). Nothing wrote the old table.
DROP TABLE replay_items;
CREATE TABLE replay_items (
    replay_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    letter_id TEXT NOT NULL,
    binding TEXT NOT NULL,
    location TEXT NOT NULL,
    state TEXT NOT NULL,
    at TEXT,
    published TEXT,
    error TEXT,
    PRIMARY KEY (replay_id, seq)
);
"#,
];

/// The canonical form that is hashed (fixed field order).
#[derive(Serialize)]
struct Canonical<'a> {
    seq: i64,
    at: &'a str,
    actor: &'a str,
    action: &'a str,
    target: &'a str,
    detail: &'a str,
}

/// The chain's MAC: HMAC-SHA256 under the ledger's key.
fn entry_hash(key: &[u8], prev_hash: &str, c: &Canonical<'_>) -> String {
    // HMAC takes keys of any length; the error branch cannot happen.
    let Ok(mut h) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(&serde_json::to_vec(c).unwrap_or_default());
    hex(&h.finalize().into_bytes())
}

/// The unkeyed chain of schema version 1, verified once before it is re-keyed.
fn legacy_entry_hash(prev_hash: &str, c: &Canonical<'_>) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_vec(c).unwrap_or_default());
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// sha256 of bytes, hex.
pub fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// The chain's anchor: the `prev_hash` of entry 1.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    actor: String,
    key: Vec<u8>,
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Where the chain's key lives: beside the ledger, never inside it.
pub fn key_path(ledger: &Path) -> PathBuf {
    let mut p = ledger.as_os_str().to_owned();
    p.push(".key");
    PathBuf::from(p)
}

mod journal_impl;
mod replays;

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
        let conn = Connection::open(path).map_err(|source| JournalError::Storage {
            path: p.clone(),
            source: Box::new(source),
        })?;
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
        let key = load_or_create_key(&key_path(path), keyed_entries).map_err(other)?;
        let l = Ledger {
            conn,
            path: path.to_path_buf(),
            actor: actor.to_string(),
            key,
        };
        // The busy timeout first: a reader opening the ledger while a replay journals
        // (`dlq-triage replays` from a second terminal) waits instead of failing.
        l.conn
            .busy_timeout(std::time::Duration::from_secs(10))
            .and_then(|_| l.conn.pragma_update(None, "journal_mode", "WAL"))
            .and_then(|_| l.conn.pragma_update(None, "synchronous", "FULL"))
            .map_err(|e| l.err(e))?;
        l.migrate()?;
        Ok(l)
    }

    fn err(&self, source: rusqlite::Error) -> JournalError {
        JournalError::Storage {
            path: self.path.display().to_string(),
            source: Box::new(source),
        }
    }

    fn other(&self, message: String) -> JournalError {
        JournalError::Other {
            path: self.path.display().to_string(),
            message,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// Bring the schema up to date, one process at a time: the write lock is taken
    /// before the version is read, so two commands opening a new ledger at once do not
    /// both create it.
    fn migrate(&self) -> Result<(), JournalError> {
        let current = |c: &Connection| -> Result<i64, JournalError> {
            c.pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(|e| self.err(e))
        };
        if current(&self.conn)? == SCHEMA_VERSION {
            return Ok(());
        }
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.err(e))?;
        let applied = (|| {
            let version = current(&self.conn)?;
            if version > SCHEMA_VERSION {
                return Err(self.other(format!("schema version {version} is newer than this build understands ({SCHEMA_VERSION}); upgrade dlq-triage")));
            }
            for (i, sql) in MIGRATIONS
                .iter()
                .enumerate()
                .skip(usize::try_from(version).unwrap_or(0))
            {
                self.conn.execute_batch(sql).map_err(|e| self.err(e))?;
                if i == 1 {
                    self.rekey_legacy_chain(&self.conn)?;
                }
                self.conn
                    .pragma_update(None, "user_version", i as i64 + 1)
                    .map_err(|e| self.err(e))?;
            }
            Ok(())
        })();
        match applied {
            Ok(()) => self.conn.execute_batch("COMMIT").map_err(|e| self.err(e)),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Schema 1 chained with plain sha256 (anyone could recompute it). Verify that chain
    /// as it was, refuse to migrate a broken one, then MAC every entry under the key.
    fn rekey_legacy_chain(&self, tx: &Connection) -> Result<(), JournalError> {
        let entries = Self::entries_in(tx).map_err(|e| self.err(e))?;
        let mut prev = GENESIS.to_string();
        let mut rekeyed = Vec::with_capacity(entries.len());
        for e in &entries {
            let c = canonical(e);
            if e.prev_hash != prev || legacy_entry_hash(&e.prev_hash, &c) != e.hash {
                return Err(self.other(format!(
                    "the audit chain was already broken at entry {} before this upgrade; keep a copy of the file and start a new ledger",
                    e.seq
                )));
            }
            prev = e.hash.clone();
        }
        let mut prev = GENESIS.to_string();
        for e in &entries {
            let hash = entry_hash(&self.key, &prev, &canonical(e));
            rekeyed.push((e.seq, prev.clone(), hash.clone()));
            prev = hash;
        }
        for (seq, prev_hash, hash) in rekeyed {
            tx.execute(
                "UPDATE audit SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
                params![prev_hash, hash, seq],
            )
            .map_err(|e| self.err(e))?;
        }
        // Schema 1 marked decisions applied without an audit entry; schema 2 audits every
        // application. Record the earlier ones now, at the end of the chain.
        let applied: Vec<(String, String, Option<String>, i64)> = tx
            .prepare(
                "SELECT source, letter_id, binding, audit_seq FROM decisions WHERE applied_at IS NOT NULL ORDER BY id",
            )
            .and_then(|mut st| st.query_map([], |r| <(String, String, Option<String>, i64)>::try_from(r))?.collect())
            .map_err(|e| self.err(e))?;
        for (source, letter_id, binding, seq) in applied {
            let detail = serde_json::json!({"decision": seq, "source": source, "binding": binding, "how": "applied before this ledger was upgraded"}).to_string();
            self.audit_in(tx, "discard-applied", &letter_id, &detail)
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Append an audit entry inside an open transaction.
    fn audit_in(
        &self,
        tx: &Connection,
        action: &str,
        target: &str,
        detail: &str,
    ) -> rusqlite::Result<AuditEntry> {
        let last: Option<(i64, String)> = tx
            .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let (seq, prev_hash) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, GENESIS.to_string()),
        };
        let at = now();
        let actor = self.actor.as_str();
        let hash = entry_hash(
            &self.key,
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
        tx.prepare_cached(
            "INSERT INTO audit (seq, at, actor, action, target, detail, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![seq, at, actor, action, target, detail, prev_hash, hash])?;
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
        f: impl FnOnce(&Self, &Connection) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.err(e))?;
        match f(self, &self.conn) {
            Ok(out) => {
                self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
                Ok(out)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
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
        self.write(|l, tx| {
            let first: Option<(String, String, String)> = tx
                .query_row(
                    "SELECT actor, at, reason FROM decisions WHERE source = ?1 AND letter_id = ?2 AND binding = ?3 AND kind = 'discard'",
                    params![source, letter_id, binding],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(|e| l.err(e))?;
            if let Some((actor, at, reason)) = first {
                return Err(JournalError::AlreadyDecided {
                    letter_id: letter_id.into(),
                    kind: "discard".into(),
                    actor,
                    at,
                    reason,
                });
            }
            let detail = serde_json::json!({"source": source, "binding": binding, "coords": coords, "reason": reason}).to_string();
            let entry = l
                .audit_in(tx, "discard", letter_id, &detail)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "INSERT INTO decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq) VALUES (?1, ?2, ?3, ?4, 'discard', ?5, ?6, ?7, ?8)",
                params![source, letter_id, binding, coords, reason, l.actor, entry.at, entry.seq],
            )
            .map_err(|e| l.err(e))?;
            Ok(Decision {
                id: tx.last_insert_rowid(),
                source: source.into(),
                letter_id: letter_id.into(),
                coords: coords.map(str::to_string),
                binding: Some(binding.into()),
                kind: "discard".into(),
                reason: reason.into(),
                actor: l.actor.clone(),
                at: entry.at,
                applied_at: None,
                audit_seq: entry.seq,
            })
        })
    }

    /// Record revision N+1 of a letter's payload (the original is never touched).
    pub fn record_revision(
        &mut self,
        source: &str,
        letter_id: &str,
        reason: &str,
        changed_paths: &[String],
        before: &[u8],
        after: &[u8],
    ) -> Result<i64, JournalError> {
        self.write(|l, tx| {
            let number: i64 = tx
                .query_row("SELECT COALESCE(MAX(number), 0) + 1 FROM revisions WHERE source = ?1 AND letter_id = ?2", params![source, letter_id], |r| r.get(0))
                .map_err(|e| l.err(e))?;
            let paths = serde_json::to_string(changed_paths).unwrap_or_default();
            let (sha_before, sha_after) = (sha256_hex(before), sha256_hex(after));
            let detail = serde_json::json!({"source": source, "revision": number, "reason": reason, "changed": changed_paths, "sha256_before": sha_before, "sha256_after": sha_after}).to_string();
            let entry = l
                .audit_in(tx, "edit", letter_id, &detail)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "INSERT INTO revisions (source, letter_id, number, actor, at, reason, changed_paths, sha256_before, sha256_after, payload, audit_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![source, letter_id, number, l.actor, entry.at, reason, paths, sha_before, sha_after, after, entry.seq],
            )
            .map_err(|e| l.err(e))?;
            Ok(number)
        })
    }

    /// The payload of revision `number`, if it exists.
    pub fn revision(
        &self,
        source: &str,
        letter_id: &str,
        number: i64,
    ) -> Result<Option<Vec<u8>>, JournalError> {
        self.conn
            .query_row(
                "SELECT payload FROM revisions WHERE source = ?1 AND letter_id = ?2 AND number = ?3",
                params![source, letter_id, number],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The broker confirmed: the decision is applied. Audited (`discard-applied`), so a
    /// reconciliation after a crash is on the record like the decision itself.
    pub fn mark_applied(&mut self, decision: &Decision, how: &str) -> Result<(), JournalError> {
        self.write(|l, tx| {
            let detail = serde_json::json!({"decision": decision.audit_seq, "source": decision.source, "binding": decision.binding, "how": how}).to_string();
            let entry = l
                .audit_in(tx, &format!("{}-applied", decision.kind), &decision.letter_id, &detail)
                .map_err(|e| l.err(e))?;
            tx.execute(
                "UPDATE decisions SET applied_at = ?1 WHERE id = ?2 AND applied_at IS NULL",
                params![entry.at, decision.id],
            )
            .map_err(|e| l.err(e))?;
            // A replayed letter acked later (reconciled): its journal says so too.
            if let Some(replay) = decision
                .reason
                .strip_prefix("replay ")
                .filter(|_| decision.kind == "replay")
            {
                tx.execute(
                    "UPDATE replay_items SET state = 'settled', at = ?1 WHERE replay_id = ?2 AND letter_id = ?3 AND binding = ?4 AND state = 'confirmed'",
                    params![entry.at, replay, decision.letter_id, decision.binding],
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
        let mut st = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![source], |r| {
                Ok(Decision {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    letter_id: r.get(2)?,
                    coords: r.get(3)?,
                    binding: r.get(4)?,
                    kind: r.get(5)?,
                    reason: r.get(6)?,
                    actor: r.get(7)?,
                    at: r.get(8)?,
                    applied_at: r.get(9)?,
                    audit_seq: r.get(10)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Every decision for a source, oldest first.
    pub fn decisions(&self, source: &str) -> Result<Vec<Decision>, JournalError> {
        self.decisions_where("", source)
    }

    /// Decisions recorded but not yet confirmed by the broker.
    pub fn pending(&self, source: &str) -> Result<Vec<Decision>, JournalError> {
        self.decisions_where("AND applied_at IS NULL", source)
    }

    fn entries_in(conn: &Connection) -> rusqlite::Result<Vec<AuditEntry>> {
        let mut st = conn.prepare(
            "SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit ORDER BY rowid",
        )?;
        let rows = st.query_map([], |r| {
            Ok(AuditEntry {
                seq: r.get(0)?,
                at: r.get(1)?,
                actor: r.get(2)?,
                action: r.get(3)?,
                target: r.get(4)?,
                detail: r.get(5)?,
                prev_hash: r.get(6)?,
                hash: r.get(7)?,
            })
        })?;
        rows.collect()
    }

    /// The audit log in order.
    pub fn audit_entries(&self) -> Result<Vec<AuditEntry>, JournalError> {
        Self::entries_in(&self.conn).map_err(|e| self.err(e))
    }

    /// Audit entries about one letter (its decisions, revisions, unmasks, refusals).
    pub fn history(&self, letter_id: &str) -> Result<Vec<AuditEntry>, JournalError> {
        Ok(self
            .audit_entries()?
            .into_iter()
            .filter(|e| e.target == letter_id)
            .collect())
    }

    /// The newest entry, or `None` for an empty log.
    pub fn head(&self) -> Result<Option<Head>, JournalError> {
        Ok(self.audit_entries()?.last().map(|e| Head {
            seq: e.seq,
            hash: e.hash.clone(),
        }))
    }

    /// Walk the chain (sequence without gaps, each `prev_hash` the previous `hash`, each
    /// MAC recomputed under the key), then check every decision and revision row against
    /// the entry that recorded it, and the anchor if one is given. Names the first
    /// problem.
    pub fn verify(&self, expect_head: Option<&Head>) -> Result<Verification, JournalError> {
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
    fn check_rows(&self, entries: &[AuditEntry]) -> Result<Option<RowProblem>, JournalError> {
        let by_seq: std::collections::HashMap<i64, &AuditEntry> =
            entries.iter().map(|e| (e.seq, e)).collect();
        // Each entry's detail parsed once (rows are checked against several fields).
        let details: std::collections::HashMap<i64, serde_json::Value> = entries
            .iter()
            .map(|e| {
                let v = serde_json::from_str(&e.detail).unwrap_or(serde_json::Value::Null);
                (e.seq, v)
            })
            .collect();
        let null = serde_json::Value::Null;
        let field = |e: &AuditEntry, k: &str| -> &serde_json::Value {
            details.get(&e.seq).and_then(|v| v.get(k)).unwrap_or(&null)
        };
        // An entry recording a row whose row is gone.
        let orphan = |action: &str, rows: &std::collections::HashSet<i64>, why: &str| {
            entries
                .iter()
                .find(|e| e.action == action && !rows.contains(&e.seq))
                .map(|e| RowProblem(e.seq, why.to_string()))
        };
        // Decisions.
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
        let mut decided_seqs = std::collections::HashSet::new();
        let applied: std::collections::HashSet<i64> = entries
            .iter()
            .filter(|e| e.action.ends_with("-applied"))
            .filter_map(|e| field(e, "decision").as_i64())
            .collect();
        for (id, source, letter_id, binding, kind, reason, actor, at, applied_at, seq) in rows {
            let matches = by_seq.get(&seq).is_some_and(|e| {
                e.action == kind
                    && e.target == letter_id
                    && e.actor == actor
                    && e.at == at
                    && field(e, "source").as_str() == Some(source.as_str())
                    && field(e, "reason").as_str() == Some(reason.as_str())
                    && details.get(&e.seq).and_then(expected_binding) == binding
            });
            if !matches {
                return Ok(Some(RowProblem(seq, format!("decision row {id} does not match the audit entry that recorded it (the decisions table was edited)"))));
            }
            if applied_at.is_some() != applied.contains(&seq) {
                return Ok(Some(RowProblem(seq, format!("decision row {id}'s applied state differs from the audit log (the decisions table was edited)"))));
            }
            decided_seqs.insert(seq);
        }
        for (action, why) in [
            (
                "discard",
                "this discard has no decision row (the decisions table was edited)",
            ),
            (
                "replay",
                "this replayed letter has no decision row (the decisions table was edited)",
            ),
        ] {
            if let Some(p) = orphan(action, &decided_seqs, why) {
                return Ok(Some(p));
            }
        }
        // Revisions.
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
        let mut revised = std::collections::HashSet::new();
        for (source, letter_id, number, sha_after, payload, seq) in revs {
            let seq = seq.unwrap_or(0);
            let ok = by_seq.get(&seq).is_some_and(|e| {
                e.action == "edit"
                    && e.target == letter_id
                    && field(e, "source").as_str() == Some(source.as_str())
                    && field(e, "revision").as_i64() == Some(number)
                    && field(e, "sha256_after").as_str() == Some(sha_after.as_str())
            }) && sha256_hex(&payload) == sha_after;
            if !ok {
                return Ok(Some(RowProblem(seq, format!("revision {number} of {letter_id} does not match the audit entry that recorded it (the revisions table was edited)"))));
            }
            revised.insert(seq);
        }
        if let Some(p) = orphan(
            "edit",
            &revised,
            "this revision has no row (the revisions table was edited)",
        ) {
            return Ok(Some(p));
        }
        // Replays: each row must have its start entry.
        let replay_ids: Vec<String> = self
            .conn
            .prepare("SELECT id FROM replays")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| self.err(e))?;
        for id in replay_ids {
            if !entries
                .iter()
                .any(|e| e.action == "replay-start" && e.target == id)
            {
                return Ok(Some(RowProblem(
                    0,
                    format!("replay {id} has no audit entry (the replays table was edited)"),
                )));
            }
        }
        if let Some(p) = self.check_replay_items(entries, &details)? {
            return Ok(Some(p));
        }
        Ok(None)
    }
}

/// The binding an audit entry recorded for its decision. Entries from schema 1 have none:
/// there it is derived as the upgrade did (Kafka coordinates), else absent.
fn expected_binding(detail: &serde_json::Value) -> Option<String> {
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
struct RowProblem(i64, String);

impl RowProblem {
    fn into_verification(self, entries: i64) -> Verification {
        Verification {
            ok: false,
            entries,
            first_bad_seq: Some(self.0),
            problem: Some(self.1),
        }
    }
}

/// The hashed form of an entry.
fn canonical(e: &AuditEntry) -> Canonical<'_> {
    Canonical {
        seq: e.seq,
        at: &e.at,
        actor: &e.actor,
        action: &e.action,
        target: &e.target,
        detail: &e.detail,
    }
}

/// The chain's key: read it, or create it (0600) for a new ledger. A ledger that exists
/// without its key cannot be appended to or verified: creating a fresh key would let
/// anyone re-chain it.
fn load_or_create_key(path: &Path, keyed_entries: bool) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(k) if k.len() >= 32 => return Ok(k),
        Ok(_) => {
            return Err(format!(
                "{} is too short to be an audit key",
                path.display()
            ))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("reading the audit key {}: {e}", path.display()))
        }
        Err(_) => {}
    }
    if keyed_entries {
        return Err(format!(
            "the audit key {} is missing: without it the chain cannot be verified or extended (restore it from backup)",
            path.display()
        ));
    }
    let mut key = vec![0u8; 32];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("no randomness for the audit key: {e}"))?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    match opts.open(path) {
        Ok(mut f) => f
            .write_all(&key)
            .and_then(|_| f.sync_all())
            .map_err(|e| format!("writing the audit key {}: {e}", path.display()))?,
        // Another process created it first (two commands started on a new ledger):
        // use theirs once it is written.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            for _ in 0..100 {
                match std::fs::read(path) {
                    Ok(k) if k.len() >= 32 => return Ok(k),
                    _ => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
            return Err(format!(
                "the audit key {} was being created by another process and never completed",
                path.display()
            ));
        }
        Err(e) => return Err(format!("writing the audit key {}: {e}", path.display())),
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            l.conn.execute_batch(sql).expect(what);
            let v = l.verify(None).expect("verify");
            assert!(!v.ok, "{what} went unnoticed");
            assert_eq!(v.first_bad_seq, Some(bad_seq), "{what}: {v:?}");
        }
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
            l.conn
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
            l.conn
                .execute_batch("UPDATE audit SET detail = '{}' WHERE seq = 2")
                .expect("edit");
            rechain(&l, key);
            let v = l.verify(None).expect("verify");
            assert_eq!(v.first_bad_seq, Some(1), "edit+rechain {key:?}: {v:?}");
            // Delete a middle entry and renumber the rest.
            let (_d, mut l) = ledger();
            chain(&mut l, 5);
            l.conn
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
            l.conn.execute_batch(sql).expect(sql);
            // Without the anchor a truncated log still chains…
            assert!(l.verify(None).expect("verify").ok, "{sql}");
            // …with it, the loss is named.
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
            l.conn.execute_batch(sql).expect(what);
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
            conn.execute_batch(MIGRATIONS[0]).expect("v1");
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
        l.conn
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
