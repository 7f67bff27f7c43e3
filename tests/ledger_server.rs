//! The team ledger on a real PostgreSQL (a database per test): the same journal as the
//! SQLite file, links computed by the server, an audit table nobody can edit, and the
//! chain naming what a superuser changed anyway.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::journal::{Journal, JournalError, ReplayState};
use dlq_ledger::{Ledger, Location};
use dlq_testkit::pg::TempDb;

const SOURCE: &str = "kafka://k/orders.dlq";

fn open(db: &TempDb) -> Ledger {
    Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("server ledger")
}

/// Discards, a revision and a finished replay, as a team would record them.
fn fill(l: &mut Ledger) {
    l.audit("unmask", "m-1", "{\"reason\":\"incident 7\"}")
        .expect("audit");
    let d = l
        .record_discard(
            SOURCE,
            "m-9",
            "at:orders.dlq/0/9",
            Some("orders.dlq/0/9"),
            "dup",
        )
        .expect("discard");
    l.mark_applied(&d, "ledger-only").expect("applied");
    l.record_revision(SOURCE, "m-8", "fix", &["/a".into()], b"{}", b"{\"a\":1}")
        .expect("revision");
    dlq_testkit::journal::finished_replay(l, "r-1", SOURCE, 2, 50);
}

#[test]
fn the_journal_on_the_server_records_verifies_and_names_the_role() {
    let Some(db) = TempDb::create() else { return };
    let mut l = open(&db);
    fill(&mut l);
    // Hostile text survives the server's canonical form byte for byte (the link the
    // server computed verifies as the SQLite ledger's would).
    l.audit(
        "unmask",
        "m-\u{1b}[2J\"\\\u{7f}é\u{1}",
        "{\"reason\":\"tab\\there \\u0000 and \\\"quotes\\\"\"}",
    )
    .expect("hostile");
    let v = l.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
    assert_eq!(v.entries, 12);
    // The actor is the role the client authenticated as, not what the client says.
    let entries = l.audit_entries().expect("entries");
    assert!(entries.iter().all(|e| e.actor == "postgres"), "{entries:?}");
    // …with the OS user and host it ran as beside it.
    let discard = entries
        .iter()
        .find(|e| e.action == "discard")
        .expect("discard");
    let detail: serde_json::Value = serde_json::from_str(&discard.detail).expect("json");
    assert!(
        detail["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("os-user@")),
        "{}",
        discard.detail
    );
    assert_eq!(l.decisions(SOURCE).expect("decisions").len(), 3);
    assert_eq!(
        l.revision(SOURCE, "m-8", 1).expect("revision"),
        Some(b"{\"a\":1}".to_vec())
    );
    let (row, items) = l.replay("r-1").expect("replay").expect("some");
    assert_eq!(row.state, ReplayState::Completed);
    assert_eq!(items.len(), 2);
    // A second client sees the first one's decisions, and the second discard of one
    // letter is refused naming who was first.
    let mut other = open(&db);
    let err = other
        .record_discard(SOURCE, "m-9", "at:orders.dlq/0/9", None, "again")
        .expect_err("decided");
    assert!(
        matches!(&err, JournalError::AlreadyDecided { actor, .. } if actor == "postgres"),
        "{err}"
    );
    // The incremental check vouches for what was written since its checkpoint.
    assert!(other.verify_since_checkpoint().expect("quick").is_some());
    // The location never shows a password.
    let with_pw = db.url.replacen("postgres@", "postgres:s3cret@", 1);
    assert!(!Location::Server(with_pw).to_string().contains("s3cret"));
}

#[test]
fn the_audit_log_is_append_only_and_a_superusers_edit_is_named() {
    let Some(db) = TempDb::create() else { return };
    let mut l = open(&db);
    fill(&mut l);
    let mut c = db.client();
    for sql in [
        "UPDATE audit SET detail = '{}' WHERE seq = 1",
        "DELETE FROM audit WHERE seq = 2",
        "TRUNCATE audit",
    ] {
        let err = c.batch_execute(sql).expect_err(sql);
        assert!(
            err.as_db_error()
                .is_some_and(|e| e.message().contains("append-only")),
            "{sql}: {err}"
        );
    }
    assert!(l.verify(None).expect("verify").ok);
    // A superuser can switch the trigger off; the chain still names the entry.
    c.batch_execute(
        "ALTER TABLE audit DISABLE TRIGGER audit_append_only;
         UPDATE audit SET detail = '{\"reason\":\"nothing to see\"}' WHERE seq = 1;
         ALTER TABLE audit ENABLE TRIGGER audit_append_only;",
    )
    .expect("superuser edit");
    let v = l.verify(None).expect("verify");
    assert!(!v.ok);
    assert_eq!(v.first_bad_seq, Some(1), "{v:?}");
    // A link forged without the server's key (inserted directly) fails too.
    let Some(db) = TempDb::create() else { return };
    let mut l = open(&db);
    fill(&mut l);
    let mut c = db.client();
    c.batch_execute(
        "INSERT INTO audit SELECT seq + 1, at, actor, 'unmask', target, detail, hash, repeat('ab', 32) FROM audit WHERE seq = (SELECT max(seq) FROM audit)",
    )
    .expect("forge");
    let v = l.verify(None).expect("verify");
    assert!(!v.ok, "{v:?}");
    assert!(v.problem.unwrap_or_default().contains("MAC"));
    // And a write then refuses to append after it.
    let v = l.verify_recent().expect("recent");
    assert!(!v.ok);
}

#[test]
fn two_clients_starting_the_same_replay_claim_each_letter_once() {
    let Some(db) = TempDb::create() else { return };
    let mut a = open(&db);
    let mut b = open(&db);
    let items: Vec<(u32, String, String)> = (0..200)
        .map(|i| (i, format!("m-{i}"), format!("at:{i}")))
        .collect();
    let start = move |l: &mut Ledger, id: &str, items: &[(u32, String, String)]| {
        let planned: Vec<(u32, &str, &str, &str)> = items
            .iter()
            .map(|(s, id, binding)| (*s, id.as_str(), binding.as_str(), "orders.dlq/0/1"))
            .collect();
        l.replay_start(id, SOURCE, "orders", &serde_json::json!({}), &planned)
    };
    let (ia, ib) = (items.clone(), items);
    // Each thread hands its ledger back: a replay is held while its sender's connection
    // lives (the server drops the lock with it), as a sending process keeps it.
    let ta = std::thread::spawn(move || (start(&mut a, "r-a", &ia), a));
    let tb = std::thread::spawn(move || (start(&mut b, "r-b", &ib), b));
    let ((ra, _a), (rb, _b)) = (ta.join().expect("a"), tb.join().expect("b"));
    // Exactly one holds them; the other is told who.
    let (won, lost) = match (ra, rb) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => (1, e),
        other => panic!("both or neither started: {other:?}"),
    };
    assert_eq!(won, 1);
    match lost {
        JournalError::Claimed { claims, .. } => {
            assert_eq!(claims.len(), 200);
            assert!(
                claims[0].describe().contains("postgres"),
                "{}",
                claims[0].describe()
            );
        }
        other => panic!("{other}"),
    }
    let l = open(&db);
    assert_eq!(l.claims(SOURCE).expect("claims").len(), 200);
    assert!(l.verify(None).expect("verify").ok);
}

