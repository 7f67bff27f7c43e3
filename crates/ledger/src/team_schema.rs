//! Server schema version 7: the team ledger enforced by the server, not by the client.
//!
//! - Every table lives in the schema `dlq`; the chain's key and the functions that may
//!   append, link or MAC live in `dlq_private`, which no team role can even name (no
//!   `USAGE`). The team gets `SELECT` on `dlq`'s tables and `EXECUTE` on its functions:
//!   it writes no table. Each function writes its rows **and** their audit entries
//!   together, builds every entry field a row is checked against from its own arguments
//!   (so no call can make the chain and the tables disagree — the lock-out of issue #45),
//!   takes the actor from `session_user`, and checks what the caller may do: the role in
//!   `dlq_roles`, an approver other than the author, a live lease (the session's own
//!   advisory lock) for every replay step, the team's policy for a replay's size.
//! - Nothing inside a function resolves through a search path anyone else can write:
//!   each runs with `search_path = pg_catalog, pg_temp` (pg_temp is never searched for
//!   functions or operators), names its tables and the tool's functions by schema, and
//!   calls pgcrypto by the schema it is installed in. A `public.to_json(text)` planted by
//!   an engineer is never called.
//! - Checkpoints are MAC'd by the server after it checked the chain up to them itself;
//!   the team can ask whether one holds, never for a MAC.
//!
//! Upgrading a ledger of version 6 moves its tables (rows, indexes, sequences) into
//! `dlq`, replaces its functions, revokes every write privilege granted on them, and
//! leaves in the old schema a `dlq_schema` table saying 7, so an older build refuses to
//! write (and never creates a second ledger beside the moved one).

/// The tables of the ledger, moved into `dlq` by the upgrade.
const TABLES: [&str; 9] = [
    "dlq_schema",
    "audit",
    "decisions",
    "revisions",
    "replays",
    "replay_items",
    "meta",
    "approvals",
    "dlq_roles",
];

/// The functions of versions 1–6, dropped by the upgrade (their successors are below).
const OLD_FUNCTIONS: [&str; 9] = [
    "dlq_set_role(TEXT, TEXT)",
    "dlq_import(BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT)",
    "dlq_mac(TEXT, TEXT)",
    "dlq_first_bad_mac(BIGINT, BIGINT)",
    "dlq_append(TEXT, TEXT, TEXT)",
    "dlq_link(TEXT, TEXT)",
    "dlq_canonical(BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT)",
    "dlq_refuse_change()",
    "dlq_notify()",
];

/// An SQL identifier, quoted.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Version 7 for a ledger whose tables are in schema `home` (`dlq` for a new one), with
/// pgcrypto installed in schema `crypto`.
pub(crate) fn schema_v7(home: &str, crypto: &str) -> String {
    let h = ident(home);
    let mut sql = String::from(
        "CREATE SCHEMA IF NOT EXISTS dlq;\nCREATE SCHEMA IF NOT EXISTS dlq_private;\n\
         REVOKE ALL ON SCHEMA dlq, dlq_private FROM PUBLIC;\n",
    );
    // The triggers go first: they name functions about to be dropped.
    sql.push_str(&format!(
        "DROP TRIGGER IF EXISTS audit_append_only ON {h}.audit;\n\
         DROP TRIGGER IF EXISTS audit_no_truncate ON {h}.audit;\n\
         DROP TRIGGER IF EXISTS decisions_notify ON {h}.decisions;\n\
         DROP TRIGGER IF EXISTS replays_notify ON {h}.replays;\n"
    ));
    if home != "dlq" {
        for t in TABLES {
            sql.push_str(&format!("ALTER TABLE {h}.{t} SET SCHEMA dlq;\n"));
        }
        // What an older build finds where it looks: version 7, so it refuses to write.
        sql.push_str(&format!(
            "CREATE TABLE {h}.dlq_schema (version BIGINT NOT NULL);\n\
             INSERT INTO {h}.dlq_schema VALUES (7);\n\
             GRANT SELECT ON {h}.dlq_schema TO PUBLIC;\n"
        ));
    }
    sql.push_str(&format!(
        "ALTER TABLE {h}.dlq_chain_key SET SCHEMA dlq_private;\n\
         ALTER TABLE dlq.approvals ADD COLUMN spent_by TEXT;\n\
         CREATE TABLE dlq.policy (key TEXT PRIMARY KEY, value TEXT NOT NULL, set_by TEXT NOT NULL, set_at TEXT NOT NULL);\n"
    ));
    for f in OLD_FUNCTIONS {
        sql.push_str(&format!("DROP FUNCTION IF EXISTS {h}.{f};\n"));
    }
    sql.push_str(&FUNCTIONS.replace("{crypto}", &ident(crypto)));
    sql.push_str(GRANTS_CLEANUP);
    sql
}

