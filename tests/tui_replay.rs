//! Replay from the TUI, end to end on the demo (librdkafka's mock cluster and the demo's
//! simulated consumer, which dead-letters a replayed message again by the scenario's
//! rules): keys go through the keymap and `update`, commands through the real worker and
//! session, and the screen is rendered on a `TestBackend`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use dlq_app::brokers::OpenOptions;
use dlq_app::session::Settings;
use dlq_core::access::Role;
use dlq_core::journal::ReplayState;
use dlq_core::masking::Masker;
use dlq_core::model::TriageState;
use dlq_core::replay::Phase;
use dlq_core::source::SourceRef;
use dlq_tui::action::{Action, Command};
use dlq_tui::action::{BrowseEvent, Event as UiEvent, LedgerEvent, ReplayEvent};
use dlq_tui::state::AppState;
use dlq_tui::worker::{spawn, Request};
use dlq_tui::{action_for_event, update::update, AppEvent};
use std::collections::BTreeSet;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

const SIZE: (u16, u16) = (160, 45);

/// The TUI without a terminal: the worker on the demo, the state, and what it saw.
struct Tui {
    s: AppState,
    rx: Receiver<AppEvent>,
    req: Sender<Request>,
    _dir: tempfile::TempDir,
    ledger: std::path::PathBuf,
    settings: Settings,
    /// Replay phases the progress pane went through, in order, without repeats.
    phases: Vec<Phase>,
    /// (state, summary) of the last replay that ended.
    ended: Option<(Option<ReplayState>, String)>,
}

impl Tui {
    fn open(role: Role) -> Tui {
        let dir = tempfile::tempdir().expect("tmp");
        let ledger = dir.path().join("ledger.db");
        let masker = Masker::with_key(vec![1]);
        let mut settings =
            dlq_testkit::session::operator("demo", "tester", ledger.clone(), masker.clone());
        settings.principal.role = role;
        let (tx, rx) = mpsc::channel();
        let (req, req_rx) = mpsc::channel();
        spawn(
            SourceRef::Demo,
            OpenOptions::default(),
            settings.clone(),
            tx,
            req_rx,
        );
        let mut s = dlq_testkit::tui::empty_state(
            "demo",
            masker,
            chrono::Utc::now().timestamp_millis(),
            64 << 20,
        );
        s.role = role;
        let mut t = Tui {
            s,
            rx,
            req,
            _dir: dir,
            ledger,
            settings,
            phases: Vec::new(),
            ended: None,
        };
        t.until("the scan completes", Duration::from_secs(60), |t| {
            t.s.scan.complete
        });
        t
    }

    fn apply(&mut self, a: Action) {
        match &a {
            Action::Event(UiEvent::Replay(ReplayEvent::ReplayProgress(p)))
                if self.phases.last() != Some(&p.phase) =>
            {
                self.phases.push(p.phase);
            }
            Action::Event(UiEvent::Replay(ReplayEvent::ReplayEnded { state, summary, .. })) => {
                self.ended = Some((*state, summary.clone()));
            }
            Action::Event(UiEvent::Scan(BrowseEvent::ScanFailed(e))) => {
                panic!("the demo failed: {e}")
            }
            _ => {}
        }
        for c in update(&mut self.s, a, SIZE) {
            self.command(c);
        }
    }

    fn command(&mut self, c: Command) {
        let c = match Request::for_command(c) {
            Ok(r) => return self.req.send(r).expect("worker alive"),
            Err(c) => *c,
        };
        // `e`: the editor runs here as the TUI runs it (minus the terminal handover).
        if let Command::Edit {
            letter_id,
            letter,
            reason,
        } = c
        {
            let done = dlq_tui::edit_and_record(&self.settings, &letter_id, &letter, &reason);
            self.apply(Action::from(LedgerEvent::Edited(done)));
        }
    }