#[test]
fn a_newer_server_schema_is_refused_and_an_unknown_scheme_is_an_error() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    db.client()
        .batch_execute("INSERT INTO dlq_schema VALUES (99)")
        .expect("bump");
    let err = Ledger::open_at(&Location::Server(db.url.clone()), "x")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("newer than this build"), "{err}");
    let err = Location::parse("mysql://root@db/x").expect_err("scheme");
    assert!(err.contains("unknown ledger scheme"));
    // An unreachable server is a clear error that names it without its password.
    let err = Ledger::open_at(
        &Location::Server("postgres://alice:s3cret@127.0.0.1:1/dlq?connect_timeout=2".into()),
        "x",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains("cannot connect") && !err.contains("s3cret"),
        "{err}"
    );
}

/// An engineer's own role with only the README's grants: records and verifies, is the
/// actor of what it records, and cannot edit the audit log, read the chain's key or
/// import history in others' names.
#[test]
fn the_teams_role_writes_through_the_server_and_cannot_edit_the_log() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db)); // the owner (here the superuser) creates the schema
    let role = format!("dlq_eng_{}", std::process::id());
    let mut admin = db.client();
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;"
        ))
        .expect("role");
    admin
        .batch_execute(&dlq_testkit::pg::readme_grants(&role))
        .expect("the README's grants");
    let as_role = db.url.replacen("postgres@", &format!("{role}@"), 1);
    let mut l = Ledger::open_at(&Location::Server(as_role.clone()), "os-user").expect("open");
    fill(&mut l);
    let v = l.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
    assert!(l
        .audit_entries()
        .expect("entries")
        .iter()
        .all(|e| e.actor == role));
    drop(l);
    let mut c = dlq_testkit::pg::connect_to_ledger(&as_role);
    for sql in [
        "UPDATE audit SET detail = '{}' WHERE seq = 1",
        "DELETE FROM audit WHERE seq = 1",
        "INSERT INTO audit VALUES (99, 'x', 'x', 'x', 'x', '{}', 'x', 'x')",
        "SELECT key FROM dlq_private.dlq_chain_key",
        "SELECT dlq_private.import(99, 'x', 'mallory', 'discard', 'm', '{}')",
        "SELECT dlq_private.link('0', 'x')",
        "SELECT dlq_private.mac('verified checkpoint', 'x')",
        "UPDATE replays SET lease_pid = NULL",
        "INSERT INTO decisions (source, letter_id, kind, reason, actor, at, audit_seq) VALUES ('s', 'm', 'discard', 'x', 'x', 'x', 1)",
        "UPDATE approvals SET state = 'approved'",
        "INSERT INTO meta VALUES ('verified', '{}')",
        "DELETE FROM meta",
    ] {
        let err = c.batch_execute(sql).expect_err(sql);
        assert!(
            err.as_db_error()
                .is_some_and(|e| e.message().contains("permission denied")),
            "{sql}: {err}"
        );
    }
    drop(c);
    let _ = admin.batch_execute(&format!(
        "DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};"
    ));
}

