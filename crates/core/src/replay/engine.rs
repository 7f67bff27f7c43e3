//! The replay engine: canary, watch window, ramp, auto-stop and kill switch, one step
//! at a time. It owns no thread and no broker: the session calls [`Engine::step`] as the
//! DLQ is tailed, hands it every new dead letter ([`Engine::observe`]), and settles what
//! it asks for. Every state change is journaled before it counts.

use super::plan::{Item, Plan};
use super::rate::TokenBucket;
pub use super::report::{Control, End, LetterOutcome, Phase, Progress};
use crate::journal::ConfirmedLetter;
use crate::journal::{Decision, ItemState, Journal, JournalError};
use crate::model::{Coords, DeadLetter};
use crate::ports::{Publisher, SourceError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

mod confirm;
mod send;

/// Letters in flight at most (the rate sets the pace; this bounds memory and the
/// confirms a kill waits for).
const MAX_IN_FLIGHT: usize = 1000;
/// The failed-again ratio is taken over this many of the latest replayed letters.
const WINDOW: usize = 50;
/// How long a stop waits for confirms in flight before leaving them in doubt.
const DRAIN: Duration = Duration::from_secs(30);
/// Confirms are gathered this long before they are journaled together.
const BATCH_WINDOW: Duration = Duration::from_millis(10);
/// The current rate is measured over this window.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// A confirmed letter whose DLQ copy the broker must settle (a held RabbitMQ delivery).
#[derive(Debug, Clone)]
pub struct ToSettle {
    pub index: usize,
    /// The letter's place in the plan (the journal's key).
    pub seq: u32,
    pub coords: Coords,
    pub decision: Decision,
}

pub struct Engine<'p> {
    plan: &'p Plan,
    control: Control,
    /// Each letter's state, as journaled (every change is written there first).
    states: Vec<ItemState>,
    /// Letters that may go now, in plan order: a key's earliest letter not sent yet
    /// (with an order-keeping publisher, also the ones after it that were released).
    ready: VecDeque<usize>,
    /// Each key's later letters, in order: the next moves to `ready` when the one
    /// before it is confirmed — so a key never has two letters in flight — or, with a
    /// publisher that keeps a key's order ([`Publisher::keeps_key_order`]), as soon as
    /// the one before it is chosen for a batch.
    behind: HashMap<&'p [u8], VecDeque<usize>>,
    /// The publisher keeps a key's order: keys are released when chosen, not on confirm.
    key_order_kept: bool,
    /// Letters not sent yet (`ready` + `behind`).
    remaining: usize,
    /// Keys whose letter the broker refused: their later letters are held back.
    blocked: HashSet<Vec<u8>>,
    in_flight: HashSet<usize>,
    bucket: TokenBucket,
    phase: Phase,
    until: Option<Instant>,
    end: Option<End>,
    canary_sent: usize,
    /// Sent letters in order, for the failed-again window.
    recent: VecDeque<usize>,
    by_from: HashMap<&'p str, usize>,
    by_message_id: HashMap<&'p str, usize>,
    settle: Vec<ToSettle>,
    sends: VecDeque<Instant>,
    started: Instant,
    stopping_since: Option<Instant>,
    counts: Counts,
    /// When the last publish started, and when the kill was first seen (benchmarks).
    pub last_send_start: Option<Instant>,
    pub kill_seen: Option<Instant>,
    first_send: Option<Instant>,
    /// The bucket has not paced a publish yet.
    bucket_fresh: bool,
    /// The pause held the last step: on resume the bucket starts afresh (no burst).
    was_paused: bool,
    /// Outcomes read while waiting, journaled by the next step.
    stash: Vec<crate::ports::Outcome>,
    /// Letters whose state changed since the last [`Engine::take_changes`].
    changed: Vec<usize>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    sent: usize,
    confirmed: usize,
    failed_again: usize,
    refused: usize,
    held_back: usize,
    withdrawn: usize,
}

