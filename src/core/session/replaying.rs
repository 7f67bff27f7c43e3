//! Replay driven by the session: candidates from the letters a front end selected, the
//! plan (dry-run), and the run itself — the engine stepped as the DLQ is tailed, so a
//! replayed letter that fails again is seen on the same browse that holds the DLQ.

use super::{Session, SessionError, SessionEvent};
use crate::core::access::Permission;
use crate::core::decisions;
use crate::core::ledger::{Ledger, ReplayItemRow, ReplayRow};
use crate::core::model::DeadLetter;
use crate::core::ports::{OriginLog, Publisher};
use crate::core::replay::{plan, Candidate, Control, End, Engine, Options, Plan, Progress};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::Instant;

/// How long the engine may publish and await confirms between two looks at the DLQ
/// (the tail's heartbeat is 100 ms): a failing letter is seen within about 0.3 s.
const STEP_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);

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

/// A replay to continue: its journal row, and per letter (id, binding) its seq and
/// whether it is done (confirmed, settled or failed again — never sent twice).
pub struct Resume {
    pub row: ReplayRow,
    pub items: Vec<ReplayItemRow>,
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
            .filter(|i| matches!(i.state.as_str(), "confirmed" | "settled" | "failed-again"))
            .map(|i| (i.letter_id.clone(), i.binding.clone()))
            .collect()
    }

    /// Letters it had in doubt (`sending` when it stopped): sent again on resume.
    pub fn in_doubt(&self) -> usize {
        self.items.iter().filter(|i| i.state == "sending").count()
    }
}