    /// Apply the worker's events until `done` holds.
    fn until(&mut self, what: &str, limit: Duration, done: impl Fn(&Tui) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < limit,
                "{what}: not within {limit:?}\n{}",
                self.screen()
            );
            if let Ok(AppEvent::Action(a)) = self.rx.recv_timeout(Duration::from_millis(50)) {
                self.apply(a);
            }
        }
    }

    fn key(&mut self, code: KeyCode) {
        let ev = Event::Key(KeyEvent::new(code, KeyModifiers::NONE));
        if let Some(a) = action_for_event(&self.s, &ev) {
            self.apply(a);
        }
    }

    fn keys(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    /// `:filter EXPR`, so the group under the cursor is the one asked for.
    fn only(&mut self, expr: &str) {
        self.key(KeyCode::Char(':'));
        self.keys(&format!("filter {expr}"));
        self.key(KeyCode::Enter);
    }

    fn screen(&self) -> String {
        dlq_testkit::tui::screen(&self.s, SIZE)
    }

    fn planned(&mut self) -> usize {
        self.until("the dry-run is planned", Duration::from_secs(60), |t| {
            t.s.replay
                .dry_run()
                .is_some_and(|d| d.plan.is_some() || d.error.is_some())
        });
        let d = self.s.replay.dry_run().expect("dry run");
        d.plan.as_ref().expect("a plan").planned
    }

    /// Move to a field of the dry-run screen and step its value.
    fn set(&mut self, field: usize, steps: i8) {
        while self.s.replay.dry_run().expect("dry run").field != field {
            self.key(KeyCode::Down);
        }
        let code = if steps > 0 {
            KeyCode::Right
        } else {
            KeyCode::Left
        };
        for _ in 0..steps.unsigned_abs() {
            self.key(code);
        }
        self.planned();
    }

    /// Enter, typing the count when the plan is above the threshold.
    fn start(&mut self) {
        let n = self.planned();
        self.key(KeyCode::Enter);
        if n > dlq_core::replay::CONFIRM_COUNT_ABOVE {
            self.keys(&n.to_string());
            self.key(KeyCode::Enter);
        }
        assert!(self.s.replay.running(), "not started:\n{}", self.screen());
    }

    fn wait_end(&mut self, limit: Duration) -> (Option<ReplayState>, String) {
        self.ended = None;
        self.until("the replay ends", limit, |t| t.ended.is_some());
        self.ended.clone().expect("ended")
    }

    fn states_of_run(&self) -> BTreeSet<TriageState> {
        let run = self.s.replay.run().expect("a run");
        run.rows
            .values()
            .flatten()
            .filter_map(|r| self.s.browse.catalog.store.row(*r).map(|x| x.state))
            .collect()
    }
}

/// The tax-profile group... no: the transient timeouts, which replays resolve. The
/// dry-run screen shows the engine's plan for the group; the progress pane goes through
/// canary → watching → ramping → done; the letters end resolved.
#[test]
fn a_group_replays_from_the_dry_run_through_canary_watch_and_ramp() {
    let mut t = Tui::open(Role::Operator);
    t.only("reason=attempt_budget_exhausted");
    t.key(KeyCode::Char('r'));
    let n = t.planned();
    assert!(n > 100, "the group is the demo's ~280 timeouts: {n}");
    let screen = t.screen();
    for want in [
        "Replay group attempt_budget_exhausted (280 letters) — dry run",
        &format!("letters:  {n} to send"),
        "attempt_budget_exhausted → kafka topic payments",
        "pace:     canary 5 at 1/s, watch 30s",
        "sample (masked):",
        &format!("Enter: type {n} to start"),
    ] {
        assert!(screen.contains(want), "no `{want}` in\n{screen}");
    }
    // canary 2 (5 → 2), canary rate 5/s, rate 1000/s, watch 5s.
    t.set(0, -1);
    t.set(1, 2);
    t.set(2, 6);
    t.set(3, -2);
    let screen = t.screen();
    assert!(
        screen.contains("canary 2 at 5/s, watch 5s, then 1000/s"),
        "{screen}"
    );
    // A wrong count sends nothing.
    t.key(KeyCode::Enter);
    t.keys("12");
    t.key(KeyCode::Enter);
    assert!(!t.s.replay.running());
    assert!(t.screen().contains("nothing was sent"));
    t.start();
    let (state, summary) = t.wait_end(Duration::from_secs(90));
    assert_eq!(state, Some(ReplayState::Completed), "{summary}");
    assert!(
        summary.contains(&format!("{n} of {n} confirmed, 0 failed again")),
        "{summary}"
    );
    // The title counts what this session handled.
    let screen = t.screen();
    assert!(
        screen.contains(&format!("{n} handled this session")),
        "{screen}"
    );
    assert_eq!(
        t.phases,
        vec![
            Phase::Canary,
            Phase::Watching,
            Phase::Ramping,
            Phase::FinalWatch,
            Phase::Done
        ]
    );
    assert_eq!(t.states_of_run(), BTreeSet::from([TriageState::Resolved]));
    let screen = t.screen();
    assert!(screen.contains("Replay r-"), "{screen}");
    assert!(
        screen.contains(&format!("{n} planned · {n} sent · {n} confirmed")),
        "{screen}"
    );
    assert!(screen.contains("completed"), "{screen}");
    // Handled, they left what is failing; `state=resolved` shows them, with the outcome.
    assert!(screen.contains("0 match"), "{screen}");
    t.only("reason=attempt_budget_exhausted state=resolved");
    t.key(KeyCode::Tab);
    assert!(t.screen().contains("resolve"), "{}", t.screen());
}

