//! #69: the team ledger decides on the server. Each attack of the issue, made as an
//! engineer with the documented grants and `psql` would make it (a non-superuser role,
//! a plain connection), is refused or has no effect — and afterwards `audit verify`
//! holds, the client reads every table, and the next discard goes through.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::journal::{Approval, Journal, ReplayState};
use dlq_ledger::{Ledger, Location};
use dlq_testkit::pg::{connect_to_ledger, TempDb};

const SOURCE: &str = "kafka://k/orders.dlq";

fn open(db: &TempDb) -> Ledger {
    Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("server ledger")
}

/// An engineer's login role (the documented grants), its URL, its role name and a ledger.
fn engineer(db: &TempDb, name: &str) -> (String, String, Ledger) {
    let url = db.engineer(name);
    let role = url
        .split("://")
        .nth(1)
        .and_then(|r| r.split('@').next())
        .expect("a role in the URL")
        .to_string();
    let l = Ledger::open_at(&Location::Server(url.clone()), "os-user").expect("open as engineer");
    (url, role, l)
}

/// The SQLSTATE of a refused statement, and its message.
fn refused(c: &mut postgres::Client, sql: &str) -> (String, String) {
    let err = c.batch_execute(sql).expect_err(sql);
    let db = err.as_db_error().unwrap_or_else(|| panic!("{sql}: {err}"));
    (db.code().code().to_string(), db.message().to_string())
}

fn planned(prefix: &str, n: u32) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("{prefix}-m{i}"),
                format!("at:orders.dlq/0/{prefix}{i}"),
            )
        })
        .collect()
}

fn items(named: &[(String, String)]) -> Vec<(u32, &str, &str, &str)> {
    (0u32..)
        .zip(named)
        .map(|(seq, (l, b))| (seq, l.as_str(), b.as_str(), "orders.dlq/0/1"))
        .collect()
}

/// After an attack: the chain verifies, every table reads, and a discard goes through.
fn team_still_works(db: &TempDb, what: &str) {
    let mut l = open(db);
    let v = l.verify(None).expect("verify");
    assert!(v.ok, "{what}: {v:?}");
    l.replays().expect("the replays read");
    l.decisions(SOURCE).expect("the decisions read");
    l.audit_entries().expect("the entries read");
    let n = l.audit_entries().expect("entries").len();
    l.record_discard(
        SOURCE,
        &format!("after-{n}"),
        &format!("at:orders.dlq/9/{n}"),
        None,
        "dup",
    )
    .unwrap_or_else(|e| panic!("{what}: the next discard: {e}"));
}

/// #69, 1: A sequence number of −1 (or any value no plan has) makes no row at all.
#[test]
fn a_replay_start_with_values_no_plan_has_writes_nothing() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let (url, _, _) = engineer(&db, "seq69");
    let mut c = connect_to_ledger(&url);
    for (sql, what) in [
        ("SELECT dlq.replay_start('r-neg', 'kafka://k/orders.dlq', 'orders', '{}', ARRAY[-1], ARRAY['m'], ARRAY['b'], ARRAY['l'], '')", "a negative seq"),
        ("SELECT dlq.replay_start('r-dup', 'kafka://k/orders.dlq', 'orders', '{}', ARRAY[0, 0], ARRAY['m', 'n'], ARRAY['b', 'c'], ARRAY['l', 'l'], '')", "a seq twice"),
        ("SELECT dlq.replay_start('r-null', 'kafka://k/orders.dlq', 'orders', '{}', ARRAY[0, 1], ARRAY['m', NULL], ARRAY['b', 'c'], ARRAY['l', 'l'], '')", "a NULL letter"),
        ("SELECT dlq.replay_start('r-short', 'kafka://k/orders.dlq', 'orders', '{}', ARRAY[0, 1], ARRAY['m'], ARRAY['b'], ARRAY['l'], '')", "arrays of two lengths"),
        ("SELECT dlq.replay_start('r-json', 'kafka://k/orders.dlq', 'orders', '[1]', ARRAY[0], ARRAY['m'], ARRAY['b'], ARRAY['l'], '')", "a detail that is no object"),
        ("SELECT dlq.replay_start(E'r\\nbad id', 'kafka://k/orders.dlq', 'orders', '{}', ARRAY[0], ARRAY['m'], ARRAY['b'], ARRAY['l'], '')", "an id with a newline"),
    ] {
        let (code, message) = refused(&mut c, sql);
        assert!(code == "22023" || code == "23514", "{what}: {code} {message}");
    }
    let rows: i64 = c
        .query_one("SELECT count(*) FROM replay_items", &[])
        .expect("count")
        .get(0);
    assert_eq!(rows, 0);
    team_still_works(&db, "after hostile starts");
}

