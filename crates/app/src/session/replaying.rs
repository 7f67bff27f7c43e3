//! Replay driven by the session: candidates from the letters a front end selected, the
//! plan (dry-run), and the run itself — the engine stepped as the DLQ is tailed, so a
//! replayed letter that fails again is seen on the same browse that holds the DLQ.

use super::{Session, SessionError, SessionEvent};
use dlq_core::access::Permission;
use dlq_core::decisions;
use dlq_core::journal::{ItemState, Journal, JournalError, ReplayItemRow, ReplayRow, ReplayState};
use dlq_core::model::Coords;
use dlq_core::model::DeadLetter;
use dlq_core::payload_cache::Kept;
use dlq_core::ports::{OriginLog, Publisher};
use dlq_core::replay::{
    plan, Candidate, Control, End, Engine, LetterOutcome, Options, Plan, Progress,
};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

pub(in crate::session) mod run;

/// What a replay run did.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    pub id: String,
    pub end: End,
    /// The journaled counts (`replays show` has the same).
    pub outcome: serde_json::Value,
    /// Confirmed letters whose DLQ copy could not be settled yet (applied on the next
    /// browse): letter id and why.
    pub unsettled: Vec<(String, String)>,
}

/// What a front end sees of a running replay. Every call comes from the thread running
/// it, between engine steps (at least every 0.2 s), so none may block for long.
pub trait ReplayWatcher {
    /// The counts, phase and rate, after every step.
    fn progress(&mut self, p: &Progress);
    /// Letters that changed state since the last call: (letter id, outcome).
    fn letters(&mut self, _changes: &[(&str, LetterOutcome)]) {}
    /// New dead letters seen on the DLQ while watching (shown live by a TUI).
    fn arrivals(&mut self, _ev: SessionEvent) {}
    /// Whether the front end has something to do between two steps (a fetch).
    fn wants_turn(&mut self) -> bool {
        false
    }
    /// Its turn: it may fetch letters from the source (nothing else may run meanwhile).
    fn turn(&mut self, _fetch: &mut dyn FnMut(&Coords) -> Result<Kept, SessionError>) {}
    /// The run asked to suspend ([`Control::request_suspend`]) is at a safe point:
    /// nothing in flight, nothing to settle, no ledger transaction open, the suspension
    /// journaled. A CLI stops the process here (job control) and returns when continued.
    fn suspend(&mut self) {}
}

/// A closure that only wants the progress.
impl<F: FnMut(&Progress)> ReplayWatcher for F {
    fn progress(&mut self, p: &Progress) {
        self(p)
    }
}

/// A letter as a replay plan takes it: the scan's preparation (shared) and its masked
/// preview (the dry-run's sample).
pub type PlanLetter = (Arc<DeadLetter>, String);

/// A letter a front end picked for a replay: the scan's preparation of it (shared, not
/// copied, never prepared again) with its masked preview if the front end still holds
/// it, else where to fetch it.
#[derive(Debug, Clone, PartialEq)]
pub enum Picked {
    Held(Arc<DeadLetter>, String),
    At(Coords),
}

/// A replay that stopped with letters left, as announced when a source is opened.
#[derive(Debug, Clone, PartialEq)]
pub struct Unfinished {
    pub id: String,
    /// `interrupted` (its process died), `killed` or `failed`.
    pub state: ReplayState,
    pub planned: usize,
    pub confirmed: usize,
    pub in_doubt: usize,
    /// Letter ids not finished: a resume sends these.
    pub left: Vec<String>,
}

/// A replay to continue: its journal row, and per letter (id, binding) its seq and
/// whether it is done (confirmed, settled or failed again — never sent twice).
pub struct Resume {
    pub row: ReplayRow,
    pub items: Vec<ReplayItemRow>,
    /// Letters the stopped run was sending that were found in their target (Kafka):
    /// recorded as confirmed when the resume runs, never sent again.
    pub found: Vec<Found>,
}

