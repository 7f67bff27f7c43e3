//! Server schema version 9: the team ledger trusts no argument and no lock a teammate can
//! take.
//!
//! Version 7 moved every write into functions that check *who* calls; an engineer with
//! `psql` and the team's grants could still pass values no client would (issue #69): a
//! sequence number of −1 that made every later read fail, a 150 MB note, a viewer's
//! `unmask` entry, an approval of one plan spent on another, a resume that adds letters,
//! an advisory lock that stalls everyone or passes for a replay's sender. This step:
//!
//! - **Every row readable, whatever the caller passed**: `CHECK` constraints on every
//!   table (sizes, ranges, enum values), added `NOT VALID` so rows already there stay
//!   (`audit verify` names them); the functions check what a constraint cannot (arrays
//!   of one length, no NULL letter, a resume's letters those of its plan).
//! - **Who may append what, in one table** (`dlq_private.entry_roles`): every entry goes
//!   through `dlq_private.append_after`, which looks its action up there — the least
//!   role, whether `dlq.audit` may write it bare, and its size. docs/ledger.md shows it.
//! - **The lease is the server's**: a sender is the backend that took it
//!   (`lease_backend`), holding a session advisory lock on a key the server drew at that
//!   moment (`lease_key`) — nobody can take it first, and holding *a* lock proves nothing
//!   unless it is that key *and* that backend. `dlq.replay_take_over` ends a holder whose
//!   heartbeat (server clock) is older than [`TAKE_OVER_AFTER_S`].
//! - **One writer at a time by a lock only the functions take**: the audit table's
//!   `SHARE ROW EXCLUSIVE` lock (taken through `dlq.write_lock()` by the client at the
//!   start of its write, and by every function); no advisory lock anyone can hold.
//!   A writer that finds it held by a session idle in its transaction for more than
//!   [`STALLED_AFTER_S`] ends that session (the owner needs `pg_signal_backend` and
//!   `pg_read_all_stats`, docs/ledger.md), so no engineer can keep the team waiting.
//! - **Plans bound by digest**: an approval request carries the plan's facts (kind,
//!   target, options, letters); the server computes their digest (with each letter's
//!   latest revision digest), renders the text the approver reads, and a replay start
//!   over the threshold must present the same facts. A discard over the team's
//!   `discard_approval_above` in 10 minutes is refused unless an approval spent by its
//!   author covers the letter.
//!
//! Every function keeps its signature (`CREATE OR REPLACE`), so the team's grants stay;
//! the new ones are granted to every role that was granted `dlq.first_bad_mac`.

/// Seconds without a heartbeat (server clock) after which `--take-over` may end a sender.
pub const TAKE_OVER_AFTER_S: u32 = 10;

/// Seconds a session may sit idle in a transaction holding the write lock before the next
/// writer ends it.
pub const STALLED_AFTER_S: u32 = 10;

/// Version 9, over a version-8 ledger (in `dlq`).
pub(crate) fn schema_v9() -> String {
    format!("{CONSTRAINTS}{ROLES}{LOCKS}{LEASE}{PLANS}{GRANTS}",)
        .replace("{take_over_s}", &TAKE_OVER_AFTER_S.to_string())
        .replace("{stalled_s}", &STALLED_AFTER_S.to_string())
}

/// What no caller can store: rows every client reads. `NOT VALID`: rows an earlier
/// version let in stay, and `audit verify` names them.
const CONSTRAINTS: &str = r#"
DROP FUNCTION IF EXISTS dlq_private.binds_rows(TEXT);
DROP FUNCTION IF EXISTS dlq_private.replay_key(TEXT);
ALTER TABLE dlq.audit ADD CONSTRAINT audit_fields_bounded CHECK (
  seq > 0 AND action ~ '^[a-z][a-z-]{0,39}$' AND pg_catalog.octet_length(target) <= 4096
  AND pg_catalog.octet_length(detail) <= 4194304) NOT VALID;
ALTER TABLE dlq.decisions ADD COLUMN approval TEXT;
ALTER TABLE dlq.decisions ADD CONSTRAINT decisions_fields_bounded CHECK (
  kind IN ('discard', 'replay') AND pg_catalog.octet_length(source) <= 4096
  AND pg_catalog.octet_length(letter_id) <= 4096 AND coalesce(pg_catalog.octet_length(binding), 0) <= 4096
  AND coalesce(pg_catalog.octet_length(coords), 0) <= 4096 AND pg_catalog.octet_length(reason) <= 8192) NOT VALID;
ALTER TABLE dlq.revisions ADD CONSTRAINT revisions_fields_bounded CHECK (
  number > 0 AND pg_catalog.octet_length(payload) <= 67108864 AND pg_catalog.octet_length(reason) <= 8192
  AND pg_catalog.octet_length(changed_paths) <= 1048576 AND sha256_before ~ '^[0-9a-f]{64}$'
  AND pg_catalog.octet_length(letter_id) <= 4096 AND pg_catalog.octet_length(source) <= 4096) NOT VALID;
ALTER TABLE dlq.replays ADD COLUMN lease_backend INT4, ADD COLUMN lease_key INT4;
ALTER TABLE dlq.replays ADD CONSTRAINT replays_fields_bounded CHECK (
  id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'
  AND state IN ('running', 'completed', 'auto-stopped', 'killed', 'failed', 'abandoned', 'interrupted')
  AND pg_catalog.octet_length(source) <= 4096 AND pg_catalog.octet_length(target) <= 65536
  AND pg_catalog.octet_length(detail) <= 4194304 AND coalesce(lease_pid, 0) BETWEEN 0 AND 2147483647
  AND coalesce(pg_catalog.octet_length(lease_host), 0) <= 255 AND lease_epoch >= 0) NOT VALID;
ALTER TABLE dlq.replay_items ADD CONSTRAINT replay_items_fields_bounded CHECK (
  seq BETWEEN 0 AND 2147483647
  AND state IN ('planned', 'sending', 'confirmed', 'settled', 'failed-again', 'refused', 'held-back', 'withdrawn')
  AND pg_catalog.octet_length(letter_id) <= 4096 AND pg_catalog.octet_length(binding) <= 4096
  AND pg_catalog.octet_length(location) <= 4096 AND coalesce(pg_catalog.octet_length(published), 0) <= 4096
  AND coalesce(pg_catalog.octet_length(error), 0) <= 8192) NOT VALID;
