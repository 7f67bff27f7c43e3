//! The TUI's worker against the demo source: the initial scan, then live arrivals from
//! the demo's trickle, then a fetch by coordinates.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_app::brokers::OpenOptions;
use dlq_app::session::Settings;
use dlq_core::masking::Masker;
use dlq_core::source::SourceRef;
use dlq_tui::action::Action;
use dlq_tui::action::{BrowseEvent, Event as UiEvent, Nav, ViewKey};
use dlq_tui::state::AppState;
use dlq_tui::worker::{spawn, Request, UI_BACKLOG};
use dlq_tui::AppEvent;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Session settings for the operator `tester` whose decisions go to `ledger`.
fn operator(
    source_key: &str,
    ledger: impl Into<dlq_core::ledger_location::Location>,
    masker: Masker,
) -> Settings {
    dlq_testkit::session::operator(source_key, "tester", ledger, masker)
}

/// The browse event a message from the worker carries, if any; a failed scan fails the
/// test.
fn browse_event(got: Result<AppEvent, mpsc::RecvTimeoutError>) -> Option<BrowseEvent> {
    match got {
        Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanFailed(e))))) => {
            panic!("scan failed: {e}")
        }
        Ok(AppEvent::Action(Action::Event(UiEvent::Scan(ev)))) => Some(ev),
        _ => None,
    }
}

#[test]
fn demo_worker_scans_then_streams_live_letters_and_fetches() {
    let (tx, rx) = mpsc::channel();
    let (req_tx, req_rx) = mpsc::channel();
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let settings = operator("demo", ledger.clone(), Masker::with_key(vec![1]));
    spawn(
        SourceRef::Demo,
        OpenOptions::default(),
        settings,
        tx,
        req_rx,
    );
    let mut first_id = None;
    let (mut scanned, mut live, mut done) = (0usize, 0usize, false);
    let mut coords = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) && !(done && live > 0) {
        match browse_event(rx.recv_timeout(Duration::from_secs(1))) {
            Some(BrowseEvent::Letters(b)) => {
                coords = coords.or_else(|| b.first().and_then(|p| p.letter.raw.coords.clone()));
                first_id = first_id.or_else(|| b.first().map(|p| p.letter.id.value.0.clone()));
                scanned += b.len();
            }
            Some(BrowseEvent::Live(b)) => live += b.len(),
            Some(BrowseEvent::ScanDone) => done = true,
            _ => {}
        }
    }
    assert!(done, "scan did not complete");
    assert_eq!(scanned, 1332 + 116, "the incident and payouts.dlq");
    assert!(
        live > 0,
        "no live letter arrived within a minute (the demo trickles one every 4 s)"
    );
    let coords = coords.expect("letters carry coordinates");
    req_tx
        .send(Request::Fetch(7, coords.clone()))
        .expect("worker alive");
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Fetched(
                7,
                Ok(letter),
            ))))) => {
                // Prepared by the session: the conventions ran (an id is set).
                assert_eq!(letter.raw.coords, Some(coords));
                assert!(!letter.id.value.0.is_empty());
                break;
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Fetched(7, Err(e)))))) => {
                panic!("fetch failed: {e}")
            }
            Ok(_) => {}
            Err(_) => panic!("no fetch answer"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "fetch never answered"
        );
    }
}

/// The worker on a dump in `dir` of the example incident's first `n` letters (then the
/// `extra` lines), as the operator `tester` recording in `ledger`, and a UI state it feeds.
struct DumpTui {
    rx: mpsc::Receiver<AppEvent>,
    req: mpsc::Sender<Request>,
    s: AppState,
    size: (u16, u16),
}

