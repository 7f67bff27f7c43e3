//! The TUI while a replay runs at 5,000 letters/s with 1,000,000 letters loaded:
//! keystroke → frame (p50/p99/max) for moves in the letters pane.
//!
//! The replay is real and runs beside the UI as the worker runs it: a session on the
//! mock cluster replays 50,000 letters at 5,000/s with the Kafka publisher and the
//! ledger journaling each one, reporting through a watcher that forwards what the TUI's
//! worker forwards (progress ten times a second, every letter's outcome). Its letters are
//! mapped onto the loaded group's letters, so the UI marks as many rows as the run
//! changes. The UI side mirrors `tui::run_loop`: events in arrival order (a key waits
//! behind the replay events queued before it), at most 512 per frame, one draw.
//! `cargo bench --bench tui_replay`. Figures, not assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::Utc;
use crossterm::event::{Event, KeyCode};
use dlq_app::session::ReplayWatcher;
use dlq_core::replay::{Control, LetterOutcome, Options, Progress};
use dlq_kafka::demo::scenario::Scale;
use dlq_kafka::demo::Demo;
use dlq_tui::action::{Action, PlanView};
use dlq_tui::action::{Event as UiEvent, ReplayEvent};
use dlq_tui::state::AppState;
use dlq_tui::theme::Theme;
use dlq_tui::update::update;
use dlq_tui::{action_for_event, views};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

mod support;
use support::{key, loaded, percentiles, replay_topic, seed, Sink, SIZE};

const REPLAYED: usize = 50_000;
const RATE: f64 = 5_000.0;
const MAX_EVENTS_PER_FRAME: usize = 512;

enum Ev {
    Ui(Action),
    /// A key, and when the input thread sent it.
    Key(Event, Option<Instant>),
    Done,
}

/// What the TUI's worker forwards of a running replay, with the replayed letters' ids
/// mapped onto the loaded ones.
struct Forward {
    tx: Sender<Ev>,
    ids: Vec<String>,
    map: HashMap<String, String>,
    last: Option<Instant>,
}

impl ReplayWatcher for Forward {
    fn progress(&mut self, p: &Progress) {
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
            || p.end.is_some()
        {
            self.last = Some(Instant::now());
            let mut p = p.clone();
            p.replay_id = "r-bench".into();
            let _ = self
                .tx
                .send(Ev::Ui(Action::from(ReplayEvent::ReplayProgress(Box::new(
                    p,
                )))));
        }
    }

    fn letters(&mut self, changes: &[(&str, LetterOutcome)]) {
        let batch = changes
            .iter()
            .map(|(id, o)| {
                let n = self.map.len();
                let to = self
                    .map
                    .entry((*id).to_string())
                    .or_insert_with(|| self.ids[n % self.ids.len()].clone());
                (to.clone(), *o)
            })
            .collect();
        let _ = self
            .tx
            .send(Ev::Ui(Action::from(ReplayEvent::ReplayLetters(batch))));
    }
}

fn apply(s: &mut AppState, ev: Ev) -> bool {
    let action = match ev {
        Ev::Ui(a) => Some(a),
        Ev::Key(e, _) => action_for_event(s, &e),
        Ev::Done => return false,
    };
    if let Some(a) = action {
        update(s, a, SIZE);
    }
    true
}