ALTER TABLE dlq.approvals ADD COLUMN plan_sha256 TEXT, ADD COLUMN kind TEXT;
ALTER TABLE dlq.approvals ADD CONSTRAINT approvals_fields_bounded CHECK (
  id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' AND letters BETWEEN 1 AND 1000000
  AND digest ~ '^[0-9a-f]{64}$' AND pg_catalog.octet_length(plan) <= 4194304
  AND coalesce(pg_catalog.octet_length(note), 0) <= 8192 AND pg_catalog.octet_length(source) <= 4096) NOT VALID;
ALTER TABLE dlq.policy ADD CONSTRAINT policy_value_bounded CHECK (pg_catalog.octet_length(value) <= 65536) NOT VALID;
ALTER TABLE dlq.dlq_roles ADD CONSTRAINT roles_fields_bounded CHECK (
  role IN ('viewer', 'operator', 'privileged') AND pg_catalog.octet_length(actor) <= 63) NOT VALID;
-- The letters an approval covers (a discard checks its letter against them).
CREATE TABLE dlq_private.approval_letters (approval_id TEXT NOT NULL, letter_id TEXT NOT NULL, binding TEXT NOT NULL,
  PRIMARY KEY (approval_id, letter_id, binding));
CREATE INDEX approval_letters_by_letter ON dlq_private.approval_letters (letter_id, binding);
CREATE INDEX decisions_discards_by_actor ON dlq.decisions (actor, at) WHERE kind = 'discard';
CREATE INDEX revisions_by_letter ON dlq.revisions (letter_id, number);

-- A replay's decisions carry its source: no caller files them under another.
CREATE FUNCTION dlq_private.replay_decision_source() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF NEW.kind = 'replay' AND EXISTS (SELECT 1 FROM dlq.replays r
      WHERE r.id = pg_catalog.substr(NEW.reason, 8) AND r.source <> NEW.source) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format(
      'a replay''s decision is filed under its replay''s source, not %s: nothing written', pg_catalog.left(NEW.source, 200));
  END IF;
  RETURN NEW;
END
$f$;
CREATE TRIGGER decisions_replay_source BEFORE INSERT ON dlq.decisions
  FOR EACH ROW EXECUTE FUNCTION dlq_private.replay_decision_source();
"#;

/// Who may append which entry, in one table; every append looks its action up.
const ROLES: &str = r#"
CREATE TABLE dlq_private.entry_roles (
  action TEXT PRIMARY KEY,
  least TEXT NOT NULL CHECK (least IN ('viewer', 'operator', 'privileged', 'owner')),
  bare BOOLEAN NOT NULL,          -- dlq.audit may write it (it binds no row)
  max_detail INT NOT NULL,        -- bytes
  written_by TEXT NOT NULL);
INSERT INTO dlq_private.entry_roles (action, least, bare, max_detail, written_by) VALUES
  ('denied', 'viewer', true, 4096, 'dlq.audit: a refusal of what the role may not do'),
  ('unmask', 'privileged', true, 4096, 'dlq.audit: before an unmasked payload is shown'),
  ('transform-dry-run', 'operator', true, 262144, 'dlq.audit'),
  ('replay-suspend', 'operator', true, 4096, 'dlq.audit'),
  ('replay-continue', 'operator', true, 4096, 'dlq.audit'),
  ('replay-pause', 'operator', true, 4096, 'dlq.audit'),
  ('replay-unpause', 'operator', true, 4096, 'dlq.audit'),
  ('discard', 'operator', false, 65536, 'dlq.discard'),
  ('discard-applied', 'operator', false, 65536, 'dlq.applied'),
  ('edit', 'operator', false, 1048576, 'dlq.revise'),
  ('replay-start', 'operator', false, 4194304, 'dlq.replay_start'),
  ('replay-resume', 'operator', false, 4194304, 'dlq.replay_resume'),
  ('replay-send', 'operator', false, 4194304, 'dlq.replay_send'),
  ('replay', 'operator', false, 65536, 'dlq.replay_confirmed'),
  ('replay-applied', 'operator', false, 65536, 'dlq.applied, dlq.replay_confirmed'),
  ('replay-refused', 'operator', false, 65536, 'dlq.replay_item'),
  ('replay-held-back', 'operator', false, 65536, 'dlq.replay_item'),
  ('replay-failed-again', 'operator', false, 65536, 'dlq.replay_item'),
  ('replay-planned', 'operator', false, 65536, 'dlq.replay_item'),
  ('replay-stop', 'operator', false, 4194304, 'dlq.replay_finish'),
  ('replay-take-over', 'operator', false, 65536, 'dlq.replay_take_over'),
  ('approval-requested', 'operator', false, 65536, 'dlq.approval_request'),
  ('approval-granted', 'operator', false, 65536, 'dlq.approval_decide'),
  ('approval-rejected', 'operator', false, 65536, 'dlq.approval_decide'),
  ('approval-used', 'operator', false, 65536, 'dlq.approval_use'),
  ('role-set', 'privileged', false, 4096, 'dlq.set_role'),
  ('policy-set', 'privileged', false, 65536, 'dlq.set_policy'),
  ('ledger-migrated', 'owner', false, 65536, 'ledger migrate (the owner)'),
  ('ledger-upgraded', 'owner', false, 65536, 'the owner''s open of an older ledger');

