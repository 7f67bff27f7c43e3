//! The team ledger on PostgreSQL: the same journal as the SQLite file (written once, over
//! `Db`), with what a shared server adds — links computed inside the insert by a function
//! that alone reads the chain's key, an audit table no role can update or delete from,
//! and a schema version a client of an older build refuses to write.

use super::*;
use crate::db::{Db, DbError, PgConn};
use crate::p;
use dlq_core::journal::LedgerWatch;
use dlq_core::ledger_location::redacted;
pub use dlq_core::ledger_location::Location;
use std::cell::RefCell;

/// The server schema this build writes (its own numbering: the SQLite file's versions
/// count a history the server never had).
pub const SERVER_SCHEMA_VERSION: i64 = 9;

impl Ledger {
    /// Open the ledger at `at`: a file (created and migrated as needed) or a server
    /// (connected, its schema created or checked). On a server the actor is the role the
    /// client authenticated as; `actor` (the OS user) is kept for messages only.
    pub fn open_at(at: &Location, actor: &str) -> Result<Ledger, JournalError> {
        match at {
            Location::File(p) => Ledger::open(p, actor),
            Location::Server(url) => {
                let mut l = Ledger::connect(url)?;
                l.client = format!("{actor}@{}", crate::host::this_host());
                Ok(l)
            }
        }
    }

    fn connect(url: &str) -> Result<Ledger, JournalError> {
        let shown = redacted(url);
        let fail = |message: String| JournalError::Other {
            path: shown.clone(),
            message,
        };
        let (mut config, tls) = client_config(url).map_err(&fail)?;
        // The tool's settings after any the URL gives (`options=`): the later `-c` wins.
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {}", session_settings()),
            _ => session_settings(),
        };
        config
            .application_name(&application_name())
            .options(&options);
        // A network cut must not hang a write for the kernel's 15 minutes of
        // retransmissions: bounded unless the URL says otherwise.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(std::time::Duration::from_secs(30));
        }
        let client = config.connect(tls.clone()).map_err(|e| {
            fail(format!(
                "cannot connect: {} (nothing is recorded or sent without the ledger)",
                DbError::from(e)
            ))
        })?;
        let mut l = Ledger {
            db: Db::Pg(Box::new(RefCell::new(PgConn::new(
                client,
                Some((config, tls)),
            )))),
            path: PathBuf::from(&shown),
            actor: String::new(),
            chain: Chain::Server,
            server: Some(url.to_string()),
            client: String::new(),
            read_only: false,
            holding: Default::default(),
        };
        l.actor =
            l.db.one("SELECT session_user::text", p![], |r| r.get(0))
                .map_err(|e| l.err(e))?;
        l.migrate()?;
        Ok(l)
    }
}

/// Every session of the tool, set at connect (so also on a connection made again): a
/// write waits at most `lock_timeout` for the team's write lock, and the **server** ends
/// a session that sits inside a transaction for `idle_in_transaction_session_timeout` —
/// a process stopped mid-write (Ctrl-Z, SIGSTOP, a paused VM) frees the lock, and its
/// replay's holder lock, within that time; nobody's clock or good behaviour is needed.
/// A stopped process's lock is freed before a waiter gives up (`IDLE_IN_TRANSACTION` <
/// `LOCK_WAIT`).
///
/// And `search_path=dlq`: the ledger's tables are named in the schema only its owner can
/// create in (see `team_schema`), never in one a teammate could plant a table in.
pub(crate) fn session_settings() -> String {
    format!(
        "-c search_path=dlq -c lock_timeout={} -c idle_in_transaction_session_timeout={}",
        crate::LOCK_WAIT.as_millis(),
        crate::IDLE_IN_TRANSACTION.as_millis()
    )
}

/// `dlq-triage <pid>@<host>`: what another engineer's "the team ledger is busy"
/// message names (the server shows `application_name` to every role).
pub(crate) fn application_name() -> String {
    let host: String = crate::host::this_host()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(40)
        .collect();
    format!("dlq-triage {}@{host}", std::process::id())
}