/// The functions of version 7 that later versions keep. Versions 8 (`team_follows`) and 9
/// (`team_fences`), applied right after on every path, define the rest: the append and
/// its lock, the lease, `dlq.audit`, the replay's start, resume, send and end, the
/// discard, the approval request, the checkpoint's store. `{crypto}` is pgcrypto's schema.
const FUNCTIONS: &str = r#"
-- ---------------------------------------------------------------- internal (dlq_private)
-- Only the owner's SECURITY DEFINER functions below call these (no other role may name
-- the schema): the small ones carry no SET clause, so the planner inlines them into
-- their callers, whose search path (pg_catalog, pg_temp) is the one they are read with.

CREATE FUNCTION dlq_private.now_text() RETURNS TEXT
LANGUAGE sql VOLATILE AS $f$
  SELECT pg_catalog.to_char(pg_catalog.clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$f$;

-- The entry's canonical form, byte for byte what the SQLite ledger hashes (serde_json's
-- compact object of these six fields in this order; to_json escapes strings the same).
CREATE FUNCTION dlq_private.canonical(seq BIGINT, at TEXT, actor TEXT, action TEXT, target TEXT, detail TEXT)
RETURNS TEXT LANGUAGE sql IMMUTABLE AS $f$
  SELECT '{"seq":' || seq::text || ',"at":' || pg_catalog.to_json(at)::text || ',"actor":' || pg_catalog.to_json(actor)::text
      || ',"action":' || pg_catalog.to_json(action)::text || ',"target":' || pg_catalog.to_json(target)::text
      || ',"detail":' || pg_catalog.to_json(detail)::text || '}'
$f$;

CREATE FUNCTION dlq_private.chain_key() RETURNS BYTEA
LANGUAGE sql STABLE AS $f$
  SELECT k.key FROM dlq_private.dlq_chain_key k LIMIT 1
$f$;