-- Whether the caller may append a `p_action` entry of this size; refused with why.
-- Before the team manages roles on the server (no `dlq_roles` row), whoever was granted
-- the functions is an operator and the roles file decides the rest on the client: a bare
-- privileged entry (an unmask) is then an operator's.
CREATE FUNCTION dlq_private.may_append(p_action TEXT, p_target TEXT, p_detail TEXT) RETURNS VOID
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r dlq_private.entry_roles; v_role TEXT; v_may BOOLEAN;
BEGIN
  SELECT * INTO r FROM dlq_private.entry_roles e WHERE e.action = p_action;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format(
      '`%s` is not an entry of the ledger (docs/ledger.md, "Who may write what"): nothing written', pg_catalog.left(p_action, 40));
  END IF;
  v_role := dlq_private.role_of(session_user);
  v_may := CASE r.least
      WHEN 'owner' THEN dlq_private.is_owner(session_user)
      WHEN 'privileged' THEN v_role = 'privileged'
        OR (r.bare AND v_role = 'operator' AND NOT EXISTS (SELECT 1 FROM dlq.dlq_roles))
      WHEN 'operator' THEN v_role IN ('operator', 'privileged')
      ELSE true END;
  IF NOT v_may THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      'a `%s` entry needs the %s role on the team ledger; %s is %s there: nothing written', p_action, r.least, session_user, v_role);
  END IF;
  IF p_target IS NULL OR p_detail IS NULL OR pg_catalog.octet_length(p_target) > 4096
     OR pg_catalog.octet_length(p_detail) > r.max_detail THEN
    RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = pg_catalog.format(
      'a `%s` entry has a target of at most 4096 bytes and a detail of at most %s (this one: %s and %s): nothing written',
      p_action, r.max_detail, pg_catalog.octet_length(p_target), pg_catalog.octet_length(p_detail));
  END IF;
END
$f$;

-- Every entry but a replay's confirmations (`dlq.replay_confirmed` checks its batch once,
-- through `lease_check`) and the owner's import goes through here.
CREATE OR REPLACE FUNCTION dlq_private.append_after(p_seq BIGINT, p_prev TEXT, p_action TEXT, p_target TEXT, p_detail TEXT)
RETURNS dlq.audit LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v dlq.audit;
BEGIN
  PERFORM dlq_private.may_append(p_action, p_target, p_detail);
  v.seq := p_seq + 1; v.prev_hash := p_prev;
  v.at := dlq_private.now_text();
  v.actor := session_user;
  v.action := p_action; v.target := p_target; v.detail := p_detail;
  v.hash := dlq_private.link(v.prev_hash, dlq_private.canonical(v.seq, v.at, v.actor, v.action, v.target, v.detail));
  INSERT INTO dlq.audit (seq, at, actor, action, target, detail, prev_hash, hash)
    VALUES (v.seq, v.at, v.actor, v.action, v.target, v.detail, v.prev_hash, v.hash);
  RETURN v;
END
$f$;

-- A bare entry: only the kinds the table marks bare, a JSON object for detail.
CREATE OR REPLACE FUNCTION dlq.audit(p_action TEXT, p_target TEXT, p_detail TEXT) RETURNS dlq.audit
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF NOT coalesce((SELECT e.bare FROM dlq_private.entry_roles e WHERE e.action = p_action), false) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      '`%s` entries are written only by the function that writes their row, or are not entries of the ledger: nothing written',
      pg_catalog.left(coalesce(p_action, 'NULL'), 40));
  END IF;
  PERFORM dlq_private.may_append(p_action, p_target, p_detail);
  IF pg_catalog.json_typeof(p_detail::pg_catalog.json) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'an entry''s detail is a JSON object: nothing written';
  END IF;
  RETURN dlq_private.append(p_action, p_target, p_detail);
END
$f$;
"#;

/// The write lock, and no session that keeps it.
const LOCKS: &str = r#"
-- Sessions idle in a transaction that holds the write lock for more than {stalled_s} s
-- (a process stopped mid-write, an engineer's open `BEGIN`) are ended. Needs the owner
-- to hold pg_read_all_stats (to see another role's session state) and pg_signal_backend;
-- without them nothing is ended and the waiter's message names the holder.
CREATE FUNCTION dlq_private.end_stalled_writers() RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r RECORD;
BEGIN
  FOR r IN SELECT DISTINCT l.pid FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'relation' AND l.relation = 'dlq.audit'::pg_catalog.regclass AND l.granted
       AND l.mode = 'ShareRowExclusiveLock' AND l.pid <> pg_catalog.pg_backend_pid()
       AND a.state IN ('idle in transaction', 'idle in transaction (aborted)')
       AND a.state_change < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => {stalled_s}) LOOP
    BEGIN
      PERFORM pg_catalog.pg_terminate_backend(r.pid);
    EXCEPTION WHEN OTHERS THEN
      NULL;  -- not the owner's to end: the waiter's message names it
    END;
  END LOOP;
END
$f$;

-- The chain's head under the write lock (held to the end of the caller's transaction).
CREATE OR REPLACE FUNCTION dlq_private.head_locked(OUT o_seq BIGINT, OUT o_hash TEXT)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  BEGIN
    LOCK TABLE dlq.audit IN SHARE ROW EXCLUSIVE MODE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    PERFORM dlq_private.end_stalled_writers();
    LOCK TABLE dlq.audit IN SHARE ROW EXCLUSIVE MODE;
  END;
  SELECT a.seq, a.hash INTO o_seq, o_hash FROM dlq.audit a ORDER BY a.seq DESC LIMIT 1;
  IF o_seq IS NULL THEN
    o_seq := 0; o_hash := pg_catalog.repeat('0', 64);
  END IF;
END
$f$;

-- The client's write transaction starts here: one writer at a time, by a lock no team
-- role can take any other way.
CREATE FUNCTION dlq.write_lock() RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  PERFORM dlq_private.head_locked();
END
$f$;

-- A failed walk's seq is one of the chain's (or the one after its head).
CREATE OR REPLACE FUNCTION dlq.walk_failed(p_seq BIGINT) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF p_seq IS NULL OR p_seq < 1 OR p_seq > (SELECT coalesce(pg_catalog.max(a.seq), 0) + 1 FROM dlq.audit a) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a failed walk names an entry of the chain';
  END IF;
  INSERT INTO dlq.meta (key, value) VALUES ('walk-failed', p_seq::text)
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
END
$f$;

