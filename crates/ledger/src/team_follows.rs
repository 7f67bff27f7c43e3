//! Server schema version 8: one decision per letter, decided by the server.
//!
//! Core's table of which decision may follow which (`dlq_core::journal::follows`) is
//! written into `dlq_private.follows` by this step, from the same rows the file ledger
//! reads, and three functions consult it under the audit lock (which every write of the
//! ledger takes, so no check and record can be split by another writer, whoever calls):
//!
//! - `dlq.discard` refuses a letter a live replay holds (planned or being sent), one a
//!   stopped replay may have sent (`sending`), and one a replay confirmed;
//! - `dlq.replay_send` journals `withdrawn` — in the same `replay-send` entry — every
//!   letter of its batch discarded or replayed by another replay since the plan, and
//!   `sending` only the rest: the client reads which, and sends only those;
//! - `dlq.revise` refuses a revision of a letter a live replay holds or may have sent.
//!
//! Each is `CREATE OR REPLACE` with the same signature, so the team's grants stay.
//! `dlq.discard`, the lease and a replay's resume and end are version 9's
//! (`team_fences`), which binds them to the server's lease and checks their arguments.

/// Version 8, over a version-7 ledger (in `dlq`).
pub(crate) fn schema_v8() -> String {
    FUNCTIONS.replace("{rows}", &dlq_core::journal::follows::sql_rows())
}

const FUNCTIONS: &str = r#"
CREATE TABLE dlq_private.follows (standing TEXT NOT NULL, step TEXT NOT NULL, allowed BOOLEAN NOT NULL,
  PRIMARY KEY (standing, step));
INSERT INTO dlq_private.follows (standing, step, allowed) VALUES {rows};
-- A letter's open replay items by its id (the discard's check, without a scan).
CREATE INDEX replay_items_by_letter ON dlq.replay_items (letter_id, binding) WHERE state IN ('planned', 'sending');
-- The decisions on a letter under any source string that named it.
CREATE INDEX decisions_by_binding ON dlq.decisions (letter_id, binding);

-- Whether p_step may follow p_standing (core's table; anything not in it: no).
CREATE FUNCTION dlq_private.may_follow(p_standing TEXT, p_step TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT coalesce((SELECT f.allowed FROM dlq_private.follows f WHERE f.standing = p_standing AND f.step = p_step), false)
$f$;

-- Why p_step may not be recorded for letter p_letter (binding p_binding; any binding when
-- null), or null — under any source string that named it (p_source is for the message).
-- The caller holds the audit lock.
CREATE FUNCTION dlq_private.refusal(p_source TEXT, p_letter TEXT, p_binding TEXT, p_step TEXT) RETURNS TEXT
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r RECORD; v_standing TEXT;
BEGIN
  FOR r IN SELECT x.id, x.state AS rstate, x.actor, i.state AS istate, x.lease_host, x.heartbeat_at
      FROM dlq.replay_items i JOIN dlq.replays x ON x.id = i.replay_id
      WHERE i.letter_id = p_letter AND (p_binding IS NULL OR i.binding = p_binding)
        AND i.state IN ('planned', 'sending') LOOP
    IF r.rstate = 'running' AND dlq_private.held(r.id, false) THEN
      v_standing := 'held';
    ELSIF r.istate = 'sending' AND r.rstate IN ('running', 'killed', 'auto-stopped', 'failed') THEN
      -- In doubt while a resume can still find out; abandoned or completed: decided again.
      v_standing := 'in-doubt';
    ELSE
      CONTINUE;  -- planned in a stopped replay: its resume withdraws it
    END IF;
    IF NOT dlq_private.may_follow(v_standing, p_step) THEN
      RETURN pg_catalog.format('%s is %s by replay %s (started by %s, %s on %s, heartbeat %s)',
        p_letter, CASE v_standing WHEN 'held' THEN 'held' ELSE 'in doubt' END, r.id, r.actor,
        r.rstate, coalesce(r.lease_host, '?'), coalesce(r.heartbeat_at, '?'));
    END IF;
  END LOOP;
  IF p_binding IS NOT NULL AND NOT dlq_private.may_follow('replayed', p_step) AND EXISTS (
      SELECT 1 FROM dlq.decisions d WHERE d.letter_id = p_letter
        AND d.binding = p_binding AND d.kind = 'replay') THEN
    RETURN pg_catalog.format('%s was replayed already', p_letter);
  END IF;
  RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION dlq.revise(p_source TEXT, p_letter TEXT, p_reason TEXT, p_changed TEXT, p_sha_before TEXT,
                           p_payload BYTEA, p_program TEXT, p_client TEXT)
RETURNS BIGINT LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; v_number BIGINT; v_after TEXT; v_detail pg_catalog.jsonb; v_why TEXT;
BEGIN
  PERFORM dlq_private.require('operator', 'a revision');
  PERFORM dlq_private.head_locked();
  v_why := dlq_private.refusal(p_source, p_letter, NULL, 'revise');
  IF v_why IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = v_why || ': no revision was recorded';
  END IF;
  SELECT coalesce(max(r.number), 0) + 1 INTO v_number FROM dlq.revisions r
    WHERE r.source = p_source AND r.letter_id = p_letter;
  v_after := pg_catalog.encode(pg_catalog.sha256(p_payload), 'hex');
  v_detail := pg_catalog.jsonb_build_object('source', p_source, 'revision', v_number, 'reason', p_reason,
      'changed', p_changed::pg_catalog.jsonb, 'sha256_before', p_sha_before, 'sha256_after', v_after);
  IF p_program IS NOT NULL THEN
    v_detail := v_detail || pg_catalog.jsonb_build_object('program', p_program,
      'program_sha256', pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_program, 'UTF8')), 'hex'));
  END IF;
  e := dlq_private.append('edit', p_letter, dlq_private.detail(v_detail, p_client));
  INSERT INTO dlq.revisions (source, letter_id, number, actor, at, reason, changed_paths, sha256_before, sha256_after, payload, audit_seq)
    VALUES (p_source, p_letter, v_number, e.actor, e.at, p_reason, p_changed, p_sha_before, v_after, p_payload, e.seq);
  RETURN v_number;
