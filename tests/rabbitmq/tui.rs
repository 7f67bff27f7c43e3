//! The TUI's worker on RabbitMQ: pending discards applied, discards and replays acking the exact delivery, a browse the broker closed.

use crate::prelude::*;

/// The TUI's worker on a classic RabbitMQ queue, as bob (operator), with this ledger:
/// its events, and the channel for its requests.
fn tui_worker(
    source: &dlq_core::source::SourceRef,
    ledger: std::path::PathBuf,
    masker: dlq_core::masking::Masker,
) -> (
    std::sync::mpsc::Receiver<dlq_tui::AppEvent>,
    std::sync::mpsc::Sender<dlq_tui::worker::Request>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (req_tx, req_rx) = std::sync::mpsc::channel();
    dlq_tui::worker::spawn(
        source.clone(),
        dlq_app::brokers::OpenOptions {
            queue_type: Some("classic".into()),
            ..dlq_app::brokers::OpenOptions::default()
        },
        dlq_testkit::session::operator(&source.to_string(), "bob", ledger, masker),
        tx,
        req_rx,
    );
    (rx, req_tx)
}

/// The TUI's worker on a RabbitMQ DLQ: a discard a crash left pending is applied to the
/// exact letter when the TUI opens the queue, and the note reaches the screen.
#[test]
fn the_tui_applies_a_pending_discard_and_says_so() {
    use dlq_core::decisions::binding;
    use dlq_core::masking::Masker;
    use dlq_ledger::Ledger;

    use dlq_core::source::SourceRef;
    use dlq_tui::action::Action;

    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = Topology::new("tui-reconcile");
    let q = t.n("tdlq");
    declare(&t, &q, vec![]);
    t.publish("", &q, "m-0", "{\"n\":0}");
    t.publish("", &q, "m-1", "{\"n\":1}");
    t.wait_for(&q, 2);
    // What the operator had decided on before the crash: m-0, this exact letter.
    let mut src = RabbitSource::new(target(), vec![q.clone()])
        .expect("source")
        .with_queue_policy(Some("classic".into()), false);
    let mut raws = Vec::new();
    src.scan(&mut |ev| {
        raws.extend(letters_of(ev));
        ControlFlow::Continue(())
    })
    .expect("browse");
    drop(src);
    t.wait_for(&q, 2);
    let m0 = raws
        .iter()
        .find(|r| r.property("message_id") == Some("m-0"))
        .expect("m-0");
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let source = SourceRef::parse(&uri).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let ledger_path = dir.path().join("ledger.db");
    Ledger::open(&ledger_path, "alice")
        .expect("ledger")
        .record_discard(&source.to_string(), "m-0", &binding(m0), None, "duplicate")
        .expect("pending decision");
    let (rx, _req_tx) = tui_worker(&source, ledger_path.clone(), Masker::with_key(vec![1]));
    let started = Instant::now();
    let mut notes = Vec::new();
    while notes.is_empty() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::Notes(n))))) =
            rx.recv_timeout(Duration::from_millis(200))
        {
            notes = n;
        }
    }
    assert!(
        notes
            .iter()
            .any(|n| n.contains("reconciled") && n.contains("m-0")),
        "{notes:?}"
    );
    // A new dead letter arrives while the TUI is open: the consumer stays open, so it
    // is delivered and shows as live.
    t.publish("", &q, "m-2", "{\"n\":2}");
    let started = Instant::now();
    let mut live = Vec::new();
    while live.is_empty() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Live(b))))) =
            rx.recv_timeout(Duration::from_millis(200))
        {
            live.extend(b.into_iter().map(|p| p.letter.id.value.0.clone()));
        }
    }
    assert_eq!(live, ["m-2"]);
    drop(rx);
    drop(_req_tx);
    // m-0 is gone; m-1 and the live m-2 stay once the worker lets go.
    t.wait_for(&q, 2);
    let l = Ledger::open(&ledger_path, "check").expect("ledger");
    assert!(l.pending(&source.to_string()).expect("pending").is_empty());
    assert!(l.verify(None).expect("verify").ok);
    delete(&t, &q);
}