/// #69, 2: A viewer appends nothing but its own refusals (small ones); no caller appends an
/// entry over its kind's size; a lock on a dead sender's key is not its lease.
#[test]
fn a_viewer_writes_nothing_and_a_lock_is_not_a_lease() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    let (alice_url, alice_role, mut alice) = engineer(&db, "alice69v");
    let (viewer_url, viewer_role, _) = engineer(&db, "viewer69v");
    owner.set_team_role(&alice_role, "operator").expect("alice");
    owner.set_team_role(&viewer_role, "viewer").expect("viewer");
    let mut v = connect_to_ledger(&viewer_url);
    let (code, message) = refused(&mut v, "SELECT dlq.audit('unmask', 'm-1', '{}')");
    assert_eq!(code, "42501", "{message}");
    assert!(message.contains("needs the privileged role"), "{message}");
    let (code, message) = refused(
        &mut v,
        "SELECT dlq.audit('denied', 'm-1', '{\"note\":\"' || repeat('x', 150000) || '\"}')",
    );
    assert_eq!(code, "54000", "{message}");
    v.batch_execute("SELECT dlq.audit('denied', 'm-1', '{\"refused\":\"unmasking\"}')")
        .expect("a viewer's own refusal is recorded");
    let mut a = connect_to_ledger(&alice_url);
    let (code, _) = refused(
        &mut a,
        "SELECT dlq.audit('transform-dry-run', 'x', '{\"n\":\"' || repeat('x', 5000000) || '\"}')",
    );
    assert_eq!(code, "54000");
    // alice starts a replay, and her process dies: nobody sends it.
    let named = planned("dead", 2);
    alice
        .replay_start(
            "r-dead",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&named),
        )
        .expect("start");
    drop(alice);
    let (key, epoch): (Option<i32>, i64) = {
        let row = v
            .query_one(
                "SELECT lease_key, lease_epoch FROM replays WHERE id = 'r-dead'",
                &[],
            )
            .expect("read");
        (row.get(0), row.get(1))
    };
    let key = key.expect("a drawn key");
    // The viewer (and an operator) take that key's lock and write as its sender: refused.
    let (mallory_url, _, _) = engineer(&db, "mallory69v");
    for (c, who) in [
        (&mut v, "viewer"),
        (&mut connect_to_ledger(&mallory_url), "operator"),
    ] {
        c.batch_execute(&format!("SELECT pg_advisory_lock(7337003, {key})"))
            .expect("anyone may take an advisory lock");
        for sql in [
            format!("SELECT * FROM dlq.replay_confirmed('r-dead', {epoch}, '{SOURCE}', ARRAY[0], ARRAY['orders/0/1'], ARRAY[true], '')"),
            format!("SELECT dlq.replay_send('r-dead', {epoch}, ARRAY[0, 1], '')"),
            format!("SELECT dlq.replay_finish('r-dead', {epoch}, 'completed', '{{}}', '')"),
        ] {
            let (code, message) = refused(c, &sql);
            assert_eq!(code, "42501", "{who}: {sql}: {message}");
        }
        c.batch_execute(&format!("SELECT pg_advisory_unlock(7337003, {key})"))
            .expect("let go");
    }
    let decisions: i64 = v
        .query_one("SELECT count(*) FROM decisions WHERE kind = 'replay'", &[])
        .expect("count")
        .get(0);
    assert_eq!(decisions, 0);
    team_still_works(&db, "after a viewer's attempts");
}