END
$f$;

-- Letters about to be published: those decided since the plan (discarded, replayed by
-- another replay — under any source string) or being sent by another live replay are
-- withdrawn in the same entry; the rest journaled `sending`. The client publishes only
-- what is `sending` after this call.
CREATE OR REPLACE FUNCTION dlq.replay_send(p_id TEXT, p_epoch BIGINT, p_seqs INT4[], p_client TEXT)
RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE e dlq.audit; v_gone INT4[]; v_why TEXT[]; v_sent INT4[]; v_detail pg_catalog.jsonb;
BEGIN
  PERFORM dlq_private.lease_check(p_id, p_epoch);
  PERFORM dlq_private.head_locked();
  SELECT coalesce(pg_catalog.array_agg(w.seq ORDER BY w.seq), '{}'), coalesce(pg_catalog.array_agg(w.why ORDER BY w.seq), '{}')
    INTO v_gone, v_why FROM (
      SELECT DISTINCT ON (i.seq) i.seq::int4 AS seq,
        CASE
          WHEN d.kind = 'discard'
            THEN pg_catalog.format('discarded by %s at %s since the plan (reason: %s)', d.actor, d.at, d.reason)
          WHEN d.kind = 'replay'
            THEN pg_catalog.format('replayed since the plan (%s, confirmed at %s)', d.reason, d.at)
          ELSE pg_catalog.format('being sent by replay %s', o.replay_id) END AS why
      FROM dlq.replay_items i
      LEFT JOIN dlq.decisions d ON d.letter_id = i.letter_id AND d.binding = i.binding
        AND (d.kind = 'discard' OR d.reason <> 'replay ' || p_id)
        AND NOT dlq_private.may_follow(CASE WHEN d.kind = 'discard' THEN 'discarded' ELSE 'replayed' END, 'send')
      LEFT JOIN dlq.replay_items o ON o.letter_id = i.letter_id AND o.binding = i.binding
        AND o.replay_id <> p_id AND o.state = 'sending'
        AND EXISTS (SELECT 1 FROM dlq.replays x WHERE x.id = o.replay_id AND x.state = 'running')
        AND dlq_private.held(o.replay_id, false)
      WHERE i.replay_id = p_id AND i.seq = ANY (p_seqs) AND i.state IN ('planned', 'sending', 'held-back', 'refused')
        AND (d.id IS NOT NULL OR o.replay_id IS NOT NULL)
      ORDER BY i.seq, d.id) w;
  -- Sent: the batch's letters in a state a letter is sent from, not withdrawn. Any other
  -- seq (unknown, or already confirmed) is neither sent nor journaled.
  v_sent := ARRAY(SELECT i.seq::int4 FROM dlq.replay_items i WHERE i.replay_id = p_id AND i.seq = ANY (p_seqs)
    AND i.state IN ('planned', 'sending', 'held-back', 'refused') AND i.seq <> ALL (v_gone) ORDER BY i.seq);
  v_detail := pg_catalog.jsonb_build_object('seqs', pg_catalog.to_jsonb(v_sent));
  IF pg_catalog.cardinality(v_gone) > 0 THEN
    v_detail := v_detail || pg_catalog.jsonb_build_object('withdrawn', (
      SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(g.s, g.w) ORDER BY g.o)
        FROM ROWS FROM (pg_catalog.unnest(v_gone), pg_catalog.unnest(v_why)) WITH ORDINALITY AS g(s, w, o)));
  END IF;
  e := dlq_private.append('replay-send', p_id, dlq_private.detail(v_detail, p_client));
  UPDATE dlq.replay_items i SET state = 'sending', at = e.at
    WHERE i.replay_id = p_id AND i.seq = ANY (v_sent);
  UPDATE dlq.replay_items i SET state = 'withdrawn', at = e.at, error = g.w
    FROM ROWS FROM (pg_catalog.unnest(v_gone), pg_catalog.unnest(v_why)) AS g(s, w)
    WHERE i.replay_id = p_id AND i.seq = g.s AND i.state IN ('planned', 'sending', 'held-back', 'refused');
