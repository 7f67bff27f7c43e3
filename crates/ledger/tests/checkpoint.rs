//! Incremental verification: what a write path checks since the last verified
//! checkpoint, and that anything it cannot vouch for goes to the full walk.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::journal::{ConfirmedLetter, Journal, ReplayState};
use dlq_ledger::Ledger;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

const SOURCE: &str = "kafka://k/orders.dlq";

/// A ledger with unmasks, a discard applied, a revision and a finished replay of three
/// letters (one settled by the replay, one applied at confirm, one left planned).
fn ledger(dir: &Path) -> (PathBuf, Ledger) {
    let path = dir.join("ledger.db");
    let mut l = Ledger::open(&path, "alice").expect("open");
    for i in 0..5 {
        l.audit("unmask", &format!("m-{i}"), "{\"reason\":\"incident\"}")
            .expect("audit");
    }
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
    replay(&mut l, "r-old");
    (path, l)
}

fn replay(l: &mut Ledger, id: &str) {
    replay_ending(l, id, ReplayState::Completed)
}

/// `replay`, ended `end`.
fn replay_ending(l: &mut Ledger, id: &str, end: ReplayState) {
    // Each replay its own letters (a letter replayed once is not planned again).
    let ids: Vec<(String, String)> = (1..=3)
        .map(|i| (format!("{id}-m{i}"), format!("{id}:{i}")))
        .collect();
    let items: Vec<(u32, &str, &str, &str)> = (0u32..)
        .zip(&ids)
        .map(|(seq, (letter, binding))| (seq, letter.as_str(), binding.as_str(), "orders.dlq/0/1"))
        .collect();
    l.replay_start(id, SOURCE, "orders", &serde_json::json!({}), &items)
        .expect("start");
    l.replay_sending(id, &[0, 1]).expect("sending");
    let confirmed = |seq: u32, letter_id, binding, ledger_only| ConfirmedLetter {
        seq,
        letter_id,
        binding,
        location: "orders/0/1",
        published: Some("orders/0/1"),
        ledger_only,
    };
    let decisions = l
        .replay_confirmed(
            id,
            SOURCE,
            &[
                confirmed(0, items[0].1, items[0].2, false),
                confirmed(1, items[1].1, items[1].2, true),
            ],
        )
        .expect("confirmed");
    l.replay_settled(id, 0, &decisions[0], "acked")
        .expect("settled");
    l.replay_finish(id, end, &serde_json::json!({}))
        .expect("finish");
}

fn sql(path: &Path, statement: &str) {
    Connection::open(path)
        .expect("db")
        .execute_batch(statement)
        .expect(statement);
}

#[test]
fn writes_after_a_checkpoint_are_verified_and_move_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_path, mut l) = ledger(dir.path());
    replay_ending(&mut l, "r-stopped", ReplayState::Killed);
    // No checkpoint yet: the first check walks everything and leaves one.
    let v = l.verify_recent().expect("verify");
    assert!(v.ok, "{v:?}");
    // Writes of every kind since: a new replay, an old decision's replay applied later,
    // more entries.
    let d = l
        .record_discard(SOURCE, "m-6", "at:6", None, "dup")
        .expect("discard");
    replay(&mut l, "r-new");
    l.mark_applied(&d, "acked").expect("applied");
    l.record_revision(SOURCE, "m-8", "again", &["/a".into()], b"{}", b"{\"a\":2}")
        .expect("revision");
    l.audit("unmask", "m-4", "{}").expect("audit");
    // The quick check vouches for all of it by itself (no hand-over to the full walk)…
    let v = l
        .verify_since_checkpoint()
        .expect("verify")
        .expect("the incremental check vouched");
    assert!(v.ok, "{v:?}");
    assert_eq!(v.entries, l.head().expect("head").expect("some").seq);
    assert_eq!(l.verify(None).expect("full"), v);
    // …and, with nothing new, again from the checkpoint it moved.
    assert_eq!(l.verify_since_checkpoint().expect("verify"), Some(v));
    // An old replay (stopped before the checkpoint) resumed and finished since: its
    // whole journal is read again. (A finished one is never resumed.)
    l.replay_resume("r-stopped", &serde_json::json!({}), &[])
        .expect("resume");
    l.replay_finish("r-stopped", ReplayState::Completed, &serde_json::json!({}))
        .expect("finish");
    assert!(l.verify_since_checkpoint().expect("verify").is_some());
}

