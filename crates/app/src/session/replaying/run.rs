//! A replay run: the plan journaled and fenced, the engine stepped as the DLQ is tailed
//! (a replayed letter that fails again is seen on the same browse), the lease renewed
//! before anything is sent, confirmed letters settled once journaled.

use super::*;

/// How long the engine may publish and await confirms between two looks at the DLQ
/// (the tail's heartbeat is 100 ms): a failing letter is seen within about 0.3 s.
const STEP_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);

impl Session {
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
        watch: &mut dyn ReplayWatcher,
    ) -> Result<ReplayReport, SessionError> {
        let mut ledger = self.begin_replay(plan, publisher, resume)?;
        let mut engine = Engine::new(plan, control.clone(), Instant::now());
        let mut beat = Heartbeat::new();
        let mut unsettled = Vec::new();
        let mut failure: Option<SessionError> = None;
        loop {
            let mut err = None;
            let tailed = self.pump(true, true, &mut |ev| {
                let step = Step {
                    plan,
                    engine: &mut engine,
                    ledger: &mut *ledger,
                    beat: &mut beat,
                    publisher: &mut *publisher,
                    watch: &mut *watch,
                    control,
                };
                match step.take(ev) {
                    Ok(flow) => flow,
                    Err(e) => {
                        err = Some(e);
                        ControlFlow::Break(())
                    }
                }
            });
            if let Some(e) = err {
                // The journal cannot be written: stop sending at once.
                failure = Some(e.into());
                break;
            }
            self.settle_replayed(&mut engine, &mut *ledger, &mut unsettled)?;
            suspend_at_safe_point(&engine, control, &mut *ledger, watch)?;
            let (src, settings) = (&mut self.src, &self.settings);
            watch.turn(&mut |c| super::super::fetch_prepared(src.as_mut(), settings, c));
            if engine.done() {
                break;
            }
            if let Err(e) = tailed {
                engine.fail(
                    format!("the DLQ could not be watched for letters failing again: {e}"),
                    Instant::now(),
                );
                self.drain(&mut engine, publisher, &mut *ledger, &mut unsettled, watch)?;
                break;
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        let end = engine.end().cloned().unwrap_or(End::Completed);
        let mut outcome = engine.outcome();
        if resume.is_some() {
            whole_run(&*ledger, &plan.id, &mut outcome)?;
        }
        ledger.replay_finish(&plan.id, end.state(), &outcome)?;
        report_step(&mut engine, watch);
        // Later views of this session see the replayed letters.
        self.load_decisions()?;
        Ok(ReplayReport {
            id: plan.id.clone(),
            end,
            outcome,
            unsettled,
        })
    }

    /// Before a replay sends anything: the Replay permission (checked and audited), the
    /// approval gate for a new plan, the plan journaled, the broker's fence taken (Kafka's
    /// producer epoch: a holder frozen past its lease is fenced here if the plan's
    /// read-back did not already), and on a resume what was found on the target.
    pub(super) fn begin_replay(
        &mut self,
        plan: &Plan,
        publisher: &mut dyn Publisher,
        resume: Option<&Resume>,
    ) -> Result<Box<dyn Journal>, SessionError> {
        self.settings
            .principal
            .require(Permission::Replay, &self.settings.source_key)?;
        let mut ledger = self.settings.principal.ledger_to_write()?;
        if resume.is_none() {
            self.approval_gate(&mut *ledger, plan)?;
        }
        journal_start(&mut *ledger, plan, resume)?;
        if let Err(e) = publisher.claim(&plan.id) {
            let said = format!("the replay's producer could not be taken: {e}; nothing was sent");
            let _ = ledger.replay_finish(
                &plan.id,
                dlq_core::journal::ReplayState::AutoStopped,
                &serde_json::json!({"stopped": said}),
            );
            return Err(SessionError::Source(e));
        }
        if let Some(r) = resume {
            record_found(&mut *ledger, plan, r)?;
        }
        Ok(ledger)
    }

    /// Settle the DLQ copies of confirmed letters (RabbitMQ: ack the held delivery). One
    /// that cannot be settled keeps its recorded decision and is applied on the next
    /// browse — it is never replayed again.
    pub(super) fn settle_replayed(
        &mut self,
        engine: &mut Engine<'_>,
        ledger: &mut dyn Journal,
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
    pub(super) fn drain(
        &mut self,
        engine: &mut Engine<'_>,
        publisher: &mut dyn Publisher,
        ledger: &mut dyn Journal,
        unsettled: &mut Vec<(String, String)>,
        watch: &mut dyn ReplayWatcher,
    ) -> Result<(), SessionError> {
        let mut beat = Heartbeat::new();
        let id = engine.plan_id().to_string();
        while !engine.done() {
            beat.renew(ledger, &id)?;
            engine.run_for(publisher, ledger, STEP_BUDGET)?;
            self.settle_replayed(engine, ledger, unsettled)?;
            report_step(engine, watch);
            std::thread::sleep(
                engine
                    .idle_for(Instant::now())
                    .max(std::time::Duration::from_millis(5)),
            );
        }
        Ok(())
    }
}

/// Ctrl-Z as a pause, not a freeze: once a suspend was asked for and the run is at a
/// safe point (nothing in flight, nothing to settle, between ledger transactions), the
/// suspension is journaled (`replay-suspend`), the front end stops the process, and on
/// `fg` the run goes on (`replay-continue`). The replay stays this process's meanwhile:
/// no lock of the ledger's is held, so the team's other writes go on.
fn suspend_at_safe_point(
    engine: &Engine<'_>,
    control: &Control,
    ledger: &mut dyn Journal,
    watch: &mut dyn ReplayWatcher,
) -> Result<(), SessionError> {
    let now = Instant::now();
    if !control.suspend_requested() || engine.wants_settle() || engine.progress(now).in_flight > 0 {
        return Ok(());
    }
    let id = engine.plan_id();
    let detail = |what: &str| serde_json::json!({ "replay": id, "by": what }).to_string();
    ledger.audit("replay-suspend", id, &detail("SIGTSTP (Ctrl-Z)"))?;
    watch.suspend();
    control.continued();
    ledger.audit("replay-continue", id, &detail("SIGCONT (fg)"))?;
    Ok(())
}

/// One turn of a replay as the DLQ is tailed: what it needs, borrowed.
struct Step<'a, 'p> {
    plan: &'p Plan,
    engine: &'a mut Engine<'p>,
    ledger: &'a mut dyn Journal,
    beat: &'a mut Heartbeat,
    publisher: &'a mut dyn Publisher,
    watch: &'a mut dyn ReplayWatcher,
    control: &'a Control,
}

impl Step<'_, '_> {
    /// New letters are checked for ours failing again; the lease is renewed before
    /// anything is sent (a process taken for dead must not send another letter); the
    /// engine runs for a step. Break when the run is over or something else must happen
    /// (settling, the front end's turn, a suspend).
    fn take(self, ev: SessionEvent) -> Result<ControlFlow<()>, JournalError> {
        if let SessionEvent::Letters(batch) = &ev {
            for p in batch {
                self.engine.observe(&p.letter, self.ledger)?;
            }
        }
        self.watch.arrivals(ev);
        self.beat.renew(self.ledger, &self.plan.id)?;
        self.engine
            .run_for(self.publisher, self.ledger, STEP_BUDGET)?;
        report_step(self.engine, self.watch);
        let pause = self.engine.done()
            || self.engine.wants_settle()
            || self.watch.wants_turn()
            || self.control.suspend_requested();
        Ok(if pause {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}

/// Renews a running replay's lease every `LEASE_HEARTBEAT`.
struct Heartbeat {
    last: Instant,
}

impl Heartbeat {
    fn new() -> Self {
        Heartbeat {
            last: Instant::now(),
        }
    }

    fn renew(&mut self, ledger: &mut dyn Journal, id: &str) -> Result<(), JournalError> {
        if self.last.elapsed() >= dlq_core::journal::LEASE_HEARTBEAT {
            ledger.replay_heartbeat(id)?;
            self.last = Instant::now();
        }
        Ok(())
    }
}

/// Tell the watcher what changed and where the run stands.
fn report_step(engine: &mut Engine<'_>, watch: &mut dyn ReplayWatcher) {
    let changes = engine.take_changes();
    if !changes.is_empty() {
        watch.letters(&changes);
    }
    watch.progress(&engine.progress(Instant::now()));
}

/// A resumed replay's outcome counts the whole replay, as its journal has it — letters
/// confirmed before the resume included — with this run's own figures under `this_run`:
/// `replays` would otherwise show only the resumed part as confirmed.
fn whole_run(
    ledger: &dyn Journal,
    id: &str,
    outcome: &mut serde_json::Value,
) -> Result<(), SessionError> {
    let Some((_, items)) = ledger.replay(id)? else {
        return Ok(());
    };
    let count = |f: fn(ItemState) -> bool| items.iter().filter(|i| f(i.state)).count();
    let this_run = outcome.clone();
    if let Some(o) = outcome.as_object_mut() {
        o.insert("planned".into(), items.len().into());
        o.insert("confirmed".into(), count(ItemState::delivered).into());
        o.insert(
            "failed_again".into(),
            count(|s| s == ItemState::FailedAgain).into(),
        );
        o.insert("refused".into(), count(|s| s == ItemState::Refused).into());
        o.insert(
            "held_back".into(),
            count(|s| s == ItemState::HeldBack).into(),
        );
        o.insert(
            "withdrawn".into(),
            count(|s| s == ItemState::Withdrawn).into(),
        );
        o.insert("this_run".into(), this_run);
    }
    Ok(())
}

/// Journal the start (or the resumption) of a replay.
fn journal_start(
    ledger: &mut dyn Journal,
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
        "read_back": plan.read_back,
        "origin_from": plan.origin_from.iter().map(|(t, parts)| {
            let parts: HashMap<String, i64> = parts.iter().map(|(p, o)| (p.to_string(), *o)).collect();
            (t.clone(), parts)
        }).collect::<HashMap<_, _>>(),
    });
    // Test hook (`planned:0`): stopped with its plan made, before it is journaled — where
    // another engineer's decision can come between (a no-op outside test builds).
    dlq_ledger::freeze::count_reached("planned", 0);
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

/// Letters a resume found already in their target: confirmed in the journal (a `replay`
/// decision each, applied at once: nothing to settle on Kafka), after the lease is taken.
fn record_found(
    ledger: &mut dyn Journal,
    plan: &Plan,
    resume: &Resume,
) -> Result<(), SessionError> {
    if resume.found.is_empty() {
        return Ok(());
    }
    let letters: Vec<dlq_core::journal::ConfirmedLetter<'_>> = resume
        .found
        .iter()
        .map(|f| dlq_core::journal::ConfirmedLetter {
            seq: f.seq,
            letter_id: &f.letter_id,
            binding: &f.binding,
            location: &f.location,
            published: Some(&f.landed),
            ledger_only: true,
        })
        .collect();
    ledger.replay_confirmed(&plan.id, &plan.source, &letters)?;
    Ok(())
}

/// The plan's targets in one line (`kafka topic invoices` or `3 targets`).
pub(in crate::session) fn targets(plan: &Plan) -> String {
    let t: std::collections::BTreeSet<&str> =
        plan.breakdown.keys().map(|(_, t)| t.as_str()).collect();
    match t.len() {
        0 => "(nothing)".into(),
        1 => t.into_iter().next().unwrap_or_default().to_string(),
        n => format!("{n} targets"),
    }
}
