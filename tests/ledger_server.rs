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
    assert!(
        discard.detail.contains("\"client\":\"os-user@"),
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
    let mut c = postgres::Client::connect(&as_role, postgres::NoTls).expect("connect");
    for sql in [
        "UPDATE audit SET detail = '{}' WHERE seq = 1",
        "DELETE FROM audit WHERE seq = 1",
        "INSERT INTO audit VALUES (99, 'x', 'x', 'x', 'x', '{}', 'x', 'x')",
        "SELECT key FROM dlq_chain_key",
        "SELECT dlq_import(99, 'x', 'mallory', 'discard', 'm', '{}')",
        "SELECT dlq_link('0', 'x')",
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
        "d1".into(),
        900,
        "Replay plan r-big".into(),
    );
    let a = l.request_approval(&request).expect("request");
    assert_eq!(a.author, "postgres");
    let own = l.decide_approval("r-big", true, "mine").expect_err("own");
    assert!(own.to_string().contains("cannot approve it"), "{own}");
    assert_eq!(
        l.approval_for("d1").expect("read").map(|a| a.state),
        Some(ApprovalState::Awaiting)
    );
    db.client()
        .batch_execute("UPDATE approvals SET state = 'approved', approver = 'mallory'")
        .expect("tamper");
    let err = l.approval_for("d1").expect_err("tampered");
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
            "SET application_name = 'psql of bob'; SET idle_in_transaction_session_timeout = 0;              BEGIN; SELECT pg_advisory_xact_lock(7337002)",
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