impl Session {
    /// The letters as replay candidates: their exact binding, held delivery, ledger
    /// state, earlier replays and latest revision. `letters` are (letter, masked preview).
    pub fn replay_candidates(
        &self,
        letters: Vec<(DeadLetter, String)>,
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
                    revision_preview: revisions
                        .get(&id)
                        .map(|(_, p)| crate::core::catalog::preview(&self.settings.masker, p)),
                    revision: revisions.get(&id).cloned(),
                    binding,
                    preview,
                    letter,
                }
            })
            .collect())
    }

    /// A publisher (and origin reader) on this session's broker.
    pub fn replay_ports(&self) -> Result<crate::core::ports::ReplayPorts, SessionError> {
        Ok(self.src.replay_ports()?)
    }

    /// A replay journaled in the ledger, to continue.
    pub fn resume_of(&self, id: &str) -> Result<Option<Resume>, SessionError> {
        let Some(ledger) = self.settings.principal.existing_ledger()? else {
            return Ok(None);
        };
        Ok(ledger.replay(id)?.map(|(row, items)| Resume { row, items }))
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

    /// Run a plan: journal it, then canary, watch, ramp — stepping the engine as the DLQ
    /// is tailed (new letters are checked for ours failing again), settling each
    /// confirmed letter's DLQ copy after its confirm is journaled. Needs the Replay
    /// permission (checked and audited here). `progress` is called on every step.
    pub fn replay(
        &mut self,
        plan: &Plan,
        publisher: &mut dyn Publisher,
        control: &Control,
        resume: Option<&Resume>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<ReplayReport, SessionError> {
        self.settings
            .principal
            .require(Permission::Replay, &self.settings.source_key)?;
        let mut ledger = self.settings.principal.ledger()?;
        journal_start(&mut ledger, plan, resume)?;
        let mut engine = Engine::new(plan, control.clone(), Instant::now());
        let mut unsettled = Vec::new();
        let mut failure: Option<SessionError> = None;
        loop {
            let mut err = None;
            let tailed = self.pump(true, true, &mut |ev| {
                if let SessionEvent::Letters(batch) = &ev {
                    for p in batch {
                        if let Err(e) = engine.observe(&p.letter, &mut ledger) {
                            err = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                }
                if let Err(e) = engine.run_for(publisher, &mut ledger, STEP_BUDGET) {
                    err = Some(e);
                    return ControlFlow::Break(());
                }
                progress(&engine.progress(Instant::now()));
                if engine.done() || engine.wants_settle() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            if let Some(e) = err {
                // The journal cannot be written: stop sending at once.
                failure = Some(e.into());
                break;
            }
            self.settle_replayed(&mut engine, &mut ledger, &mut unsettled)?;
            if engine.done() {
                break;
            }
            if let Err(e) = tailed {
                engine.fail(
                    format!("the DLQ could not be watched for letters failing again: {e}"),
                    Instant::now(),
                );
                self.drain(
                    &mut engine,
                    publisher,
                    &mut ledger,
                    &mut unsettled,
                    progress,
                )?;
                break;
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let end = engine.end().cloned().unwrap_or(End::Completed);
        let outcome = engine.outcome();
        ledger.replay_finish(&plan.id, end.state(), &outcome)?;
        progress(&engine.progress(Instant::now()));
        // Later views of this session see the replayed letters.
        self.load_decisions()?;
        Ok(ReplayReport {
            id: plan.id.clone(),
            end,
            outcome,
            unsettled,
        })
    }

    /// Settle the DLQ copies of confirmed letters (RabbitMQ: ack the held delivery). One
    /// that cannot be settled keeps its recorded decision and is applied on the next
    /// browse — it is never replayed again.
    fn settle_replayed(
        &mut self,
        engine: &mut Engine<'_>,
        ledger: &mut Ledger,
        unsettled: &mut Vec<(String, String)>,
    ) -> Result<(), SessionError> {
        let plan_id = engine.plan_id().to_string();
        for s in engine.take_settles() {
            match self.src.settle(&s.coords) {
                Ok(_) => {
                    ledger.replay_settled(&plan_id, s.seq, &s.decision, "acked")?;
                    if let Some(b) = &s.decision.binding {
                        self.held.forget(b, &s.coords);
                    }
                    engine.settled(s.index);
                }
                Err(e) => unsettled.push((s.decision.letter_id.clone(), e.to_string())),
            }
        }
        Ok(())
    }

    /// The DLQ watch is gone: no more sends; wait for confirms in flight, journal them.
    fn drain(
        &mut self,
        engine: &mut Engine<'_>,
        publisher: &mut dyn Publisher,
        ledger: &mut Ledger,
        unsettled: &mut Vec<(String, String)>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<(), SessionError> {
        while !engine.done() {
            engine.run_for(publisher, ledger, STEP_BUDGET)?;
            self.settle_replayed(engine, ledger, unsettled)?;
            progress(&engine.progress(Instant::now()));
            std::thread::sleep(
                engine
                    .idle_for(Instant::now())
                    .max(std::time::Duration::from_millis(5)),
            );
        }
        Ok(())
    }
}

/// Journal the start (or the resumption) of a replay.
fn journal_start(
    ledger: &mut Ledger,
    plan: &Plan,
    resume: Option<&Resume>,
) -> Result<(), SessionError> {
    let rows = plan.journal_rows();
    let detail = serde_json::json!({
        "source": plan.source,
        "options": plan.options.to_json(),
        "planned": plan.items.len(),
        "excluded": plan.excluded_counts().iter().map(|(w, n)| (w.as_str().to_string(), *n)).collect::<HashMap<_, _>>(),
        "warnings": plan.warnings.iter().map(|w| serde_json::json!({"kind": w.kind, "count": w.count})).collect::<Vec<_>>(),
        "pid": std::process::id(),
    });
    match resume {
        Some(r) => {
            let known: HashSet<u32> = r.items.iter().map(|i| i.seq).collect();
            let added: Vec<_> = rows.into_iter().filter(|r| !known.contains(&r.0)).collect();
            ledger.replay_resume(&plan.id, &detail, &added)?;
        }
        None => {
            ledger.replay_start(&plan.id, &plan.source, &targets(plan), &detail, &rows)?;
        }
    }
    Ok(())
}

/// The plan's targets in one line (`kafka topic invoices` or `3 targets`).
fn targets(plan: &Plan) -> String {
    let t: std::collections::BTreeSet<&str> =
        plan.breakdown.keys().map(|(_, t)| t.as_str()).collect();
    match t.len() {
        0 => "(nothing)".into(),
        1 => t.into_iter().next().unwrap_or_default().to_string(),
        n => format!("{n} targets"),
    }
}
