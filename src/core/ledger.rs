//! The ledger: durable decisions and a tamper-evident audit log in SQLite (WAL).
//!
//! Ledger first, broker second: a decision is committed here before the broker is
//! touched, and marked applied only after the broker confirmed. A crash in between leaves
//! a pending decision, which the next browse applies — once.
//!
//! Audit entries form a hash chain: `hash = sha256(prev_hash ‖ canonical entry)`, so an
//! edited, deleted or reordered row breaks the chain at that row.

use chrono::{SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger {path}: {source}")]
    Sql {
        path: String,
        source: rusqlite::Error,
    },
    #[error("ledger {path}: {message}")]
    Other { path: String, message: String },
}

/// The schema version this build writes; older ledgers are migrated forward.
pub const SCHEMA_VERSION: i64 = 1;

const MIGRATIONS: [&str; 1] = [r#"
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
"#];

/// One audit entry; what is hashed is everything but `hash` itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub detail: String,
    pub prev_hash: String,
    pub hash: String,
}

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

fn entry_hash(prev_hash: &str, c: &Canonical<'_>) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_vec(c).unwrap_or_default());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The chain's anchor: the `prev_hash` of entry 1.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Outcome of `verify`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verification {
    pub ok: bool,
    pub entries: i64,
    /// The first entry that does not check out, and why.
    pub first_bad_seq: Option<i64>,
    pub problem: Option<String>,
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub id: i64,
    pub source: String,
    pub letter_id: String,
    pub coords: Option<String>,
    pub kind: String,
    pub reason: String,
    pub actor: String,
    pub at: String,
    pub applied_at: Option<String>,
}

pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    actor: String,
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Ledger {
    /// Open (creating and migrating as needed) the ledger at `path`.
    pub fn open(path: &Path, actor: &str) -> Result<Ledger, LedgerError> {
        let p = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LedgerError::Other {
                path: p.clone(),
                message: format!("creating {}: {e}", dir.display()),
            })?;
        }
        let conn = Connection::open(path).map_err(|source| LedgerError::Sql {
            path: p.clone(),
            source,
        })?;
        let l = Ledger {
            conn,
            path: path.to_path_buf(),
            actor: actor.to_string(),
        };
        l.conn
            .pragma_update(None, "journal_mode", "WAL")
            .and_then(|_| l.conn.pragma_update(None, "synchronous", "FULL"))
            .and_then(|_| l.conn.busy_timeout(std::time::Duration::from_secs(10)))
            .map_err(|e| l.err(e))?;
        l.migrate()?;
        Ok(l)
    }

    fn err(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sql {
            path: self.path.display().to_string(),
            source,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn actor(&self) -> &str {
        &self.actor
    }

    fn migrate(&self) -> Result<(), LedgerError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if version > SCHEMA_VERSION {
            return Err(LedgerError::Other {
                path: self.path.display().to_string(),
                message: format!("schema version {version} is newer than this build understands ({SCHEMA_VERSION}); upgrade dlq-triage"),
            });
        }
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
            tx.execute_batch(sql).map_err(|e| self.err(e))?;
            tx.pragma_update(None, "user_version", i as i64 + 1)
                .map_err(|e| self.err(e))?;
            tx.commit().map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Append an audit entry inside an open transaction.
    fn audit_in(
        tx: &rusqlite::Transaction<'_>,
        actor: &str,
        action: &str,
        target: &str,
        detail: &str,
    ) -> rusqlite::Result<AuditEntry> {
        let last: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (seq, prev_hash) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, GENESIS.to_string()),
        };
        let at = now();
        let hash = entry_hash(
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
            params![seq, at, actor, action, target, detail, prev_hash, hash],
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

    /// Record an audited action (unmask, export, a refused attempt, …).
    pub fn audit(
        &mut self,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, LedgerError> {
        let path = self.path.display().to_string();
        let err = |source| LedgerError::Sql {
            path: path.clone(),
            source,
        };
        let actor = self.actor.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let e = Self::audit_in(&tx, &actor, action, target, detail).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(e)
    }

    /// Record a discard decision (and its audit entry) durably. Call before touching
    /// the broker.
    pub fn record_discard(
        &mut self,
        source: &str,
        letter_id: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> Result<Decision, LedgerError> {
        let path = self.path.display().to_string();
        let err = |source| LedgerError::Sql {
            path: path.clone(),
            source,
        };
        let actor = self.actor.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let detail =
            serde_json::json!({"source": source, "coords": coords, "reason": reason}).to_string();
        let entry = Self::audit_in(&tx, &actor, "discard", letter_id, &detail).map_err(&err)?;
        let at = entry.at.clone();
        tx.execute(
            "INSERT INTO decisions (source, letter_id, coords, kind, reason, actor, at, audit_seq) VALUES (?1, ?2, ?3, 'discard', ?4, ?5, ?6, ?7)",
            params![source, letter_id, coords, reason, actor, at, entry.seq],
        )
        .map_err(&err)?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(&err)?;
        Ok(Decision {
            id,
            source: source.into(),
            letter_id: letter_id.into(),
            coords: coords.map(str::to_string),
            kind: "discard".into(),
            reason: reason.into(),
            actor,
            at,
            applied_at: None,
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
    ) -> Result<i64, LedgerError> {
        let path = self.path.display().to_string();
        let err = |source| LedgerError::Sql {
            path: path.clone(),
            source,
        };
        let actor = self.actor.clone();
        let sha = |b: &[u8]| -> String {
            Sha256::digest(b)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect()
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let number: i64 = tx
            .query_row("SELECT COALESCE(MAX(number), 0) + 1 FROM revisions WHERE source = ?1 AND letter_id = ?2", params![source, letter_id], |r| r.get(0))
            .map_err(&err)?;
        let paths = serde_json::to_string(changed_paths).unwrap_or_default();
        let detail = serde_json::json!({"source": source, "revision": number, "reason": reason, "changed": changed_paths, "sha256_before": sha(before), "sha256_after": sha(after)}).to_string();
        let entry = Self::audit_in(&tx, &actor, "edit", letter_id, &detail).map_err(&err)?;
        tx.execute(
            "INSERT INTO revisions (source, letter_id, number, actor, at, reason, changed_paths, sha256_before, sha256_after, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![source, letter_id, number, actor, entry.at, reason, paths, sha(before), sha(after), after],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(number)
    }

    /// The payload of revision `number`, if it exists.
    pub fn revision(
        &self,
        source: &str,
        letter_id: &str,
        number: i64,
    ) -> Result<Option<Vec<u8>>, LedgerError> {
        self.conn
            .query_row(
                "SELECT payload FROM revisions WHERE source = ?1 AND letter_id = ?2 AND number = ?3",
                params![source, letter_id, number],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The broker confirmed: the decision is applied.
    pub fn mark_applied(&mut self, decision_id: i64) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "UPDATE decisions SET applied_at = ?1 WHERE id = ?2 AND applied_at IS NULL",
                params![now(), decision_id],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn decisions_where(&self, clause: &str, source: &str) -> Result<Vec<Decision>, LedgerError> {
        let sql = format!(
            "SELECT id, source, letter_id, coords, kind, reason, actor, at, applied_at FROM decisions WHERE source = ?1 {clause} ORDER BY id"
        );
        let mut st = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![source], |r| {
                Ok(Decision {
                    id: r.get(0)?,
                    source: r.get(1)?,
                    letter_id: r.get(2)?,
                    coords: r.get(3)?,
                    kind: r.get(4)?,
                    reason: r.get(5)?,
                    actor: r.get(6)?,
                    at: r.get(7)?,
                    applied_at: r.get(8)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Every decision for a source, oldest first.
    pub fn decisions(&self, source: &str) -> Result<Vec<Decision>, LedgerError> {
        self.decisions_where("", source)
    }

    /// Decisions recorded but not yet confirmed by the broker.
    pub fn pending(&self, source: &str) -> Result<Vec<Decision>, LedgerError> {
        self.decisions_where("AND applied_at IS NULL", source)
    }

    /// The audit log in order.
    pub fn audit_entries(&self) -> Result<Vec<AuditEntry>, LedgerError> {
        let mut st = self
            .conn
            .prepare("SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit ORDER BY rowid")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
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
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Audit entries about one letter (its decisions, revisions, unmasks, refusals).
    pub fn history(&self, letter_id: &str) -> Result<Vec<AuditEntry>, LedgerError> {
        Ok(self
            .audit_entries()?
            .into_iter()
            .filter(|e| e.target == letter_id)
            .collect())
    }

    /// Walk the chain: sequence numbers without gaps, each `prev_hash` the previous
    /// `hash`, each `hash` recomputed. Names the first entry that fails.
    pub fn verify(&self) -> Result<Verification, LedgerError> {
        let entries = self.audit_entries()?;
        let mut prev = GENESIS.to_string();
        for (expected_seq, e) in (1i64..).zip(entries.iter()) {
            let bad = |why: String| Verification {
                ok: false,
                entries: entries.len() as i64,
                first_bad_seq: Some(e.seq),
                problem: Some(why),
            };
            if e.seq != expected_seq {
                return Ok(bad(format!(
                    "expected entry {expected_seq}, found {} (an entry was deleted or reordered)",
                    e.seq
                )));
            }
            if e.prev_hash != prev {
                return Ok(bad("its prev_hash does not match the previous entry (an entry was removed, inserted or reordered)".into()));
            }
            let c = Canonical {
                seq: e.seq,
                at: &e.at,
                actor: &e.actor,
                action: &e.action,
                target: &e.target,
                detail: &e.detail,
            };
            if entry_hash(&e.prev_hash, &c) != e.hash {
                return Ok(bad(
                    "its content does not match its hash (the entry was edited)".into(),
                ));
            }
            prev = e.hash.clone();
        }
        Ok(Verification {
            ok: true,
            entries: entries.len() as i64,
            first_bad_seq: None,
            problem: None,
        })
    }
}

/// Who is acting: the OS user (with `--actor`/`DLQ_TRIAGE_ACTOR` for tests and automation).
pub fn current_actor() -> String {
    std::env::var("DLQ_TRIAGE_ACTOR")
        .ok()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .or_else(os_user)
        .unwrap_or_else(|| "unknown".into())
}

/// The process owner's name from /etc/passwd (no environment needed: cron, tmux, sudo -i).
fn os_user() -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let uid = std::fs::metadata("/proc/self").ok()?.uid();
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2].parse() == Ok(uid)).then(|| f[0].to_string())
        })
    }
    #[cfg(not(unix))]
    {
        None
    }
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
            .record_discard("kafka://k/t", "msg-9", Some("t/0/9"), "duplicate of msg-8")
            .expect("discard");
        assert_eq!(l.pending("kafka://k/t").expect("pending"), vec![d.clone()]);
        l.mark_applied(d.id).expect("applied");
        assert!(l.pending("kafka://k/t").expect("pending").is_empty());
        assert_eq!(
            l.verify().expect("verify"),
            Verification {
                ok: true,
                entries: 6,
                first_bad_seq: None,
                problem: None
            }
        );
        drop(l);
        let again = Ledger::open(&dir.path().join("state/ledger.db"), "bob").expect("reopen");
        assert_eq!(again.audit_entries().expect("entries").len(), 6);
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
            let v = l.verify().expect("verify");
            assert!(!v.ok, "{what} went unnoticed");
            assert_eq!(v.first_bad_seq, Some(bad_seq), "{what}: {v:?}");
        }
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