CREATE OR REPLACE FUNCTION dlq.store_checkpoint(p_unsigned TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_seq BIGINT; v_hash TEXT; v_prev BIGINT;
BEGIN
  IF p_unsigned IS NULL OR pg_catalog.octet_length(p_unsigned) > 4096 THEN
    RETURN false;
  END IF;
  BEGIN
    v_seq := (p_unsigned::pg_catalog.json ->> 'seq')::int8; v_hash := p_unsigned::pg_catalog.json ->> 'hash';
  EXCEPTION WHEN OTHERS THEN
    RETURN false;
  END;
  SELECT ((m.value::pg_catalog.json) ->> 'seq')::int8 INTO v_prev FROM dlq.meta m WHERE m.key = 'verified';
  v_prev := coalesce(v_prev, 0);
  IF v_seq IS NULL OR v_prev >= v_seq OR (v_prev > 0 AND NOT EXISTS (SELECT 1 FROM dlq.audit a WHERE a.seq = v_prev)) THEN
    RETURN false;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM dlq.audit a WHERE a.seq = v_seq AND a.hash = v_hash)
     OR (SELECT count(*) FROM dlq.audit a WHERE a.seq BETWEEN v_prev AND v_seq) <> v_seq - v_prev + (CASE WHEN v_prev > 0 THEN 1 ELSE 0 END)
     OR dlq.first_bad_mac(v_prev + 1, v_seq) IS NOT NULL
     OR EXISTS (SELECT 1 FROM (SELECT a.seq, a.prev_hash,
                   pg_catalog.lag(a.hash, 1, pg_catalog.repeat('0', 64)) OVER (ORDER BY a.seq) AS before
                 FROM dlq.audit a WHERE a.seq BETWEEN GREATEST(v_prev, 1) AND v_seq) x
                WHERE x.seq > v_prev AND x.prev_hash <> x.before) THEN
    RETURN false;
  END IF;
  INSERT INTO dlq.meta (key, value) VALUES ('verified',
      (p_unsigned::pg_catalog.jsonb || pg_catalog.jsonb_build_object('mac', dlq_private.mac('verified checkpoint', p_unsigned)))::text)
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
  RETURN true;
END
$f$;
"#;

/// The lease: the backend that took it, on a key drawn when it did.
const LEASE: &str = r#"
-- Whether replay p_id's sender is alive (this session: `mine`): the backend that took the
-- lease still holds the advisory lock on the key drawn for it. Another session holding
-- that key, or any other, is not the sender.
CREATE OR REPLACE FUNCTION dlq_private.held(p_id TEXT, mine BOOLEAN) RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT EXISTS (SELECT 1 FROM dlq.replays r JOIN pg_catalog.pg_locks l
      ON l.locktype = 'advisory' AND l.granted AND l.classid = (7337003)::oid AND l.objsubid = 2
     AND l.objid = (r.lease_key)::oid AND l.pid = r.lease_backend
     AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
    WHERE r.id = p_id AND r.lease_backend IS NOT NULL
      AND (NOT mine OR r.lease_backend = pg_catalog.pg_backend_pid()))
$f$;

-- A replay step's fence: an operator, on the backend that holds the lease, under the
-- epoch it took, while the replay runs.
CREATE OR REPLACE FUNCTION dlq_private.lease_check(p_id TEXT, p_epoch BIGINT) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_state TEXT; v_epoch BIGINT;
BEGIN
  PERFORM dlq_private.require('operator', 'a replay step');
  SELECT r.state, r.lease_epoch INTO v_state, v_epoch FROM dlq.replays r WHERE r.id = p_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'replay % is not in the ledger', pg_catalog.left(p_id, 128);
  END IF;
  IF v_state <> 'running' OR p_epoch IS NULL OR v_epoch <> p_epoch OR NOT dlq_private.held(p_id, true) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      'replay %s: this session is not its sender (epoch %s, the ledger''s %s, state %s): nothing written',
      p_id, p_epoch, v_epoch, v_state);
  END IF;
END
$f$;