/// The demo's story: the string amounts fail again and the canary auto-stops (the reason
/// on screen); a revision fixes one letter and its replay from revisions goes through.
#[test]
fn failing_letters_auto_stop_the_canary_and_a_revision_goes_through() {
    let mut t = Tui::open(Role::Operator);
    t.only("reason=amount_not_a_number");
    t.key(KeyCode::Char('r'));
    t.planned();
    t.set(3, -2); // watch 5s
    t.start();
    let (state, summary) = t.wait_end(Duration::from_secs(60));
    assert_eq!(state, Some(ReplayState::AutoStopped), "{summary}");
    let screen = t.screen();
    assert!(screen.contains("auto-stopped"), "{screen}");
    assert!(
        screen.contains("stopped: ") && screen.contains("failed again"),
        "the reason is on screen:\n{screen}"
    );
    assert!(
        t.states_of_run().contains(&TriageState::FailedAgain),
        "failed-again letters are marked"
    );
    // The History tab lists the letter's replays: sent, confirmed, back in the DLQ.
    t.key(KeyCode::Tab);
    let at =
        t.s.letters
            .rows()
            .iter()
            .position(|r| {
                t.s.browse.catalog.store.row(*r).map(|x| x.state) == Some(TriageState::FailedAgain)
            })
            .expect("a failed-again letter in the list");
    while t.s.letters.cursor() < at {
        t.key(KeyCode::Down);
    }
    t.key(KeyCode::Char('5'));
    t.until("the history is read", Duration::from_secs(10), |t| {
        let row = t.s.selected_row();
        row.and_then(|r| t.s.detail.history(r))
            .is_some_and(|l| l.iter().all(|l| !l.contains("reading")))
    });
    let screen = t.screen();
    for want in [
        "replayed by r-",
        "its DLQ copy settled",
        "failed again: back in the DLQ at",
    ] {
        assert!(
            screen.contains(want),
            "no `{want}` in the History tab:\n{screen}"
        );
    }
    t.key(KeyCode::Char('1'));
    t.key(KeyCode::BackTab);
    // `e` on an open letter of the group (the one that failed again is replayed: its DLQ
    // copy is settled; its new copy is a letter of its own): the editor (a sed script, as
    // in the README) writes the amount as a number; the revision is ledgered.
    t.key(KeyCode::Tab);
    t.key(KeyCode::Home);
    let row = t.s.letters.rows()[t.s.letters.cursor()];
    assert_eq!(
        t.s.browse.catalog.store.row(row).map(|r| r.state),
        Some(TriageState::Open)
    );
    let row = t.s.letters.rows()[t.s.letters.cursor()];
    let payload = t.s.cache.get(row).expect("held").raw.payload.clone();
    assert!(
        String::from_utf8_lossy(&payload).contains("\"amount\":\""),
        "a string amount"
    );
    std::env::set_var(
        "EDITOR",
        r#"sed -i -E 's/"amount": *"([0-9]+),?([0-9]*\.[0-9]+)"/"amount": \1\2/'"#,
    );
    t.key(KeyCode::Char('e'));
    t.keys("amount as a number");
    t.key(KeyCode::Enter);
    let msg = t.s.message.clone().expect("a message").0;
    assert!(msg.contains("revision 1 saved"), "{msg}");
    t.key(KeyCode::Char(' '));
    t.key(KeyCode::Char('r'));
    assert_eq!(t.planned(), 1);
    t.set(5, 1); // payloads: latest revisions
    assert!(
        t.screen().contains("payloads: the latest revision"),
        "{}",
        t.screen()
    );
    t.set(3, -2);
    t.start();
    let (state, summary) = t.wait_end(Duration::from_secs(60));
    assert_eq!(state, Some(ReplayState::Completed), "{summary}");
    assert!(
        summary.contains("1 of 1 confirmed, 0 failed again"),
        "{summary}"
    );
}