/// A letter in flight when its replay stopped, found in its target under the replay's
/// id: the broker has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub seq: u32,
    pub letter_id: String,
    pub binding: String,
    /// Its DLQ location.
    pub location: String,
    /// Where the replayed copy landed (`topic/partition/offset`).
    pub landed: String,
}

impl Resume {
    fn seqs(&self) -> HashMap<(String, String), u32> {
        self.items
            .iter()
            .map(|i| ((i.letter_id.clone(), i.binding.clone()), i.seq))
            .collect()
    }

    fn done(&self) -> HashSet<(String, String)> {
        self.items
            .iter()
            .filter(|i| i.state.done())
            .map(|i| (i.letter_id.clone(), i.binding.clone()))
            .collect()
    }

    /// Letter ids it has not finished (not sent, or in doubt): what a resume sends.
    pub fn left(&self) -> Vec<String> {
        let done = self.done();
        self.items
            .iter()
            .filter(|i| !done.contains(&(i.letter_id.clone(), i.binding.clone())))
            .map(|i| i.letter_id.clone())
            .collect()
    }

    /// Letters it had in doubt (`sending` when it stopped): sent again on resume.
    pub fn in_doubt(&self) -> usize {
        self.items
            .iter()
            .filter(|i| i.state == ItemState::Sending)
            .count()
    }
}

impl Session {
    /// The full letters a front end picked, fetching those it no longer holds. Letters
    /// that cannot be read are left out, each with why (the plan is built without them).
    pub fn picked_letters(&mut self, picked: Vec<Picked>) -> (Vec<PlanLetter>, Vec<String>) {
        let mut letters = Vec::with_capacity(picked.len());
        let mut missing = Vec::new();
        for p in picked {
            match p {
                Picked::Held(letter, preview) => letters.push((letter, preview)),
                // Not held any more: read again, so prepared again (only these).
                Picked::At(c) => match self.src.fetch(&c) {
                    Ok(raw) => {
                        let s = &self.settings;
                        let (letter, preview) = dlq_core::catalog::prepare_with(
                            &s.masker,
                            &s.mappings,
                            s.codec.as_deref(),
                            true,
                            raw,
                        );
                        letters.push((Arc::new(letter), preview));
                    }
                    Err(e) => missing.push(format!("{c}: {e}")),
                },
            }
        }
        (letters, missing)
    }

    /// Replays of this source that stopped before sending everything and were not
    /// abandoned: the process died (`interrupted`), the kill switch, or a failure.
    /// Auto-stopped ones are not listed: the operator saw why they stopped.
    pub fn unfinished_replays(&self) -> Result<Vec<Unfinished>, SessionError> {
        let Some(ledger) = self.settings.principal.existing_ledger()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in ledger.replays()? {
            let state = crate::identity::replay_state(&row);
            if row.source != self.settings.source_key
                || !matches!(
                    state,
                    ReplayState::Interrupted | ReplayState::Killed | ReplayState::Failed
                )
            {
                continue;
            }
            let Some((_, items)) = ledger.replay(&row.id)? else {
                continue;
            };
            let confirmed = items.iter().filter(|i| i.state.delivered()).count();
            let resume = Resume {
                row,
                items,
                found: Vec::new(),
            };
            let left = resume.left();
            out.push(Unfinished {
                id: resume.row.id.clone(),
                state,
                planned: resume.items.len(),
                confirmed,
                in_doubt: resume.in_doubt(),
                left,
            });
        }
        Ok(out)
    }