/// An approval is what its entries say: one set to `approved` in the table lets nothing
/// through, and `audit verify` names it; its author cannot approve it.
#[test]
fn an_approval_edited_in_the_table_lets_nothing_start() {
    use dlq_core::journal::{Approval, ApprovalState};
    let Some(db) = TempDb::create() else { return };
    let mut l = open(&db);
    let request = Approval::request(
        "r-big".into(),
        SOURCE.into(),
        "d1".repeat(32),
        900,
        "Replay plan r-big".into(),
    )
    .with_facts(facts("orders", &planned(900)));
    let a = l.request_approval(&request).expect("request");
    assert_eq!(a.author, "postgres");
    let own = l.decide_approval("r-big", true, "mine").expect_err("own");
    assert!(own.to_string().contains("cannot approve it"), "{own}");
    assert_eq!(
        l.approval_for(&"d1".repeat(32))
            .expect("read")
            .map(|a| a.state),
        Some(ApprovalState::Awaiting)
    );
    db.client()
        .batch_execute("UPDATE approvals SET state = 'approved', approver = 'mallory'")
        .expect("tamper");
    let err = l.approval_for(&"d1".repeat(32)).expect_err("tampered");
    assert!(err.to_string().contains("does not match"), "{err}");
    let v = l.verify(None).expect("verify");
    assert!(!v.ok && v.problem.unwrap_or_default().contains("approval r-big"));
}