/// `K` stops a long replay at once; it is announced as unfinished and `:resume` opens
/// the dry-run of what it left; `:abandon` closes it.
#[test]
fn k_kills_a_long_replay_which_can_then_be_resumed_or_abandoned() {
    let mut t = Tui::open(Role::Operator);
    t.only("reason=customer_tax_profile_missing");
    t.key(KeyCode::Char('r'));
    t.set(0, -3); // no canary: straight to the rate (10/s)
    t.start();
    t.until("letters are being sent", Duration::from_secs(30), |t| {
        t.s.replay
            .run()
            .and_then(|r| r.progress.as_ref())
            .is_some_and(|p| p.sent >= 3)
    });
    t.key(KeyCode::Char('K'));
    let (state, summary) = t.wait_end(Duration::from_secs(40));
    assert_eq!(state, Some(ReplayState::Killed), "{summary}");
    let sent = t.s.replay.run().unwrap().progress.as_ref().unwrap().sent;
    assert!(sent < 50, "the kill stopped it early: {sent} sent");
    assert!(t.screen().contains("killed"), "{}", t.screen());
    t.until(
        "the killed replay is announced",
        Duration::from_secs(10),
        |t| !t.s.replay.unfinished().is_empty(),
    );
    let id = t.s.replay.unfinished()[0].id.clone();
    assert!(
        t.screen().contains(&format!(":resume {id}")),
        "{}",
        t.screen()
    );
    // The ended replay's pane is put away with `x`, and `:replays` brings it back.
    t.key(KeyCode::Char('x'));
    assert!(t.s.replay.run().is_none(), "the pane stays after x");
    t.key(KeyCode::Char(':'));
    t.keys("replays");
    t.key(KeyCode::Enter);
    assert!(
        t.s.replay.run().is_some(),
        ":replays did not bring the pane back"
    );
    t.key(KeyCode::Esc);
    t.key(KeyCode::Char(':'));
    t.keys("resume");
    t.key(KeyCode::Enter);
    t.until("the resume is planned", Duration::from_secs(30), |t| {
        t.s.replay.dry_run().is_some_and(|d| d.plan.is_some())
    });
    let left = t.s.replay.dry_run().unwrap().plan.as_ref().unwrap().planned;
    assert!(left > 0 && left <= 612 - sent, "left {left}, sent {sent}");
    assert!(
        t.screen().contains(&format!("Resuming {id}")),
        "{}",
        t.screen()
    );
    t.key(KeyCode::Esc);
    assert!(t.s.replay.dry_run().is_none());
    t.key(KeyCode::Char(':'));
    t.keys(&format!("abandon {id}"));
    t.key(KeyCode::Enter);
    t.until("abandoned", Duration::from_secs(10), |t| {
        t.s.notes.iter().any(|n| n.contains("abandoned"))
    });
    let l = dlq_ledger::Ledger::open(&t.ledger, "tester").expect("ledger");
    let (row, _) = l.replay(&id).expect("read").expect("journaled");
    assert_eq!(row.state, ReplayState::Abandoned);
}