fn main() {
    let started = Instant::now();
    let mut s = loaded(true);
    eprintln!(
        "loaded {} letters in {:.2?}",
        s.browse.catalog.store.len(),
        started.elapsed()
    );
    let theme = Theme::load(Some("default")).expect("theme");
    let mut term = Terminal::with_options(
        CrosstermBackend::new(Sink::default()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, SIZE.0, SIZE.1)),
        },
    )
    .expect("terminal");
    // `r` on the largest group: the dry-run screen (its plan answered as the worker
    // would), then the count typed — the progress pane is on from here.
    for k in [KeyCode::Home, KeyCode::Char('r')] {
        let t = Instant::now();
        apply(&mut s, Ev::Key(key(k), None));
        if k == KeyCode::Char('r') {
            eprintln!(
                "r on a group of {} letters: {:.2?} to pick them for the plan",
                s.replay.dry_run().map_or(0, |d| d.rows.len()),
                t.elapsed()
            );
        }
    }
    let planned = s.replay.dry_run().expect("dry run").rows.len();
    let opts = Options {
        canary: 0,
        rate: RATE,
        watch: Duration::ZERO,
        ..Options::default()
    };
    update(
        &mut s,
        Action::from(ReplayEvent::ReplayPlanned(PlanView {
            id: "r-bench".into(),
            planned,
            options: opts,
            lines: vec!["Replay plan r-bench".into()],
            resuming: false,
            refusal: None,
        })),
        SIZE,
    );
    apply(&mut s, Ev::Key(key(KeyCode::Enter), None));
    for c in planned.to_string().chars() {
        apply(&mut s, Ev::Key(key(KeyCode::Char(c)), None));
    }
    apply(&mut s, Ev::Key(key(KeyCode::Enter), None));
    assert!(s.replay.running(), "the progress pane is on");
    let ids: Vec<String> = s.replay.run().expect("run").rows.keys().cloned().collect();
    apply(&mut s, Ev::Key(key(KeyCode::Tab), None));

    let (tx, rx) = mpsc::channel::<Ev>();
    let keys = tx.clone();
    let (ready, seeded) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        // The mock cluster lives on the thread that uses it.
        let demo = Demo::start(5, Utc::now(), Scale(0.01)).expect("demo");
        seed(&demo, "tui-replay.dlq", REPLAYED, None);
        let _ = ready.send(());
        let mut fwd = Forward {
            tx: tx.clone(),
            ids,
            map: HashMap::new(),
            last: None,
        };
        let t = Instant::now();
        replay_topic(&demo, "tui-replay.dlq", RATE, &Control::default(), &mut fwd);
        let took = t.elapsed();
        let _ = tx.send(Ev::Done);
        took
    });
    seeded.recv().expect("seeded");
    // The input thread: a key every 20 ms.
    std::thread::spawn(move || {
        for i in 0.. {
            std::thread::sleep(Duration::from_millis(20));
            let k = if i % 40 < 20 {
                KeyCode::Down
            } else {
                KeyCode::Up
            };
            if keys.send(Ev::Key(key(k), Some(Instant::now()))).is_err() {
                break;
            }
        }
    });
    let (keys, frames, events) = run_loop(&mut s, &mut term, &theme, &rx);
    let took = worker.join().expect("replay thread");
    let p = s
        .replay
        .run()
        .and_then(|r| r.progress.clone())
        .expect("progress");
    eprintln!(
        "replay beside the UI: {} sent, {} confirmed in {:.2?} ({:.0}/s); {} replay events applied",
        p.sent,
        p.confirmed,
        took,
        p.confirmed as f64 / took.as_secs_f64(),
        events
    );
    let (p50, p99, max) = percentiles(keys.clone());
    eprintln!(
        "keystroke → frame during the replay ({} keys): p50 {p50:.2?} p99 {p99:.2?} max {max:.2?}",
        keys.len()
    );
    let (f50, f99, fmax) = percentiles(frames);
    eprintln!("frame (update + draw) p50 {f50:.2?} p99 {f99:.2?} max {fmax:.2?}");
}

/// `tui::run_loop`'s shape: wait for an event, take what else is queued (at most 512),
/// apply them in order, draw once. A key's latency runs from when the input thread sent
/// it to the end of the frame that shows it.
fn run_loop(
    s: &mut AppState,
    term: &mut Terminal<CrosstermBackend<Sink>>,
    theme: &Theme,
    rx: &Receiver<Ev>,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    let (mut keys, mut frames, mut events) = (Vec::new(), Vec::new(), 0usize);
    let mut queued_keys: Vec<Instant> = Vec::new();
    // Keys count once the replay is sending (not while its session scans the topic).
    let mut replaying = false;
    while let Ok(first) = rx.recv() {
        let t = Instant::now();
        let mut batch = vec![first];
        while batch.len() < MAX_EVENTS_PER_FRAME {
            match rx.try_recv() {
                Ok(ev) => batch.push(ev),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let mut done = false;
        for ev in batch {
            match &ev {
                Ev::Key(_, Some(sent)) => queued_keys.push(*sent),
                Ev::Key(_, None) => {}
                Ev::Ui(a) => {
                    replaying |= matches!(
                        a,
                        Action::Event(UiEvent::Replay(ReplayEvent::ReplayProgress(_)))
                    );
                    events += 1;
                }
                Ev::Done => done = true,
            }
            apply(s, ev);
        }
        term.draw(|f| views::render(f, s, theme)).expect("draw");
        frames.push(t.elapsed());
        let waited = queued_keys.drain(..).map(|sent| sent.elapsed());
        if replaying {
            keys.extend(waited);
        }
        if done {
            break;
        }
    }
    (keys, frames, events)
}