    /// Close an unfinished replay without sending the rest (audited; `replays` shows
    /// it `abandoned`, and it can no longer be resumed).
    pub fn abandon_replay(&self, id: &str) -> Result<String, SessionError> {
        let principal = &self.settings.principal;
        principal.require(Permission::Replay, &self.settings.source_key)?;
        let Some(r) = self.resume_of(id)? else {
            return Err(SessionError::Invalid(format!(
                "no replay {} in the ledger",
                dlq_core::sanitize::clean(id)
            )));
        };
        if r.row.source != self.settings.source_key {
            return Err(SessionError::Invalid(format!(
                "replay {} is of another source",
                dlq_core::sanitize::clean(id)
            )));
        }
        let left = r.left().len();
        let mut outcome = r
            .row
            .detail
            .get("outcome")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        if let Some(o) = outcome.as_object_mut() {
            o.insert("abandoned_by".into(), principal.actor.clone().into());
            o.insert("not_sent".into(), left.into());
        }
        principal
            .ledger_to_write()?
            .replay_finish(id, ReplayState::Abandoned, &outcome)?;
        Ok(format!(
            "replay {} abandoned: {left} letters not sent stay in the DLQ",
            dlq_core::sanitize::clean(id)
        ))
    }

    /// The letters as replay candidates: their exact binding, held delivery, ledger
    /// state, earlier replays, latest revision, and the running replay that holds them
    /// (other than `resuming`). `letters` are (letter, masked preview).
    pub fn replay_candidates(
        &self,
        letters: Vec<PlanLetter>,
        resuming: Option<&str>,
    ) -> Result<Vec<Candidate>, SessionError> {
        let ledger = self.settings.principal.existing_ledger()?;
        let source = &self.settings.source_key;
        let counts = match &ledger {
            Some(l) => l.replay_counts(source)?,
            None => HashMap::new(),
        };
        let revisions = match &ledger {
            Some(l) => l.latest_revisions(source)?,
            None => HashMap::new(),
        };
        let claims: HashMap<(String, String), String> = match &ledger {
            Some(l) => l
                .claims(source)?
                .into_iter()
                .filter(|c| Some(c.replay_id.as_str()) != resuming)
                .map(|c| ((c.letter_id.clone(), c.binding.clone()), c.describe()))
                .collect(),
            None => HashMap::new(),
        };
        let mut copies: HashMap<String, usize> = HashMap::new();
        Ok(letters
            .into_iter()
            .map(|(letter, preview)| {
                let binding = decisions::binding(&letter.raw);
                let id = letter.id.value.0.clone();
                let n = copies.entry(binding.clone()).or_insert(0);
                let settle = self.held.nth(&binding, &id, *n);
                *n += 1;
                let state = self.letter_state(&letter).state;
                Candidate {
                    location: letter
                        .raw
                        .coords
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    settle,
                    state,
                    ledger_replays: counts.get(&id).copied().unwrap_or(0),
                    // Read as the letter is: a schema-encoded revision previews decoded.
                    // A stored revision is a program's real output: only a role that may
                    // unmask sees it (masked, as any payload); others are told where what
                    // its program computes on the masked view is shown.
                    revision_preview: revisions.get(&id).map(|r| {
                        let s = &self.settings;
                        if !s.principal.may(dlq_core::access::Permission::Unmask) {
                            return format!(
                                "revision {} — not shown to your role: `diff … {} --revision {}` shows what its program computes on the masked view",
                                r.number,
                                dlq_core::sanitize::clean(&id),
                                r.number
                            );
                        }
                        let mut raw = letter.raw.clone();
                        raw.payload.clone_from(&r.payload);
                        let codec = s.codec.as_deref();
                        dlq_core::catalog::prepare_with(&s.masker, &s.mappings, codec, true, raw).1
                    }),
                    revision: revisions.get(&id).map(|r| (r.number, r.payload.clone())),
                    held_by: claims.get(&(id.clone(), binding.clone())).cloned(),
                    binding,
                    preview,
                    letter,
                }
            })
            .collect())
    }

    /// Letters of this source in doubt in stopped replays other than `except`.
    pub fn in_doubt_elsewhere(
        &self,
        except: &str,
    ) -> Result<Vec<dlq_core::journal::InDoubt>, SessionError> {
        Ok(match self.settings.principal.existing_ledger()? {
            Some(l) => l
                .in_doubt(&self.settings.source_key)?
                .into_iter()
                .filter(|d| d.replay_id != except)
                .collect(),
            None => Vec::new(),
        })
    }