/// A viewer sees `r` disabled and cannot open the dry-run.
#[test]
fn a_viewer_cannot_replay() {
    let mut t = Tui::open(Role::Viewer);
    t.key(KeyCode::Char('r'));
    assert!(t.s.replay.dry_run().is_none());
    let screen = t.screen();
    assert!(
        screen.contains("refused: replaying needs the operator role; you are viewer"),
        "{screen}"
    );
    t.key(KeyCode::Char('?'));
    let screen = t.screen();
    assert!(
        screen.contains("(off: needs operator) replay the marked letters"),
        "help shows r disabled:\n{screen}"
    );
}

/// `T` on the amount group: the program and a reason, the dry-run over the panes (at
/// 80×24 too), the count typed, one revision per letter — then `r` with the revisions
/// switch on replays them and the simulated consumer accepts every one.
#[test]
fn t_transforms_the_amount_group_and_the_replay_sends_the_revisions() {
    dlq_app::transform::use_worker(dlq_app::transform::WorkerCommand {
        program: env!("CARGO_BIN_EXE_dlq-triage").into(),
        args: vec![dlq_transform::WORKER_ARG.into()],
    });
    let mut t = Tui::open(Role::Operator);
    t.only("reason=amount_not_a_number");
    t.key(KeyCode::Char('T'));
    t.keys(r#".payload.amount |= (gsub(",";"") | tonumber)"#);
    t.key(KeyCode::Enter);
    t.keys("INC-42 amounts as strings");
    t.key(KeyCode::Enter);
    t.until("the transform's dry-run", Duration::from_secs(60), |t| {
        matches!(
            t.s.prompt.input(),
            dlq_tui::state::Input::TransformConfirm(..)
        )
    });
    let dlq_tui::state::Input::TransformConfirm(_, n) = *t.s.prompt.input() else {
        unreachable!()
    };
    assert!(n >= 300, "{}", t.screen());
    for (size, wants) in [
        (
            SIZE,
            vec![
                "Transform — dry run".to_string(),
                format!("{n} change · 0 unchanged"),
                "/payload/amount".to_string(),
                format!("type {n} to confirm"),
            ],
        ),
        (
            (80, 24),
            vec!["Transform — dry run".to_string(), format!("{n} change")],
        ),
    ] {
        let screen = dlq_testkit::tui::screen(&t.s, size);
        for want in wants {
            assert!(screen.contains(&want), "no `{want}` at {size:?}:\n{screen}");
        }
    }
    t.keys(&n.to_string());
    t.key(KeyCode::Enter);
    t.until("the revisions are recorded", Duration::from_secs(60), |t| {
        t.s.message
            .as_ref()
            .is_some_and(|(m, _)| m.starts_with("recorded"))
    });
    let db = rusqlite::Connection::open(&t.ledger).expect("ledger");
    let (revisions, letters): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT letter_id) FROM revisions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count");
    assert_eq!((revisions, letters), (n as i64, n as i64));
    // Replay with the revisions switch (field 5) on, at a test's pace.
    t.key(KeyCode::Char('r'));
    t.planned();
    // The dry-run names who the target reaches: the demo's service reads `invoices`.
    let lines = &t.s.replay.dry_run().unwrap().plan.as_ref().unwrap().lines;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  reaches:  invoices: consumer group invoice-worker (lag ")),
        "{lines:#?}"
    );
    t.set(0, -1);
    t.set(1, 2);
    t.set(2, 6);
    t.set(3, -2);
    t.set(5, 1);
    assert!(t.screen().contains("latest revisions"), "{}", t.screen());
    t.start();
    let (state, summary) = t.wait_end(Duration::from_secs(120));
    assert_eq!(state, Some(ReplayState::Completed), "{summary}");
    assert!(summary.contains("0 failed again"), "{summary}");
}

