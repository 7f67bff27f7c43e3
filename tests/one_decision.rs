//! One decision per letter (#68), on both stores: the SQLite file and the team's
//! PostgreSQL. A letter a live replay holds cannot be discarded or revised; a letter
//! discarded after a replay's plan is withdrawn in the very transaction that would have
//! journaled it `sending`; a letter a stopped replay may have sent cannot be discarded
//! until a resume finds out. On the server the same rule holds for an engineer who calls
//! the functions with `psql`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::journal::follows::Standing;
use dlq_core::journal::{ItemState, Journal, JournalError, ReplayState};
use dlq_ledger::{Ledger, Location};
use dlq_testkit::pg::TempDb;

const SOURCE: &str = "kafka://k/orders.dlq";

/// `n` letters `m-i` bound `at:orders.dlq/0/i`.
fn letters(n: u32) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("m-{i}"), format!("at:orders.dlq/0/{i}")))
        .collect()
}

fn start(l: &mut Ledger, id: &str, named: &[(String, String)]) {
    let items: Vec<(u32, &str, &str, &str)> = (0u32..)
        .zip(named)
        .map(|(seq, (m, b))| (seq, m.as_str(), b.as_str(), "orders.dlq/0/1"))
        .collect();
    l.replay_start(id, SOURCE, "orders", &serde_json::json!({}), &items)
        .expect("start");
}

fn discard(l: &mut Ledger, (m, b): &(String, String)) -> Result<(), JournalError> {
    l.record_discard(SOURCE, m, b, Some("orders.dlq/0/1"), "duplicate")
        .map(|_| ())
}

fn standing(e: JournalError) -> Standing {
    match e {
        JournalError::Decided { conflicts } => {
            assert_eq!(conflicts.len(), 1, "{conflicts:?}");
            conflicts[0].standing
        }
        other => panic!("not a refusal of the table: {other}"),
    }
}

fn item_states(l: &Ledger, id: &str) -> Vec<ItemState> {
    let (_, items) = l.replay(id).expect("replay").expect("row");
    items.into_iter().map(|i| i.state).collect()
}

/// The whole story on one store; `open` gives a new handle (a second process, as far as
/// the ledger's holder locks go: another file lock, another server session).
fn story(open: &dyn Fn() -> Ledger) {
    let named = letters(6);
    let mut sender = open();
    let mut other = open();

    // 1. Discarded after the plan, before the replay journaled it: withdrawn at send.
    discard(&mut other, &named[1]).expect("a discard before the replay started");
    start(&mut sender, "r-1", &named);
    // 2. While the replay lives, its letters are neither discarded nor revised.
    let held = discard(&mut other, &named[2]).expect_err("held by a live replay");
    let message = held.to_string();
    assert_eq!(standing(held), Standing::Held);
    assert!(
        message.contains("r-1") && message.contains("running on") && message.contains("stop it"),
        "the refusal names the replay, who runs it and how to stop it: {message}"
    );
    let revised = other
        .record_revision(SOURCE, "m-3", "fix", &["/a".into()], b"{}", b"{\"a\":1}")
        .expect_err("a revision of a held letter");
    assert_eq!(standing(revised), Standing::Held);
    // The sender journals its first batch: the discarded letter is withdrawn, not sent.
    let withdrawn = sender.replay_sending("r-1", &[0, 1, 2]).expect("sending");
    assert_eq!(withdrawn.iter().map(|w| w.seq).collect::<Vec<_>>(), vec![1]);
    assert!(withdrawn[0].why.contains("discarded"), "{withdrawn:?}");
    assert_eq!(
        &item_states(&other, "r-1")[..3],
        &[ItemState::Sending, ItemState::Withdrawn, ItemState::Sending]
    );
    // 3. The sender dies with letters `sending` (in doubt) and `planned`.
    drop(sender);
    let in_doubt = discard(&mut other, &named[0]).expect_err("in doubt");
    assert_eq!(standing(in_doubt), Standing::InDoubt);
    // A planned letter of a stopped replay may be discarded: its resume withdraws it.
    discard(&mut other, &named[4]).expect("planned in a stopped replay");
    let mut taker = open();
    taker
        .replay_resume("r-1", &serde_json::json!({}), &[])
        .expect("resume");
    let withdrawn = taker.replay_sending("r-1", &[3, 4, 5]).expect("sending");
    assert_eq!(withdrawn.iter().map(|w| w.seq).collect::<Vec<_>>(), vec![4]);
    // Still in doubt while the replay can be resumed; abandoned, nobody can find out
    // any more: the letter is the operator's to decide again.
    taker
        .replay_finish("r-1", ReplayState::Abandoned, &serde_json::json!({}))
        .expect("abandoned");
    drop(taker);
    discard(&mut other, &named[0]).expect("in doubt in an abandoned replay");
    // Every step is in the chain: the journal verifies with the withdrawn letters.
    let v = other.verify(None).expect("verify");
    assert!(v.ok, "{v:?}");
    // Exactly the discards that were allowed are recorded.
    let mut discarded: Vec<String> = other
        .decisions(SOURCE)
        .expect("decisions")
        .into_iter()
        .map(|d| d.letter_id)
        .collect();
    discarded.sort();
    assert_eq!(discarded, vec!["m-0", "m-1", "m-4"]);
}

#[test]
fn one_decision_per_letter_on_the_file_ledger() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ledger.db");
    story(&|| Ledger::open(&path, "alice").expect("ledger"));
}

#[test]
fn one_decision_per_letter_on_the_team_ledger() {
    let Some(db) = TempDb::create() else { return };
    let at = Location::Server(db.url.clone());
    story(&|| Ledger::open_at(&at, "os-user").expect("server ledger"));
}

/// The server decides, not the client: an engineer with the team's grants who calls
/// `dlq.discard` with `psql` while a live replay holds the letter is refused, and
/// `dlq.replay_send` of a discarded letter (by the holder, with its lease) withdraws it.
#[test]
fn on_the_team_ledger_psql_cannot_discard_a_held_letter() {
    let Some(db) = TempDb::create() else { return };
    drop(Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner opens"));
    let url = db.engineer("eve");
    let mut psql = postgres::Client::connect(&url, postgres::NoTls).expect("psql as eve");
    let discard = |c: &mut postgres::Client, i: u32| {
        c.query(
            "SELECT * FROM dlq.discard($1, $2, $3, NULL, 'by hand', NULL)",
            &[&SOURCE, &format!("m-{i}"), &format!("at:orders.dlq/0/{i}")],
        )
    };
    // Discarded by hand before the replay started (its plan did not know).
    discard(&mut psql, 2).expect("an unheld letter is discarded");
    let mut sender = Ledger::open_at(&Location::Server(url.clone()), "eve").expect("eve");
    start(&mut sender, "r-1", &letters(3));
    let err = discard(&mut psql, 0).expect_err("the server refuses a held letter");
    let db_err = err.as_db_error().expect("a server error");
    assert_eq!(db_err.code().code(), "55000", "{db_err:?}");
    assert!(db_err.message().contains("r-1"), "{}", db_err.message());
    // The server withdraws the discarded letter as the batch is journaled.
    let withdrawn = sender.replay_sending("r-1", &[0, 1, 2]).expect("sending");
    assert_eq!(withdrawn.iter().map(|w| w.seq).collect::<Vec<_>>(), vec![2]);
    assert!(withdrawn[0].why.contains("by hand"), "{withdrawn:?}");
    let l = Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner");
    assert!(l.verify(None).expect("verify").ok);
    assert_eq!(l.decisions(SOURCE).expect("decisions").len(), 1);
}
