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
pub const SERVER_SCHEMA_VERSION: i64 = 7;

const SCHEMA_V1: &str = r#"
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE TABLE audit (
    seq BIGINT PRIMARY KEY,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_by_target ON audit (target);
CREATE TABLE decisions (
    id BIGSERIAL PRIMARY KEY,
    source TEXT NOT NULL,
    letter_id TEXT NOT NULL,
    coords TEXT,
    binding TEXT,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    applied_at TEXT,
    audit_seq BIGINT NOT NULL
);
CREATE INDEX decisions_by_letter ON decisions (source, letter_id);
CREATE INDEX decisions_by_entry ON decisions (audit_seq);
CREATE UNIQUE INDEX one_discard_per_letter ON decisions (source, letter_id, binding)
    WHERE kind = 'discard' AND binding IS NOT NULL;
CREATE TABLE revisions (
    id BIGSERIAL PRIMARY KEY,
    source TEXT NOT NULL,
    letter_id TEXT NOT NULL,
    number BIGINT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    reason TEXT NOT NULL,
    changed_paths TEXT NOT NULL,
    sha256_before TEXT NOT NULL,
    sha256_after TEXT NOT NULL,
    payload BYTEA NOT NULL,
    audit_seq BIGINT
);
CREATE INDEX revisions_by_entry ON revisions (audit_seq);
CREATE TABLE replays (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    actor TEXT NOT NULL,
    started_at TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL,
    lease_pid BIGINT,
    lease_host TEXT,
    heartbeat_at TEXT
);
CREATE INDEX replays_running ON replays (source) WHERE state = 'running';
CREATE TABLE replay_items (
    replay_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    letter_id TEXT NOT NULL,
    binding TEXT NOT NULL,
    location TEXT NOT NULL,
    state TEXT NOT NULL,
    at TEXT,
    published TEXT,
    error TEXT,
    PRIMARY KEY (replay_id, seq)
);
CREATE INDEX replay_items_open ON replay_items (replay_id) WHERE state IN ('planned', 'sending');
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- The chain's key: readable by the ledger's owner only. Clients append and verify
-- through the SECURITY DEFINER functions below, so no client can write a forged link.
CREATE TABLE dlq_chain_key (key BYTEA NOT NULL);
INSERT INTO dlq_chain_key VALUES (gen_random_bytes(32));
REVOKE ALL ON dlq_chain_key FROM PUBLIC;

-- The entry's canonical form, byte for byte what the SQLite ledger hashes (serde_json's
-- compact object of these six fields in this order; to_json escapes strings the same).
CREATE FUNCTION dlq_canonical(seq BIGINT, at TEXT, actor TEXT, action TEXT, target TEXT, detail TEXT)
RETURNS TEXT LANGUAGE sql IMMUTABLE AS $f$
  SELECT '{"seq":' || seq::text || ',"at":' || to_json(at)::text || ',"actor":' || to_json(actor)::text
      || ',"action":' || to_json(action)::text || ',"target":' || to_json(target)::text
      || ',"detail":' || to_json(detail)::text || '}'
$f$;