/// `T` as an operator with programs that launder the demo's customer data (an email as
/// base64, a name spelt out, a name raised as the error): the dry-run overlay, at 80×24
/// and wide, shows only what the program computed on the masked view (#56), labelled so,
/// and no customer's name in any form.
#[test]
fn t_shows_no_customer_data_whatever_the_program_does() {
    dlq_app::transform::use_worker(dlq_app::transform::WorkerCommand {
        program: env!("CARGO_BIN_EXE_dlq-triage").into(),
        args: vec![dlq_transform::WORKER_ARG.into()],
    });
    let mut t = Tui::open(Role::Operator);
    t.only("reason=amount_not_a_number");
    let names: Vec<String> = dlq_kafka::demo::scenario::LAST
        .iter()
        .chain(dlq_kafka::demo::scenario::FIRST)
        .filter(|n| n.chars().count() >= 4)
        .map(|n| n.to_lowercase())
        .collect();
    for (program, wants) in [
        (
            ".payload.note = (.payload.customer.email | @base64)",
            "on the masked view",
        ),
        (
            r#".payload.note = (.payload.customer.name | split("") | join("-"))"#,
            "on the masked view",
        ),
        ("error(.payload.customer.name)", "on the masked view"),
    ] {
        t.key(KeyCode::Char('T'));
        // The prompt offers the last program: cleared first.
        for _ in 0..80 {
            t.key(KeyCode::Backspace);
        }
        t.keys(program);
        t.key(KeyCode::Enter);
        t.keys("probe");
        t.key(KeyCode::Enter);
        t.until("the transform's dry-run", Duration::from_secs(60), |t| {
            t.s.prompt.overlay().is_some()
        });
        for size in [SIZE, (80, 24)] {
            let screen = dlq_testkit::tui::screen(&t.s, size);
            let flat: String = screen
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric())
                .collect();
            for n in &names {
                assert!(
                    !flat.contains(n.as_str()),
                    "{program}: {n} shown at {size:?}:\n{screen}"
                );
            }
            if size == SIZE {
                assert!(screen.contains(wants), "{program}: no {wants}:\n{screen}");
            }
        }
        t.key(KeyCode::Esc);
        t.s.prompt.close_overlay();
    }
    let l = dlq_ledger::Ledger::open(&t.ledger, "tester").expect("ledger");
    let dry = l
        .audit_entries()
        .expect("entries")
        .into_iter()
        .filter(|e| e.action == "transform-dry-run")
        .count();
    assert_eq!(dry, 3, "each dry-run is audited");
}

/// `p` holds a running replay: the pane says PAUSED, nothing more is sent while it
/// holds, and `p` again lets it complete.
#[test]
fn p_pauses_the_running_replay_and_p_again_resumes_it() {
    let mut t = Tui::open(Role::Operator);
    t.only("reason=attempt_budget_exhausted");
    t.key(KeyCode::Char('r'));
    t.planned();
    t.set(0, -1);
    t.set(1, 2);
    t.set(3, -2);
    t.start();
    let sent = |t: &Tui| {
        t.s.replay
            .run()
            .and_then(|r| r.progress.as_ref())
            .map_or(0, |p| p.sent)
    };
    t.until("the ramp starts", Duration::from_secs(60), |t| sent(t) > 5);
    t.key(KeyCode::Char('p'));
    assert!(t.screen().contains("PAUSED"), "{}", t.screen());
    // Let the last step's sends land, then hold for two seconds.
    let settle = Instant::now() + Duration::from_millis(500);
    t.until("settled", Duration::from_secs(5), |_| {
        Instant::now() >= settle
    });
    let at = sent(&t);
    let hold = Instant::now() + Duration::from_secs(2);
    t.until("two seconds paused", Duration::from_secs(10), |_| {
        Instant::now() >= hold
    });
    assert_eq!(sent(&t), at, "sent while paused");
    t.key(KeyCode::Char('p'));
    let (state, summary) = t.wait_end(Duration::from_secs(120));
    assert_eq!(state, Some(ReplayState::Completed), "{summary}");
}