END
$f$;

-- One decision per letter, in the table itself, whichever function (or caller) inserts
-- it: a letter (id and binding, under any source string) carries at most one replay
-- confirmation, and never a discard beside one.
CREATE FUNCTION dlq_private.one_decision() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_first dlq.decisions;
BEGIN
  IF NEW.binding IS NULL THEN
    RETURN NEW;
  END IF;
  SELECT * INTO v_first FROM dlq.decisions d
   WHERE d.letter_id = NEW.letter_id AND d.binding = NEW.binding
     AND (d.kind = 'replay' OR NEW.kind = 'replay')
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format(
      '%s was already %s by %s at %s (%s): one decision per letter, nothing written',
      NEW.letter_id, CASE v_first.kind WHEN 'replay' THEN 'replayed' ELSE 'discarded' END,
      v_first.actor, v_first.at, v_first.reason);
  END IF;
  RETURN NEW;
END
$f$;
CREATE TRIGGER decisions_one_per_letter BEFORE INSERT ON dlq.decisions
  FOR EACH ROW EXECUTE FUNCTION dlq_private.one_decision();

-- A letter of a replay moves only forward: it is journaled `sending` only from a state a
-- letter is sent from, `confirmed` or `settled` only once it was `sending`, back
-- `failed-again` only once it was sent, and a `withdrawn` letter stays withdrawn —
-- whichever function, or caller, writes it.
CREATE FUNCTION dlq_private.item_moves() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND (
       OLD.state = 'withdrawn'
    OR (NEW.state = 'sending' AND OLD.state NOT IN ('planned', 'held-back', 'refused'))
    OR (NEW.state = 'failed-again' AND OLD.state NOT IN ('sending', 'confirmed', 'settled'))
    OR (NEW.state IN ('confirmed', 'settled') AND OLD.state NOT IN ('sending', 'confirmed'))) THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format(
      'replay %s letter %s cannot go from `%s` to `%s`: nothing written', OLD.replay_id, OLD.seq, OLD.state, NEW.state);
  END IF;
  RETURN NEW;
END
$f$;
CREATE TRIGGER replay_items_move BEFORE UPDATE OF state ON dlq.replay_items
  FOR EACH ROW EXECUTE FUNCTION dlq_private.item_moves();
REVOKE ALL ON FUNCTION dlq_private.may_follow(TEXT, TEXT), dlq_private.refusal(TEXT, TEXT, TEXT, TEXT), dlq_private.item_moves(), dlq_private.one_decision() FROM PUBLIC;
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn the_servers_table_is_cores() {
        let sql = super::schema_v8();
        assert!(sql.contains("('held','discard',false)"));
        assert!(!sql.contains("{rows}"));
    }
}