/// `d` in the TUI on a RabbitMQ DLQ: through the worker, the ledger records the discard
/// and exactly that delivery is acked; the other letters stay in the queue.
#[test]
fn a_tui_discard_acks_exactly_the_discarded_letter() {
    use dlq_app::session::DiscardTarget;
    use dlq_core::masking::Masker;
    use dlq_core::source::SourceRef;
    use dlq_core::store::LetterStore;
    use dlq_tui::action::Action;
    use dlq_tui::worker::Request;
    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = seeded("tui-discard");
    let q = t.n("dlq");
    let source =
        SourceRef::parse(&format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}")).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let (rx, req_tx) = tui_worker(
        &source,
        dir.path().join("ledger.db"),
        Masker::with_key(vec![1]),
    );
    // The UI's store, fed the way the TUI feeds it.
    let mut store = LetterStore::new();
    let started = Instant::now();
    let mut done = false;
    while !done && started.elapsed() < Duration::from_secs(20) {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Letters(b))))) => {
                for p in b {
                    store.push(&p.letter, &p.preview);
                }
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanDone)))) => {
                done = true
            }
            _ => {}
        }
    }
    assert_eq!(store.len(), 10);
    req_tx
        .send(Request::Discard {
            rows: vec![(0, DiscardTarget::of(&store, 0).expect("target"))],
            reason: "duplicate".into(),
        })
        .expect("worker");
    let started = Instant::now();
    let mut outcome = None;
    while outcome.is_none() && started.elapsed() < Duration::from_secs(20) {
        if let Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::DiscardDone {
            rows,
            message,
            ok,
        })))) = rx.recv_timeout(Duration::from_millis(200))
        {
            outcome = Some((rows, message, ok));
        }
    }
    let (rows, message, ok) = outcome.expect("discard answered");
    assert!(
        ok && rows == [0] && message.contains("1 removed from the DLQ"),
        "{message}"
    );
    drop(rx);
    drop(req_tx);
    // Nine left once the worker lets go: exactly the discarded one was acked.
    t.wait_for(&q, 9);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&q), 9);
}

/// The TUI's worker on a RabbitMQ DLQ when the broker closes the browse: the screen
/// says so, the held letters are back in the queue, `R` browses again on a new
/// connection — the same letters, once, not twice — and a discard after it acks
/// exactly that letter.
#[test]
fn the_tui_says_when_the_broker_closes_the_browse_and_r_browses_again() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

    use dlq_app::session::DiscardTarget;

    use dlq_core::masking::Masker;

    use dlq_core::source::SourceRef;
    use dlq_tui::action::Action;
    use dlq_tui::state::AppState;
    use dlq_tui::worker::Request;
    use dlq_tui::{action_for_event, update::update, AppEvent};

    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = Topology::new("tui-lost");
    let q = t.n("ldlq");
    declare(&t, &q, vec![]);
    for i in 0..10 {
        t.publish("", &q, &format!("m-{i}"), &format!("{{\"n\":{i}}}"));
    }
    t.wait_for(&q, 10);
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/%2f?queue={q}");
    let source = SourceRef::parse(&uri).expect("uri");
    let dir = tempfile::tempdir().expect("tmp");
    let masker = Masker::with_key(vec![1]);
    let (rx, req_tx) = tui_worker(&source, dir.path().join("ledger.db"), masker.clone());
    let size = (160, 40);
    let mut s =
        dlq_testkit::tui::empty_state(&q, masker, chrono::Utc::now().timestamp_millis(), 1 << 20);
    let mut rebrowsed = false;
    let mut pump = |s: &mut AppState, what: &str, until: &dyn Fn(&AppState, bool) -> bool| {
        let started = Instant::now();
        while !until(s, rebrowsed) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{what}: not within 30 s"
            );
            if let Ok(AppEvent::Action(a)) = rx.recv_timeout(Duration::from_millis(100)) {
                rebrowsed |= matches!(a, Action::Event(UiEvent::Scan(BrowseEvent::Rebrowsing)));
                for c in update(s, a, size) {
                    if let Ok(r) = Request::for_command(c) {
                        req_tx.send(r).expect("worker alive");
                    }
                }
            }
        }
    };
    pump(&mut s, "the first browse", &|s, _| s.scan.complete);
    assert_eq!(s.browse.catalog.store.len(), 10);
    assert_eq!(t.count(&q), 0, "browsed letters are held unacked");
    server_closes_consumer_of(&q);
    pump(&mut s, "the loss is reported", &|s, _| {
        s.scan.lost.is_some()
    });
    let screen = dlq_testkit::tui::screen(&s, size);
    assert!(
        screen.contains("browse closed by the broker · R browses again"),
        "{screen}"
    );
    t.wait_for(&q, 10);
    // `R`, through the keymap.
    let r = action_for_event(
        &s,
        &Event::Key(KeyEvent::new(KeyCode::Char('R'), KeyModifiers::NONE)),
    )
    .expect("R is bound");
    for c in update(&mut s, r, size) {
        req_tx
            .send(Request::for_command(c).expect("a worker request"))
            .expect("worker alive");
    }
    pump(&mut s, "the second browse", &|s, again| {
        again && s.scan.complete
    });
    assert_eq!(s.browse.catalog.store.len(), 10, "the same letters, once");
    assert!(s.scan.lost.is_none());
    assert_eq!(t.count(&q), 0, "held again by the new browse");
    // A discard on the new browse acks exactly that letter.
    let store = &s.browse.catalog.store;
    let (at, _) = store
        .rows()
        .iter()
        .enumerate()
        .find(|(_, r)| store.id(r) == "m-3")
        .expect("m-3");
    let target = DiscardTarget::of(store, u32::try_from(at).expect("row")).expect("target");
    req_tx
        .send(Request::Discard {
            rows: vec![(at as u32, target)],
            reason: "duplicate".into(),
        })
        .expect("worker alive");
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Ledger(LedgerEvent::DiscardDone {
                rows,
                message,
                ok,
            })))) => {
                assert!(ok, "{message}");
                assert_eq!(rows, [at as u32]);
                break;
            }
            _ => assert!(
                started.elapsed() < Duration::from_secs(20),
                "no discard answer"
            ),
        }
    }
    drop(req_tx);
    drop(rx);
    // The worker ends its browse: the nine others go back, m-3 was acked.
    t.wait_for(&q, 9);
    delete(&t, &q);
}