/// A write that waits for the team's write lock in vain (another session holds it past
/// `lock_timeout`) says who holds it, and leaves the connection usable: the next write,
/// once the lock is free, goes through — a failed transaction is rolled back, never left
/// to refuse every later statement. A session ended by the server (a restart, a
/// failover, `pg_terminate_backend`) costs nothing either: the next write makes a new
/// connection.
#[test]
fn a_lock_wait_in_vain_names_the_holder_and_neither_it_nor_a_cut_poisons_the_connection() {
    let Some(db) = TempDb::create() else { return };
    let mut l = open(&db);
    l.audit("unmask", "m-1", "{}").expect("a first write");
    // Another client holds the write lock inside an open transaction (and has turned
    // off the database's idle-in-transaction timeout, which would end it after 5 s).
    let mut holder = db.client();
    holder
        .batch_execute(
            "SET application_name = 'psql of bob'; SET idle_in_transaction_session_timeout = 0;              BEGIN; SELECT dlq.write_lock()",
        )
        .expect("hold the lock");
    let refused = l
        .audit("unmask", "m-2", "{}")
        .expect_err("the lock is held");
    let said = refused.to_string();
    assert!(matches!(refused, JournalError::Busy { .. }), "{said}");
    for words in [
        "the team ledger is busy",
        "`psql of bob`",
        "database role postgres",
        "has held its write lock",
        "nothing was recorded",
    ] {
        assert!(said.contains(words), "`{words}` in {said}");
    }
    holder.batch_execute("COMMIT").expect("let go");
    l.audit("unmask", "m-2", "{}")
        .expect("the same connection writes again");
    // The server ends every session of the database, as a restart would.
    let name = db.url.rsplit('/').next().expect("db name").to_string();
    holder
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&name],
        )
        .expect("terminate");
    l.audit("unmask", "m-3", "{}")
        .expect("a new connection writes");
    let entries = l.audit_entries().expect("entries");
    assert_eq!(entries.len(), 3, "each write once: {entries:?}");
    assert!(l.verify(None).expect("verify").ok);
}

/// An engineer's login role with the README's grants (a name of its own per test: roles
/// are the cluster's), and a ledger opened as it.
fn engineer(db: &TempDb, name: &str) -> (String, Ledger) {
    let url = db.engineer(name);
    let l = Ledger::open_at(&Location::Server(url.clone()), "os-user").expect("open as engineer");
    (url, l)
}

/// The SQLSTATE of a refused statement, and its message.
fn refused(c: &mut postgres::Client, sql: &str) -> (String, String) {
    let err = c.batch_execute(sql).expect_err(sql);
    let db = err.as_db_error().unwrap_or_else(|| panic!("{sql}: {err}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// What a client sends the server with an approval request: the plan's facts.
fn facts(target: &str, named: &[(String, String)]) -> serde_json::Value {
    serde_json::json!({"kind": "replay", "target": target, "letters": named.iter().map(|(l, b)| [l, b]).collect::<Vec<_>>()})
}

fn planned(n: u32) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("big-m{i}"), format!("at:orders.dlq/0/{i}")))
        .collect()
}

fn items(named: &[(String, String)]) -> Vec<(u32, &str, &str, &str)> {
    (0u32..)
        .zip(named)
        .map(|(seq, (l, b))| (seq, l.as_str(), b.as_str(), "orders.dlq/0/1"))
        .collect()
}