impl<'p> Engine<'p> {
    pub fn new(plan: &'p Plan, control: Control, now: Instant) -> Self {
        let o = &plan.options;
        let canary = o.canary.min(plan.items.len());
        let (phase, rate) = if canary > 0 {
            (Phase::Canary, o.canary_rate)
        } else {
            (Phase::Ramping, o.rate)
        };
        let mut ready = VecDeque::new();
        let mut behind: HashMap<&'p [u8], VecDeque<usize>> = HashMap::new();
        for (i, it) in plan.items.iter().enumerate() {
            match it.key.as_deref() {
                Some(k) => match behind.get_mut(k) {
                    Some(q) => q.push_back(i),
                    None => {
                        behind.insert(k, VecDeque::new());
                        ready.push_back(i);
                    }
                },
                None => ready.push_back(i),
            }
        }
        let mut by_message_id = HashMap::new();
        for (i, it) in plan.items.iter().enumerate() {
            if let Some(m) = it.message_id.as_deref() {
                by_message_id.insert(m, i);
            }
        }
        Engine {
            plan,
            control,
            states: vec![ItemState::Planned; plan.items.len()],
            ready,
            behind,
            key_order_kept: false,
            remaining: plan.items.len(),
            blocked: HashSet::new(),
            in_flight: HashSet::new(),
            bucket: TokenBucket::new(rate, now),
            phase,
            until: None,
            end: None,
            canary_sent: 0,
            recent: VecDeque::new(),
            by_from: plan
                .items
                .iter()
                .enumerate()
                .map(|(i, it)| (it.location.as_str(), i))
                .collect(),
            by_message_id,
            settle: Vec::new(),
            sends: VecDeque::new(),
            started: now,
            stopping_since: None,
            counts: Counts::default(),
            last_send_start: None,
            kill_seen: None,
            first_send: None,
            stash: Vec::new(),
            bucket_fresh: true,
            was_paused: false,
            changed: Vec::new(),
        }
    }

    fn set(&mut self, i: usize, st: ItemState) {
        self.states[i] = st;
        self.changed.push(i);
    }

    /// (letter id, outcome) of every letter whose state changed since the last call.
    pub fn take_changes(&mut self) -> Vec<(&'p str, LetterOutcome)> {
        let plan = self.plan;
        let mut changed = std::mem::take(&mut self.changed);
        // A letter that changed twice in a step is reported once, as it stands now.
        changed.sort_unstable();
        changed.dedup();
        let mut out = Vec::with_capacity(changed.len());
        for i in changed {
            let outcome = match self.states[i] {
                ItemState::Planned => continue,
                ItemState::Sending => LetterOutcome::Sending,
                ItemState::Confirmed | ItemState::Settled => LetterOutcome::Confirmed,
                ItemState::FailedAgain => LetterOutcome::FailedAgain,
                ItemState::Refused => LetterOutcome::Refused,
                ItemState::HeldBack => LetterOutcome::HeldBack,
                ItemState::Withdrawn => LetterOutcome::Withdrawn,
            };
            out.push((plan.items[i].letter_id.as_str(), outcome));
        }
        out
    }

    pub fn plan_id(&self) -> &str {
        &self.plan.id
    }

    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    /// Letters in doubt: sent, never confirmed nor refused (a stop that timed out).
    pub fn in_doubt(&self) -> usize {
        self.states
            .iter()
            .filter(|s| **s == ItemState::Sending)
            .count()
    }

    /// Confirmed letters whose DLQ copy is to be settled now.
    pub fn take_settles(&mut self) -> Vec<ToSettle> {
        std::mem::take(&mut self.settle)
    }

    pub fn wants_settle(&self) -> bool {
        !self.settle.is_empty()
    }

    /// The broker settled (acked) the DLQ copy; the ledger has it applied.
    pub fn settled(&mut self, index: usize) {
        if self.states.get(index) == Some(&ItemState::Confirmed) {
            self.set(index, ItemState::Settled);
        }
    }

    /// Stop now for a reason outside the engine (the DLQ watch was lost).
    pub fn fail(&mut self, why: String, now: Instant) {
        self.stop(End::Failed(why), now);
    }

    fn stop(&mut self, end: End, now: Instant) {
        if self.end.is_none() {
            self.end = Some(end);
            self.phase = Phase::Stopping;
            self.stopping_since = Some(now);
        }
    }

