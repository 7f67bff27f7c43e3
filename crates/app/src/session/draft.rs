//! A replay from selection to run, once for every front end: the broker's ports, the
//! journaled replay it resumes (checked: same source, resumable), its options (a resume
//! keeps its plan's choices, only the pace may change), its id, the candidates and the
//! plan; re-planning when the operator changes a choice; and the run. The CLI's
//! `replay` and the TUI's dry-run screen both hold one of these.

use super::{
    Found, Picked, PlanLetter, ReplayReport, ReplayWatcher, Resume, Session, SessionError,
};
use dlq_core::journal::{Claim, ItemState, JournalError};
use dlq_core::ports::{OriginLog, ReplayPorts, SourceError, Target};
use dlq_core::replay::plan::{Item, Warning, Why};
use dlq_core::replay::{self, Control, Options, Plan};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

mod in_doubt;
mod reach;

/// The pace of a replay: what may change on a resume without planning other letters.
/// `None` keeps the plan's (a stored plan on resume, the defaults otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pace {
    pub canary: Option<usize>,
    pub canary_rate: Option<f64>,
    pub rate: Option<f64>,
    pub watch: Option<Duration>,
    pub max_failed_ratio: Option<f64>,
}

impl Pace {
    /// Every pace field of `o`.
    pub fn of(o: &Options) -> Pace {
        Pace {
            canary: Some(o.canary),
            canary_rate: Some(o.canary_rate),
            rate: Some(o.rate),
            watch: Some(o.watch),
            max_failed_ratio: Some(o.max_failed_ratio),
        }
    }

    /// `base` with this pace over it.
    pub fn over(&self, base: Options) -> Options {
        Options {
            canary: self.canary.unwrap_or(base.canary),
            canary_rate: self.canary_rate.unwrap_or(base.canary_rate),
            rate: self.rate.unwrap_or(base.rate),
            watch: self.watch.unwrap_or(base.watch),
            max_failed_ratio: self.max_failed_ratio.unwrap_or(base.max_failed_ratio),
            ..base
        }
    }
}

/// What is being replayed: a new selection with its options, or the rest of a
/// journaled replay at a pace.
#[derive(Debug, Clone)]
pub enum Start {
    New(Options),
    /// A new selection that also sends the letters stopped replays had in flight where
    /// their target cannot be read back (`--resend-unconfirmed`; RabbitMQ): a consumer
    /// may see those twice. The only way to send again what an abandoned replay had in
    /// doubt there.
    NewResendingUnconfirmed(Options),
    /// Continue replay `id` at `pace`. Letters it was sending when it stopped are looked
    /// up in their target (Kafka); where that cannot be done (RabbitMQ) they are left
    /// out as `may have been sent` unless `resend_unconfirmed`.
    Resume {
        id: String,
        pace: Pace,
        resend_unconfirmed: bool,
    },
}

/// A planned replay, not yet run.
pub struct ReplayDraft {
    letters: Vec<PlanLetter>,
    missing: Vec<String>,
    plan: Plan,
    ports: ReplayPorts,
    resume: Option<Resume>,
    resend_unconfirmed: bool,
    /// Who the targets reach, read once per draft (`reach`).
    /// Who the targets reach (lines), and the targets that do not exist: read once.
    reaches: Option<(Vec<String>, Vec<String>)>,
}