-- The lease for this backend: a new epoch, on a key drawn now (so nobody holds it first).
CREATE OR REPLACE FUNCTION dlq.take_lease(p_id TEXT, p_pid BIGINT, p_host TEXT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_epoch BIGINT; v_state TEXT; v_key INT4; i INT;
BEGIN
  PERFORM dlq_private.require('operator', 'sending a replay');
  IF p_pid IS NULL OR p_pid < 0 OR p_pid > 2147483647 OR p_host IS NULL OR pg_catalog.octet_length(p_host) > 255 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a lease names its process (pid 0..2^31) and host (at most 255 bytes)';
  END IF;
  SELECT r.lease_epoch, r.state INTO v_epoch, v_state FROM dlq.replays r WHERE r.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'replay % is not in the ledger', pg_catalog.left(p_id, 128);
  END IF;
  IF v_state NOT IN ('running', 'killed', 'auto-stopped', 'failed') THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format(
      'replay %s is %s: a finished replay is never resumed; plan a new one', p_id, v_state);
  END IF;
  IF dlq_private.held(p_id, true) THEN
    v_key := (SELECT r.lease_key FROM dlq.replays r WHERE r.id = p_id);
  ELSIF dlq_private.held(p_id, false) THEN
    RETURN NULL;
  ELSE
    FOR i IN 1 .. 16 LOOP
      v_key := (1 + pg_catalog.floor(pg_catalog.random() * 2147483646))::int4;
      EXIT WHEN pg_catalog.pg_try_advisory_lock(7337003, v_key);
      v_key := NULL;
    END LOOP;
    IF v_key IS NULL THEN
      RAISE EXCEPTION 'replay %: no holder lock could be taken (16 keys drawn were held): nothing written', p_id;
    END IF;
  END IF;
  UPDATE dlq.replays r SET lease_pid = p_pid, lease_host = p_host, lease_backend = pg_catalog.pg_backend_pid(),
         lease_key = v_key, heartbeat_at = dlq_private.now_text(), lease_epoch = v_epoch + 1 WHERE r.id = p_id;
  RETURN v_epoch + 1;
END
$f$;

CREATE OR REPLACE FUNCTION dlq.replay_heartbeat(p_id TEXT, p_epoch BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF NOT dlq_private.held(p_id, true) THEN
    RETURN false;
  END IF;
  UPDATE dlq.replays r SET heartbeat_at = dlq_private.now_text()
    WHERE r.id = p_id AND r.lease_epoch = p_epoch AND r.state = 'running' AND r.lease_backend = pg_catalog.pg_backend_pid();
  RETURN FOUND;
END
$f$;

-- Whether replay p_id has a live sender (anyone may ask).
CREATE FUNCTION dlq.replay_live(p_id TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT dlq_private.held(p_id, false)
$f$;

-- This session gives up the holder locks it holds for no running replay it sends (a
-- finished one, a take that rolled back). Only its own.
CREATE FUNCTION dlq.replay_release() RETURNS INT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET client_min_messages = error AS $f$
DECLARE k BIGINT; n INT := 0;
BEGIN
  FOR k IN SELECT l.objid::int8 FROM pg_catalog.pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.pid = pg_catalog.pg_backend_pid()
        AND l.classid = (7337003)::oid AND l.objsubid = 2
        AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
        AND NOT EXISTS (SELECT 1 FROM dlq.replays r WHERE r.lease_backend = pg_catalog.pg_backend_pid()
                          AND r.lease_key::int8 = l.objid::int8 AND r.state = 'running') LOOP
    WHILE pg_catalog.pg_advisory_unlock(7337003, k::int4) LOOP
      n := n + 1;
    END LOOP;
  END LOOP;
  RETURN n;
END
$f$;

-- `replay --resume ID --take-over`: a sender whose heartbeat (server clock) is older than
-- {take_over_s} s — frozen, cut off, its bastion gone — is ended (its backend terminated
-- where the owner may) and its lease voided (a new epoch, no backend), in an entry that
-- names it; the caller's resume then takes the lease as from a dead holder. The frozen
-- sender's next write fails its fence.
CREATE FUNCTION dlq.replay_take_over(p_id TEXT, p_client TEXT) RETURNS TEXT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r dlq.replays; v_age BIGINT; v_ended BOOLEAN := false; v_role TEXT;
BEGIN
  PERFORM dlq_private.require('operator', 'taking over a replay');
  IF p_client IS NOT NULL AND pg_catalog.octet_length(p_client) > 512 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'the client is at most 512 bytes';
  END IF;
  PERFORM dlq_private.head_locked();
  SELECT * INTO r FROM dlq.replays x WHERE x.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'replay % is not in the ledger', pg_catalog.left(p_id, 128);
  END IF;
  IF r.state <> 'running' OR NOT dlq_private.held(p_id, false) THEN
    RETURN 'nobody sends it';
  END IF;
  IF r.lease_backend = pg_catalog.pg_backend_pid() THEN
    RETURN 'this session sends it';
  END IF;
  v_age := pg_catalog.floor(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp() - r.heartbeat_at::timestamptz))::int8;
  IF v_age IS NULL OR v_age < {take_over_s} THEN
    RAISE EXCEPTION USING ERRCODE = '55006', MESSAGE = pg_catalog.format(
      'replay %s is being sent by pid %s on %s (%s), whose heartbeat is %s s old on the server''s clock: a sender is taken over only once it is older than {take_over_s} s; nothing changed',
      p_id, r.lease_pid, coalesce(r.lease_host, '?'), r.actor, coalesce(v_age::text, '?'));
  END IF;
  SELECT a.usename::text INTO v_role FROM pg_catalog.pg_stat_activity a WHERE a.pid = r.lease_backend;
  BEGIN
    v_ended := pg_catalog.pg_terminate_backend(r.lease_backend);
  EXCEPTION WHEN OTHERS THEN
    v_ended := false;
  END;
  PERFORM dlq_private.append('replay-take-over', p_id, dlq_private.detail(pg_catalog.jsonb_build_object(
      'from', pg_catalog.jsonb_build_object('actor', r.actor, 'role', v_role, 'pid', r.lease_pid, 'host', r.lease_host,
               'backend', r.lease_backend, 'epoch', r.lease_epoch, 'heartbeat_at', r.heartbeat_at, 'heartbeat_age_s', v_age),
      'backend_ended', v_ended), p_client));
  UPDATE dlq.replays x SET lease_backend = NULL, lease_key = NULL, lease_epoch = x.lease_epoch + 1 WHERE x.id = p_id;
  RETURN pg_catalog.format('took replay %s over from pid %s on %s (%s; heartbeat %s s old%s)', p_id, r.lease_pid,
    coalesce(r.lease_host, '?'), coalesce(v_role, r.actor), v_age,
    CASE WHEN v_ended THEN '; its server session was ended' ELSE '; its server session could not be ended by the ledger''s owner (pg_signal_backend): its next write is refused' END);
END
$f$;

-- A resume goes on with its plan's letters, never more.
CREATE OR REPLACE FUNCTION dlq.replay_resume(p_id TEXT, p_epoch BIGINT, p_detail TEXT,
    p_seqs INT4[], p_letters TEXT[], p_bindings TEXT[], p_locations TEXT[], p_client TEXT)
RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_detail pg_catalog.jsonb := p_detail::pg_catalog.jsonb; v_state TEXT;
BEGIN
  PERFORM dlq_private.require('operator', 'a replay');
  IF pg_catalog.jsonb_typeof(v_detail) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a resume''s detail is a JSON object: nothing written';
  END IF;
  SELECT r.state INTO v_state FROM dlq.replays r WHERE r.id = p_id FOR UPDATE;
  IF v_state IS NULL OR v_state NOT IN ('running', 'killed', 'auto-stopped', 'failed') THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format(
      'replay %s is %s: a finished replay is never resumed; plan a new one', p_id, coalesce(v_state, 'not in the ledger'));
  END IF;
  IF EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(p_letters), pg_catalog.unnest(p_bindings)) AS u(s, l, b)
             WHERE NOT EXISTS (SELECT 1 FROM dlq.replay_items x
                                WHERE x.replay_id = p_id AND x.seq = u.s AND x.letter_id = u.l AND x.binding = u.b)) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      'replay %s: a resume sends the letters of its plan and never adds one (plan a new replay for others): nothing written', p_id);
  END IF;
  UPDATE dlq.replays r SET state = 'running' WHERE r.id = p_id;
  PERFORM dlq_private.lease_check(p_id, p_epoch);
  PERFORM dlq_private.append('replay-resume', p_id, dlq_private.detail(
    v_detail || pg_catalog.jsonb_build_object('items_sha256', dlq_private.items_digest(p_id)), p_client));
  UPDATE dlq.replays r SET detail = (r.detail::pg_catalog.jsonb
      || pg_catalog.jsonb_build_object('options', v_detail -> 'options', 'pid', v_detail -> 'pid'))::text
    WHERE r.id = p_id;
END
$f$;