/// The driver's config from the URL, the password from the URL, `PGPASSWORD` or the
/// pgpass file as libpq finds them, and TLS as `sslmode` asks, with libpq's meanings
/// (`sslrootcert` adds a CA).
fn client_config(
    url: &str,
) -> Result<(postgres::Config, postgres_native_tls::MakeTlsConnector), String> {
    // The userinfo is ours to read (it ends at the last `@`, so a password may hold
    // `/ ? #`), and the driver never sees it: nothing it echoes can carry the password.
    let parts = dlq_core::uri::split(url).ok_or("not a PostgreSQL URL (postgres://…)")?;
    let decode = |s: &str| {
        dlq_core::uri::decode(s).ok_or_else(|| {
            "%-escapes in the ledger URL's userinfo are not UTF-8 (not shown)".to_string()
        })
    };
    let user = parts.user.map(decode).transpose()?;
    let password = parts.password.map(decode).transpose()?;
    let bare = format!("{}{}", parts.scheme, parts.rest);
    let url = bare.as_str();
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept = Vec::new();
    let mut root: Option<String> = None;
    let mut mode = "prefer".to_string();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        match kv.split_once('=') {
            Some(("sslrootcert", v)) => root = Some(v.to_string()),
            Some(("sslmode", v)) => mode = v.to_string(),
            _ => kept.push(kv.to_string()),
        }
    }
    let driver_mode = match mode.as_str() {
        "disable" | "allow" | "prefer" => mode.as_str(),
        "require" | "verify-ca" | "verify-full" => "require",
        other => {
            return Err(format!(
                "unknown sslmode `{}`",
                dlq_core::sanitize::clean(other)
            ))
        }
    };
    kept.push(format!("sslmode={driver_mode}"));
    let url = format!("{base}?{}", kept.join("&"));
    let mut config: postgres::Config = url
        .parse()
        .map_err(|e| format!("not a PostgreSQL URL: {e}"))?;
    if let Some(u) = &user {
        config.user(u);
    }
    if let Some(pw) = &password {
        config.password(pw.as_bytes());
    }
    if config.get_password().is_none() {
        if let Some(pw) = std::env::var_os("PGPASSWORD") {
            config.password(pw.as_encoded_bytes());
        } else if let Some(pw) = pgpass(&config) {
            config.password(pw);
        }
    }
    let mut tls = native_tls::TlsConnector::builder();
    // libpq's meaning: `prefer`/`require` encrypt without authenticating the server,
    // `verify-ca` checks its certificate's chain, `verify-full` the chain and its name.
    let (check_chain, check_name) = match mode.as_str() {
        "verify-full" => (true, true),
        "verify-ca" => (true, false),
        _ => (false, false),
    };
    tls.danger_accept_invalid_certs(!check_chain)
        .danger_accept_invalid_hostnames(!check_name);
    if let Some(path) = root {
        let pem = std::fs::read(&path).map_err(|e| format!("reading sslrootcert {path}: {e}"))?;
        let cert = native_tls::Certificate::from_pem(&pem)
            .map_err(|e| format!("sslrootcert {path}: {e}"))?;
        tls.add_root_certificate(cert);
    }
    let connector = tls.build().map_err(|e| format!("TLS: {e}"))?;
    Ok((
        config,
        postgres_native_tls::MakeTlsConnector::new(connector),
    ))
}

/// The password for this host, port, database and user in `PGPASSFILE` or `~/.pgpass`
/// (libpq's format: `host:port:db:user:password`, `*` matches anything, `\:` escapes).
fn pgpass(config: &postgres::Config) -> Option<String> {
    let path = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    let text = std::fs::read_to_string(path).ok()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    let want = [host, port, db, user];
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let fields = split_pgpass(line);
            let [h, p, d, u, pw] = <[String; 5]>::try_from(fields).ok()?;
            let matches = [h, p, d, u]
                .iter()
                .zip(&want)
                .all(|(f, w)| f == "*" || f == w);
            matches.then_some(pw)
        })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

impl Ledger {
    /// `detail` with `client` (the OS user and host this process runs as, as the OS
    /// says) beside the server's actor: the role proves who, this says from where.
    pub(crate) fn with_client(&self, detail: &str) -> String {
        if self.client.is_empty() {
            return detail.to_string();
        }
        match serde_json::from_str::<serde_json::Value>(detail) {
            Ok(serde_json::Value::Object(mut o)) => {
                o.insert("client".into(), self.client.clone().into());
                serde_json::Value::Object(o).to_string()
            }
            _ => detail.to_string(),
        }
    }

    /// A second connection that listens for other clients' changes (a server ledger).
    pub fn watch(&self) -> Result<Option<Box<dyn LedgerWatch>>, JournalError> {
        let Some(url) = &self.server else {
            return Ok(None);
        };
        let (config, tls) = client_config(url).map_err(|m| self.other(m))?;
        let mut client = config.connect(tls).map_err(|e| self.err(e))?;
        client
            .batch_execute("LISTEN dlq_triage_changes")
            .map_err(|e| self.err(e))?;
        Ok(Some(Box::new(PgWatch {
            client,
            at: self.location(),
        })))
    }
}