/// #69, 3: Four eyes approve a plan, not a count: the start must present the approved
/// letters and target; the approver reads the server's rendering, not the author's.
#[test]
fn an_approval_is_spent_only_on_the_plan_it_approved() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    owner
        .set_team_policy("approval_above", Some("2"))
        .expect("policy");
    let (_, _, mut alice) = engineer(&db, "alice69a");
    let (_, _, mut bob) = engineer(&db, "bob69a");
    let asked = planned("asked", 3);
    let facts = serde_json::json!({"kind": "replay", "target": "invoices",
        "letters": asked.iter().map(|(l, b)| [l, b]).collect::<Vec<_>>()});
    let a = alice
        .request_approval(
            &Approval::request(
                "r-asked".into(),
                SOURCE.into(),
                "ab".repeat(32),
                3,
                "author says: three harmless letters to invoices".into(),
            )
            .with_facts(facts),
        )
        .expect("request");
    let shown = bob.approval(&a.id).expect("read").expect("there").plan;
    assert!(shown.contains("Replay 3 letters"), "{shown}");
    assert!(
        shown.contains("invoices") && shown.contains("asked-m2"),
        "{shown}"
    );
    assert!(!shown.contains("author says"), "{shown}");
    bob.decide_approval(&a.id, true, "ok").expect("approve");
    alice.use_approval(&a.id).expect("spent");
    let other = planned("other", 3);
    for (letters, target, what) in [
        (&other, "invoices", "three other letters"),
        (&asked, "attacker-exfil", "another target"),
    ] {
        let err = alice
            .replay_start(
                "r-swap",
                SOURCE,
                target,
                &serde_json::json!({}),
                &items(letters),
            )
            .expect_err(what);
        assert!(err.to_string().contains("this exact plan"), "{what}: {err}");
    }
    alice
        .replay_start(
            "r-asked",
            SOURCE,
            "invoices",
            &serde_json::json!({}),
            &items(&asked),
        )
        .expect("the approved plan starts");
    alice
        .replay_finish("r-asked", ReplayState::Killed, &serde_json::json!({}))
        .expect("end");
    team_still_works(&db, "after a swapped plan");
}

/// #69, 4: A resume sends its plan's letters, never more; a finished replay is never resumed.
#[test]
fn a_resume_neither_extends_nor_reopens_a_replay() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let (_, _, mut alice) = engineer(&db, "alice69r");
    let one = planned("one", 1);
    alice
        .replay_start(
            "r-one",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&one),
        )
        .expect("start");
    alice
        .replay_finish("r-one", ReplayState::Killed, &serde_json::json!({}))
        .expect("killed");
    let more = planned("more", 101);
    let err = alice
        .replay_resume("r-one", &serde_json::json!({}), &items(&more)[1..])
        .expect_err("100 letters more");
    assert!(err.to_string().contains("never adds one"), "{err}");
    alice
        .replay_resume("r-one", &serde_json::json!({}), &[])
        .expect("its own letters");
    alice
        .replay_finish("r-one", ReplayState::Completed, &serde_json::json!({}))
        .expect("done");
    let (_, _, mut mallory) = engineer(&db, "mallory69r");
    let err = mallory
        .replay_resume("r-one", &serde_json::json!({}), &[])
        .expect_err("a completed replay");
    assert!(err.to_string().contains("never resumed"), "{err}");
    let items_n: i64 = connect_to_ledger(&db.url)
        .query_one(
            "SELECT count(*) FROM replay_items WHERE replay_id = 'r-one'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(items_n, 1);
    team_still_works(&db, "after a resume with more letters");
}

/// #69, 5: No lock a teammate can take stalls a write, a verify or a list: the ledger's
/// advisory-lock numbers of older versions, held in an idle session, mean nothing now.
#[test]
fn a_teammates_advisory_locks_stall_nobody() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let (viewer_url, _, _) = engineer(&db, "viewer69l");
    let mut v = connect_to_ledger(&viewer_url);
    v.batch_execute(
        "SET idle_in_transaction_session_timeout = 0; SELECT pg_advisory_lock(7337001); \
         SELECT pg_advisory_lock(7337002); SELECT pg_advisory_lock(7337003, 1); \
         SELECT pg_advisory_lock(0, 7337002)",
    )
    .expect("held by a viewer");
    let (_, _, mut alice) = engineer(&db, "alice69l");
    alice
        .record_discard(SOURCE, "m-1", "at:orders.dlq/0/1", None, "dup")
        .expect("a discard is not stalled");
    // A second open (the schema check), a verify and a list: none waits.
    let l = open(&db);
    assert!(l.verify(None).expect("verify").ok);
    assert_eq!(l.decisions(SOURCE).expect("list").len(), 1);
    team_still_works(&db, "with a viewer's locks held");
}