-- The replay ended: by its sender (p_epoch: its lease), or — abandoned, interrupted — by
-- an operator while nobody sends it; once, never again. The sender's lock is let go.
CREATE OR REPLACE FUNCTION dlq.replay_finish(p_id TEXT, p_epoch BIGINT, p_state TEXT, p_outcome TEXT, p_client TEXT)
RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_outcome pg_catalog.jsonb := p_outcome::pg_catalog.jsonb; v_state TEXT;
BEGIN
  PERFORM dlq_private.require('operator', 'ending a replay');
  IF p_state IS NULL OR p_state NOT IN ('completed', 'auto-stopped', 'killed', 'failed', 'abandoned', 'interrupted') THEN
    RAISE EXCEPTION 'a replay does not end `%`', pg_catalog.left(coalesce(p_state, 'NULL'), 40);
  END IF;
  IF pg_catalog.jsonb_typeof(v_outcome) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a replay''s outcome is a JSON object: nothing written';
  END IF;
  SELECT r.state INTO v_state FROM dlq.replays r WHERE r.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'replay % is not in the ledger', pg_catalog.left(p_id, 128);
  END IF;
  IF v_state IN ('completed', 'abandoned') THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format(
      'replay %s is %s already: a finished replay is not ended again', p_id, v_state);
  END IF;
  IF p_epoch IS NOT NULL THEN
    PERFORM dlq_private.lease_check(p_id, p_epoch);
  ELSIF dlq_private.held(p_id, false) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
      'replay %s is being sent by a live session: only its sender ends it (or --take-over once its heartbeat is old)', p_id);
  END IF;
  PERFORM dlq_private.append('replay-stop', p_id, dlq_private.detail(pg_catalog.jsonb_build_object(
        'state', p_state, 'outcome', v_outcome), p_client));
  UPDATE dlq.replays r SET state = p_state, lease_pid = NULL, lease_backend = NULL, lease_key = NULL,
      detail = (r.detail::pg_catalog.jsonb || pg_catalog.jsonb_build_object('outcome', v_outcome))::text
    WHERE r.id = p_id;
  PERFORM dlq.replay_release();
END
$f$;
"#;

/// Plans bound by digest: what an approver reads and a start must match.
const PLANS: &str = r#"
CREATE FUNCTION dlq_private.field(p TEXT) RETURNS BYTEA
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $f$
  SELECT pg_catalog.int8send(pg_catalog.octet_length(p)::int8) || pg_catalog.convert_to(p, 'UTF8')
$f$;

-- The digest a plan is approved and started by: kind, source, target, options, and each
-- letter (sorted) with the digest of its latest revision (none: empty) — so a revision
-- written after the approval is not what was approved.
CREATE FUNCTION dlq_private.plan_sha256(p_kind TEXT, p_source TEXT, p_target TEXT, p_options pg_catalog.jsonb,
    p_letters TEXT[], p_bindings TEXT[]) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT pg_catalog.encode(pg_catalog.sha256(
      dlq_private.field(p_kind) || dlq_private.field(p_source) || dlq_private.field(coalesce(p_target, ''))
   || dlq_private.field(coalesce(p_options, 'null'::pg_catalog.jsonb)::text)
   || coalesce((SELECT pg_catalog.string_agg(dlq_private.field(u.l) || dlq_private.field(u.b)
          || dlq_private.field(coalesce((SELECT v.sha256_after FROM dlq.revisions v WHERE v.source = p_source AND v.letter_id = u.l
                                          ORDER BY v.number DESC, v.id DESC LIMIT 1), '')), ''::bytea ORDER BY u.l, u.b)
        FROM ROWS FROM (pg_catalog.unnest(p_letters), pg_catalog.unnest(p_bindings)) AS u(l, b)), ''::bytea)), 'hex')
$f$;

-- The text an approver reads: the server's, from what it stored (never the author's).
CREATE FUNCTION dlq_private.render_plan(p_kind TEXT, p_source TEXT, p_facts pg_catalog.jsonb,
    p_letters TEXT[], p_bindings TEXT[]) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT CASE p_kind
      WHEN 'replay' THEN pg_catalog.format('Replay %s letters of %s to %s (as stored by the ledger: a start must match it exactly)',
        pg_catalog.cardinality(p_letters), p_source, coalesce(p_facts ->> 'target', '?'))
        || E'\noptions: ' || coalesce((p_facts -> 'options')::text, '{}')
      ELSE pg_catalog.format('Discard %s letters of %s (reason: %s; as stored by the ledger)',
        pg_catalog.cardinality(p_letters), p_source, coalesce(p_facts ->> 'reason', '?')) END
    || coalesce((SELECT E'\n' || pg_catalog.string_agg(pg_catalog.format('  %s  %s%s', u.l, pg_catalog.left(u.b, 16),
          coalesce((SELECT pg_catalog.format('  revision %s by %s (sha256 %s…)', v.number, v.actor, pg_catalog.left(v.sha256_after, 12))
                      FROM dlq.revisions v WHERE v.source = p_source AND v.letter_id = u.l ORDER BY v.number DESC, v.id DESC LIMIT 1), '')), E'\n' ORDER BY u.o)
        FROM ROWS FROM (pg_catalog.unnest(p_letters), pg_catalog.unnest(p_bindings)) WITH ORDINALITY AS u(l, b, o)
        WHERE u.o <= 50), '')
    || CASE WHEN pg_catalog.cardinality(p_letters) > 50
         THEN pg_catalog.format(E'\n  … and %s more', pg_catalog.cardinality(p_letters) - 50) ELSE '' END
$f$;