/// #45, 1: a bare entry that binds a row (the lock-out: `audit verify` broken for good)
/// is refused by the server; so is every table write. The chain stays clean and every
/// write still works.
#[test]
fn an_engineer_with_psql_cannot_lock_the_team_out() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let (url, mut l) = engineer(&db, "lockout");
    fill(&mut l);
    let mut c = dlq_testkit::pg::connect_to_ledger(&url);
    for action in [
        "discard",
        "replay",
        "edit",
        "discard-applied",
        "replay-start",
        "approval-granted",
        "role-set",
    ] {
        let (code, message) = refused(
            &mut c,
            &format!("SELECT dlq.audit('{action}', 'x', '{{}}')"),
        );
        assert_eq!(code, "42501", "{action}: {message}");
        assert!(
            message.contains("written only by the function"),
            "{message}"
        );
    }
    // The old entry point is gone; the internal one is out of reach.
    let (_, gone) = refused(&mut c, "SELECT dlq_append('discard', 'x', '{}')");
    assert!(gone.contains("does not exist"), "{gone}");
    let (code, _) = refused(&mut c, "SELECT dlq_private.append('discard', 'x', '{}')");
    assert_eq!(code, "42501");
    // A replay step without the lease: refused by the server, whatever the client.
    let (code, message) = refused(&mut c, "SELECT dlq.replay_send('r-1', 1, ARRAY[0], '')");
    assert_eq!(code, "42501", "{message}");
    let (_, message) = refused(
        &mut c,
        "SELECT dlq.replay_item('r-1', 1, 0, 'refused', 'x', '')",
    );
    assert!(message.contains("is not its sender"), "{message}");
    drop(c);
    let v = l.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
    l.record_discard(SOURCE, "m-after", "at:orders.dlq/0/77", None, "dup")
        .expect("a write after");
    assert!(l.verify(None).expect("verify").ok);
}

/// #45, 2: four eyes with two hands — the author can neither approve her own plan (SQL
/// or client) nor start a replay over the team's approval_above without a second
/// operator's approval, whatever her config says.
#[test]
fn the_author_cannot_approve_her_own_replay_nor_skip_the_teams_threshold() {
    use dlq_core::journal::{Approval, ApprovalState};
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    owner
        .set_team_policy("approval_above", Some("20"))
        .expect("the team's policy");
    let (alice_url, mut alice) = engineer(&db, "alice45");
    let (_, mut bob) = engineer(&db, "bob45");
    let named = planned(30);
    let plan = items(&named);
    // A config without approval_above (the client asks nothing): the server refuses.
    let err = alice
        .replay_start("r-big", SOURCE, "orders", &serde_json::json!({}), &plan)
        .expect_err("over the team's threshold");
    assert!(err.to_string().contains("approval_above (20)"), "{err}");
    let request = Approval::request(
        "r-big".into(),
        SOURCE.into(),
        "d4".repeat(32),
        30,
        "plan".into(),
    )
    .with_facts(facts("orders", &named));
    let a = alice.request_approval(&request).expect("request");
    // Her own approval: refused by the client and, through psql, by the server; the
    // table is not hers to write.
    assert!(alice.decide_approval(&a.id, true, "mine").is_err());
    let mut c = dlq_testkit::pg::connect_to_ledger(&alice_url);
    let (code, message) = refused(
        &mut c,
        "SELECT dlq.approval_decide('r-big', true, 'mine', '')",
    );
    assert_eq!(code, "42501");
    assert!(message.contains("cannot approve it"), "{message}");
    let (code, _) = refused(
        &mut c,
        "UPDATE approvals SET state = 'approved', approver = current_user",
    );
    assert_eq!(code, "42501");
    let (code, _) = refused(&mut c, "SELECT dlq.approval_use('r-big', '')");
    assert_eq!(code, "42501");
    drop(c);
    assert!(alice
        .replay_start("r-big", SOURCE, "orders", &serde_json::json!({}), &plan)
        .is_err());
    // A second operator approves; the author spends it; the replay starts, once.
    let granted = bob
        .decide_approval(&a.id, true, "looks right")
        .expect("bob approves");
    assert_eq!(granted.state, ApprovalState::Approved);
    alice.use_approval(&a.id).expect("spent");
    alice
        .replay_start("r-big", SOURCE, "orders", &serde_json::json!({}), &plan)
        .expect("approved start");
    alice
        .replay_finish("r-big", ReplayState::Killed, &serde_json::json!({}))
        .expect("finish");
    let again = planned(30);
    let err = alice
        .replay_start(
            "r-big-2",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&again),
        )
        .expect_err("the approval was spent");
    assert!(err.to_string().contains("approval_above"), "{err}");
    let v = owner.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
}