    /// A new letter in the DLQ: is it one we replayed, failing again?
    pub fn observe(
        &mut self,
        letter: &DeadLetter,
        ledger: &mut dyn Journal,
    ) -> Result<(), JournalError> {
        let raw = &letter.raw;
        let ours = raw
            .header("x-dlq-replay-id")
            .and_then(|v| v.as_nonempty_text())
            .is_some_and(|id| id == self.plan.id);
        let index = if ours {
            raw.header("x-dlq-replayed-from")
                .and_then(|v| v.as_nonempty_text())
                .and_then(|from| self.by_from.get(from.as_str()).copied())
        } else {
            None
        }
        .or_else(|| {
            let m = letter.event.message_id.as_ref()?;
            self.by_message_id.get(m.value.as_str()).copied()
        });
        let Some(i) = index else { return Ok(()) };
        if !matches!(
            self.states[i],
            ItemState::Sending | ItemState::Confirmed | ItemState::Settled
        ) {
            return Ok(());
        }
        let item = &self.plan.items[i];
        let at = raw.coords.as_ref().map(ToString::to_string);
        ledger.replay_item(
            &self.plan.id,
            item.seq,
            &item.letter_id,
            ItemState::FailedAgain,
            Some(&format!(
                "back in the DLQ{} as {}",
                at.map(|a| format!(" at {a}")).unwrap_or_default(),
                letter.reason_code()
            )),
        )?;
        self.set(i, ItemState::FailedAgain);
        self.counts.failed_again += 1;
        Ok(())
    }

    fn failed_ratio(&self) -> (usize, usize, f64) {
        let failed = self
            .recent
            .iter()
            .filter(|&&i| self.states[i] == ItemState::FailedAgain)
            .count();
        let n = self.recent.len();
        let floor = self.plan.options.canary.max(1);
        (failed, n, failed as f64 / n.max(floor) as f64)
    }