    /// A publisher (and origin reader) on this session's broker.
    pub fn replay_ports(&self) -> Result<dlq_core::ports::ReplayPorts, SessionError> {
        Ok(self.src.replay_ports()?)
    }

    /// The origin topics' reader (Kafka), for `why`'s baseline.
    pub fn origin_log(&self) -> Option<Box<dyn dlq_core::ports::OriginLog + Send>> {
        self.src.origin_log()
    }

    /// The reader of dead letters held outside the DLQ on their way to it (RabbitMQ
    /// at-least-once dead-lettering), for `summary`, the TUI header and `watch`.
    pub fn backlog(&self) -> Option<Box<dyn dlq_core::ports::Backlog>> {
        self.src.backlog()
    }

    /// A replay journaled in the ledger, to continue.
    pub fn resume_of(&self, id: &str) -> Result<Option<Resume>, SessionError> {
        let Some(ledger) = self.settings.principal.existing_ledger()? else {
            return Ok(None);
        };
        Ok(ledger.replay(id)?.map(|(row, items)| Resume {
            row,
            items,
            found: Vec::new(),
        }))
    }

    /// The plan (dry-run). With `resume`, only its letters not yet done, under its id,
    /// options and seqs.
    pub fn plan_replay(
        &self,
        cands: Vec<Candidate>,
        opts: &Options,
        id: String,
        origin_log: Option<&mut dyn OriginLog>,
        kafka_source: bool,
        resume: Option<&Resume>,
    ) -> Plan {
        let seqs = resume.map(Resume::seqs);
        let cands = match resume {
            Some(r) => {
                let (done, seqs) = (r.done(), r.seqs());
                cands
                    .into_iter()
                    .filter(|c| {
                        let k = (c.letter.id.value.0.clone(), c.binding.clone());
                        seqs.contains_key(&k) && !done.contains(&k)
                    })
                    .collect()
            }
            None => cands,
        };
        plan::build(
            cands,
            opts,
            plan::Context {
                id,
                source: self.settings.source_key.clone(),
                actor: self.settings.principal.actor.clone(),
                mappings: &self.settings.mappings,
                kafka_source,
                origin_log,
                seqs: seqs.as_ref(),
            },
        )
    }
}

/// The transform dry-runs over `source` the ledger holds: who ran each, and when (ms),
/// for `watch`'s `dry-runs > N` (read by the source's index of entries).
pub fn dry_runs(
    principal: &super::Principal,
    source: &str,
) -> Result<Vec<(String, i64)>, SessionError> {
    let Some(ledger) = principal.existing_ledger()? else {
        return Ok(Vec::new());
    };
    Ok(ledger
        .history(source)?
        .into_iter()
        .filter(|e| e.action == "transform-dry-run")
        .filter_map(|e| {
            let at = chrono::DateTime::parse_from_rfc3339(&e.at).ok()?;
            Some((e.actor, at.timestamp_millis()))
        })
        .collect())
}

/// The latest replay of `source` in `principal`'s ledger: letters sent and how many came
/// back (`watch`'s `replay failed-again` rule). None without a ledger or a replay. A free
/// function: `watch` reads it while its session is busy tailing.
pub fn latest_replay_figures(
    principal: &super::Principal,
    source: &str,
) -> Result<Option<dlq_core::watch::ReplayFigures>, SessionError> {
    let Some(ledger) = principal.existing_ledger()? else {
        return Ok(None);
    };
    let Some(row) = ledger.replays()?.into_iter().find(|r| r.source == source) else {
        return Ok(None);
    };
    let Some((_, items)) = ledger.replay(&row.id)? else {
        return Ok(None);
    };
    let count =
        |counted: fn(ItemState) -> bool| items.iter().filter(|i| counted(i.state)).count() as u64;
    Ok(Some(dlq_core::watch::ReplayFigures {
        id: row.id,
        sent: count(|s| {
            !matches!(
                s,
                ItemState::Planned | ItemState::HeldBack | ItemState::Withdrawn
            )
        }),
        failed_again: count(|s| s == ItemState::FailedAgain),
    }))
}
