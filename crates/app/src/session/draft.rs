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
        self.plan.items.is_empty().then(|| {
            format!(
                "nothing to replay: {} excluded (see the plan)",
                dlq_core::words::letters(self.plan.excluded.len())
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
        self.settle_in_doubt(&mut plan);
        self.settle_others_in_doubt(session, &mut plan);
        plan
    }

    /// Letters another, stopped replay had in flight (killed, lost, abandoned): sent only
    /// once their target is read back for that replay's id and they are not there — one
    /// found there is left out (the broker has it; `--resume` of that replay records it).
    /// Where the target cannot be read back (RabbitMQ, a failed read) they are left out
    /// as `may have been sent` unless `--resend-unconfirmed`. Without this a new replay
    /// of the same filter would send again whatever the dead one had in flight. What it
    /// sends of them is `plan.read_back`, which the journal's start checks.
    fn settle_others_in_doubt(&mut self, session: &Session, plan: &mut Plan) {
        plan.read_back.clear();
        let doubts = match session.in_doubt_elsewhere(&plan.id) {
            Ok(d) => d,
            Err(e) => {
                // Unknown is not "none": leave out every letter rather than guess.
                let why = format!(
                    "the ledger's letters in doubt could not be read ({e}): nothing is sent"
                );
                leave_out_all(plan, "in-doubt-unread", why);
                return;
            }
        };
        type Doubts<'a> = HashMap<(String, String), Vec<&'a dlq_core::journal::InDoubt>>;
        let mut by_letter: Doubts<'_> = HashMap::new();
        for d in &doubts {
            by_letter
                .entry((d.letter_id.clone(), d.binding.clone()))
                .or_default()
                .push(d);
        }
        fn of<'a>(m: &'a Doubts<'a>, i: &Item) -> Option<&'a Vec<&'a dlq_core::journal::InDoubt>> {
            m.get(&(i.letter_id.clone(), i.binding.clone()))
        }
        let ours = |i: &Item| of(&by_letter, i);
        // The stopped replays this plan meets, each with its journaled detail.
        let replays: BTreeMap<&str, &serde_json::Value> = plan
            .items
            .iter()
            .filter_map(ours)
            .flatten()
            .map(|d| (d.replay_id.as_str(), &d.detail))
            .collect();
        if replays.is_empty() {
            return;
        }
        let in_doubt =
            |i: &Item, r: &str| ours(i).is_some_and(|ds| ds.iter().any(|d| d.replay_id == r));
        let (landed, unread) = self.landed(plan, &replays, &in_doubt);
        let (mut found, mut may, mut resent) = (Vec::new(), Vec::new(), Vec::new());
        let mut read_back = Vec::new();
        plan.items.retain(|i| {
            let Some(ds) = ours(i) else {
                return true;
            };
            if landed.contains_key(&i.location) {
                found.push(i.letter_id.clone());
                return false;
            }
            if unread.is_some() && !self.resend_unconfirmed {
                may.push(i.letter_id.clone());
                return false;
            }
            if unread.is_some() {
                resent.push(i.letter_id.clone());
            }
            read_back.extend(ds.iter().map(|d| (d.replay_id.clone(), d.seq)));
            true
        });
        plan.read_back = read_back;
        let named: Vec<&str> = replays.keys().copied().collect();
        say_in_doubt(
            plan,
            &format!("in stopped replay {}", named.join(", ")),
            found,
            "not sent again (its --resume records them)",
            may,
            unread,
            self.resend_unconfirmed.then_some(resent),
        );
    }

    /// Where the letters in doubt of each stopped replay landed, reading its target back
    /// for its id (Kafka, each replay fenced first), and why not all could be read.
    fn landed(
        &mut self,
        plan: &Plan,
        replays: &BTreeMap<&str, &serde_json::Value>,
        in_doubt: &dyn Fn(&Item, &str) -> bool,
    ) -> (HashMap<String, String>, Option<String>) {
        let Some(log) = self
            .ports
            .origin_log
            .as_deref_mut()
            .filter(|_| self.ports.kafka)
        else {
            return (
                HashMap::new(),
                Some("the target cannot be read back".to_string()),
            );
        };
        let (mut landed, mut unread) = (HashMap::new(), None);
        for (r, detail) in replays {
            if let Err(e) = self.ports.publisher.fence(r) {
                unread = Some(unfenced(r, &e));
                continue;
            }
            let (found, why) = read_back(log, plan, detail, r, &|i: &Item| in_doubt(i, r));
            landed.extend(found);
            unread = why.or(unread);
        }
        (landed, unread)
    }

    /// Where each Kafka target's partitions end now, journaled with the plan: a resume
    /// reads a stopped run's copies back from there. A target whose ends cannot be read
    /// is read back from its beginning (slower, never wrong).
    fn mark_origin_ends(&mut self, plan: &mut Plan) {
        let Some(log) = self
            .ports
            .origin_log
            .as_deref_mut()
            .filter(|_| self.ports.kafka)
        else {
            return;
        };
        let topics: BTreeSet<String> = plan
            .items
            .iter()
            .filter_map(|i| match &i.outgoing.target {
                Target::Kafka { topic } => Some(topic.clone()),
                Target::Amqp { .. } => None,
            })
            .collect();
        for t in topics {
            match log.ends(&t) {
                Ok(ends) => {
                    plan.origin_from.insert(t, ends);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "origin ends not read; a resume reads it whole")
                }
            }
        }
    }

    /// Letters the stopped run was `sending` (never confirmed) are checked, not guessed:
    /// on Kafka each is looked up in its target topic, read from the replay's start for
    /// this replay's id; a found one is left out of the plan (recorded as confirmed when
    /// the resume runs), one not found is sent. Where the target cannot be read back (a
    /// RabbitMQ exchange, or a read that failed) they are left out as `may have been
    /// sent` unless `--resend-unconfirmed`.
    fn settle_in_doubt(&mut self, plan: &mut Plan) {
        let Some(resume) = self.resume.as_mut() else {
            return;
        };
        resume.found.clear();
        let doubt: HashSet<(&str, &str)> = resume
            .items
            .iter()
            .filter(|i| i.state == ItemState::Sending)
            .map(|i| (i.letter_id.as_str(), i.binding.as_str()))
            .collect();
        let in_doubt = |i: &Item| doubt.contains(&(i.letter_id.as_str(), i.binding.as_str()));
        if !plan.items.iter().any(in_doubt) {
            return;
        }
        let (landed, unread) = match self.ports.origin_log.as_deref_mut() {
            // Fenced first: what the stopped holder still had open is aborted, and it
            // cannot commit after the read.
            Some(log) if self.ports.kafka => match self.ports.publisher.fence(&plan.id) {
                Ok(()) => read_back(log, plan, &resume.row.detail, &plan.id, &in_doubt),
                Err(e) => (HashMap::new(), Some(unfenced(&plan.id, &e))),
            },
            _ => (
                HashMap::new(),
                Some("the target cannot be read back".to_string()),
            ),
        };
        let (mut found, mut may) = (Vec::new(), Vec::new());
        plan.items.retain(|i| {
            if !in_doubt(i) {
                return true;
            }
            if let Some(at) = landed.get(&i.location) {
                found.push(Found {
                    seq: i.seq,
                    letter_id: i.letter_id.clone(),
                    binding: i.binding.clone(),
                    location: i.location.clone(),
                    landed: at.clone(),
                });
                return false;
            }
            // Read to the end and not there: never sent. Unreadable: sent only if asked.
            if unread.is_none() || self.resend_unconfirmed {
                return true;
            }
            may.push(i.letter_id.clone());
            false
        });
        let resent: Vec<String> = plan
            .items
            .iter()
            .filter(|i| in_doubt(i))
            .map(|i| i.letter_id.clone())
            .collect();
        say_in_doubt(
            plan,
            "when the replay stopped",
            found.iter().map(|f| f.letter_id.clone()).collect(),
            "recorded as confirmed, not sent again",
            may,
            unread,
            self.resend_unconfirmed.then_some(resent),
        );
        resume.found = found;
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
            "replay {} is being sent by {} (as {}): one sender per replay; wait for it to end, or stop it (K in its TUI, Ctrl-C in its CLI)",
            clean(id),
            clean(holder),
            clean(&r.row.actor)
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

/// Why a stopped replay's target was not read back: its producer could not be fenced,
/// so what it had open might still be committed after the read.
fn unfenced(replay_id: &str, e: &dlq_core::ports::SourceError) -> String {
    format!(
        "replay {}'s producer could not be fenced before the read ({e})",
        dlq_core::sanitize::clean(replay_id)
    )
}

/// A broker that cannot replay says so as a usage problem, not a failure.
pub fn unsupported(e: &SessionError) -> Option<&str> {
    match e {
        SessionError::Source(SourceError::Unsupported(m)) => Some(m),
        _ => None,
    }
}

/// What became of the letters a replay had in flight `whose` (`when the replay stopped`,
/// `in stopped replay …`), in the plan: found in the target (`found_note` says what of
/// them), left out as `may-have-been-sent`, or sent again as asked (`resent`, with
/// `--resend-unconfirmed`, where the target could not be read: `unread`).
fn say_in_doubt(
    plan: &mut Plan,
    whose: &str,
    found: Vec<String>,
    found_note: &str,
    may: Vec<String>,
    unread: Option<String>,
    resent: Option<Vec<String>>,
) {
    let note = |kind, message: String, ids: Vec<String>| Warning {
        kind,
        message,
        count: ids.len(),
        examples: ids.into_iter().take(3).collect(),
    };
    plan.excluded
        .extend(found.iter().map(|id| (id.clone(), Why::FoundInTarget)));
    plan.excluded
        .extend(may.iter().map(|id| (id.clone(), Why::MayHaveBeenSent)));
    if !found.is_empty() {
        plan.warnings.push(note(
            "found-in-target",
            format!("in flight {whose} and found in the target: {found_note}"),
            found,
        ));
    }
    match (unread, resent) {
        (Some(why), _) if !may.is_empty() => plan.warnings.push(note(
            "may-have-been-sent",
            format!("in flight {whose} and may have been sent ({why}): left out; --resend-unconfirmed sends them again"),
            may,
        )),
        (Some(why), Some(ids)) if !ids.is_empty() => plan.warnings.push(note(
            "resend-unconfirmed",
            format!("in flight {whose}, sent again as asked (--resend-unconfirmed; {why}): a consumer may see them twice"),
            ids,
        )),
        _ => {}
    }
}

/// Where a journaled replay's target `topic` ended, partition by partition, when it was
/// planned (its detail's `origin_from`).
fn origin_from(detail: &serde_json::Value, topic: &str) -> HashMap<i32, i64> {
    detail["origin_from"][topic]
        .as_object()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|(p, o)| Some((p.parse().ok()?, o.as_i64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Leave every letter of the plan out, saying why (`kind`), with a few of their ids.
fn leave_out_all(plan: &mut Plan, kind: &'static str, message: String) {
    plan.warnings.push(Warning {
        kind,
        message,
        count: plan.items.len(),
        examples: plan
            .items
            .iter()
            .take(3)
            .map(|i| i.letter_id.clone())
            .collect(),
    });
    plan.items.clear();
}

/// Replayed copies of the in-doubt items (of replay `replay_id`, journaled with
/// `detail`) in their Kafka targets, by DLQ location, read from where the targets ended
/// when that replay was planned; and why not, if a target could not be read.
fn read_back(
    log: &mut dyn OriginLog,
    plan: &Plan,
    detail: &serde_json::Value,
    replay_id: &str,
    in_doubt: &dyn Fn(&Item) -> bool,
) -> (HashMap<String, String>, Option<String>) {
    let topics: BTreeSet<&str> = plan
        .items
        .iter()
        .filter(|i| in_doubt(i))
        .filter_map(|i| match &i.outgoing.target {
            Target::Kafka { topic } => Some(topic.as_str()),
            Target::Amqp { .. } => None,
        })
        .collect();
    let mut landed = HashMap::new();
    let mut unread = None;
    for t in topics {
        match log.replayed(t, &origin_from(detail, t), replay_id) {
            Ok(found) => landed.extend(found),
            Err(e) => {
                unread = Some(format!(
                    "reading `{}` back failed: {e}",
                    dlq_core::sanitize::clean(t)
                ))
            }
        }
    }
    (landed, unread)
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