    /// One step: collect confirms, apply the kill switch and the auto-stop rule, move
    /// through the phases and start the publishes that are due.
    pub fn step(
        &mut self,
        publisher: &mut dyn Publisher,
        ledger: &mut dyn Journal,
        now: Instant,
    ) -> Result<(), JournalError> {
        self.collect(publisher, ledger, now)?;
        if self.control.killed() && self.end.is_none() {
            self.kill_seen = Some(now);
            self.stop(End::Killed, now);
        }
        let (failed, n, ratio) = self.failed_ratio();
        if ratio > self.plan.options.max_failed_ratio && self.end.is_none() {
            self.stop(
                End::AutoStopped(if n < self.plan.options.canary {
                    format!(
                        "{failed} of {n} replayed letters failed again: {:.0}% of the {}-letter canary > {:.0}%",
                        ratio * 100.0,
                        self.plan.options.canary,
                        self.plan.options.max_failed_ratio * 100.0
                    )
                } else {
                    format!(
                        "{failed} of the last {n} replayed letters failed again ({:.0}% > {:.0}%)",
                        ratio * 100.0,
                        self.plan.options.max_failed_ratio * 100.0
                    )
                }),
                now,
            );
        }
        match self.phase {
            Phase::Canary => {
                self.send_due(publisher, ledger)?;
                let canary = self.plan.options.canary.min(self.plan.items.len());
                if self.phase == Phase::Canary
                    && (self.canary_sent >= canary || self.remaining == 0)
                    && self.in_flight.is_empty()
                {
                    self.phase = Phase::Watching;
                    self.until = Some(now + self.plan.options.watch);
                }
            }
            Phase::Watching if self.until.is_some_and(|u| now >= u) => {
                self.phase = Phase::Ramping;
                self.bucket = TokenBucket::new(self.plan.options.rate, now);
                self.until = None;
            }
            Phase::Ramping => {
                self.send_due(publisher, ledger)?;
                if self.phase == Phase::Ramping && self.remaining == 0 && self.in_flight.is_empty()
                {
                    self.phase = Phase::FinalWatch;
                    self.until = Some(now + self.plan.options.watch);
                }
            }
            Phase::FinalWatch if self.until.is_some_and(|u| now >= u) => {
                self.end = Some(End::Completed);
                self.phase = Phase::Done;
            }
            Phase::Stopping => {
                let waited = self
                    .stopping_since
                    .is_some_and(|s| now.saturating_duration_since(s) > DRAIN);
                if self.in_flight.is_empty() || waited {
                    self.phase = Phase::Done;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Step repeatedly for up to `budget`, waiting briefly for confirms or the next
    /// token in between — so a key's next letter follows its confirm within
    /// milliseconds, not at the next DLQ heartbeat. Returns early when there is
    /// nothing to send or wait for, something to settle, or the run is done.
    pub fn run_for(
        &mut self,
        publisher: &mut dyn Publisher,
        ledger: &mut dyn Journal,
        budget: Duration,
    ) -> Result<(), JournalError> {
        let start = Instant::now();
        loop {
            self.step(publisher, ledger, Instant::now())?;
            let elapsed = start.elapsed();
            let active = matches!(self.phase, Phase::Canary | Phase::Ramping | Phase::Stopping);
            if self.done()
                || self.wants_settle()
                || elapsed >= budget
                || !active
                || (self.in_flight.is_empty() && self.remaining == 0)
            {
                return Ok(());
            }
            let left = budget - elapsed;
            let wait = self
                .idle_for(Instant::now())
                .min(left)
                .max(Duration::from_millis(1));
            if self.in_flight.is_empty() {
                std::thread::sleep(wait);
                continue;
            }
            // Gather confirms for a batch window (each journal commit is an fsync), or
            // until every letter in flight is confirmed (a canary, one hot key).
            let deadline = Instant::now() + wait.max(BATCH_WINDOW).min(left);
            loop {
                let now = Instant::now();
                if now >= deadline || self.stash.len() >= self.in_flight.len() {
                    break;
                }
                let got = publisher.confirmations(deadline - now);
                self.stash.extend(got);
            }
        }
    }

    pub fn progress(&self, now: Instant) -> Progress {
        // Publishes started in the last window, as intervals between the first and the
        // last of them; none lately is a rate of 0.
        let recent: Vec<&Instant> = self
            .sends
            .iter()
            .rev()
            .take_while(|t| now.saturating_duration_since(**t) <= RATE_WINDOW)
            .collect();
        let rate = match (recent.last(), recent.first()) {
            (Some(oldest), Some(newest)) if recent.len() > 1 => {
                (recent.len() - 1) as f64 / newest.duration_since(**oldest).as_secs_f64().max(0.001)
            }
            _ => 0.0,
        };
        let target_rate = self.bucket.rate();
        let remaining = self.remaining;
        let watch_left = matches!(self.phase, Phase::Watching | Phase::FinalWatch)
            .then(|| self.until.map(|u| u.saturating_duration_since(now)))
            .flatten();
        let eta = match self.phase {
            Phase::Done | Phase::Stopping => None,
            _ => Some(
                Duration::from_secs_f64(remaining as f64 / self.plan.options.rate.max(0.001))
                    + if matches!(self.phase, Phase::FinalWatch) {
                        Duration::ZERO
                    } else {
                        self.plan.options.watch
                    }
                    + watch_left.unwrap_or_default(),
            ),
        };
        Progress {
            replay_id: self.plan.id.clone(),
            phase: self.phase,
            planned: self.plan.items.len(),
            sent: self.counts.sent,
            confirmed: self.counts.confirmed,
            failed_again: self.counts.failed_again,
            refused: self.counts.refused,
            held_back: self.counts.held_back,
            withdrawn: self.counts.withdrawn,
            in_flight: self.in_flight.len(),
            remaining,
            rate,
            target_rate,
            elapsed: now.saturating_duration_since(self.started),
            eta,
            watch_left,
            end: self.end.clone(),
            paused: self.control.paused(),
            first_send_start: self.first_send,
            last_send_start: self.last_send_start,
        }
    }

    /// The counts as journaled when the replay ends.
    pub fn outcome(&self) -> serde_json::Value {
        serde_json::json!({
            "planned": self.plan.items.len(),
            "sent": self.counts.sent,
            "confirmed": self.counts.confirmed,
            "failed_again": self.counts.failed_again,
            "refused": self.counts.refused,
            "held_back": self.counts.held_back,
            "withdrawn": self.counts.withdrawn,
            "not_sent": self.remaining,
            "in_doubt": self.in_doubt(),
            "reason": self.end.as_ref().and_then(End::reason),
        })
    }

    /// Sleep hint: how long until something is due (a token, a window's end).
    pub fn idle_for(&mut self, now: Instant) -> Duration {
        let mut d = Duration::from_millis(100);
        // Paused, tokens do not matter: nothing is due but confirms and the watch.
        if matches!(self.phase, Phase::Canary | Phase::Ramping)
            && self.remaining > 0
            && !self.control.paused()
        {
            d = d.min(self.bucket.wait(now));
        }
        if let Some(u) = self.until {
            d = d.min(u.saturating_duration_since(now));
        }
        d
    }
}