impl DumpTui {
    fn open(
        dir: &std::path::Path,
        n: usize,
        extra: &str,
        ledger: impl Into<dlq_core::ledger_location::Location>,
        size: (u16, u16),
    ) -> DumpTui {
        let dump = dir.join("d.ndjson");
        let good = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson"),
        )
        .expect("example");
        let mut text: String = good.lines().take(n).map(|l| format!("{l}\n")).collect();
        text.push_str(extra);
        std::fs::write(&dump, text).expect("dump");
        let (tx, rx) = mpsc::channel();
        let (req, req_rx) = mpsc::channel();
        let masker = Masker::with_key(vec![1]);
        spawn(
            SourceRef::File { path: dump },
            OpenOptions::default(),
            operator("file://d", ledger, masker.clone()),
            tx,
            req_rx,
        );
        let s = dlq_testkit::tui::empty_state("d", masker, 1_764_450_000_000, 1 << 20);
        DumpTui { rx, req, s, size }
    }

    /// Apply the worker's messages until `until` holds (20 s at most).
    fn pump(&mut self, until: &dyn Fn(&AppState) -> bool) {
        let started = Instant::now();
        while !until(&self.s) && started.elapsed() < Duration::from_secs(20) {
            if let Ok(AppEvent::Action(a)) = self.rx.recv_timeout(Duration::from_millis(200)) {
                dlq_tui::update::update(&mut self.s, a, self.size);
            }
        }
    }

    /// Ask the worker to discard the first letter, for `reason`.
    fn discard_first(&self, reason: &str) {
        let store = &self.s.browse.catalog.store;
        let target = dlq_app::session::DiscardTarget::of(store, 0).expect("target");
        self.req
            .send(Request::Discard {
                rows: vec![(0, target)],
                reason: reason.into(),
            })
            .expect("worker");
    }

    fn screen(&self) -> String {
        dlq_testkit::tui::screen(&self.s, self.size)
    }
}

/// Through the worker on a dump with a broken line: the problem is counted on screen
/// and listed on `:problems`; a discard made in the TUI shows who and why in the
/// detail, from the same view model as `show`.
#[test]
fn problems_and_decisions_reach_the_screen() {
    use dlq_tui::state::Tab;
    use dlq_tui::update::update;

    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let mut t = DumpTui::open(dir.path(), 5, "{ this line is broken\n", ledger, (160, 40));
    t.pump(&|s| {
        s.scan.complete && s.browse.followed() > 0
            || s.scan.complete && s.scan.problem_count > 0 && s.browse.catalog.store.len() == 5
    });
    assert_eq!(t.s.scan.problem_count, 1);
    assert!(t.screen().contains("1 unreadable (:problems)"));
    // Discard the first letter through the worker.
    t.discard_first("poison pill, fixed upstream");
    t.pump(&|s| s.browse.followed() > 0);
    assert_eq!(t.s.browse.followed(), 1);
    // Open that letter's detail on the Failure tab.
    let (s, size) = (&mut t.s, t.size);
    update(s, Action::from(ViewKey::SetTab(Tab::Failure)), size);
    s.letters.fill(vec![(0, 0)], true);
    update(s, Action::from(Nav::FocusNext), size);
    update(s, Action::from(Nav::FocusNext), size);
    let text = t.screen();
    assert!(
        text.contains("discarded by tester") && text.contains("poison pill, fixed upstream"),
        "{text}"
    );
}

/// A UI that does not take what it is sent (its frames stuck on a slow terminal) holds
/// the scan back: the worker stops at the backlog limit plus one batch, instead of piling
/// the whole DLQ into the channel; once the UI lets go, the scan completes with every
/// letter.
#[test]
fn a_ui_that_falls_behind_holds_the_scan_back() {
    const LETTERS: usize = 40_000;
    let dir = tempfile::tempdir().expect("tmp");
    let dump = dir.path().join("big.ndjson");
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson"),
    )
    .expect("example");
    let lines: Vec<&str> = example.lines().collect();
    let text: String = (0..LETTERS)
        .map(|i| format!("{}\n", lines[i % lines.len()]))
        .collect();
    std::fs::write(&dump, text).expect("dump");
    let (tx, rx) = mpsc::channel();
    let (_req_tx, req_rx) = mpsc::channel();
    let settings = operator(
        "file://big",
        dir.path().join("ledger.db"),
        Masker::with_key(vec![1]),
    );
    spawn(
        SourceRef::File { path: dump },
        OpenOptions::default(),
        settings,
        tx,
        req_rx,
    );
    // Take batches without letting go of them until nothing more comes for a second.
    let mut held = Vec::new();
    let mut received = 0usize;
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(60), "no stall");
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Letters(b))))) => {
                received += b.len();
                held.push(b);
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanDone)))) => {
                panic!("the scan finished with {received} letters held by a stuck UI")
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) if received > 0 => break,
            Err(e) => assert!(
                matches!(e, mpsc::RecvTimeoutError::Timeout),
                "worker gone: {e}"
            ),
        }
    }
    assert!(
        (UI_BACKLOG..=UI_BACKLOG + 4_096).contains(&received),
        "{received} letters in flight to a UI that took none of them"
    );
    // The UI catches up: the rest comes, and the scan ends with every letter.
    drop(held);
    let mut done = false;
    while !done {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "scan did not resume"
        );
        let got = rx.recv_timeout(Duration::from_secs(5));
        if let Err(e) = &got {
            panic!("scan did not resume: {e} after {received}");
        }
        match browse_event(got) {
            Some(BrowseEvent::Letters(b)) => received += b.len(),
            Some(BrowseEvent::ScanDone) => done = true,
            _ => {}
        }
    }
    assert_eq!(received, LETTERS);
}

