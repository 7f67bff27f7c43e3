//! The schema and its migrations, one process at a time; a schema-1 chain re-keyed once.

use super::*;

/// The schema version this build writes; older ledgers are migrated forward.
pub const SCHEMA_VERSION: i64 = 7;

pub(crate) const MIGRATIONS: [&str; 7] = [
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
    r#"
-- A running replay's lease: the process that sends it (pid on host) and its heartbeat.
-- One sender per replay; a replay's unfinished letters are claimed while it is live.
ALTER TABLE replays ADD COLUMN lease_pid INTEGER;
ALTER TABLE replays ADD COLUMN lease_host TEXT;
ALTER TABLE replays ADD COLUMN heartbeat_at TEXT;
CREATE INDEX replays_running ON replays (source) WHERE state = 'running';
"#,
    r#"
-- Incremental verification (a write checks what changed since the last verified
-- checkpoint, kept in meta): rows found by the entry that wrote them, a replay's entries
-- by its id, its unfinished letters without a scan. A letter's history by its id.
CREATE INDEX decisions_by_entry ON decisions (audit_seq);
CREATE INDEX revisions_by_entry ON revisions (audit_seq);
CREATE INDEX audit_by_target ON audit (target);
CREATE INDEX replay_items_open ON replay_items (replay_id) WHERE state IN ('planned', 'sending');
"#,
    r#"
-- Each takeover of a replay bumps its lease epoch; every journal write of the replay
-- checks the epoch its sender took (a sender whose lease was taken stops there).
ALTER TABLE replays ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
"#,
    r#"
-- One decision per letter: a discard finds the replays that hold its letter without a
-- scan of their items.
CREATE INDEX replay_items_by_letter ON replay_items (letter_id, binding) WHERE state IN ('planned', 'sending');
-- ... and the decisions on a letter under any source string that named it.
CREATE INDEX decisions_by_binding ON decisions (letter_id, binding);
-- A replay's letter moves only forward, whoever writes it (the team ledger's server has
-- the same rule): `sending` only from a state a letter is sent from, `confirmed` or
-- `settled` only once it was `sending`, and a `withdrawn` letter stays withdrawn.
CREATE TRIGGER replay_items_move BEFORE UPDATE OF state ON replay_items
FOR EACH ROW WHEN NEW.state <> OLD.state AND (
     OLD.state = 'withdrawn'
  OR (NEW.state = 'sending' AND OLD.state NOT IN ('planned', 'held-back', 'refused'))
  OR (NEW.state = 'failed-again' AND OLD.state NOT IN ('sending', 'confirmed', 'settled'))
  OR (NEW.state IN ('confirmed', 'settled') AND OLD.state NOT IN ('sending', 'confirmed')))
BEGIN
  SELECT RAISE(ABORT, 'a replay letter cannot move back to sending or be confirmed unsent: nothing written');
END;
-- One decision per letter in the table itself: at most one replay confirmation, and
-- never a discard beside one (a letter is its id and binding, under any source).
CREATE TRIGGER decisions_one_per_letter BEFORE INSERT ON decisions
FOR EACH ROW WHEN NEW.binding IS NOT NULL AND EXISTS (
  SELECT 1 FROM decisions d WHERE d.letter_id = NEW.letter_id AND d.binding = NEW.binding
    AND (d.kind = 'replay' OR NEW.kind = 'replay'))
BEGIN
  SELECT RAISE(ABORT, 'one decision per letter: this letter was already replayed or discarded, nothing written');
END;
"#,
];

impl Ledger {
    /// Bring the schema up to date, one process at a time: the write lock is taken
    /// before the version is read, so two commands opening a new ledger at once do not
    /// both create it.
    pub(crate) fn migrate(&self) -> Result<(), JournalError> {
        if self.db.is_pg() {
            return crate::server_migrate::migrate(self);
        }
        let current = |db: &Db| -> Result<i64, JournalError> {
            db.one("PRAGMA user_version", p![], |r| r.get(0))
                .map_err(|e| self.err(e))
        };
        if current(&self.db)? == SCHEMA_VERSION {
            return Ok(());
        }
        self.db.begin_write_sqlite().map_err(|e| self.err(e))?;
        let applied = (|| {
            let version = current(&self.db)?;
            if version > SCHEMA_VERSION {
                return Err(self.other(format!("schema version {version} is newer than this build understands ({SCHEMA_VERSION}); upgrade dlq-triage")));
            }
            for (i, sql) in MIGRATIONS
                .iter()
                .enumerate()
                .skip(usize::try_from(version).unwrap_or(0))
            {
                self.db.batch(sql).map_err(|e| self.err(e))?;
                if i == 1 {
                    self.rekey_legacy_chain(&self.db)?;
                }
                self.db
                    .batch(&format!("PRAGMA user_version = {}", i + 1))
                    .map_err(|e| self.err(e))?;
            }
            Ok(())
        })();
        match applied {
            Ok(()) => self.db.commit().map_err(|e| self.err(e)),
            Err(e) => {
                self.db.rollback();
                Err(e)
            }
        }
    }

    /// Schema 1 chained with plain sha256 (anyone could recompute it). Verify that chain
    /// as it was, refuse to migrate a broken one, then MAC every entry under the key.
    pub(crate) fn rekey_legacy_chain(&self, tx: &Db) -> Result<(), JournalError> {
        let Chain::Local(key) = &self.chain else {
            return Ok(()); // schema 1 was SQLite only
        };
        let entries = Self::entries_in(tx, i64::MIN).map_err(|e| self.err(e))?;
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
            let hash = entry_hash(key, &prev, &canonical(e));
            rekeyed.push((e.seq, prev.clone(), hash.clone()));
            prev = hash;
        }
        for (seq, prev_hash, hash) in rekeyed {
            tx.execute(
                "UPDATE audit SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
                p![prev_hash, hash, seq],
            )
            .map_err(|e| self.err(e))?;
        }
        // Schema 1 marked decisions applied without an audit entry; schema 2 audits every
        // application. Record the earlier ones now, at the end of the chain.
        let applied: Vec<(String, String, Option<String>, i64)> = tx
            .map(
                "SELECT source, letter_id, binding, audit_seq FROM decisions WHERE applied_at IS NOT NULL ORDER BY id",
                p![],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .map_err(|e| self.err(e))?;
        for (source, letter_id, binding, seq) in applied {
            let detail = serde_json::json!({"decision": seq, "source": source, "binding": binding, "how": "applied before this ledger was upgraded"}).to_string();
            self.audit_in(tx, "discard-applied", &letter_id, &detail)
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}