/// #45, 3: a function planted in a writable `public` never runs with the owner's rights:
/// every call inside the ledger's functions is qualified, their search path is
/// pg_catalog's.
#[test]
fn a_function_planted_in_public_never_runs_as_the_owner() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let mut admin = db.client();
    let (mallory_url, _) = engineer(&db, "mallory45");
    // (Each engineer's grants, as the README writes them, revoke CREATE on public: both
    // are made before the test opens it again.)
    let (_, mut bob) = engineer(&db, "bob45p");
    // The default before PostgreSQL 15, kept by upgraded clusters (and an admin who
    // skipped the README's REVOKE).
    admin
        .batch_execute(
            "GRANT CREATE ON SCHEMA public TO PUBLIC; \
             CREATE TABLE public.loot (who TEXT, what TEXT); GRANT INSERT, SELECT ON public.loot TO PUBLIC;",
        )
        .expect("a writable public");
    let mut m = dlq_testkit::pg::connect_to_ledger(&mallory_url);
    for f in [
        "public.to_json(TEXT) RETURNS json",
        "public.encode(BYTEA, TEXT) RETURNS TEXT",
        "public.convert_to(TEXT, TEXT) RETURNS BYTEA",
        "public.jsonb_build_object(TEXT, TEXT) RETURNS jsonb",
    ] {
        m.batch_execute(&format!(
            "CREATE FUNCTION {f} LANGUAGE plpgsql AS $$ BEGIN \
               INSERT INTO public.loot VALUES (current_user, '{f}'); \
               BEGIN INSERT INTO public.loot SELECT current_user, encode(k.key, 'hex') FROM dlq_private.dlq_chain_key k; \
               EXCEPTION WHEN OTHERS THEN NULL; END; \
               RETURN NULL; END $$"
        ))
        .expect("plant");
    }
    drop(m);
    // The tool says so (a warning at start, `team_ledger::team_view`).
    assert!(
        bob.public_writable().expect("asked"),
        "a writable public is found"
    );
    fill(&mut bob);
    bob.audit("unmask", "m-1", "{\"reason\":\"x\"}")
        .expect("audit");
    let loot: i64 = admin
        .query_one("SELECT count(*) FROM public.loot", &[])
        .expect("count")
        .get(0);
    assert_eq!(
        loot, 0,
        "a planted function ran inside the ledger's functions"
    );
    assert!(bob.verify(None).expect("verify").ok);
    admin
        .batch_execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        .expect("as the README says");
    assert!(!bob.public_writable().expect("asked"));
}