-- Four eyes: a plan's facts (JSON: kind, target, options, letters [[id, binding], …];
-- a discard's reason) stored, digested and rendered by the server.
CREATE OR REPLACE FUNCTION dlq.approval_request(p_id TEXT, p_source TEXT, p_digest TEXT, p_letters BIGINT, p_plan TEXT, p_client TEXT)
RETURNS dlq.audit LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; f pg_catalog.jsonb; v_kind TEXT; v_letters TEXT[]; v_bindings TEXT[]; v_sha TEXT; v_n BIGINT;
BEGIN
  PERFORM dlq_private.require('operator', 'asking for an approval');
  BEGIN
    f := p_plan::pg_catalog.jsonb;
  EXCEPTION WHEN OTHERS THEN
    f := NULL;
  END;
  v_kind := f ->> 'kind';
  IF f IS NULL OR pg_catalog.jsonb_typeof(f) <> 'object' OR v_kind IS NULL OR v_kind NOT IN ('replay', 'discard')
     OR pg_catalog.jsonb_typeof(f -> 'letters') IS DISTINCT FROM 'array' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
      'an approval request carries its plan''s facts (kind, target, options, letters) for the server to bind and show: upgrade dlq-triage; nothing recorded';
  END IF;
  SELECT pg_catalog.array_agg(x.v ->> 0 ORDER BY x.o), pg_catalog.array_agg(x.v ->> 1 ORDER BY x.o)
    INTO v_letters, v_bindings FROM pg_catalog.jsonb_array_elements(f -> 'letters') WITH ORDINALITY AS x(v, o);
  v_n := coalesce(pg_catalog.cardinality(v_letters), 0);
  IF v_n < 1 OR v_n > 1000000 OR v_n IS DISTINCT FROM p_letters
     OR pg_catalog.array_position(v_letters, NULL) IS NOT NULL OR pg_catalog.array_position(v_bindings, NULL) IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format(
      'an approval names 1 to 1,000,000 letters, each an id and a binding, as many as it counts (%s named, %s counted): nothing recorded',
      v_n, p_letters);
  END IF;
  v_sha := dlq_private.plan_sha256(v_kind, p_source, CASE v_kind WHEN 'replay' THEN f ->> 'target' ELSE f ->> 'reason' END,
                                   f -> 'options', v_letters, v_bindings);
  e := dlq_private.append('approval-requested', p_id, dlq_private.detail(pg_catalog.jsonb_build_object(
        'source', p_source, 'digest', p_digest, 'letters', p_letters, 'kind', v_kind, 'plan_sha256', v_sha), p_client));
  INSERT INTO dlq.approvals (id, source, digest, letters, plan, author, requested_at, state, plan_sha256, kind)
    VALUES (p_id, p_source, p_digest, p_letters, dlq_private.render_plan(v_kind, p_source, f, v_letters, v_bindings),
            e.actor, e.at, 'awaiting', v_sha, v_kind);
  INSERT INTO dlq_private.approval_letters (approval_id, letter_id, binding)
    SELECT p_id, u.l, u.b FROM ROWS FROM (pg_catalog.unnest(v_letters), pg_catalog.unnest(v_bindings)) AS u(l, b)
    ON CONFLICT DO NOTHING;
  RETURN e;
END
$f$;

-- A replay's start: its planned letters (each once, none NULL), row and entry. Over the
-- team's approval_above it needs an approval of exactly this plan (its digest), granted
-- by another operator and spent by this author; this start binds it.
CREATE OR REPLACE FUNCTION dlq.replay_start(p_id TEXT, p_source TEXT, p_target TEXT, p_detail TEXT,
    p_seqs INT4[], p_letters TEXT[], p_bindings TEXT[], p_locations TEXT[], p_client TEXT)
RETURNS dlq.audit LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; v_n BIGINT := coalesce(pg_catalog.cardinality(p_seqs), 0); v_above BIGINT; v_approval TEXT;
        v_detail pg_catalog.jsonb := p_detail::pg_catalog.jsonb; v_sha TEXT; v_foreign TEXT;
BEGIN
  PERFORM dlq_private.require('operator', 'a replay');
  IF pg_catalog.jsonb_typeof(v_detail) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a replay''s detail is a JSON object: nothing written';
  END IF;
  IF v_n <> coalesce(pg_catalog.cardinality(p_letters), 0) OR v_n <> coalesce(pg_catalog.cardinality(p_bindings), 0)
     OR v_n <> coalesce(pg_catalog.cardinality(p_locations), 0)
     OR pg_catalog.array_position(p_seqs, NULL) IS NOT NULL OR pg_catalog.array_position(p_letters, NULL) IS NOT NULL
     OR pg_catalog.array_position(p_bindings, NULL) IS NOT NULL OR pg_catalog.array_position(p_locations, NULL) IS NOT NULL
     OR (SELECT pg_catalog.count(DISTINCT s) FROM pg_catalog.unnest(p_seqs) s) <> v_n
     OR (SELECT pg_catalog.min(s) FROM pg_catalog.unnest(p_seqs) s) < 0 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
      'a replay''s letters are one list each of seqs (distinct, 0 or more), ids, bindings and locations, none NULL: nothing written';
  END IF;
  INSERT INTO dlq.replay_items (replay_id, seq, letter_id, binding, location, state)
    SELECT p_id, u.s, u.l, u.b, u.loc, 'planned' FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(p_letters), pg_catalog.unnest(p_bindings), pg_catalog.unnest(p_locations)) AS u(s, l, b, loc);
  v_above := dlq_private.policy_number('approval_above');
  -- Revisions another engineer wrote, about to be sent: an approver who may see them
  -- (a privileged role: `diff --revision` shows it the stored bytes, masked) must have
  -- approved this exact plan — whatever its size.
  IF coalesce((v_detail -> 'options' ->> 'use_revisions')::boolean, false) THEN
    SELECT pg_catalog.string_agg(DISTINCT w.actor, ', ') INTO v_foreign FROM pg_catalog.unnest(p_letters) AS u(l)
      CROSS JOIN LATERAL (SELECT v.actor FROM dlq.revisions v WHERE v.source = p_source AND v.letter_id = u.l
                          ORDER BY v.number DESC, v.id DESC LIMIT 1) w
     WHERE w.actor <> session_user;
  END IF;
  IF (v_above IS NOT NULL AND v_n > v_above) OR v_foreign IS NOT NULL THEN
    v_sha := dlq_private.plan_sha256('replay', p_source, p_target, v_detail -> 'options', p_letters, p_bindings);
    UPDATE dlq.approvals a SET spent_by = p_id WHERE a.id = (
      SELECT x.id FROM dlq.approvals x
       WHERE x.state = 'used' AND x.spent_by IS NULL AND x.author = session_user
         AND x.approver IS NOT NULL AND x.approver <> session_user
         AND x.kind = 'replay' AND x.plan_sha256 = v_sha
         AND (v_foreign IS NULL OR dlq_private.role_of(x.approver) = 'privileged'
              OR NOT EXISTS (SELECT 1 FROM dlq.dlq_roles))
       ORDER BY x.requested_at DESC LIMIT 1)
    RETURNING a.id INTO v_approval;
    IF v_approval IS NULL AND v_foreign IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
        'this replay sends revisions written by %s: it needs this exact plan approved by a privileged engineer, who may see what they changed (dlq-triage approve; diff --revision); nothing was sent',
        v_foreign);
    ELSIF v_approval IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
        '%s letters is more than the team''s approval_above (%s): a replay this big needs this exact plan (its letters, target, options and revisions) approved by a second operator (dlq-triage approve); nothing was sent',
        v_n, v_above);
    END IF;
    v_detail := v_detail || pg_catalog.jsonb_build_object('approval', v_approval, 'plan_sha256', v_sha);
  END IF;
  v_detail := v_detail || pg_catalog.jsonb_build_object('items_sha256', dlq_private.items_digest(p_id));
  e := dlq_private.append('replay-start', p_id, dlq_private.detail(v_detail, p_client));
  INSERT INTO dlq.replays (id, source, target, actor, started_at, state, detail)
    VALUES (p_id, p_source, p_target, e.actor, e.at, 'running', p_detail);
  RETURN e;