#[test]
fn every_edit_a_write_path_would_trust_is_caught_by_the_incremental_check() {
    // (what, statement, in the problem): rows written before the checkpoint whose edit
    // would change what is sent, and rows written after it.
    let cases = [
        (
            "an old replayed letter set back to planned (a resume would send it again)",
            "UPDATE replay_items SET state = 'planned' WHERE replay_id = 'r-old' AND seq = 0",
            "replay_items",
        ),
        (
            "an old replay decision deleted (the letter would look open again)",
            "DELETE FROM decisions WHERE kind = 'replay' AND letter_id = 'r-old-m2'",
            "decision",
        ),
        ("an old replay's state edited", "UPDATE replays SET state = 'killed' WHERE id = 'r-old'", "r-old"),
        (
            "an old replay's letter deleted",
            "DELETE FROM replay_items WHERE replay_id = 'r-old' AND seq = 2",
            "r-old",
        ),
        ("a decision forged", "INSERT INTO decisions (source, letter_id, binding, kind, reason, actor, at, audit_seq) VALUES ('kafka://k/orders.dlq', 'm-7', 'at:7', 'discard', 'x', 'mallory', 'now', 1)", "decision"),
        ("a replay forged", "INSERT INTO replays (id, source, target, actor, started_at, state, detail) VALUES ('r-x', 's', 't', 'a', 'now', 'completed', '{}')", "r-x"),
        ("the log truncated below the checkpoint", "DELETE FROM audit WHERE seq > 10", "removed from the end"),
        ("the last checked entry edited", "UPDATE audit SET detail = '{}' WHERE seq = (SELECT max(seq) FROM audit)", "MAC"),
        ("an old revision deleted", "DELETE FROM revisions", "revision"),
    ];
    for (what, statement, named) in cases {
        let dir = tempfile::tempdir().expect("tmp");
        let (path, l) = ledger(dir.path());
        assert!(l.verify(None).expect("full").ok, "{what}: clean first");
        sql(&path, statement);
        assert_eq!(l.verify_since_checkpoint().expect("quick"), None, "{what}");
        let v = l.verify_recent().expect("verify");
        assert!(!v.ok, "{what} went unnoticed");
        let problem = v.problem.clone().unwrap_or_default();
        assert!(problem.contains(named), "{what}: {problem}");
        // The write path's answer is the full walk's (which names the row).
        let full = l.verify(None).expect("full");
        assert_eq!(v, full, "{what}");
    }
}

#[test]
fn rows_written_after_the_checkpoint_are_checked_against_their_entries() {
    for (what, statement) in [
        (
            "a new discard's reason",
            "UPDATE decisions SET reason = 'nothing to see' WHERE letter_id = 'm-6'",
        ),
        (
            "a new replay's letter",
            "UPDATE replay_items SET state = 'planned' WHERE replay_id = 'r-new' AND seq = 0",
        ),
        (
            "a new entry",
            "UPDATE audit SET actor = 'mallory' WHERE seq = (SELECT max(seq) FROM audit)",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tmp");
        let (path, mut l) = ledger(dir.path());
        assert!(l.verify(None).expect("full").ok);
        l.record_discard(SOURCE, "m-6", "at:6", None, "dup")
            .expect("discard");
        replay(&mut l, "r-new");
        l.audit("unmask", "m-4", "{}").expect("audit");
        sql(&path, statement);
        let v = l.verify_recent().expect("verify");
        assert!(!v.ok, "{what} went unnoticed");
    }
}

#[test]
fn a_forged_or_missing_checkpoint_means_the_full_walk() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, l) = ledger(dir.path());
    assert!(l.verify(None).expect("full").ok);
    // Moving the checkpoint past an edit without the key: its MAC fails, so it is not
    // used, and the edit (older than any checkpoint) is found by the walk.
    sql(
        &path,
        "UPDATE decisions SET reason = 'nothing to see' WHERE kind = 'discard';
         UPDATE meta SET value = json_set(value, '$.decisions', 99) WHERE key = 'verified';",
    );
    let v = l.verify_recent().expect("verify");
    assert!(!v.ok);
    assert!(v.problem.unwrap_or_default().contains("decision row"));
    // Without one at all, the same.
    sql(&path, "DELETE FROM meta WHERE key = 'verified'");
    assert!(!l.verify_recent().expect("verify").ok);
}