/// #69, 5b: A session that takes the write lock and sits in its transaction is ended by the
/// next writer once it has been idle past `STALLED_AFTER_S` (on the server's clock); the
/// writes that waited before then are told who holds it, by database role.
#[test]
fn a_session_idle_with_the_write_lock_is_ended_by_the_next_writer() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let (mallory_url, mallory_role, _) = engineer(&db, "mallory69s");
    let mut m = connect_to_ledger(&mallory_url);
    m.batch_execute("SET idle_in_transaction_session_timeout = 0; BEGIN; SELECT dlq.write_lock()")
        .expect("mallory holds the write lock");
    let (_, _, mut alice) = engineer(&db, "alice69s");
    // Each try waits at most the lock's timeout; the server decides when the holder
    // counts as stalled. Bounded, whatever the timing.
    let mut busy = Vec::new();
    let done = (0..6).find_map(|i| {
        match alice.record_discard(SOURCE, "m-s", "at:orders.dlq/0/5", None, "dup") {
            Ok(d) => Some(d),
            Err(e) => {
                busy.push(e.to_string());
                assert!(i < 5, "never freed: {busy:?}");
                None
            }
        }
    });
    assert!(done.is_some());
    for said in &busy {
        assert!(
            said.contains(&format!("database role {mallory_role}")),
            "{said}"
        );
    }
    assert!(
        m.batch_execute("SELECT 1").is_err(),
        "mallory's session was ended"
    );
    team_still_works(&db, "after a stalled writer");
}

/// #69, 6a: The discard threshold is the server's: direct calls over it are refused, and
/// letters an approval covers go through.
#[test]
fn the_discard_threshold_holds_for_direct_calls() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    owner
        .set_team_policy("discard_approval_above", Some("5"))
        .expect("policy");
    let (alice_url, _, mut alice) = engineer(&db, "alice69d");
    let (_, _, mut bob) = engineer(&db, "bob69d");
    let mut c = connect_to_ledger(&alice_url);
    let mut accepted = 0;
    for i in 0..10 {
        let sql = format!(
            "SELECT * FROM dlq.discard('{SOURCE}', 'd-{i}', 'at:orders.dlq/0/{i}', NULL, 'dup', '')"
        );
        match c.batch_execute(&sql) {
            Ok(()) => accepted += 1,
            Err(e) => {
                let m = e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_default();
                assert!(m.contains("discard_approval_above"), "{m}");
            }
        }
    }
    assert_eq!(accepted, 5);
    let named = planned("ok", 3);
    let a = alice
        .request_approval(
            &Approval::request(
                "d-approved".into(),
                SOURCE.into(),
                "cd".repeat(32),
                3,
                "x".into(),
            )
            .with_facts(serde_json::json!({"kind": "discard", "reason": "dup",
                    "letters": named.iter().map(|(l, b)| [l, b]).collect::<Vec<_>>()})),
        )
        .expect("request");
    bob.decide_approval(&a.id, true, "ok").expect("approve");
    alice.use_approval(&a.id).expect("spent");
    for (l, b) in &named {
        alice
            .record_discard(SOURCE, l, b, None, "dup")
            .expect("an approved letter");
    }
    let err = alice
        .record_discard(SOURCE, "d-x", "at:orders.dlq/1/1", None, "dup")
        .expect_err("not covered");
    assert!(err.to_string().contains("discard_approval_above"), "{err}");
    assert!(open(&db).verify(None).expect("verify").ok);
}

