//! What a replay run reports: the kill switch it obeys, its phase and progress, how
//! it ended, and where each letter stands.

use crate::journal::ReplayState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kill switch and the pause, shared with whatever watches for them (Ctrl-C, `p`,
/// a TUI key, a pause file).
#[derive(Debug, Clone, Default)]
pub struct Control {
    kill: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    /// Job control asked to suspend (Ctrl-Z): the run pauses, and once nothing is in
    /// flight and no ledger transaction is open its front end stops the process.
    suspend: Arc<AtomicBool>,
    /// The suspend request paused the run (it was not paused before): continuing
    /// un-pauses it.
    suspend_paused: Arc<AtomicBool>,
}

/// Two handles are equal when they are the same switch.
impl PartialEq for Control {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.kill, &other.kill)
    }
}

impl Control {
    /// No publish starts after this returns; confirms in flight are awaited.
    pub fn kill(&self) {
        self.kill.store(true, Ordering::SeqCst);
    }

    pub fn killed(&self) -> bool {
        self.kill.load(Ordering::SeqCst)
    }

    /// Hold the replay where it is: no publish starts while paused; confirms in flight
    /// are still collected and failures still counted. The kill switch still works.
    pub fn set_paused(&self, paused: bool) {
        self.pause.store(paused, Ordering::SeqCst);
    }

    /// Pause if running, resume if paused; whether it is now paused.
    pub fn toggle_pause(&self) -> bool {
        !self.pause.fetch_xor(true, Ordering::SeqCst)
    }

    pub fn paused(&self) -> bool {
        self.pause.load(Ordering::SeqCst)
    }

    /// Ctrl-Z: pause now, suspend at the next safe point.
    pub fn request_suspend(&self) {
        if !self.suspend.swap(true, Ordering::SeqCst) {
            let was = self.pause.swap(true, Ordering::SeqCst);
            self.suspend_paused.store(!was, Ordering::SeqCst);
        }
    }

    pub fn suspend_requested(&self) -> bool {
        self.suspend.load(Ordering::SeqCst)
    }

    /// The process was continued (`fg`): the run goes on as it was before Ctrl-Z.
    pub fn continued(&self) {
        if self.suspend.swap(false, Ordering::SeqCst)
            && self.suspend_paused.swap(false, Ordering::SeqCst)
        {
            self.pause.store(false, Ordering::SeqCst);
        }
    }
}

/// How a replay ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Completed,
    /// Too many letters failed again, or the broker refused one: why.
    AutoStopped(String),
    Killed,
    /// The replay could not go on (the ledger or the DLQ watch failed): why.
    Failed(String),
}

impl End {
    /// The state the journal keeps for this end.
    pub fn state(&self) -> ReplayState {
        match self {
            End::Completed => ReplayState::Completed,
            End::AutoStopped(_) => ReplayState::AutoStopped,
            End::Killed => ReplayState::Killed,
            End::Failed(_) => ReplayState::Failed,
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            End::AutoStopped(r) | End::Failed(r) => Some(r),
            End::Completed | End::Killed => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Canary,
    /// After the canary: nothing is sent until the window passes.
    Watching,
    Ramping,
    /// Everything sent: watching the last letters.
    FinalWatch,
    /// Stopping: waiting for confirms in flight.
    Stopping,
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Canary => "canary",
            Phase::Watching => "watching",
            Phase::Ramping => "ramping",
            Phase::FinalWatch => "final watch",
            Phase::Stopping => "stopping",
            Phase::Done => "done",
        }
    }
}

/// A snapshot for progress displays.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub replay_id: String,
    pub phase: Phase,
    pub planned: usize,
    pub sent: usize,
    pub confirmed: usize,
    pub failed_again: usize,
    pub refused: usize,
    pub held_back: usize,
    /// Decided elsewhere since the plan (discarded, replayed by another): not sent.
    pub withdrawn: usize,
    pub in_flight: usize,
    pub remaining: usize,
    /// Letters/s started over the last 5 s.
    pub rate: f64,
    pub target_rate: f64,
    pub elapsed: Duration,
    pub eta: Option<Duration>,
    /// Time left in a watch window.
    pub watch_left: Option<Duration>,
    pub end: Option<End>,
    /// Held by the pause: nothing is being sent.
    pub paused: bool,
    /// When the first and the latest publish started (benchmarks: achieved rate, and
    /// kill latency against when the switch was thrown).
    pub first_send_start: Option<Instant>,
    pub last_send_start: Option<Instant>,
}

impl Progress {
    /// One line: `ramping  120/500 confirmed · 3 failed again · 9.8/s (10/s) · ETA 39s`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{:<11} {}/{} confirmed · {} failed again · {} refused · {:.1}/s (set {}/s)",
            self.phase.as_str(),
            self.confirmed,
            self.planned,
            self.failed_again,
            self.refused,
            self.rate,
            self.target_rate
        );
        if self.withdrawn > 0 {
            s.push_str(&format!(" · {} withdrawn", self.withdrawn));
        }
        if self.paused && self.end.is_none() {
            s.push_str(" · PAUSED (nothing sent)");
        }
        if let Some(w) = self.watch_left {
            s.push_str(&format!(" · watch {}s left", w.as_secs()));
        }
        if let Some(e) = self.eta {
            s.push_str(&format!(" · ETA {}s", e.as_secs()));
        }
        if let Some(end) = &self.end {
            s.push_str(&format!(" · {}", end.state()));
            if let Some(r) = end.reason() {
                s.push_str(&format!(": {r}"));
            }
        }
        s
    }
}

/// Where one letter of a replay stands, for front ends that mark letters as it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LetterOutcome {
    Sending,
    /// Confirmed by the broker (and its DLQ copy settled, where there is one).
    Confirmed,
    FailedAgain,
    Refused,
    HeldBack,
    /// Decided elsewhere since the plan: not sent.
    Withdrawn,
}

impl LetterOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LetterOutcome::Sending => "sending",
            LetterOutcome::Confirmed => "confirmed",
            LetterOutcome::FailedAgain => "failed again",
            LetterOutcome::Refused => "refused",
            LetterOutcome::HeldBack => "held back",
            LetterOutcome::Withdrawn => "withdrawn",
        }
    }
}