-- A link under `key` (a batch reads the key once).
CREATE FUNCTION dlq_private.link_with(key BYTEA, prev_hash TEXT, canonical TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $f$
  SELECT pg_catalog.encode({crypto}.hmac(pg_catalog.convert_to(prev_hash || E'\n' || canonical, 'UTF8'),
         key, 'sha256'::text), 'hex')
$f$;

CREATE FUNCTION dlq_private.link(prev_hash TEXT, canonical TEXT) RETURNS TEXT
LANGUAGE sql STABLE AS $f$
  SELECT dlq_private.link_with(dlq_private.chain_key(), prev_hash, canonical)
$f$;

-- A MAC for another purpose (a checkpoint); the label keeps it from ever being a link.
CREATE FUNCTION dlq_private.mac(p_label TEXT, p_text TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT pg_catalog.encode({crypto}.hmac(pg_catalog.convert_to('dlq-triage ' || p_label || E'\n' || p_text, 'UTF8'),
         (SELECT k.key FROM dlq_private.dlq_chain_key k LIMIT 1), 'sha256'::text), 'hex')
$f$;

-- Append one entry. Only the functions below call it.
CREATE FUNCTION dlq_private.append(p_action TEXT, p_target TEXT, p_detail TEXT) RETURNS dlq.audit
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE h RECORD;
BEGIN
  h := dlq_private.head_locked();
  RETURN dlq_private.append_after(h.o_seq, h.o_hash, p_action, p_target, p_detail);
END
$f$;

-- The ledger's owner (the role that owns its tables) or a superuser.
CREATE FUNCTION dlq_private.is_owner(p_actor TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT p_actor = (SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c
                     WHERE c.oid = 'dlq.audit'::pg_catalog.regclass)
      OR coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = p_actor), false)
$f$;

-- The caller's role on the ledger: the owner is privileged; a listed role is its row;
-- once the team manages roles here, anyone unlisted is a viewer; before that (no row
-- at all), whoever was granted the functions operates (the roles file decides on the
-- client, as on one host).
CREATE FUNCTION dlq_private.role_of(p_actor TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT CASE
    WHEN dlq_private.is_owner(p_actor) THEN 'privileged'
    WHEN EXISTS (SELECT 1 FROM dlq.dlq_roles r WHERE r.actor = p_actor)
      THEN (SELECT r.role FROM dlq.dlq_roles r WHERE r.actor = p_actor)
    WHEN EXISTS (SELECT 1 FROM dlq.dlq_roles) THEN 'viewer'
    ELSE 'operator' END
$f$;

CREATE FUNCTION dlq_private.require(p_need TEXT, p_what TEXT) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_role TEXT := dlq_private.role_of(session_user);
BEGIN
  IF (p_need = 'operator' AND v_role NOT IN ('operator', 'privileged'))
     OR (p_need = 'privileged' AND v_role <> 'privileged') THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('%s needs the %s role on the team ledger; %s is %s there', p_what, p_need, session_user, v_role);
  END IF;
END
$f$;

-- The digest of a replay's planned letters (the client's `items_digest`).
CREATE FUNCTION dlq_private.items_digest(p_id TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT pg_catalog.encode(pg_catalog.sha256(coalesce(pg_catalog.string_agg(
      pg_catalog.int8send(pg_catalog.octet_length(i.seq::text)::int8) || pg_catalog.convert_to(i.seq::text, 'UTF8')
   || pg_catalog.int8send(pg_catalog.octet_length(i.letter_id)::int8) || pg_catalog.convert_to(i.letter_id, 'UTF8')
   || pg_catalog.int8send(pg_catalog.octet_length(i.binding)::int8) || pg_catalog.convert_to(i.binding, 'UTF8')
   || pg_catalog.int8send(pg_catalog.octet_length(i.location)::int8) || pg_catalog.convert_to(i.location, 'UTF8'),
      ''::bytea ORDER BY i.seq), ''::bytea)), 'hex')
  FROM dlq.replay_items i WHERE i.replay_id = p_id
$f$;

-- A detail object with the client (the OS user and host, as the client says) beside it.
CREATE FUNCTION dlq_private.detail(p_detail pg_catalog.jsonb, p_client TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $f$
  SELECT CASE WHEN coalesce(p_client, '') = '' THEN p_detail::text
              ELSE (p_detail || pg_catalog.jsonb_build_object('client', p_client))::text END
$f$;

-- `ledger migrate`: a file ledger's entries appended with their own time and actor,
-- linked under the server's key. Only the owner (it writes history in others' names).
CREATE FUNCTION dlq_private.import(p_seq BIGINT, p_at TEXT, p_actor TEXT, p_action TEXT, p_target TEXT, p_detail TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_last BIGINT; v_prev TEXT; v_hash TEXT;
BEGIN
  IF NOT dlq_private.is_owner(session_user) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'only the ledger''s owner imports history';
  END IF;
  LOCK TABLE dlq.audit IN SHARE ROW EXCLUSIVE MODE;
  SELECT a.seq, a.hash INTO v_last, v_prev FROM dlq.audit a ORDER BY a.seq DESC LIMIT 1;
  IF coalesce(v_last, 0) + 1 <> p_seq THEN
    RAISE EXCEPTION 'import out of order: entry % after %', p_seq, coalesce(v_last, 0);
  END IF;
  v_prev := coalesce(v_prev, pg_catalog.repeat('0', 64));
  v_hash := dlq_private.link(v_prev, dlq_private.canonical(p_seq, p_at, p_actor, p_action, p_target, p_detail));
  INSERT INTO dlq.audit (seq, at, actor, action, target, detail, prev_hash, hash)
    VALUES (p_seq, p_at, p_actor, p_action, p_target, p_detail, v_prev, v_hash);
  RETURN v_hash;
END
$f$;

-- Append-only, even for the table's owner (a superuser can drop the trigger: the chain
-- still names what was changed).
CREATE FUNCTION dlq_private.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RAISE EXCEPTION 'the dlq-triage audit log is append-only: % refused', TG_OP;
END
$f$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON dlq.audit
  FOR EACH ROW EXECUTE FUNCTION dlq_private.refuse_change();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON dlq.audit
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_private.refuse_change();

-- Every committed change to decisions or a replay's state is announced (the table's
-- name only: nothing of a letter).
CREATE FUNCTION dlq_private.notify() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  PERFORM pg_catalog.pg_notify('dlq_triage_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$f$;
CREATE TRIGGER decisions_notify AFTER INSERT OR UPDATE ON dlq.decisions
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_private.notify();
CREATE TRIGGER replays_notify AFTER INSERT OR UPDATE OF state, detail ON dlq.replays
  FOR EACH STATEMENT EXECUTE FUNCTION dlq_private.notify();

-- ---------------------------------------------------------------- the team's (dlq)

-- The first entry between two seqs whose stored hash is not its MAC.
CREATE FUNCTION dlq.first_bad_mac(p_from BIGINT, p_to BIGINT) RETURNS BIGINT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT min(a.seq) FROM dlq.audit a
  WHERE a.seq BETWEEN p_from AND p_to
    AND a.hash <> dlq_private.link(a.prev_hash, dlq_private.canonical(a.seq, a.at, a.actor, a.action, a.target, a.detail))
$f$;

-- The broker confirmed (or settled) a decision: it is applied. A replay's own step
-- (p_epoch set) needs its lease; a reconciliation after a crash (p_epoch null) does not.
CREATE FUNCTION dlq.applied(p_decision BIGINT, p_how TEXT, p_epoch BIGINT, p_seq INT4, p_client TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE d dlq.decisions; e dlq.audit; v_replay TEXT; v_detail pg_catalog.jsonb;
BEGIN
  PERFORM dlq_private.require('operator', 'applying a decision');
  SELECT * INTO d FROM dlq.decisions x WHERE x.id = p_decision;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'decision % is not in the ledger', p_decision;
  END IF;
  IF d.kind = 'replay' THEN
    v_replay := pg_catalog.substr(d.reason, 8);
  END IF;
  v_detail := pg_catalog.jsonb_build_object('decision', d.audit_seq, 'source', d.source, 'binding', d.binding, 'how', p_how);
  IF p_epoch IS NOT NULL THEN
    PERFORM dlq_private.lease_check(v_replay, p_epoch);
    v_detail := v_detail || pg_catalog.jsonb_build_object('replay', v_replay, 'seq', p_seq);
  END IF;
  e := dlq_private.append(d.kind || '-applied', d.letter_id, dlq_private.detail(v_detail, p_client));
  UPDATE dlq.decisions x SET applied_at = e.at WHERE x.id = p_decision AND x.applied_at IS NULL;
  IF v_replay IS NOT NULL THEN
    UPDATE dlq.replay_items i SET state = 'settled', at = e.at
      WHERE i.replay_id = v_replay AND i.letter_id = d.letter_id AND i.binding = d.binding AND i.state = 'confirmed';
  END IF;
  RETURN e.at;
END
$f$;

-- A number from the team's policy (null: not set).
CREATE FUNCTION dlq_private.policy_number(p_key TEXT) RETURNS BIGINT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT p.value::int8 FROM dlq.policy p WHERE p.key = p_key
$f$;

-- Letters the broker confirmed, a batch in one call: each its `replay` decision and
-- entry (ledger-only ones applied at once, with their own entry).
CREATE FUNCTION dlq.replay_confirmed(p_id TEXT, p_epoch BIGINT, p_source TEXT, p_seqs INT4[],
    p_published TEXT[], p_ledger_only BOOLEAN[], p_client TEXT)
RETURNS TABLE (o_seq INT4, o_id BIGINT, o_entry BIGINT, o_at TEXT, o_applied TEXT, o_letter TEXT, o_binding TEXT, o_location TEXT)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
  v_reason TEXT := 'replay ' || p_id; h RECORD; v_actor TEXT := session_user;
  n INT := coalesce(pg_catalog.cardinality(p_seqs), 0); i INT; k INT := 0;
  v_letters TEXT[]; v_bindings TEXT[]; v_locations TEXT[];
  -- The entries, then the rows, written one statement each (a batch is one call).
  a_seq BIGINT[]; a_at TEXT[]; a_action TEXT[]; a_target TEXT[]; a_detail TEXT[]; a_prev TEXT[]; a_hash TEXT[];
  d_seq BIGINT[]; d_at TEXT[]; d_applied TEXT[];
  v_at TEXT; v_detail TEXT; v_key BYTEA := dlq_private.chain_key();
BEGIN
  PERFORM dlq_private.lease_check(p_id, p_epoch);
  SELECT pg_catalog.array_agg(x.letter_id ORDER BY u.o), pg_catalog.array_agg(x.binding ORDER BY u.o),
         pg_catalog.array_agg(x.location ORDER BY u.o)
    INTO v_letters, v_bindings, v_locations
    FROM pg_catalog.unnest(p_seqs) WITH ORDINALITY AS u(s, o)
    JOIN dlq.replay_items x ON x.replay_id = p_id AND x.seq = u.s;
  IF coalesce(pg_catalog.cardinality(v_letters), 0) <> n THEN
    RAISE EXCEPTION 'replay % has not every letter of this batch', p_id;
  END IF;
  -- One read of the head for the batch: the lock is held to the commit.
  h := dlq_private.head_locked();
  FOR i IN 1 .. n LOOP
    v_at := dlq_private.now_text();
    v_detail := dlq_private.detail(pg_catalog.jsonb_build_object(
          'source', p_source, 'binding', v_bindings[i], 'coords', v_locations[i], 'reason', v_reason,
          'replay', p_id, 'seq', p_seqs[i], 'published', p_published[i]), p_client);
    k := k + 1;
    a_seq[k] := h.o_seq + 1; a_at[k] := v_at; a_action[k] := 'replay'; a_target[k] := v_letters[i];
    a_detail[k] := v_detail; a_prev[k] := h.o_hash;
    a_hash[k] := dlq_private.link_with(v_key, h.o_hash, dlq_private.canonical(a_seq[k], v_at, v_actor, 'replay', v_letters[i], v_detail));
    h.o_seq := a_seq[k]; h.o_hash := a_hash[k];
    d_seq[i] := a_seq[k]; d_at[i] := v_at; d_applied[i] := NULL;
    IF p_ledger_only[i] THEN
      v_detail := dlq_private.detail(pg_catalog.jsonb_build_object(
            'decision', d_seq[i], 'source', p_source, 'binding', v_bindings[i], 'how', 'ledger-only'), p_client);
      k := k + 1;
      a_seq[k] := h.o_seq + 1; a_at[k] := v_at; a_action[k] := 'replay-applied'; a_target[k] := v_letters[i];
      a_detail[k] := v_detail; a_prev[k] := h.o_hash;
      a_hash[k] := dlq_private.link_with(v_key, h.o_hash, dlq_private.canonical(a_seq[k], v_at, v_actor, 'replay-applied', v_letters[i], v_detail));
      h.o_seq := a_seq[k]; h.o_hash := a_hash[k];
      d_applied[i] := v_at;
    END IF;
  END LOOP;
  INSERT INTO dlq.audit (seq, at, actor, action, target, detail, prev_hash, hash)
    SELECT u.seq, u.at, v_actor, u.action, u.target, u.detail, u.prev, u.hash
    FROM ROWS FROM (pg_catalog.unnest(a_seq), pg_catalog.unnest(a_at), pg_catalog.unnest(a_action), pg_catalog.unnest(a_target), pg_catalog.unnest(a_detail), pg_catalog.unnest(a_prev), pg_catalog.unnest(a_hash)) AS u(seq, at, action, target, detail, prev, hash);
  RETURN QUERY
  WITH rows AS (
    INSERT INTO dlq.decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq, applied_at)
      SELECT p_source, u.l, u.b, u.loc, 'replay', v_reason, v_actor, u.at, u.seq, u.applied
      FROM ROWS FROM (pg_catalog.unnest(v_letters), pg_catalog.unnest(v_bindings), pg_catalog.unnest(v_locations), pg_catalog.unnest(d_at), pg_catalog.unnest(d_seq), pg_catalog.unnest(d_applied)) AS u(l, b, loc, at, seq, applied)
      RETURNING id, audit_seq
  ), items AS (
    UPDATE dlq.replay_items x SET
        state = CASE WHEN x.state = 'failed-again' THEN x.state WHEN u.applied IS NULL THEN 'confirmed' ELSE 'settled' END,
        at = u.at, published = u.pub
      FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(d_at), pg_catalog.unnest(d_applied), pg_catalog.unnest(p_published)) AS u(s, at, applied, pub)
      WHERE x.replay_id = p_id AND x.seq = u.s
  )
  SELECT u.s, r.id, u.seq, u.at, u.applied, u.l, u.b, u.loc
    FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(d_seq), pg_catalog.unnest(d_at), pg_catalog.unnest(d_applied), pg_catalog.unnest(v_letters), pg_catalog.unnest(v_bindings), pg_catalog.unnest(v_locations))
         WITH ORDINALITY AS u(s, seq, at, applied, l, b, loc, o)
    JOIN rows r ON r.audit_seq = u.seq
    ORDER BY u.o;