/// The tables `ledger migrate` copies, with their columns (the audit log goes through
/// `dlq_import`; `meta` — checkpoints — stays behind).
const COPIED: [(&str, &str); 4] = [
    (
        "decisions",
        "id, source, letter_id, coords, binding, kind, reason, actor, at, applied_at, audit_seq",
    ),
    (
        "revisions",
        "id, source, letter_id, number, actor, at, reason, changed_paths, sha256_before, sha256_after, payload, audit_seq",
    ),
    (
        "replays",
        "id, source, target, actor, started_at, state, detail, lease_pid, lease_host, heartbeat_at",
    ),
    (
        "replay_items",
        "replay_id, seq, letter_id, binding, location, state, at, published, error",
    ),
];

/// What `ledger migrate` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Migrated {
    /// Entries and rows copied; the file's head, which the server's record now holds.
    Copied {
        entries: usize,
        rows: usize,
        head: Head,
    },
    /// The server already holds this file's ledger (migrated before).
    AlreadyThere { head: Head },
}

impl Ledger {
    /// Copy this (file) ledger into `to` (an empty server ledger): verified first, every
    /// entry appended with its own time and actor and linked under the server's key,
    /// every row copied, then a `ledger-migrated` entry naming the file's head (so the old
    /// chain's anchor still proves what was copied), all in one transaction; verified
    /// after. Running it again is a no-op.
    pub fn migrate_to(&self, to: &Ledger) -> Result<Migrated, JournalError> {
        if !to.db.is_pg() || self.db.is_pg() {
            return Err(self
                .other("ledger migrate copies a file ledger into a server (postgres://…)".into()));
        }
        let v = self.verify(None)?;
        if !v.ok {
            return Err(self.other(format!(
                "it fails verification at entry {} ({}): nothing copied — `dlq-triage audit verify`",
                v.first_bad_seq.unwrap_or_default(),
                v.problem.unwrap_or_default()
            )));
        }
        let head = self.head()?.unwrap_or(Head {
            seq: 0,
            hash: GENESIS.into(),
        });
        let running = self
            .replays()?
            .into_iter()
            .filter(|r| r.held_by.is_some())
            .count();
        if running > 0 {
            return Err(self.other(format!("{running} replay(s) are being sent with this ledger right now: migrate when they have ended (a replay journals into the ledger it started with)")));
        }
        to.db.begin_write().map_err(|e| to.err(e))?;
        let copied = self.copy_into(to, &head);
        match copied {
            Ok(m) => {
                to.db.commit().map_err(|e| to.err(e))?;
                let after = to.verify(None)?;
                if !after.ok {
                    return Err(to.other(format!(
                        "copied, but the server's ledger fails verification at entry {}: {}",
                        after.first_bad_seq.unwrap_or_default(),
                        after.problem.unwrap_or_default()
                    )));
                }
                Ok(m)
            }
            Err(e) => {
                to.db.rollback();
                Err(e)
            }
        }
    }

    fn copy_into(&self, to: &Ledger, head: &Head) -> Result<Migrated, JournalError> {
        let anchor = head.to_string();
        let there: Vec<String> = to
            .db
            .map(
                "SELECT detail FROM audit WHERE action = 'ledger-migrated'",
                p![],
                |r| r.get(0),
            )
            .map_err(|e| to.err(e))?;
        if there.iter().any(|d| {
            serde_json::from_str::<serde_json::Value>(d)
                .ok()
                .and_then(|v| {
                    v.get("from_head")
                        .and_then(|h| h.as_str())
                        .map(str::to_string)
                })
                .as_deref()
                == Some(anchor.as_str())
        }) {
            return Ok(Migrated::AlreadyThere { head: head.clone() });
        }
        if to.head()?.is_some() {
            return Err(to.other("the server's ledger already has entries: migrate into an empty one (a second file's history would need renumbering)".into()));
        }
        let entries = self.audit_entries()?;
        for e in &entries {
            to.db
                .one(
                    "SELECT dlq_private.import(?1, ?2, ?3, ?4, ?5, ?6)",
                    p![e.seq, e.at, e.actor, e.action, e.target, e.detail],
                    |r| r.get::<String>(0),
                )
                .map_err(|err| to.err(err))?;
        }
        let mut rows = 0;
        for (table, cols) in COPIED {
            let n = cols.split(',').count();
            let marks: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
            let insert = format!("INSERT INTO {table} ({cols}) VALUES ({})", marks.join(", "));
            let read = self
                .db
                .query(&format!("SELECT {cols} FROM {table}"), p![])
                .map_err(|e| self.err(e))?;
            for r in &read {
                let values: Vec<&dyn crate::db::ToValue> = (0..n)
                    .map(|i| r.value(i) as &dyn crate::db::ToValue)
                    .collect();
                to.db.execute(&insert, &values).map_err(|e| to.err(e))?;
                rows += 1;
            }
        }
        for table in ["decisions", "revisions"] {
            to.db
                .batch(&format!("SELECT setval(pg_get_serial_sequence('{table}', 'id'), greatest((SELECT max(id) FROM {table}), 1))"))
                .map_err(|e| to.err(e))?;
        }
        let detail =
            serde_json::json!({"from_head": anchor, "entries": entries.len(), "rows": rows})
                .to_string();
        // The owner's own append (a bare `ledger-migrated` is not the team's to write).
        to.db
            .execute(
                "SELECT dlq_private.append('ledger-migrated', 'ledger', ?1)",
                p![to.with_client(&detail)],
            )
            .map_err(|e| to.err(e))?;
        Ok(Migrated::Copied {
            entries: entries.len(),
            rows,
            head: head.clone(),
        })
    }
}