CREATE FUNCTION dlq_link(prev_hash TEXT, canonical TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $f$
  SELECT encode(hmac(convert_to(prev_hash || E'\n' || canonical, 'UTF8'), (SELECT key FROM dlq_chain_key LIMIT 1), 'sha256'), 'hex')
$f$;
REVOKE ALL ON FUNCTION dlq_link(TEXT, TEXT) FROM PUBLIC;

-- Append one entry (the caller's transaction holds the audit lock): seq, time, actor
-- (the role the client authenticated as) and link are the server's.
CREATE FUNCTION dlq_append(p_action TEXT, p_target TEXT, p_detail TEXT)
RETURNS TABLE (seq BIGINT, at TEXT, actor TEXT, prev_hash TEXT, hash TEXT)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $f$
DECLARE
  v_seq BIGINT; v_prev TEXT; v_at TEXT; v_actor TEXT := session_user; v_hash TEXT;
BEGIN
  LOCK TABLE audit IN SHARE ROW EXCLUSIVE MODE;
  SELECT a.seq + 1, a.hash INTO v_seq, v_prev FROM audit a ORDER BY a.seq DESC LIMIT 1;
  IF v_seq IS NULL THEN
    v_seq := 1; v_prev := repeat('0', 64);
  END IF;
  v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
  v_hash := dlq_link(v_prev, dlq_canonical(v_seq, v_at, v_actor, p_action, p_target, p_detail));
  INSERT INTO audit VALUES (v_seq, v_at, v_actor, p_action, p_target, p_detail, v_prev, v_hash);
  RETURN QUERY SELECT v_seq, v_at, v_actor, v_prev, v_hash;
END
$f$;

-- The first entry between two seqs whose stored hash is not its MAC.
CREATE FUNCTION dlq_first_bad_mac(p_from BIGINT, p_to BIGINT) RETURNS BIGINT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $f$
  SELECT min(a.seq) FROM audit a
  WHERE a.seq BETWEEN p_from AND p_to
    AND a.hash <> dlq_link(a.prev_hash, dlq_canonical(a.seq, a.at, a.actor, a.action, a.target, a.detail))
$f$;

-- A MAC for another purpose (the verified checkpoint); the label keeps it from ever
-- being a link.
CREATE FUNCTION dlq_mac(p_label TEXT, p_text TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $f$
  SELECT encode(hmac(convert_to('dlq-triage ' || p_label || E'\n' || p_text, 'UTF8'), (SELECT key FROM dlq_chain_key LIMIT 1), 'sha256'), 'hex')
$f$;

-- Append-only, even for the table's owner (a superuser can drop the trigger: the chain
-- still names what was changed).
CREATE FUNCTION dlq_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'the dlq-triage audit log is append-only: % refused', TG_OP;
END
$f$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
  FOR EACH ROW EXECUTE FUNCTION dlq_refuse_change();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_refuse_change();
"#;

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

/// Version 2: every committed change to decisions or a replay's state is announced on
/// the `dlq_triage_changes` channel (the table's name only: nothing of a letter).
const SCHEMA_V2: &str = r#"
CREATE FUNCTION dlq_notify() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM pg_notify('dlq_triage_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$f$;
CREATE TRIGGER decisions_notify AFTER INSERT OR UPDATE ON decisions
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_notify();
CREATE TRIGGER replays_notify AFTER INSERT OR UPDATE OF state, detail ON replays
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_notify();
"#;

/// Version 3: `ledger migrate` — a SQLite ledger's entries appended with their own time
/// and actor, linked under the server's key. Only the ledger's owner may (it writes
/// history in others' names); each entry must follow the last.
const SCHEMA_V3: &str = r#"
CREATE FUNCTION dlq_import(p_seq BIGINT, p_at TEXT, p_actor TEXT, p_action TEXT, p_target TEXT, p_detail TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $f$
DECLARE v_last BIGINT; v_prev TEXT; v_hash TEXT;
BEGIN
  LOCK TABLE audit IN SHARE ROW EXCLUSIVE MODE;
  SELECT a.seq, a.hash INTO v_last, v_prev FROM audit a ORDER BY a.seq DESC LIMIT 1;
  IF coalesce(v_last, 0) + 1 <> p_seq THEN
    RAISE EXCEPTION 'import out of order: entry % after %', p_seq, coalesce(v_last, 0);
  END IF;
  v_prev := coalesce(v_prev, repeat('0', 64));
  v_hash := dlq_link(v_prev, dlq_canonical(p_seq, p_at, p_actor, p_action, p_target, p_detail));
  INSERT INTO audit VALUES (p_seq, p_at, p_actor, p_action, p_target, p_detail, v_prev, v_hash);
  RETURN v_hash;
END
$f$;
REVOKE ALL ON FUNCTION dlq_import(BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT) FROM PUBLIC;
"#;

/// Version 4: four eyes — plans over `approval_above` letters await a second operator.
const SCHEMA_V4: &str = r#"
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    digest TEXT NOT NULL,
    letters BIGINT NOT NULL,
    plan TEXT NOT NULL,
    author TEXT NOT NULL,
    requested_at TEXT NOT NULL,
    state TEXT NOT NULL,
    approver TEXT,
    decided_at TEXT,
    note TEXT
);
CREATE INDEX approvals_by_digest ON approvals (digest);
"#;

/// Version 5: the team's roles on the server — changed only through `dlq_set_role`, by a
/// privileged role (or the ledger's owner, to begin with), each change an audit entry.
const SCHEMA_V5: &str = r#"
CREATE TABLE dlq_roles (
    actor TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    granted_at TEXT NOT NULL
);
REVOKE ALL ON dlq_roles FROM PUBLIC;
CREATE FUNCTION dlq_set_role(p_actor TEXT, p_role TEXT) RETURNS TEXT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $f$
DECLARE
  v_caller TEXT := session_user;
  v_role TEXT;
  v_owner BOOLEAN;
  v_at TEXT := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
BEGIN
  IF p_role NOT IN ('viewer', 'operator', 'privileged') THEN
    RAISE EXCEPTION 'unknown role % (viewer, operator, privileged)', p_role;
  END IF;
  SELECT r.role INTO v_role FROM dlq_roles r WHERE r.actor = v_caller;
  SELECT v_caller = (SELECT tableowner FROM pg_tables WHERE tablename = 'audit' AND schemaname = current_schema())
      OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = v_caller), false)
    INTO v_owner;
  IF coalesce(v_role, '') <> 'privileged' AND NOT v_owner THEN
    RAISE EXCEPTION 'only a privileged role (or the ledger''s owner) changes roles: % is %', v_caller, coalesce(v_role, 'not listed');
  END IF;
  INSERT INTO dlq_roles VALUES (p_actor, p_role, v_caller, v_at)
    ON CONFLICT (actor) DO UPDATE SET role = EXCLUDED.role, granted_by = EXCLUDED.granted_by, granted_at = EXCLUDED.granted_at;
  PERFORM dlq_append('role-set', p_actor, json_build_object('role', p_role)::text);
  RETURN p_role;
END
$f$;
"#;

/// Each takeover of a replay bumps its lease epoch (see `lease`). And the database itself
/// ends any session (a teammate's `psql` too, not only this tool's, which sets it at
/// connect) that sits inside a transaction for 5 s: one stopped client cannot keep the
/// team's write lock. Set where the migrating role may (the database's owner).
const SCHEMA_V6: &str = r#"
ALTER TABLE replays ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
DO $d$ BEGIN
  EXECUTE pg_catalog.format('ALTER DATABASE %I SET idle_in_transaction_session_timeout = %L',
                            pg_catalog.current_database(), '5s');
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'idle_in_transaction_session_timeout not set on the database (not its owner); the tool sets it on its own sessions';
END $d$;
"#;

/// The server schema's steps, version `i + 1` each.
const SERVER_MIGRATIONS: [&str; 6] = [
    SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6,
];

/// The schema an older build (version 6) created, as it created it: for the test that
/// upgrades such a ledger in place.
#[doc(hidden)]
pub fn server_schema_v6_for_tests() -> String {
    let mut sql = String::from("CREATE TABLE dlq_schema (version BIGINT NOT NULL);\n");
    for (i, step) in SERVER_MIGRATIONS.iter().enumerate() {
        sql.push_str(step);
        sql.push_str(&format!("\nINSERT INTO dlq_schema VALUES ({});\n", i + 1));
    }
    sql
}

/// Create the schema on an empty database, or check the one there and bring it to this
/// build's version in place (entries and rows kept; `team_schema` for version 7): a newer
/// version (a newer build's) is refused, never written to. One client at a time (an
/// advisory lock), in one transaction: an upgrade that fails leaves the old schema.
pub(crate) fn migrate(l: &Ledger) -> Result<(), JournalError> {
    let db = &l.db;
    db.begin_with("BEGIN; SELECT pg_catalog.pg_advisory_xact_lock(7337001);")
        .map_err(|e| l.busy_or(e))?;
    let done = (|| {
        // Where the ledger's tables are: `dlq` (version 7 on), the schema an older build
        // created them in (the database's default, usually `public`), or nowhere yet.
        let homes: Vec<String> = db
            .map(
                "SELECT n.nspname::text FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relname = 'dlq_schema' AND c.relkind = 'r' ORDER BY 1",
                p![],
                |r| r.get(0),
            )
            .map_err(|e| l.err(e))?;
        let home = match homes.as_slice() {
            h if h.iter().any(|s| s == "dlq") => "dlq".to_string(),
            [] => {
                // Created by whoever opens an empty database first (its owner, in a team
                // setup); pgcrypto where no team role can reach it.
                db.batch(
                    "CREATE SCHEMA IF NOT EXISTS dlq; CREATE SCHEMA IF NOT EXISTS dlq_private; \
                     REVOKE ALL ON SCHEMA dlq, dlq_private FROM PUBLIC; \
                     CREATE EXTENSION IF NOT EXISTS pgcrypto SCHEMA dlq_private; \
                     CREATE TABLE dlq.dlq_schema (version BIGINT NOT NULL)",
                )
                .map_err(|e| l.err(e))?;
                "dlq".to_string()
            }
            [one] => one.clone(),
            many => {
                return Err(l.other(format!(
                    "a dlq-triage ledger in several schemas of this database ({}): name one database per ledger",
                    many.join(", ")
                )))
            }
        };
        let h = crate::team_schema::ident(&home);
        let version: i64 = db
            .opt(
                &format!("SELECT max(version) FROM {h}.dlq_schema"),
                p![],
                |r| r.get::<Option<i64>>(0),
            )
            .map_err(|e| l.err(e))?
            .flatten()
            .unwrap_or(0);
        if version > SERVER_SCHEMA_VERSION {
            return Err(l.other(format!("the server's ledger schema is version {version}, newer than this build understands ({SERVER_SCHEMA_VERSION}); upgrade dlq-triage before writing to it")));
        }
        if version < SERVER_SCHEMA_VERSION && version > 0 {
            // An upgrade moves and replaces what the owner owns: a teammate's client says
            // who must open it first, and writes nothing.
            let (owner, may): (String, bool) = db
                .one(
                    &format!(
                        "SELECT pg_catalog.pg_get_userbyid(c.relowner)::text, \
                         pg_catalog.pg_get_userbyid(c.relowner) = current_user \
                         OR coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) \
                         FROM pg_catalog.pg_class c WHERE c.oid = '{}.dlq_schema'::pg_catalog.regclass",
                        h.replace('\'', "''")
                    ),
                    p![],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| l.err(e))?;
            if !may {
                return Err(l.other(format!(
                    "the team ledger's schema is version {version} and this build writes version {SERVER_SCHEMA_VERSION}: its owner ({}) upgrades it in place by opening it once (`PGUSER={} dlq-triage --ledger … audit verify`); nothing was written",
                    dlq_core::sanitize::clean(&owner),
                    dlq_core::sanitize::clean(&owner)
                )));
            }
        }
        if version < 6 {
            // The old steps' functions name their tables by a search path of their time
            // (not checked now: version 7 replaces them all).
            db.batch(&format!(
                "SET LOCAL search_path = {h}, dlq_private; SET LOCAL check_function_bodies = off"
            ))
            .map_err(|e| l.err(e))?;
            for (i, step) in SERVER_MIGRATIONS
                .iter()
                .enumerate()
                .skip(usize::try_from(version).unwrap_or(0))
            {
                db.batch(step).map_err(|e| l.err(e))?;
                db.execute(
                    &format!("INSERT INTO {h}.dlq_schema VALUES (?1)"),
                    p![i + 1],
                )
                .map_err(|e| l.err(e))?;
            }
        }
        if version < 7 {
            let crypto: String = db
                .one(
                    "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
                     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'",
                    p![],
                    |r| r.get(0),
                )
                .map_err(|e| l.err(e))?;
            db.batch(&crate::team_schema::schema_v7(&home, &crypto))
                .map_err(|e| l.err(e))?;
            db.execute("INSERT INTO dlq.dlq_schema VALUES (7)", p![])
                .map_err(|e| l.err(e))?;
            if version > 0 {
                db.execute(
                    "SELECT dlq_private.append('ledger-upgraded', 'ledger', ?1)",
                    p![serde_json::json!({"from": version, "to": 7, "schema": home}).to_string()],
                )
                .map_err(|e| l.err(e))?;
            }
        }
        Ok(())
    })();
    match done {
        Ok(()) => db.commit().map_err(|e| l.err(e)),
        Err(e) => {
            db.rollback();
            Err(e)
        }
    }
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