/// Replay from the TUI on RabbitMQ: the worker that holds the browsed deliveries plans
/// and runs the replay, so each confirmed letter's DLQ copy is acked on that same
/// browse; letters that fail again come back as live letters and are reported.
#[test]
fn a_replay_from_the_tui_acks_through_the_worker_that_holds_the_deliveries() {
    use dlq_app::session::Picked;
    use dlq_core::replay::{Control, Options};
    use dlq_tui::action::Action;
    use dlq_tui::worker::Request;
    use dlq_tui::AppEvent;

    if !rabbit_available() {
        return;
    }
    let t = dead_orders("tui-replay");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let source = dlq_core::source::SourceRef::parse(&uri).expect("uri");
    let (rx, req) = tui_worker(
        &source,
        dir.path().join("ledger.db"),
        dlq_core::masking::Masker::with_key(vec![1]),
    );
    let recv = |what: &str, want: &dyn Fn(&Action) -> bool| -> Action {
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what}: no answer"
            );
            if let Ok(AppEvent::Action(a)) = rx.recv_timeout(Duration::from_millis(200)) {
                if want(&a) {
                    return a;
                }
            }
        }
    };
    // The UI holds the letters' bytes from the browse, as the TUI's cache does.
    let mut picked = Vec::new();
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(30), "no scan");
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::Letters(b))))) => {
                picked.extend(b.into_iter().map(|p| Picked::Held(p.letter, p.preview)))
            }
            Ok(AppEvent::Action(Action::Event(UiEvent::Scan(BrowseEvent::ScanDone)))) => break,
            _ => {}
        }
    }
    assert_eq!(picked.len(), 20);
    req.send(Request::PlanReplay {
        picked,
        opts: Options {
            canary: 2,
            canary_rate: 20.0,
            rate: 100.0,
            // Room for a failure to come back through a broker busy with other tests.
            watch: Duration::from_secs(5),
            max_failed_ratio: 0.5,
            ..Options::default()
        },
        resume: None,
    })
    .expect("worker");
    let Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanned(view))) = recv("the plan", &|a| {
        matches!(
            a,
            Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanned(_)))
                | Action::Event(UiEvent::Replay(ReplayEvent::ReplayPlanFailed(_)))
        )
    }) else {
        panic!("no plan");
    };
    assert_eq!(view.planned, 20, "{:?}", view.lines);
    req.send(Request::RunReplay {
        id: view.id.clone(),
        control: Control::default(),
    })
    .expect("worker");
    // Every letter's outcome reaches the UI; the run's end says how it went.
    let mut back = std::collections::HashSet::new();
    let started = Instant::now();
    let (state, summary) =
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the replay never ended"
            );
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(AppEvent::Action(Action::Event(UiEvent::Replay(
                    ReplayEvent::ReplayLetters(c),
                )))) => back.extend(
                    c.into_iter()
                        .filter(|(_, o)| *o == dlq_core::replay::LetterOutcome::FailedAgain)
                        .map(|(id, _)| id),
                ),
                Ok(AppEvent::Action(Action::Event(UiEvent::Replay(
                    ReplayEvent::ReplayEnded { state, summary, .. },
                )))) => break (state, summary),
                _ => {}
            }
        };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        state,
        Some(dlq_core::journal::ReplayState::Completed),
        "{summary}"
    );
    assert!(
        summary.contains("20 of 20 confirmed, 2 failed again"),
        "{summary}"
    );
    assert_eq!(back.len(), 2, "{back:?}");
    assert_eq!(seen.try_iter().count(), 20);
    // Acked on the worker's browse: only the 2 that failed again are in the DLQ once
    // the TUI lets go of what it holds.
    drop(req);
    drop(rx);
    t.wait_for(&t.n("dlq"), 2);
}