/// #69, 6b: Every function the team may execute, called with hostile arguments (NULLs,
/// negatives, huge strings, another engineer's ids), by an operator and by a viewer:
/// whatever it answers, the ledger verifies afterwards, every table reads, and the next
/// discard succeeds.
#[test]
fn every_function_with_hostile_arguments_leaves_the_ledger_whole() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    let (_, alice_role, mut alice) = engineer(&db, "alice69h");
    let (op_url, op_role, _) = engineer(&db, "op69h");
    let (viewer_url, viewer_role, _) = engineer(&db, "viewer69h");
    for (r, role) in [
        (&alice_role, "operator"),
        (&op_role, "operator"),
        (&viewer_role, "viewer"),
    ] {
        owner.set_team_role(r, role).expect("role");
    }
    let named = planned("live", 2);
    alice
        .replay_start(
            "r-alice",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&named),
        )
        .expect("alice sends a replay");
    let d = alice
        .record_discard(SOURCE, "m-a", "at:orders.dlq/0/1", None, "dup")
        .expect("alice's discard");
    let mut c = connect_to_ledger(&db.url);
    let functions: Vec<(String, Vec<String>)> = c
        .query(
            "SELECT p.proname::text, coalesce(array_agg(format_type(t, NULL) ORDER BY n) FILTER (WHERE t IS NOT NULL), '{}') \
             FROM pg_proc p LEFT JOIN LATERAL unnest(p.proargtypes) WITH ORDINALITY AS a(t, n) ON true \
             WHERE p.pronamespace = 'dlq'::regnamespace GROUP BY p.oid, p.proname",
            &[],
        )
        .expect("the team's functions")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(functions.len() >= 25, "{functions:?}");
    let big = format!("'{}'", "x".repeat(2_000_000));
    let hostile = |ty: &str| -> Vec<String> {
        let mut v = vec!["NULL".to_string()];
        v.extend(
            match ty {
                "text" => vec![
                    "''",
                    "'-1'",
                    "'r-alice'",
                    "'{\"a\":[1]}'",
                    "'replay'",
                    "'completed'",
                    big.as_str(),
                ],
                "bigint" | "integer" => vec!["-1", "0", "2147483647", "9223372036854775807"],
                "integer[]" => vec!["'{-1}'", "'{0,0}'", "'{}'", "'{2147483647}'", "'{NULL}'"],
                "text[]" => vec![
                    "'{}'",
                    "'{NULL}'",
                    "ARRAY['m-a']",
                    "ARRAY[repeat('y', 100000)]",
                ],
                "boolean[]" => vec!["'{}'", "'{true}'", "'{NULL}'"],
                "boolean" => vec!["true", "false"],
                "bytea" => vec!["''::bytea", "decode(repeat('ff', 1000000), 'hex')"],
                _ => vec![],
            }
            .into_iter()
            .map(str::to_string),
        );
        v
    };
    let plausible = |ty: &str| -> String {
        match ty {
            "text" => "'r-alice'".into(),
            "bigint" | "integer" => "1".into(),
            "integer[]" => "ARRAY[0]".into(),
            "text[]" => "ARRAY['m-a']".into(),
            "boolean[]" => "ARRAY[true]".into(),
            "boolean" => "true".into(),
            "bytea" => "'\\x7b7d'::bytea".into(),
            other => panic!("an argument type this test does not know: {other}"),
        }
    };
    let mut calls = 0;
    for url in [&op_url, &viewer_url] {
        let mut c = connect_to_ledger(url);
        for (name, args) in &functions {
            for (i, ty) in args.iter().enumerate() {
                for value in hostile(ty) {
                    let list: Vec<String> = args
                        .iter()
                        .enumerate()
                        .map(|(j, t)| if i == j { value.clone() } else { plausible(t) })
                        .collect();
                    let sql = format!("SELECT * FROM dlq.{name}({})", list.join(", "));
                    // Each in its own transaction; a refusal is an answer.
                    let _ = c.batch_execute(&sql);
                    calls += 1;
                }
            }
        }
    }
    assert!(calls > 500, "{calls} calls");
    // alice's replay and discard are as she left them.
    let mut check = connect_to_ledger(&db.url);
    let state: String = check
        .query_one("SELECT state FROM replays WHERE id = 'r-alice'", &[])
        .expect("read")
        .get(0);
    assert_eq!(state, "running");
    let decisions: i64 = check
        .query_one(
            "SELECT count(*) FROM decisions WHERE letter_id = 'm-a'",
            &[],
        )
        .expect("read")
        .get(0);
    assert_eq!(decisions, 1, "{d:?}");
    team_still_works(&db, "after hostile calls");
}