END
$f$;

-- One letter's later state (refused, held back, back in the DLQ, planned again).
CREATE FUNCTION dlq.replay_item(p_id TEXT, p_epoch BIGINT, p_seq INT4, p_state TEXT, p_note TEXT, p_client TEXT)
RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; v_letter TEXT;
BEGIN
  PERFORM dlq_private.lease_check(p_id, p_epoch);
  IF p_state NOT IN ('refused', 'held-back', 'failed-again', 'planned') THEN
    RAISE EXCEPTION 'a replay letter is not set to `%` by hand', p_state;
  END IF;
  SELECT x.letter_id INTO v_letter FROM dlq.replay_items x WHERE x.replay_id = p_id AND x.seq = p_seq;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'replay % has no letter %', p_id, p_seq;
  END IF;
  e := dlq_private.append('replay-' || p_state, v_letter, dlq_private.detail(pg_catalog.jsonb_build_object(
        'replay', p_id, 'seq', p_seq, 'note', p_note), p_client));
  UPDATE dlq.replay_items x SET state = p_state, at = e.at,
      error = coalesce(CASE WHEN p_state IN ('refused', 'held-back', 'failed-again') THEN p_note END, x.error)
    WHERE x.replay_id = p_id AND x.seq = p_seq;
END
$f$;