/// A ledger that fails verification: the TUI says so on its second line from the start
/// (at 80×24 too), browsing works, and a discard is refused with the broken entry named
/// and nothing recorded.
#[test]
fn a_tampered_ledger_is_announced_and_writes_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let mut l = dlq_ledger::Ledger::open(&ledger, "tester").expect("ledger");
    l.audit("unmask", "m-1", r#"{"reason":"ticket 1"}"#)
        .expect("entry");
    drop(l);
    rusqlite::Connection::open(&ledger)
        .expect("db")
        .execute("UPDATE audit SET detail = '{}' WHERE seq = 1", [])
        .expect("tamper");
    let mut t = DumpTui::open(dir.path(), 3, "", ledger, (80, 24));
    t.pump(&|s| s.scan.complete && s.ledger_alert.is_some());
    assert_eq!(t.s.browse.catalog.store.len(), 3, "browsing works");
    let shown = t.screen();
    assert!(
        shown.contains("ledger fails verification: read-only"),
        "{shown}"
    );
    t.discard_first("poison pill");
    t.pump(&|s| {
        s.message
            .as_ref()
            .is_some_and(|(m, _)| m.contains("fails verification"))
    });
    let (m, _) = t.s.message.clone().expect("refusal");
    assert!(m.contains("fails verification at entry 1"), "{m}");
    assert!(t.s.browse.followed() == 0, "nothing recorded");
}

/// Two engineers' TUIs on one team ledger (PostgreSQL): a discard in one turns the letter
/// `discarded` in the other as the server announces it, without a restart.
#[test]
fn a_discard_in_one_tui_appears_in_anothers_on_the_team_ledger() {
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    let at = dlq_core::ledger_location::Location::Server(db.url.clone());
    let (da, db_dir) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let mut alice = DumpTui::open(da.path(), 3, "", at.clone(), (120, 40));
    let mut bob = DumpTui::open(db_dir.path(), 3, "", at, (120, 40));
    alice.pump(&|s| s.scan.complete);
    bob.pump(&|s| s.scan.complete);
    let open_before = bob.s.browse.index().total();
    // Let bob's listener connect before alice writes.
    std::thread::sleep(Duration::from_millis(500));
    alice.discard_first("poison pill");
    let sent = Instant::now();
    alice.pump(&|s| s.browse.followed() > 0);
    assert_eq!(alice.s.browse.followed(), 1, "alice's discard recorded");
    bob.pump(&|s| s.browse.followed() > 0);
    let seen_after = sent.elapsed();
    eprintln!("bob saw alice's discard {seen_after:?} after she asked for it");
    assert_eq!(bob.s.browse.followed(), 1, "bob never saw alice's discard");
    assert_eq!(
        bob.s.browse.index().total(),
        open_before - 1,
        "it left bob's open groups"
    );
    let said = bob.s.message.clone().map(|m| m.0).unwrap_or_default();
    assert!(said.contains("decided in the ledger by postgres"), "{said}");
}