/// #69, 1 (the reader): a ledger an older server let a caller write into — a letter
/// numbered −1 — is read by every command; `audit verify` names the row.
#[test]
fn a_letter_no_plan_numbers_is_named_not_fatal() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    let named = planned("old", 1);
    owner
        .replay_start(
            "r-old",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&named),
        )
        .expect("start");
    owner
        .replay_finish("r-old", ReplayState::Killed, &serde_json::json!({}))
        .expect("end");
    connect_to_ledger(&db.url)
        .batch_execute(
            "ALTER TABLE replay_items DROP CONSTRAINT replay_items_fields_bounded; \
             INSERT INTO replay_items (replay_id, seq, letter_id, binding, location, state) \
             VALUES ('r-old', -1, 'm', 'b', 'l', 'confirmed')",
        )
        .expect("as a version-8 server let a caller do");
    let l = open(&db);
    let (_, letters) = l.replay("r-old").expect("read").expect("there");
    assert_eq!(letters.len(), 1);
    l.replays().expect("the list reads");
    let v = l.verify(None).expect("verify runs");
    assert!(!v.ok);
    let problem = v.problem.unwrap_or_default();
    assert!(problem.contains("numbered -1"), "{problem}");
}

/// #69, 6: a revision another engineer wrote is not sent on an operator's word alone: a
/// replay of it needs this exact plan approved by a privileged engineer (who may see its
/// stored bytes), whatever its size; the approver reads which revisions, by whom.
#[test]
fn a_replay_of_anothers_revision_needs_a_privileged_approver() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    let (_, mallory_role, mut mallory) = engineer(&db, "mallory69w");
    let (_, bob_role, mut bob) = engineer(&db, "bob69w");
    let (_, carol_role, mut carol) = engineer(&db, "carol69w");
    let (_, pat_role, mut pat) = engineer(&db, "pat69w");
    for (r, role) in [
        (&mallory_role, "operator"),
        (&bob_role, "operator"),
        (&carol_role, "operator"),
        (&pat_role, "privileged"),
    ] {
        owner.set_team_role(r, role).expect("role");
    }
    // mallory's revision: a swapped IBAN, whatever program it claims.
    mallory
        .record_revision(
            SOURCE,
            "pay-m0",
            "fix amount",
            &["/amount".into()],
            b"{\"amount\":1,\"iban\":\"DE00\"}",
            b"{\"amount\":2,\"iban\":\"XX99\"}",
        )
        .expect("a revision");
    let named = vec![("pay-m0".to_string(), "at:orders.dlq/0/77".to_string())];
    let detail = serde_json::json!({"options": {"use_revisions": true}});
    let err = bob
        .replay_start("r-rev", SOURCE, "payments", &detail, &items(&named))
        .expect_err("another's revision, no approval");
    assert!(
        err.to_string()
            .contains(&format!("written by {mallory_role}")),
        "{err}"
    );
    let facts = serde_json::json!({"kind": "replay", "target": "payments", "options": {"use_revisions": true},
        "letters": named.iter().map(|(l, b)| [l, b]).collect::<Vec<_>>()});
    let request = |id: &str| {
        Approval::request(id.into(), SOURCE.into(), "ef".repeat(32), 1, "x".into())
            .with_facts(facts.clone())
    };
    // An operator's approval is not enough.
    let a = bob.request_approval(&request("r-rev")).expect("request");
    let shown = carol.approval(&a.id).expect("read").expect("there").plan;
    assert!(
        shown.contains(&format!("revision 1 by {mallory_role}")),
        "{shown}"
    );
    carol
        .decide_approval(&a.id, true, "ok")
        .expect("carol approves");
    bob.use_approval(&a.id).expect("spent");
    let err = bob
        .replay_start("r-rev", SOURCE, "payments", &detail, &items(&named))
        .expect_err("approved by an operator");
    assert!(err.to_string().contains("privileged engineer"), "{err}");
    // A privileged engineer's approval of the same plan lets it start.
    let b = bob.request_approval(&request("r-rev-2")).expect("request");
    pat.decide_approval(&b.id, true, "seen the diff")
        .expect("pat approves");
    bob.use_approval(&b.id).expect("spent");
    bob.replay_start("r-rev-2", SOURCE, "payments", &detail, &items(&named))
        .expect("approved by a privileged engineer");
    bob.replay_finish("r-rev-2", ReplayState::Killed, &serde_json::json!({}))
        .expect("end");
    team_still_works(&db, "after a reviewed revision");
}