-- Approved or rejected, by an operator who is not its author.
CREATE FUNCTION dlq.approval_decide(p_id TEXT, p_approve BOOLEAN, p_note TEXT, p_client TEXT)
RETURNS dlq.audit LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE a dlq.approvals; e dlq.audit;
BEGIN
  PERFORM dlq_private.require('operator', 'deciding an approval');
  SELECT * INTO a FROM dlq.approvals x WHERE x.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no approval % in the ledger', p_id;
  END IF;
  IF a.author = session_user THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      '%s planned this replay and cannot approve it: a second operator must', a.author);
  END IF;
  IF a.state <> 'awaiting' THEN
    RAISE EXCEPTION 'approval % is % already', p_id, a.state;
  END IF;
  e := dlq_private.append(CASE WHEN p_approve THEN 'approval-granted' ELSE 'approval-rejected' END, p_id,
        dlq_private.detail(pg_catalog.jsonb_build_object('digest', a.digest, 'note', p_note), p_client));
  UPDATE dlq.approvals x SET state = CASE WHEN p_approve THEN 'approved' ELSE 'rejected' END,
      approver = e.actor, decided_at = e.at, note = p_note
    WHERE x.id = p_id;
  RETURN e;
END
$f$;

-- Its author spends an approval (once).
CREATE FUNCTION dlq.approval_use(p_id TEXT, p_client TEXT)
RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  PERFORM dlq_private.require('operator', 'a replay');
  UPDATE dlq.approvals x SET state = 'used'
    WHERE x.id = p_id AND x.state = 'approved' AND x.author = session_user
      AND x.approver IS NOT NULL AND x.approver <> session_user;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format('approval %s is not approved for %s', p_id, session_user);
  END IF;
  PERFORM dlq_private.append('approval-used', p_id, dlq_private.detail('{}'::pg_catalog.jsonb, p_client));