/// #45, 4: the replays table and the checkpoint are the server's: an engineer cannot
/// clear a live lease, end another's live replay, or store a checkpoint the chain does
/// not hold up to; a viewer cannot write at all; roles fail closed.
#[test]
fn leases_checkpoints_and_roles_are_the_servers() {
    let Some(db) = TempDb::create() else { return };
    let mut owner = open(&db);
    let (alice_url, mut alice) = engineer(&db, "alice45r");
    let named = planned(3);
    alice
        .replay_start(
            "r-live",
            SOURCE,
            "orders",
            &serde_json::json!({}),
            &items(&named),
        )
        .expect("start");
    let (mallory_url, _) = engineer(&db, "mallory45r");
    let mut m = dlq_testkit::pg::connect_to_ledger(&mallory_url);
    let (code, _) = refused(
        &mut m,
        "UPDATE replays SET lease_pid = NULL, lease_epoch = 0",
    );
    assert_eq!(code, "42501");
    let (_, message) = refused(
        &mut m,
        "SELECT dlq.replay_finish('r-live', NULL, 'killed', '{}', '')",
    );
    assert!(
        message.contains("being sent by a live session"),
        "{message}"
    );
    // Its lease is alice's session's lock: the server gives it to no one else.
    let taken: Option<i64> = m
        .query_one("SELECT dlq.take_lease('r-live', 1, 'x')", &[])
        .expect("call")
        .get(0);
    assert_eq!(taken, None);
    let (_, message) = refused(&mut m, "SELECT dlq.replay_send('r-live', 1, ARRAY[0], '')");
    assert!(message.contains("is not its sender"), "{message}");
    // A checkpoint past a hash the chain does not have is not kept; a forged one in
    // the table cannot be written.
    let head = owner.head().expect("head").expect("some");
    let forged = format!(
        "{{\"seq\":{},\"hash\":\"{}\",\"decisions\":0,\"revisions\":0,\"replay_items\":0,\"replays\":{{}},\"mac\":\"\"}}",
        head.seq + 5,
        "f".repeat(64)
    );
    let kept: bool = m
        .query_one("SELECT dlq.store_checkpoint($1)", &[&forged])
        .expect("call")
        .get(0);
    assert!(!kept);
    let (code, _) = refused(
        &mut m,
        "INSERT INTO meta VALUES ('verified', '{}') ON CONFLICT (key) DO UPDATE SET value = '{}'",
    );
    assert_eq!(code, "42501");
    // Roles on the server: a viewer writes nothing, even through the functions.
    owner
        .set_team_role(&mallory_url_role(&mallory_url), "viewer")
        .expect("role");
    owner
        .set_team_role(&mallory_url_role(&alice_url), "operator")
        .expect("role");
    let (code, message) = refused(
        &mut m,
        "SELECT * FROM dlq.discard('s', 'm', 'b', NULL, 'x', '')",
    );
    assert_eq!(code, "42501");
    assert!(message.contains("needs the operator role"), "{message}");
    drop(m);
    alice
        .replay_finish("r-live", ReplayState::Completed, &serde_json::json!({}))
        .expect("its holder ends it");
    let v = owner.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
}

/// The role name in an engineer's URL (`postgres://NAME@host/db`).
fn mallory_url_role(url: &str) -> String {
    url.split("://")
        .nth(1)
        .and_then(|r| r.split('@').next())
        .unwrap_or_default()
        .to_string()
}

/// #45: a ledger written by the version-6 schema (tables in `public`, the team granted
/// INSERT and UPDATE on them, as that README said) is upgraded in place by its owner's
/// next open: every entry kept and verified before and after, the tables moved into
/// `dlq`, the team's old write grants revoked, and an older build refused where it looks.
#[test]
fn a_version_6_ledger_is_upgraded_in_place_and_verifies_before_and_after() {
    let Some(db) = TempDb::create() else { return };
    let mut admin = postgres::Client::connect(&db.url, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&dlq_ledger::server_schema_v6_for_tests())
        .expect("a version-6 ledger");
    // What a version-6 client wrote: entries through dlq_append, rows beside them.
    let mut tx = admin.transaction().expect("tx");
    let seq: i64 = tx
        .query_one(
            "SELECT seq FROM dlq_append('discard', 'm-6', '{\"source\":\"kafka://k/orders.dlq\",\"binding\":\"at:orders.dlq/0/6\",\"coords\":\"orders.dlq/0/6\",\"reason\":\"dup\"}')",
            &[],
        )
        .expect("append")
        .get(0);
    tx.execute(
        "INSERT INTO decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq) \
         SELECT 'kafka://k/orders.dlq', 'm-6', 'at:orders.dlq/0/6', 'orders.dlq/0/6', 'discard', 'dup', a.actor, a.at, a.seq FROM audit a WHERE a.seq = $1",
        &[&seq],
    )
    .expect("row");
    tx.query_one(
        "SELECT seq FROM dlq_append('unmask', 'm-7', '{\"reason\":\"incident\"}')",
        &[],
    )
    .expect("append");
    tx.commit().expect("commit");
    let role = format!("dlq_old_team_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; \
             GRANT SELECT, INSERT, UPDATE ON decisions, revisions, replays, replay_items, approvals TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON meta TO {role}; \
             GRANT SELECT ON audit, dlq_schema, dlq_roles TO {role}; \
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}; \
             GRANT EXECUTE ON FUNCTION dlq_append(TEXT, TEXT, TEXT), dlq_first_bad_mac(BIGINT, BIGINT), dlq_mac(TEXT, TEXT) TO {role};"
        ))
        .expect("the old README's grants");
    let bad_before: Option<i64> = admin
        .query_one("SELECT dlq_first_bad_mac(1, 2)", &[])
        .expect("verify before")
        .get(0);
    assert_eq!(bad_before, None);
    // A teammate's newer build does not upgrade it (not the owner): it says who must.
    let team_url = db.url.replacen("postgres@", &format!("{role}@"), 1);
    let err = Ledger::open_at(&Location::Server(team_url.clone()), "os-user")
        .err()
        .expect("not the owner");
    assert!(err.to_string().contains("upgrades it in place"), "{err}");
    // The owner's next open upgrades it.
    let l = open(&db);
    let entries = l.audit_entries().expect("entries");
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert_eq!(entries[2].action, "ledger-upgraded");
    assert!(entries[2].detail.contains("\"to\":9"), "{entries:?}");
    let v = l.verify(None).expect("verify after");
    assert!(v.ok, "{v:?}");
    assert_eq!(l.decisions(SOURCE).expect("decisions").len(), 1);
    let version: i64 = admin
        .query_one("SELECT max(version) FROM public.dlq_schema", &[])
        .expect("what an older build reads")
        .get(0);
    assert_eq!(version, 7);
    admin
        .batch_execute(&format!("GRANT USAGE ON SCHEMA dlq TO {role};"))
        .ok();
    let mut team = dlq_testkit::pg::connect_to_ledger(&team_url);
    let (code, _) = refused(&mut team, "INSERT INTO decisions (source, letter_id, kind, reason, actor, at, audit_seq) VALUES ('s', 'm', 'discard', 'x', 'x', 'x', 1)");
    assert_eq!(code, "42501");
    drop(team);
    let _ = admin.batch_execute(&format!(
        "DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};"
    ));
}

