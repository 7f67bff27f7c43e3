//! The team ledger's schema on PostgreSQL, versions 1–7, and the one migration that
//! brings any of them to this build's (the team schema itself is `team_schema`).

use super::*;
use crate::p;
use crate::server::SERVER_SCHEMA_VERSION;

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
    // Up to date (every open but the first and an upgrade): nothing to lock. A lock any
    // session can take (an advisory one) is taken only to create or upgrade.
    if current_version(l)? == Some(SERVER_SCHEMA_VERSION) {
        return Ok(());
    }
    db.begin_with("BEGIN; SELECT pg_catalog.pg_advisory_xact_lock(7337001);")
        .map_err(|e| l.busy_or(e))?;
    let done = (|| {
        let home = ledger_home(l)?;
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
            may_upgrade(l, &h, version)?;
        }
        if version < 6 {
            old_steps(l, &h, version)?;
        }
        if version < 7 {
            to_team_schema(l, &home)?;
        }
        if version < 8 {
            to_v8(l)?;
        }
        if version < 9 {
            to_v9(l)?;
        }
        if version > 0 && version < SERVER_SCHEMA_VERSION {
            // One entry for the whole upgrade, whatever steps it took.
            db.execute(
                "SELECT dlq_private.append('ledger-upgraded', 'ledger', ?1)",
                p![serde_json::json!({"from": version, "to": SERVER_SCHEMA_VERSION, "schema": home}).to_string()],
            )
            .map_err(|e| l.err(e))?;
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

/// Where the ledger's tables are: `dlq` (version 7 on), the schema an older build
/// created them in (the database's default, usually `public`), or nowhere yet — then
/// `dlq` is created, by whoever opens an empty database first (its owner, in a team
/// setup), with pgcrypto where no team role can reach it.
fn ledger_home(l: &Ledger) -> Result<String, JournalError> {
    let db = &l.db;
    let homes: Vec<String> = db
        .map(
            "SELECT n.nspname::text FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = 'dlq_schema' AND c.relkind = 'r' ORDER BY 1",
            p![],
            |r| r.get(0),
        )
        .map_err(|e| l.err(e))?;
    match homes.as_slice() {
        h if h.iter().any(|s| s == "dlq") => Ok("dlq".to_string()),
        [] => {
            db.batch(
                "CREATE SCHEMA IF NOT EXISTS dlq; CREATE SCHEMA IF NOT EXISTS dlq_private; \
                 REVOKE ALL ON SCHEMA dlq, dlq_private FROM PUBLIC; \
                 CREATE EXTENSION IF NOT EXISTS pgcrypto SCHEMA dlq_private; \
                 CREATE TABLE dlq.dlq_schema (version BIGINT NOT NULL)",
            )
            .map_err(|e| l.err(e))?;
            Ok("dlq".to_string())
        }
        [one] => Ok(one.clone()),
        many => Err(l.other(format!(
            "a dlq-triage ledger in several schemas of this database ({}): name one database per ledger",
            many.join(", ")
        ))),
    }
}

/// An upgrade moves and replaces what the owner owns: a teammate's client says who must
/// open it first, and writes nothing.
fn may_upgrade(l: &Ledger, h: &str, version: i64) -> Result<(), JournalError> {
    let (owner, may): (String, bool) = l
        .db
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
    if may {
        return Ok(());
    }
    Err(l.other(format!(
        "the team ledger's schema is version {version} and this build writes version {SERVER_SCHEMA_VERSION}: its owner ({}) upgrades it in place by opening it once (`PGUSER={} dlq-triage --ledger … audit verify`); nothing was written",
        dlq_core::sanitize::clean(&owner),
        dlq_core::sanitize::clean(&owner)
    )))
}

/// Versions 1–6, step by step from `version`. The old steps' functions name their
/// tables by a search path of their time (not checked now: version 7 replaces them all).
fn old_steps(l: &Ledger, h: &str, version: i64) -> Result<(), JournalError> {
    let db = &l.db;
    // pgcrypto wherever the cluster has it (`public` when an admin created it first).
    let crypto: String = db
        .opt(
            "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'",
            p![],
            |r| r.get(0),
        )
        .map_err(|e| l.err(e))?
        .unwrap_or_else(|| "dlq_private".into());
    db.batch(&format!(
        "SET LOCAL search_path = {h}, dlq_private, {}; SET LOCAL check_function_bodies = off",
        crate::team_schema::ident(&crypto)
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
    Ok(())
}

/// Version 7, the team schema (`team_schema`), in `dlq`; an upgrade is itself an entry.
fn to_team_schema(l: &Ledger, home: &str) -> Result<(), JournalError> {
    let db = &l.db;
    let crypto: String = db
        .one(
            "SELECT n.nspname::text FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'",
            p![],
            |r| r.get(0),
        )
        .map_err(|e| l.err(e))?;
    db.batch(&crate::team_schema::schema_v7(home, &crypto))
        .map_err(|e| l.err(e))?;
    db.execute("INSERT INTO dlq.dlq_schema VALUES (7)", p![])
        .map_err(|e| l.err(e))?;
    Ok(())
}

/// The version of a ledger in `dlq` (`None`: none there yet, or an older one elsewhere),
/// read without a lock.
fn current_version(l: &Ledger) -> Result<Option<i64>, JournalError> {
    let there: bool =
        l.db.one(
            "SELECT pg_catalog.to_regclass('dlq.dlq_schema') IS NOT NULL",
            p![],
            |r| r.get(0),
        )
        .map_err(|e| l.err(e))?;
    if !there {
        return Ok(None);
    }
    l.db.one("SELECT max(version) FROM dlq.dlq_schema", p![], |r| {
        r.get(0)
    })
    .map_err(|e| l.err(e))
}

/// Version 9, every argument and lock the server's (`team_fences`).
fn to_v9(l: &Ledger) -> Result<(), JournalError> {
    let db = &l.db;
    db.batch(&crate::team_fences::schema_v9())
        .map_err(|e| l.err(e))?;
    db.execute("INSERT INTO dlq.dlq_schema VALUES (9)", p![])
        .map_err(|e| l.err(e))?;
    Ok(())
}

/// Version 8, one decision per letter on the server (`team_follows`).
fn to_v8(l: &Ledger) -> Result<(), JournalError> {
    let db = &l.db;
    db.batch(&crate::team_follows::schema_v8())
        .map_err(|e| l.err(e))?;
    db.execute("INSERT INTO dlq.dlq_schema VALUES (8)", p![])
        .map_err(|e| l.err(e))?;
    Ok(())
}