END
$f$;

-- The team's roles, changed by a privileged role (or the owner, to begin with).
CREATE FUNCTION dlq.set_role(p_actor TEXT, p_role TEXT) RETURNS TEXT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_at TEXT := dlq_private.now_text();
BEGIN
  IF p_role NOT IN ('viewer', 'operator', 'privileged') THEN
    RAISE EXCEPTION 'unknown role % (viewer, operator, privileged)', p_role;
  END IF;
  PERFORM dlq_private.require('privileged', 'changing roles');
  INSERT INTO dlq.dlq_roles (actor, role, granted_by, granted_at) VALUES (p_actor, p_role, session_user, v_at)
    ON CONFLICT (actor) DO UPDATE SET role = EXCLUDED.role, granted_by = EXCLUDED.granted_by, granted_at = EXCLUDED.granted_at;
  PERFORM dlq_private.append('role-set', p_actor, pg_catalog.jsonb_build_object('role', p_role)::text);
  RETURN p_role;
END
$f$;

-- The team's policy (approval_above, discard_approval_above, confirm_above,
-- allowed_targets), set by a privileged role; null clears a key. A client's config can
-- tighten it, never loosen it.
CREATE FUNCTION dlq.set_policy(p_key TEXT, p_value TEXT) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF p_key NOT IN ('approval_above', 'discard_approval_above', 'confirm_above', 'allowed_targets') THEN
    RAISE EXCEPTION 'unknown policy % (approval_above, discard_approval_above, confirm_above, allowed_targets)', p_key;
  END IF;
  IF p_key <> 'allowed_targets' AND p_value IS NOT NULL AND p_value !~ '^[0-9]{1,12}$' THEN
    RAISE EXCEPTION 'policy % is a number of letters, not %', p_key, p_value;
  END IF;
  PERFORM dlq_private.require('privileged', 'changing the team''s policy');
  IF p_value IS NULL THEN
    DELETE FROM dlq.policy p WHERE p.key = p_key;
  ELSE
    INSERT INTO dlq.policy (key, value, set_by, set_at) VALUES (p_key, p_value, session_user, dlq_private.now_text())
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at;
  END IF;
  PERFORM dlq_private.append('policy-set', p_key, pg_catalog.jsonb_build_object('value', p_value)::text);