impl ReplayDraft {
    /// Plan a replay of `letters` (with their masked previews). `missing` names picked
    /// letters that could not be read (they are reported, not planned).
    pub fn new(
        session: &mut Session,
        letters: Vec<PlanLetter>,
        missing: Vec<String>,
        start: Start,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<ReplayDraft, SessionError> {
        let ports = session.replay_ports()?;
        let (id, opts, resume, resend_unconfirmed) = match start {
            Start::New(opts) => (replay::new_id(now), opts, None, false),
            Start::NewResendingUnconfirmed(opts) => (replay::new_id(now), opts, None, true),
            Start::Resume {
                id,
                pace,
                resend_unconfirmed,
            } => {
                let r = resumable(session, &id)?;
                let opts = pace.over(Options::from_json(&r.row.detail["options"]));
                (r.row.id.clone(), opts, Some(r), resend_unconfirmed)
            }
        };
        if let Some(t) = &opts.to {
            if matches!(t, Target::Kafka { .. }) != ports.kafka {
                return Err(SessionError::Invalid("--to must be on the source's broker (kafka:… for Kafka, amqp:…/queue:… for RabbitMQ)".into()));
            }
            // Checked before any plan (a resume too: the list may have shrunk since).
            let allowed = &session.settings().allowed_targets;
            if !dlq_core::replay::options::target_allowed(t, allowed) {
                return Err(SessionError::Invalid(format!(
                    "refused: {} is not a place replays may go — {}; nothing was sent",
                    dlq_core::sanitize::clean(&dlq_core::replay::options::target_spec(t)),
                    if allowed.is_empty() {
                        "replays go to each letter's origin unless `[replay] allowed_targets` in the config lists others".to_string()
                    } else {
                        format!(
                            "`[replay] allowed_targets` lists {}",
                            dlq_core::sanitize::clean(&allowed.join(", "))
                        )
                    }
                )));
            }
        }
        let mut d = ReplayDraft {
            letters,
            missing,
            plan: Plan::default(),
            ports,
            resume,
            resend_unconfirmed,
            reaches: None,
        };
        d.plan = d.build(session, &opts, id);
        Ok(d)
    }

    /// The same, from what a front end picked (letters it holds, or where to fetch them).
    pub fn picked(
        session: &mut Session,
        picked: Vec<Picked>,
        start: Start,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<ReplayDraft, SessionError> {
        let (letters, missing) = session.picked_letters(picked);
        ReplayDraft::new(session, letters, missing, start, now)
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn resume(&self) -> Option<&Resume> {
        self.resume.as_ref()
    }

    /// Picked letters left out because they could not be read: why, for each.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    /// Other options: the pace (canary, rates, watch, threshold) changes no letter of
    /// the plan; any other choice (which letters, which payloads) plans again, which
    /// reads the ledger and the origin partitions.
    pub fn replan(&mut self, session: &mut Session, opts: Options) {
        let same_letters = Pace::of(&self.plan.options).over(opts.clone()) == self.plan.options;
        if same_letters {
            self.plan.options = opts;
        } else {
            let id = self.plan.id.clone();
            self.plan = self.build(session, &opts, id);
        }
    }

    /// Why this plan cannot run, as every front end says it: every letter is excluded.
    pub fn refusal(&self) -> Option<String> {
        if self.plan.items.is_empty() {
            return Some(format!(
                "nothing to replay: {} excluded (see the plan)",
                dlq_core::words::letters(self.plan.excluded.len())
            ));
        }
        let missing = &self.plan.missing_targets;
        (!missing.is_empty() && !self.plan.options.create_targets).then(|| {
            format!(
                "refused: the target {} does not exist ({}): a replay would create it where the broker auto-creates topics, with its defaults. Create it first, replay --to an existing one, or give --create-topics",
                if missing.len() == 1 { "topic" } else { "topics" },
                dlq_core::sanitize::clean(&missing.join(", "))
            )
        })
    }

    /// Run the plan (journal first; see `Session::replay`). An empty plan is refused.
    /// Letters another replay claimed since the plan was made (two replays of one group
    /// started at once) are left out, said in the plan's warnings, and the rest is sent;
    /// nothing left is `Held`.
    ///
    /// Refused, with `refusal`'s words, when the plan has nothing to send.
    pub fn run(
        mut self,
        session: &mut Session,
        control: &Control,
        watch: &mut dyn ReplayWatcher,
    ) -> Result<ReplayReport, SessionError> {
        loop {
            if let Some(why) = self.refusal() {
                return Err(SessionError::Invalid(why));
            }
            let run = session.replay(
                &self.plan,
                self.ports.publisher.as_mut(),
                control,
                self.resume.as_ref(),
                watch,
            );
            match run {
                // Refused before anything was journaled or sent.
                Err(SessionError::Ledger(JournalError::Claimed { claims, replayed })) => {
                    let first = claims.first().map(Claim::describe);
                    self.plan.exclude_taken(&claims, &replayed);
                    if self.plan.items.is_empty() {
                        return Err(SessionError::Held(match first {
                            Some(by) => format!("nothing to replay: every letter is held by another running replay — {by}"),
                            None => "nothing to replay: every letter was replayed by another process since the plan was made".into(),
                        }));
                    }
                }
                other => return other,
            }
        }
    }

    fn build(&mut self, session: &mut Session, opts: &Options, id: String) -> Plan {
        let resuming = self.resume.as_ref().map(|r| r.row.id.clone());
        let cands = match session.replay_candidates(self.letters.clone(), resuming.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                self.missing
                    .push(format!("the ledger could not be read: {e}"));
                Vec::new()
            }
        };
        let log = self.ports.origin_log.as_deref_mut().map(|l| l as _);
        let mut plan =
            session.plan_replay(cands, opts, id, log, self.ports.kafka, self.resume.as_ref());
        if self.resume.is_none() {
            self.mark_origin_ends(&mut plan);
        }
        self.mark_readers(&mut plan);
        self.settle_in_doubt(&mut plan);
        self.settle_others_in_doubt(session, &mut plan);
        plan
    }
}

/// A journaled replay of this source that can go on.
fn resumable(session: &Session, id: &str) -> Result<Resume, SessionError> {
    let clean = dlq_core::sanitize::clean;
    let Some(r) = session.resume_of(id)? else {
        return Err(SessionError::Invalid(format!(
            "no replay `{}` in the ledger (see `dlq-triage replays`)",
            clean(id)
        )));
    };
    if r.row.source != session.source_key() {
        return Err(SessionError::Invalid(format!(
            "replay {} was of {}, not of this source",
            clean(id),
            clean(&r.row.source)
        )));
    }
    if let Some(holder) = &r.row.held_by {
        return Err(SessionError::Held(format!(
            "replay {} is {}: one sender per replay; wait for it to end, or stop it (K in its TUI, Ctrl-C in its CLI)",
            clean(id),
            clean(holder)
        )));
    }
    if !r.row.state.resumable() {
        return Err(SessionError::Invalid(format!(
            "replay {} is {}: nothing to resume",
            clean(id),
            r.row.state
        )));
    }
    Ok(r)
}

/// A broker that cannot replay says so as a usage problem, not a failure.
pub fn unsupported(e: &SessionError) -> Option<&str> {
    match e {
        SessionError::Source(SourceError::Unsupported(m)) => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pace_changes_only_the_pace() {
        let base = Options {
            use_revisions: true,
            ..Options::default()
        };
        let pace = Pace {
            rate: Some(2.0),
            ..Pace::default()
        };
        let o = pace.over(base.clone());
        assert_eq!(o.rate, 2.0);
        assert!(o.use_revisions);
        assert_eq!(o.canary, base.canary);
        assert_eq!(Pace::of(&o).over(base.clone()), o);
    }
}
