//! The TUI's worker against the demo source: the initial scan, then live arrivals from
//! the demo's trickle, then a fetch by coordinates.

use dlq_triage::brokers::OpenOptions;
use dlq_triage::core::access::Role;
use dlq_triage::core::masking::Masker;
use dlq_triage::core::session::{Principal, Settings};
use dlq_triage::core::source::SourceRef;
use dlq_triage::tui::action::Action;
use dlq_triage::tui::worker::{spawn, Request};
use dlq_triage::tui::AppEvent;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn demo_worker_scans_then_streams_live_letters_and_fetches() {
    let (tx, rx) = mpsc::channel();
    let (req_tx, req_rx) = mpsc::channel();
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let settings = Settings {
        source_key: "demo".into(),
        principal: Principal {
            actor: "tester".into(),
            role: Role::Operator,
            read_only: false,
            ledger_path: Some(ledger.clone()),
        },
        masker: Masker::with_key(vec![1]),
        mappings: Vec::new(),
    };
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
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(AppEvent::Action(Action::Letters(b))) => {
                coords = coords.or_else(|| b.first().and_then(|p| p.letter.raw.coords.clone()));
                first_id = first_id.or_else(|| b.first().map(|p| p.letter.id.value.0.clone()));
                scanned += b.len();
            }
            Ok(AppEvent::Action(Action::Live(b))) => live += b.len(),
            Ok(AppEvent::Action(Action::ScanDone)) => done = true,
            Ok(AppEvent::Action(Action::ScanFailed(e))) => panic!("scan failed: {e}"),
            _ => {}
        }
    }
    assert!(done, "scan did not complete");
    assert_eq!(scanned, 1332);
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
            Ok(AppEvent::Action(Action::Fetched(7, Ok(raw)))) => {
                assert_eq!(raw.coords, Some(coords));
                break;
            }
            Ok(AppEvent::Action(Action::Fetched(7, Err(e)))) => panic!("fetch failed: {e}"),
            Ok(_) => {}
            Err(_) => panic!("no fetch answer"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "fetch never answered"
        );
    }
}