END
$f$;

-- Whether a checkpoint's MAC holds (the MAC itself is never handed out).
CREATE FUNCTION dlq.checkpoint_holds(p_unsigned TEXT, p_mac TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT dlq_private.mac('verified checkpoint', p_unsigned) = p_mac
$f$;

-- A full walk failed at p_seq: no write trusts the checkpoint until one passes.
CREATE FUNCTION dlq.walk_failed(p_seq BIGINT) RETURNS VOID
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  INSERT INTO dlq.meta (key, value) VALUES ('walk-failed', p_seq::text)
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
$f$;

-- A full walk passed: cleared once the server finds every MAC holding.
CREATE FUNCTION dlq.walk_passed() RETURNS BOOLEAN
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF dlq.first_bad_mac(1, (SELECT coalesce(max(a.seq), 0) FROM dlq.audit a)) IS NOT NULL THEN
    RETURN false;
  END IF;
  DELETE FROM dlq.meta m WHERE m.key = 'walk-failed';
  RETURN true;
END
$f$;
"#;

/// No role but the owner writes a table or calls a function it was not granted: every
/// privilege on the ledger's functions is taken from PUBLIC, and every write privilege an
/// older setup granted on its tables (the README of version 6 granted the team INSERT and
/// UPDATE) is revoked.
const GRANTS_CLEANUP: &str = r#"
DO $d$
DECLARE r RECORD;
BEGIN
  FOR r IN SELECT p.oid::pg_catalog.regprocedure AS f FROM pg_catalog.pg_proc p
           WHERE p.pronamespace IN ('dlq'::pg_catalog.regnamespace, 'dlq_private'::pg_catalog.regnamespace) LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.f);
  END LOOP;
  FOR r IN SELECT DISTINCT g.grantee, g.table_schema, g.table_name FROM information_schema.role_table_grants g
           WHERE g.table_schema IN ('dlq', 'dlq_private') AND g.grantee <> current_user
             AND (g.table_schema = 'dlq_private'
                  OR g.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER')) LOOP
    EXECUTE pg_catalog.format('REVOKE %s ON %I.%I FROM %s',
      CASE WHEN r.table_schema = 'dlq_private' THEN 'ALL' ELSE 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER' END,
      r.table_schema, r.table_name,
      CASE WHEN r.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.grantee) END);
    EXECUTE pg_catalog.format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA dlq FROM %s',
      CASE WHEN r.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.grantee) END);
  END LOOP;
END $d$;
ALTER DEFAULT PRIVILEGES IN SCHEMA dlq, dlq_private REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
"#;