/// `sslmode=verify-full` against a server whose certificate a private CA signed: the
/// ledger opens and writes; a certificate that names another host is refused (and
/// accepted by `verify-ca`, which checks the chain only); without the CA, refused.
#[test]
fn verify_full_checks_the_servers_certificate_and_its_name() {
    let Some(db) = TempDb::create() else { return };
    drop(open(&db));
    let Some((_, rest)) = db.url.split_once("127.0.0.1:5432") else {
        return; // another server (DLQ_TRIAGE_TEST_PG): this test fronts the local one
    };
    let dir = tempfile::tempdir().expect("tmp");
    let url_for = |front: &dlq_testkit::tls::TlsFront, mode: &str, ca: bool| {
        let ca_path = dir.path().join(format!("ca-{}.pem", front.ports[0]));
        std::fs::write(&ca_path, &front.ca_pem).expect("ca");
        let root = if ca {
            format!("&sslrootcert={}", ca_path.display())
        } else {
            String::new()
        };
        format!(
            "postgres://postgres@127.0.0.1:{}{rest}?sslmode={mode}{root}",
            front.ports[0]
        )
    };
    let open_url = |url: String| Ledger::open_at(&Location::Server(url), "os-user");
    let right = dlq_testkit::tls::postgres_tls_front(&["127.0.0.1"], 5432);
    let mut l = open_url(url_for(&right, "verify-full", true)).expect("verify-full");
    l.audit("unmask", "m-tls", "{}").expect("a write over TLS");
    assert!(l.verify(None).expect("verify").ok);
    let err = open_url(url_for(&right, "verify-full", false))
        .err()
        .expect("an unknown CA");
    assert!(err.to_string().contains("cannot connect"), "{err}");
    let wrong = dlq_testkit::tls::postgres_tls_front(&["db.elsewhere.internal"], 5432);
    let err = open_url(url_for(&wrong, "verify-full", true))
        .err()
        .expect("a certificate for another name");
    assert!(err.to_string().contains("cannot connect"), "{err}");
    open_url(url_for(&wrong, "verify-ca", true)).expect("verify-ca checks the chain only");
}