impl Ledger {
    /// The team's roles (actor → role) when the server manages them; `None` for a file
    /// ledger (roles come from the roles file there).
    pub fn team_roles(&self) -> Result<Option<Vec<(String, String)>>, JournalError> {
        if !self.db.is_pg() {
            return Ok(None);
        }
        self.db
            .map(
                "SELECT actor, role FROM dlq_roles ORDER BY actor",
                p![],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map(Some)
            .map_err(|e| self.err(e))
    }

    /// Set `actor`'s role on the server (a privileged role, or the owner; audited there).
    pub fn set_team_role(&mut self, actor: &str, role: &str) -> Result<(), JournalError> {
        if !self.db.is_pg() {
            return Err(self.other("roles are kept on the team's ledger (--ledger postgres://…); a file ledger takes them from the roles file".into()));
        }
        self.write(|l, tx| {
            tx.one("SELECT dlq.set_role(?1, ?2)", p![actor, role], |r| {
                r.get::<String>(0)
            })
            .map(|_| ())
            .map_err(|e| l.err(e))
        })
    }

    /// Each role row as its latest `role-set` entry left it, and no row without one.
    pub(crate) fn check_team_roles(
        &self,
    ) -> Result<Option<crate::verify::RowProblem>, JournalError> {
        let Some(rows) = self.team_roles()? else {
            return Ok(None);
        };
        for (actor, role) in rows {
            let told = self
                .history(&actor)?
                .into_iter()
                .rev()
                .find(|e| e.action == "role-set")
                .and_then(|e| {
                    serde_json::from_str::<serde_json::Value>(&e.detail)
                        .ok()
                        .and_then(|d| d.get("role").and_then(|r| r.as_str()).map(str::to_string))
                });
            if told.as_deref() != Some(role.as_str()) {
                return Ok(Some(crate::verify::RowProblem(
                    0,
                    format!(
                        "{} is `{}` in dlq_roles but its audit entries say {} (the roles table was edited)",
                        dlq_core::sanitize::clean(&actor),
                        dlq_core::sanitize::clean(&role),
                        told.map_or("nothing".into(), |t| format!("`{t}`"))
                    ),
                )));
            }
        }
        Ok(None)
    }
}

struct PgWatch {
    client: postgres::Client,
    at: String,
}

impl LedgerWatch for PgWatch {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, JournalError> {
        let err = |e: postgres::Error| JournalError::Storage {
            path: self.at.clone(),
            source: Box::new(DbError::from(e)),
        };
        use postgres::fallible_iterator::FallibleIterator;
        let mut notes = self.client.notifications();
        let changed = notes.timeout_iter(timeout).next().map_err(err)?.is_some();
        // A burst (a replay confirming a batch) is one change.
        while notes.iter().next().map_err(err)?.is_some() {}
        Ok(changed)
    }
}

pub(crate) fn first_bad_mac(db: &Db, from: i64, to: i64) -> Result<Option<i64>, DbError> {
    db.one("SELECT dlq.first_bad_mac(?1, ?2)", p![from, to], |r| {
        r.get(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_lines_match_like_libpq() {
        assert_eq!(
            split_pgpass(r"db.example:*:dlq:alice:pa\:ss\\word"),
            vec!["db.example", "*", "dlq", "alice", r"pa:ss\word"]
        );
    }
}