#[test]
fn an_old_revision_swapped_in_place_is_refused_where_it_is_read() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, l) = ledger(dir.path());
    assert!(l.verify(None).expect("full").ok);
    assert_eq!(
        l.revision(SOURCE, "m-8", 1).expect("read"),
        Some(b"{\"a\":1}".to_vec())
    );
    sql(&path, "UPDATE revisions SET payload = X'7B7D'");
    // The incremental check does not read old payloads (the documented limit; below
    // FULL_WALK_UP_TO entries a write walks everything instead)…
    assert!(l.verify_since_checkpoint().expect("verify").is_some());
    assert!(!l.verify_recent().expect("small: walked whole").ok);
    // …but a revision is checked when it is read for showing or sending.
    let err = l.revision(SOURCE, "m-8", 1).expect_err("swapped");
    assert!(err.to_string().contains("does not match"), "{err}");
    assert!(l.latest_revisions(SOURCE).is_err());
    // Once a full walk has failed, no write trusts the checkpoint until one passes.
    assert!(!l.verify(None).expect("full").ok);
    assert_eq!(l.verify_since_checkpoint().expect("verify"), None);
    sql(&path, "UPDATE revisions SET payload = X'7B2261223A317D'");
    assert!(l.verify(None).expect("full").ok);
    assert!(l.verify_since_checkpoint().expect("verify").is_some());
}

/// `--read-only` writes nothing, not even a checkpoint.
#[test]
fn a_read_only_verification_keeps_no_checkpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, l) = ledger(dir.path());
    drop(l);
    let ro = Ledger::open(&path, "alice").expect("open").read_only();
    assert!(ro.verify(None).expect("full").ok);
    assert_eq!(ro.verify_since_checkpoint().expect("quick"), None);
    let rw = Ledger::open(&path, "alice").expect("open");
    assert!(rw.verify(None).expect("full").ok);
    assert!(rw.verify_since_checkpoint().expect("quick").is_some());
}

/// The full walk reads the chain in pages of 16,384 entries and checks the MACs on a
/// second thread: an edit in the second page, right at its start, is found and named,
/// a decision recorded in the third page is still checked against its row, and the
/// clean ledger's count is every entry.
#[test]
fn the_full_walk_crosses_pages_and_finds_what_each_one_holds() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ledger.db");
    let mut l = Ledger::open(&path, "alice").expect("open");
    l.audit_batch(40_000, |i| {
        (
            "unmask".into(),
            format!("m-{i}"),
            "{\"reason\":\"incident\"}".into(),
        )
    })
    .expect("fill");
    l.record_discard(SOURCE, "m-40001", "at:orders.dlq/0/1", None, "dup")
        .expect("discard");
    let v = l.verify(None).expect("verify");
    assert_eq!((v.ok, v.entries), (true, 40_001), "{v:?}");
    drop(l);

    let c = Connection::open(&path).expect("sqlite");
    c.execute("UPDATE decisions SET reason = 'not a dup'", [])
        .expect("edit the row");
    let l = Ledger::open(&path, "alice").expect("open");
    let v = l.verify(None).expect("verify");
    assert_eq!((v.ok, v.first_bad_seq), (false, Some(40_001)), "{v:?}");
    drop(l);

    c.execute("UPDATE decisions SET reason = 'dup'", [])
        .expect("put it back");
    c.execute(
        "UPDATE audit SET detail = '{\"reason\":\"nothing\"}' WHERE seq = 16385",
        [],
    )
    .expect("edit an entry");
    let l = Ledger::open(&path, "alice").expect("open");
    let v = l.verify(None).expect("verify");
    assert_eq!(
        (v.ok, v.first_bad_seq, v.entries),
        (false, Some(16_385), 40_001),
        "{v:?}"
    );
}
