//! What the replay screens hold: the dry-run screen's choices and plan, the progress
//! pane's samples, unfinished replays. Its fields are the replay module's: the rest of
//! the TUI reads them through accessors and changes them only through `replaying`.

use crate::action::{PlanView, Resuming};
use dlq_app::session::Unfinished;
use dlq_core::journal::ReplayState;
use dlq_core::replay::{Control, Options, Progress, CONFIRM_COUNT_ABOVE};
use dlq_core::store::RowId;
use std::collections::HashMap;
use std::time::Duration;

/// Samples kept for the sparklines (one per second of the run).
pub(crate) const SPARK_SAMPLES: usize = 120;

/// Everything replay-related the screen shows.
#[derive(Debug)]
pub struct ReplayUi {
    pub(super) dry_run: Option<DryRun>,
    pub(super) run: Option<RunView>,
    /// Replays of this source left unfinished, as the worker found them on open.
    pub(super) unfinished: Vec<Unfinished>,
    /// Replays of this source being sent by other processes (a team ledger), a line each.
    pub(super) elsewhere: Vec<String>,
    /// The pane of an ended replay, put away with `x` (`:replays` brings it back).
    pub(super) hidden: Option<RunView>,
    /// The last choices made on the dry-run screen: the next one starts from them.
    pub(super) opts: Option<Options>,
    /// `q` was pressed once while a replay runs: the next `q` quits.
    pub(super) quit_armed: bool,
    /// Above this many letters the count is typed to confirm.
    pub(super) confirm_above: usize,
}

impl Default for ReplayUi {
    fn default() -> Self {
        ReplayUi {
            dry_run: None,
            run: None,
            unfinished: Vec::new(),
            elsewhere: Vec::new(),
            hidden: None,
            opts: None,
            quit_armed: false,
            confirm_above: CONFIRM_COUNT_ABOVE,
        }
    }
}

impl ReplayUi {
    /// A replay is sending or waiting for confirms.
    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.ended.is_none())
    }

    /// The dry-run screen, while it is open.
    pub fn dry_run(&self) -> Option<&DryRun> {
        self.dry_run.as_ref()
    }

    /// The progress pane, while it is shown.
    pub fn run(&self) -> Option<&RunView> {
        self.run.as_ref()
    }

    /// Replays of this source left unfinished.
    pub fn unfinished(&self) -> &[Unfinished] {
        &self.unfinished
    }

    /// Above this many letters the count is typed to confirm (a discard's too).
    pub fn confirm_above(&self) -> usize {
        self.confirm_above
    }

    pub fn set_confirm_above(&mut self, n: usize) {
        self.confirm_above = n;
    }

    /// `q` while a replay runs: true the first time (the caller warns), after which
    /// `q` quits.
    pub fn arm_quit(&mut self) -> bool {
        if !self.running() || self.quit_armed {
            return false;
        }
        self.quit_armed = true;
        true
    }

    /// `:replays`: the pane put away with `x` comes back.
    pub fn reopen(&mut self) {
        if self.run.is_none() {
            self.run = self.hidden.take();
        }
    }

    /// A new browse: a dry-run and an ended run were of the old rows; a running replay
    /// keeps its pane.
    pub fn new_browse(&mut self) {
        if !self.running() {
            self.run = None;
        }
        self.dry_run = None;
    }
}

/// The dry-run screen.
#[derive(Debug)]
pub struct DryRun {
    /// What was picked, in words (`group customer_tax_profile_missing`, `3 marked letters`).
    pub what: String,
    /// Letter id → its rows, to mark outcomes once it runs.
    pub rows: HashMap<String, Vec<RowId>>,
    /// The option under the cursor (see [`FIELDS`]).
    pub field: usize,
    pub opts: Options,
    /// The worker's plan for `opts` (None while it plans).
    pub plan: Option<PlanView>,
    pub error: Option<String>,
    pub resume: Option<Resuming>,
    /// Plans asked for and not answered yet: only the answer to the last one is shown.
    pub(crate) asked: u32,
    /// Lines of the plan scrolled past (PgDn/PgUp).
    pub scroll: u16,
    /// Above this many letters the count is typed (`replay.confirm_above`).
    pub confirm_above: usize,
}

/// The progress pane.
#[derive(Debug)]
pub struct RunView {
    pub id: String,
    pub planned: usize,
    pub progress: Option<Progress>,
    /// Letters started per second, and letters failed again per second, one sample per
    /// second of the run (the engine's clock, so a test's run draws the same lines).
    pub rate: Vec<u64>,
    pub failed: Vec<u64>,
    pub(crate) second: u64,
    pub(crate) failed_seen: usize,
    pub control: Control,
    pub rows: HashMap<String, Vec<RowId>>,
    /// (state, summary) once it has ended.
    /// How it ended (`None`: never started) and the summary line.
    pub ended: Option<(Option<ReplayState>, String)>,
    pub killed_at: Option<Duration>,
}

/// The dry-run screen's choices: label, and the values ←/→ step through.
pub const FIELDS: [&str; 7] = [
    "canary",
    "canary rate",
    "rate",
    "watch window",
    "stop above",
    "payloads",
    "route",
];
const CANARY: [usize; 8] = [0, 1, 2, 5, 10, 20, 50, 100];
const CANARY_RATE: [f64; 6] = [0.2, 0.5, 1.0, 2.0, 5.0, 10.0];
const RATE: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];
const WATCH_S: [u64; 8] = [0, 5, 10, 30, 60, 120, 300, 600];
const RATIO: [f64; 7] = [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0];

/// A field's value as the screen writes it.
pub fn field_value(o: &Options, field: usize) -> String {
    match field {
        0 if o.canary == 0 => "none (straight to the rate)".into(),
        0 => format!("{} letters", o.canary),
        1 => format!("{}/s", o.canary_rate),
        2 => format!("{}/s", o.rate),
        3 => format!("{}s after the canary and at the end", o.watch.as_secs()),
        4 => format!("{:.0}% failed again", o.max_failed_ratio * 100.0),
        5 if o.use_revisions => "latest revisions (where a letter has one)".into(),
        5 => "originals".into(),
        _ if o.to_failed_queue => "the failed queue only (RabbitMQ)".into(),
        _ => "as they came (origin exchange and key, or topic)".into(),
    }
}

/// The preset after (or before) `now` in `steps`: the nearest one, then one step.
fn step<T: Copy + PartialOrd>(steps: &[T], now: T, by: i8) -> T {
    let at = steps
        .iter()
        .position(|s| *s >= now)
        .unwrap_or(steps.len() - 1);
    let exact = steps.get(at).is_some_and(|s| *s == now);
    let i = match (by > 0, exact) {
        (true, true) => at + 1,
        (true, false) => at,
        (false, _) => at.saturating_sub(1),
    };
    steps[i.min(steps.len() - 1)]
}

pub(crate) fn change(o: &mut Options, field: usize, by: i8) {
    match field {
        0 => o.canary = step(&CANARY, o.canary, by),
        1 => o.canary_rate = step(&CANARY_RATE, o.canary_rate, by),
        2 => o.rate = step(&RATE, o.rate, by),
        3 => o.watch = Duration::from_secs(step(&WATCH_S, o.watch.as_secs(), by)),
        4 => o.max_failed_ratio = step(&RATIO, o.max_failed_ratio, by),
        5 => o.use_revisions = !o.use_revisions,
        _ => o.to_failed_queue = !o.to_failed_queue,
    }
}