END
$f$;

CREATE OR REPLACE FUNCTION dlq.discard(p_source TEXT, p_letter TEXT, p_binding TEXT, p_coords TEXT, p_reason TEXT, p_client TEXT)
RETURNS TABLE (o_id BIGINT, o_seq BIGINT, o_at TEXT, o_actor TEXT, o_reason TEXT, o_fresh BOOLEAN)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; v_id BIGINT; v_why TEXT; v_above BIGINT; v_approval TEXT; v_recent BIGINT; v_detail pg_catalog.jsonb;
BEGIN
  PERFORM dlq_private.require('operator', 'a discard');
  IF p_binding IS NULL OR p_binding = '' OR p_letter IS NULL OR p_letter = '' OR p_source IS NULL THEN
    RAISE EXCEPTION 'a discard names its exact letter (its id and binding) and source: nothing written';
  END IF;
  IF p_reason IS NULL OR pg_catalog.btrim(p_reason) = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a discard records a reason: nothing written';
  END IF;
  -- Under the write lock from here: no replay's send can come between check and record.
  PERFORM dlq_private.head_locked();
  RETURN QUERY SELECT d.id, d.audit_seq, d.at, d.actor, d.reason, false FROM dlq.decisions d
    WHERE d.letter_id = p_letter AND d.binding = p_binding AND d.kind = 'discard' LIMIT 1;
  IF FOUND THEN RETURN; END IF;
  v_why := dlq_private.refusal(p_source, p_letter, p_binding, 'discard');
  IF v_why IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = v_why || ': nothing was discarded';
  END IF;
  -- The team's discard threshold, on the server: letters an approval this author spent
  -- covers, or at most that many of this engineer's discards in ten minutes.
  v_above := dlq_private.policy_number('discard_approval_above');
  IF v_above IS NOT NULL THEN
    SELECT a.id INTO v_approval FROM dlq_private.approval_letters al JOIN dlq.approvals a ON a.id = al.approval_id
      WHERE al.letter_id = p_letter AND al.binding = p_binding AND a.kind = 'discard' AND a.state = 'used'
        AND a.author = session_user AND a.approver IS NOT NULL AND a.approver <> session_user
      LIMIT 1;
    IF v_approval IS NULL THEN
      SELECT pg_catalog.count(*) INTO v_recent FROM dlq.decisions d
        WHERE d.actor = session_user AND d.kind = 'discard' AND d.approval IS NULL
          AND d.at > pg_catalog.to_char((pg_catalog.clock_timestamp() - interval '10 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
      IF v_recent >= v_above THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
          '%s discarded %s letters without an approval in the last 10 minutes, the team''s discard_approval_above: more needs a plan approved by a second operator (dlq-triage approve); nothing was discarded',
          session_user, v_recent);
      END IF;
    END IF;
  END IF;
  v_detail := pg_catalog.jsonb_build_object('source', p_source, 'binding', p_binding, 'coords', p_coords, 'reason', p_reason);
  IF v_approval IS NOT NULL THEN
    v_detail := v_detail || pg_catalog.jsonb_build_object('approval', v_approval);
  END IF;
  e := dlq_private.append('discard', p_letter, dlq_private.detail(v_detail, p_client));
  INSERT INTO dlq.decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq, approval)
    VALUES (p_source, p_letter, p_binding, p_coords, 'discard', p_reason, e.actor, e.at, e.seq, v_approval)
    RETURNING id INTO v_id;
  RETURN QUERY SELECT v_id, e.seq, e.at, e.actor, p_reason, true;
END
$f$;
"#;

/// New functions reach whoever the team's setup granted the ledger's functions (the
/// roles holding `dlq.first_bad_mac`); PUBLIC gets none.
const GRANTS: &str = r#"
REVOKE ALL ON FUNCTION dlq.write_lock(), dlq.replay_live(TEXT), dlq.replay_release(), dlq.replay_take_over(TEXT, TEXT) FROM PUBLIC;
REVOKE ALL ON TABLE dlq_private.entry_roles, dlq_private.approval_letters FROM PUBLIC;
DO $d$
DECLARE r RECORD;
BEGIN
  FOR r IN SELECT DISTINCT g.grantee::text AS grantee FROM information_schema.routine_privileges g
           WHERE g.routine_schema = 'dlq' AND g.routine_name = 'first_bad_mac' AND g.privilege_type = 'EXECUTE'
             AND g.grantee <> current_user AND g.grantee <> 'PUBLIC' LOOP
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION dlq.write_lock(), dlq.replay_live(TEXT), dlq.replay_release(), dlq.replay_take_over(TEXT, TEXT) TO %I', r.grantee);
  END LOOP;
END $d$;
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn every_placeholder_is_filled() {
        let sql = super::schema_v9();
        assert!(!sql.contains("{take_over_s}") && !sql.contains("{stalled_s}"));
        assert!(sql.contains("make_interval(secs => 10)"));
    }
}
