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
/// The same letters named another way (another spelling of the broker, another topic
/// list): one letter, whatever string named it.
const SPELLED_OTHERWISE: &str = "kafka://localhost:9092/orders.dlq,payments.dlq";

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

fn discard(l: &mut Ledger, letter: &(String, String)) -> Result<(), JournalError> {
    discard_as(l, SOURCE, letter)
}

fn discard_as(l: &mut Ledger, source: &str, (m, b): &(String, String)) -> Result<(), JournalError> {
    l.record_discard(source, m, b, Some("orders.dlq/0/1"), "duplicate")
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

    // 1. Discarded after the plan, before the replay journaled it — under another
    //    spelling of the source: withdrawn at send all the same.
    discard_as(&mut other, SPELLED_OTHERWISE, &named[1]).expect("a discard before the replay");
    let again = discard(&mut other, &named[1]).expect_err("one discard per letter");
    assert!(
        matches!(again, JournalError::AlreadyDecided { .. }),
        "{again}"
    );
    start(&mut sender, "r-1", &named);
    // 2. While the replay lives, its letters are neither discarded nor revised, under
    //    any name.
    let held =
        discard_as(&mut other, SPELLED_OTHERWISE, &named[2]).expect_err("held by a live replay");
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
    let mut discarded: Vec<String> = [SOURCE, SPELLED_OTHERWISE]
        .iter()
        .flat_map(|s| other.decisions(s).expect("decisions"))
        .map(|d| d.letter_id)
        .collect();
    discarded.sort();
    assert_eq!(discarded, vec!["m-0", "m-1", "m-4"]);
    // A finished replay is never reopened.
    let mut late = open();
    let reopened = late.replay_resume("r-1", &serde_json::json!({}), &[]);
    assert!(reopened.is_err(), "an abandoned replay resumed");
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

/// #68 under attack (an engineer with the team's grants and psql): a letter the server
/// withdrew, or never sent, cannot be confirmed — so no `replay` decision lands beside a
/// discard — and a finished replay cannot be taken or resumed; the chain still verifies.
#[test]
fn on_the_team_ledger_psql_cannot_confirm_what_was_not_sent_nor_reopen_a_replay() {
    let Some(db) = TempDb::create() else { return };
    drop(Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner opens"));
    let url = db.engineer("mallory");
    let mut psql = postgres::Client::connect(&url, postgres::NoTls).expect("psql");
    psql.query(
        "SELECT * FROM dlq.discard($1, 'm-0', 'at:orders.dlq/0/0', NULL, 'by alice', NULL)",
        &[&SOURCE],
    )
    .expect("a discard");
    let mut tx = psql.transaction().expect("tx");
    tx.query(
        "SELECT dlq.replay_start('r-evil', $1, 'orders', '{}', '{0,1}', '{m-0,m-1}', \
         '{at:orders.dlq/0/0,at:orders.dlq/0/1}', '{orders.dlq/0/0,orders.dlq/0/1}', NULL)",
        &[&SPELLED_OTHERWISE],
    )
    .expect("a start");
    let epoch: i64 = tx
        .query_one("SELECT dlq.take_lease('r-evil', 1, 'evil')", &[])
        .expect("lease")
        .get(0);
    tx.commit().expect("commit");
    psql.execute(
        "SELECT dlq.replay_send('r-evil', $1, '{0}', NULL)",
        &[&epoch],
    )
    .expect("send");
    let state: String = psql
        .query_one(
            "SELECT state FROM dlq.replay_items WHERE replay_id = 'r-evil' AND seq = 0",
            &[],
        )
        .expect("item")
        .get(0);
    assert_eq!(state, "withdrawn", "discarded under another spelling");
    for seq in ["0", "1"] {
        let err = psql
            .query(
                &format!("SELECT * FROM dlq.replay_confirmed('r-evil', $1, $2, '{{{seq}}}', '{{orders/0/9}}', '{{true}}', NULL)"),
                &[&epoch, &SPELLED_OTHERWISE],
            )
            .expect_err("confirming what was not sent");
        let e = err.as_db_error().expect("server error");
        assert_eq!(e.code().code(), "55000", "{e:?}");
    }
    psql.execute(
        "SELECT dlq.replay_finish('r-evil', $1, 'completed', '{}', NULL)",
        &[&epoch],
    )
    .expect("finish");
    let err = psql
        .query("SELECT dlq.take_lease('r-evil', 1, 'evil')", &[])
        .expect_err("a finished replay taken again");
    assert!(
        err.to_string().contains("never resumed")
            || err
                .as_db_error()
                .is_some_and(|e| e.message().contains("never resumed")),
        "{err}"
    );
    let l = Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner");
    assert!(l.verify(None).expect("verify").ok);
    let replays: Vec<_> = [SOURCE, SPELLED_OTHERWISE]
        .iter()
        .flat_map(|s| l.decisions(s).expect("decisions"))
        .filter(|d| d.kind == dlq_core::journal::DecisionKind::Replay)
        .collect();
    assert!(replays.is_empty(), "{replays:?}");
}

/// The file ledger keeps the same rule for a letter's moves: a letter never sent cannot
/// be confirmed, whatever calls the journal.
#[test]
fn on_the_file_ledger_a_letter_never_sent_cannot_be_confirmed() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut l = Ledger::open(&dir.path().join("l.db"), "alice").expect("ledger");
    let named = letters(2);
    start(&mut l, "r-1", &named);
    let confirmed = l.replay_confirmed(
        "r-1",
        SOURCE,
        &[dlq_core::journal::ConfirmedLetter {
            seq: 1,
            letter_id: "m-1",
            binding: "at:orders.dlq/0/1",
            location: "orders.dlq/0/1",
            published: Some("orders/0/1"),
            ledger_only: true,
        }],
    );
    assert!(confirmed.is_err(), "confirmed a letter never sent");
    assert!(l.decisions(SOURCE).expect("decisions").is_empty());
    assert!(l.verify(None).expect("verify").ok);
}

/// #68, the second pass of attacks through psql: a letter confirmed once is not confirmed
/// again, a letter never sent is not set back `failed-again` to be confirmed, a discarded
/// letter never gets a replay decision beside its discard, a finished replay is not
/// ended again (to be resumed), a discard names its exact letter — and the ledger still
/// verifies and takes a normal discard afterwards.
#[test]
fn on_the_team_ledger_psql_cannot_decide_a_letter_twice() {
    let Some(db) = TempDb::create() else { return };
    drop(Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner opens"));
    let url = db.engineer("trudy");
    let mut psql = postgres::Client::connect(&url, postgres::NoTls).expect("psql");
    let refused = |c: &mut postgres::Client, sql: &str, epoch: i64| {
        let err = if sql.contains("$1") {
            c.batch_execute("SELECT 1").expect("alive");
            c.query(sql, &[&epoch]).expect_err(sql)
        } else {
            c.query(sql, &[]).expect_err(sql)
        };
        let e = err
            .as_db_error()
            .unwrap_or_else(|| panic!("{sql}: {err}"))
            .clone();
        (e.code().code().to_string(), e.message().to_string())
    };
    let mut tx = psql.transaction().expect("tx");
    tx.query(
        "SELECT dlq.replay_start('r-t', $1, 'orders', '{}', '{0,1,2}', '{t-0,t-1,t-2}', \
         '{at:o/0/0,at:o/0/1,at:o/0/2}', '{o/0/0,o/0/1,o/0/2}', NULL)",
        &[&SOURCE],
    )
    .expect("start");
    let epoch: i64 = tx
        .query_one("SELECT dlq.take_lease('r-t', 1, 'h')", &[])
        .expect("lease")
        .get(0);
    tx.commit().expect("commit");
    psql.execute("SELECT dlq.replay_send('r-t', $1, '{0}', NULL)", &[&epoch])
        .expect("send");
    psql.query(
        "SELECT * FROM dlq.replay_confirmed('r-t', $1, 'kafka://k/orders.dlq', '{0}', '{x}', '{true}', NULL)",
        &[&epoch],
    )
    .expect("the first confirm");
    // Again, under another spelling of the source: refused.
    let (code, _) = refused(
        &mut psql,
        "SELECT * FROM dlq.replay_confirmed('r-t', $1, 'kafka://localhost/orders.dlq', '{0}', '{y}', '{true}', NULL)",
        epoch,
    );
    assert_eq!(code, "55000");
    // A letter never sent, set back `failed-again` by hand to be confirmed: refused.
    let (code, _) = refused(
        &mut psql,
        "SELECT dlq.replay_item('r-t', $1, 1, 'failed-again', 'x', NULL)",
        epoch,
    );
    assert_eq!(code, "55000");
    // A discard beside the replay decision: refused.
    let (code, msg) = refused(
        &mut psql,
        "SELECT * FROM dlq.discard('kafka://other/orders.dlq', 't-0', 'at:o/0/0', NULL, 'mine', NULL)",
        0,
    );
    assert_eq!(code, "55000", "{msg}");
    // A discard with no binding: refused, whatever it names.
    let (_, msg) = refused(
        &mut psql,
        "SELECT * FROM dlq.discard('kafka://k/orders.dlq', 't-0', NULL, NULL, 'x', NULL)",
        0,
    );
    assert!(msg.contains("exact letter"), "{msg}");
    // Abandoned, then "ended again" to become resumable: refused.
    psql.execute(
        "SELECT dlq.replay_finish('r-t', $1, 'abandoned', '{}', NULL)",
        &[&epoch],
    )
    .expect("abandoned");
    psql.batch_execute("SELECT pg_catalog.pg_advisory_unlock_all()")
        .expect("unlock");
    let (code, _) = refused(
        &mut psql,
        "SELECT dlq.replay_finish('r-t', NULL, 'failed', '{}', NULL)",
        0,
    );
    assert_eq!(code, "55000");
    let l = Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner");
    assert!(l.verify(None).expect("verify").ok);
    let decided: Vec<_> = l.decisions(SOURCE).expect("decisions");
    assert_eq!(decided.len(), 1, "{decided:?}");
    drop(l);
    let mut owner = Ledger::open_at(&Location::Server(db.url.clone()), "os-user").expect("owner");
    owner
        .record_discard(SOURCE, "t-2", "at:o/0/2", None, "normal")
        .expect("a normal discard still works");
}
