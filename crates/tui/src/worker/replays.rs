//! The replay and the transform the worker plans, runs and records for the UI, and the
//! run's watcher that keeps the UI informed and serves requests between steps.

use super::*;

/// `:approve`'s answer: the plan (and the decision, once made) as an overlay.
pub(super) fn approval_view(
    principal: &Principal,
    id: &str,
    decide: Option<bool>,
) -> Result<(String, Vec<String>), String> {
    let a = dlq_app::team_ledger::approve(principal, id, decide.map(|yes| (yes, "")))
        .map_err(|e| e.to_string())?;
    let mut lines = vec![format!(
        "{} letters · planned by {} at {} · {}",
        a.letters, a.author, a.requested_at, a.state
    )];
    lines.extend(a.plan.lines().map(str::to_string));
    lines.push(String::new());
    lines.push(match (&a.approver, decide) {
        (Some(by), Some(_)) => format!("{} by {by}: {} may start it now", a.state, a.author),
        _ => format!(":approve {id} --yes approves it, --yes --reject refuses it"),
    });
    Ok((format!("Approval {id}"), lines))
}

/// The replay being planned on the dry-run screen, and a transform planned for recording.
#[derive(Default)]
pub(super) struct Replays {
    pub(super) pending: Option<ReplayDraft>,
    /// A transform's dry-run, held until it is recorded or dropped (its worker process
    /// and the revisions to record).
    pub(super) transform: Option<Transform>,
}

impl Replays {
    pub(super) fn plan(
        &mut self,
        session: &mut Session,
        picked: Vec<Picked>,
        opts: Options,
        resume: Option<Resuming>,
    ) -> Action {
        self.pending = None;
        let start = match resume {
            // A resume keeps its plan's choices; the pace can still be changed.
            // Letters that may have been sent stay out unless asked for
            // (`:resume ID --resend-unconfirmed`), as in the CLI.
            Some(r) => Start::Resume {
                id: r.id,
                pace: Pace::of(&opts),
                resend_unconfirmed: r.resend_unconfirmed,
            },
            None => Start::New(opts),
        };
        match ReplayDraft::picked(session, picked, start, chrono::Utc::now()) {
            Ok(d) => {
                let v = view(session, &d);
                self.pending = Some(d);
                Action::from(ReplayEvent::ReplayPlanned(v))
            }
            Err(e) => Action::from(ReplayEvent::ReplayPlanFailed(e.to_string())),
        }
    }

    /// A transform's dry-run over the picked letters, kept for `record_transform`.
    pub(super) fn plan_transform(
        &mut self,
        session: &mut Session,
        picked: Vec<dlq_app::session::Picked>,
        program: &str,
        reason: &str,
    ) -> Action {
        self.transform = None;
        let (letters, missing) = session.picked_letters(picked);
        match plan_transform(session.settings(), &letters, program, reason) {
            Ok(t) => {
                let tally = t.audited_tally().cloned().unwrap_or_default();
                let mut lines = tally.lines(70);
                if !missing.is_empty() {
                    lines.push(format!(
                        "{} could not be read and are left out",
                        dlq_core::words::letters(missing.len())
                    ));
                }
                let n = tally.changed as usize;
                self.transform = Some(t);
                Action::from(LedgerEvent::TransformPlanned(Ok((lines, n))))
            }
            Err(e) => Action::from(LedgerEvent::TransformPlanned(Err(e.to_string()))),
        }
    }

    /// Record the planned transform's revisions.
    pub(super) fn record_transform(&mut self) -> Action {
        Action::from(LedgerEvent::TransformRecorded(match self.transform.take() {
            Some(t) => t
                .record(&mut |_, _| {})
                .map(|r| {
                    format!(
                        "recorded {} (the originals stay): r, then the revisions switch, replays them",
                        dlq_core::words::count(r.revisions as u64, "revision")
                    )
                })
                .map_err(|e| format!("nothing recorded: {e}")),
            None => Err("no transform to record (it was dropped)".into()),
        }))
    }

    pub(super) fn replan(&mut self, session: &mut Session, opts: Options) -> Action {
        let Some(d) = self.pending.as_mut() else {
            return Action::from(ReplayEvent::ReplayPlanFailed(
                "no replay is being planned".into(),
            ));
        };
        d.replan(session, opts);
        Action::from(ReplayEvent::ReplayPlanned(view(session, d)))
    }

    pub(super) fn run(
        &mut self,
        session: &mut Session,
        id: &str,
        control: Control,
        events: &Sender<AppEvent>,
        requests: &Receiver<Request>,
    ) -> Action {
        let Some(d) = self.pending.take().filter(|d| d.plan().id == id) else {
            return Action::from(ReplayEvent::ReplayEnded {
                id: id.to_string(),
                state: None,
                summary: "that plan is gone (planned again?): nothing was sent".into(),
            });
        };
        if let Some(why) = d.refusal() {
            return Action::from(ReplayEvent::ReplayEnded {
                id: id.to_string(),
                state: None,
                summary: why,
            });
        }
        let mut watch = Watch {
            principal: session.principal().clone(),
            source_key: session.source_key().to_string(),
            events,
            requests,
            stash: Vec::new(),
            last: None,
            last_phase: None,
        };
        let _ = events.send(AppEvent::Action(Action::from(ReplayEvent::ReplayStarted {
            id: id.to_string(),
            planned: d.plan().items.len(),
        })));
        match d.run(session, &control, &mut watch) {
            Ok(r) => {
                let mut summary = describe::summary_line(&r.id, &r.end, &r.outcome);
                if !r.unsettled.is_empty() {
                    summary.push_str(&format!(
                        "; {} replayed letters not settled in the DLQ yet (the next browse applies them)",
                        r.unsettled.len()
                    ));
                }
                Action::from(ReplayEvent::ReplayEnded {
                    id: r.id,
                    state: Some(r.end.state()),
                    summary,
                })
            }
            Err(e) => Action::from(ReplayEvent::ReplayEnded {
                id: id.to_string(),
                state: Some(dlq_core::journal::ReplayState::Failed),
                summary: format!("replay {} failed: {e}", dlq_core::sanitize::clean(id)),
            }),
        }
    }
}

fn view(session: &Session, d: &ReplayDraft) -> crate::action::PlanView {
    let plan = d.plan();
    let mut lines = describe::plan_lines(plan, &session.info().label, d.resume().is_some(), "K");
    if let Some(first) = d.missing().first() {
        lines.push(format!(
            "  ! {} picked letters could not be read and are not in the plan (e.g. {})",
            d.missing().len(),
            dlq_core::sanitize::clean(first)
        ));
    }
    crate::action::PlanView {
        id: plan.id.clone(),
        planned: plan.items.len(),
        options: plan.options.clone(),
        lines,
        resuming: d.resume().is_some(),
        refusal: d.refusal(),
    }
}

/// The TUI's view of a running replay: progress and letter outcomes to the UI (the
/// progress at most ten times a second, and at every change of phase), arrivals as live
/// letters; requests that come meanwhile are served between steps — fetches and ledger
/// reads at once, anything that would act on the DLQ refused until the replay ends.
struct Watch<'a> {
    principal: Principal,
    source_key: String,
    events: &'a Sender<AppEvent>,
    requests: &'a Receiver<Request>,
    stash: Vec<Request>,
    last: Option<std::time::Instant>,
    last_phase: Option<dlq_core::replay::Phase>,
}

impl dlq_app::session::ReplayWatcher for Watch<'_> {
    fn progress(&mut self, p: &dlq_core::replay::Progress) {
        let due = self
            .last
            .is_none_or(|t| t.elapsed() >= std::time::Duration::from_millis(100))
            || self.last_phase != Some(p.phase)
            || p.end.is_some();
        if due {
            self.last = Some(std::time::Instant::now());
            self.last_phase = Some(p.phase);
            let _ = self
                .events
                .send(AppEvent::Action(Action::from(ReplayEvent::ReplayProgress(
                    Box::new(p.clone()),
                ))));
        }
    }

    fn letters(&mut self, changes: &[(&str, dlq_core::replay::LetterOutcome)]) {
        let _ = self
            .events
            .send(AppEvent::Action(Action::from(ReplayEvent::ReplayLetters(
                changes.iter().map(|(i, o)| (i.to_string(), *o)).collect(),
            ))));
    }

    fn arrivals(&mut self, ev: SessionEvent) {
        forward(self.events, ev, true);
    }

    fn wants_turn(&mut self) -> bool {
        while let Ok(r) = self.requests.try_recv() {
            self.stash.push(r);
        }
        !self.stash.is_empty()
    }

    fn turn(
        &mut self,
        fetch: &mut dyn FnMut(
            &Coords,
        ) -> Result<
            dlq_core::payload_cache::Kept,
            dlq_app::session::SessionError,
        >,
    ) {
        for r in std::mem::take(&mut self.stash) {
            let action = match (needs(&r), r) {
                (Needs::Ledger, r) => {
                    ledger_only(&self.principal, &self.source_key, r, self.events);
                    continue;
                }
                (Needs::Source, Request::Fetch(row, coords)) => Action::from(BrowseEvent::Fetched(
                    row,
                    fetch(&coords).map_err(|e| e.to_string()),
                )),
                (_, r) => match unavailable(&r, "a replay is running (K stops it)") {
                    Some(a) => a,
                    None => continue,
                },
            };
            let _ = self.events.send(AppEvent::Action(action));
        }
    }
}

/// A transform's dry-run over the picked letters, kept for recording.
fn plan_transform(
    settings: &Settings,
    letters: &[dlq_app::session::PlanLetter],
    program: &str,
    reason: &str,
) -> Result<Transform, dlq_app::session::SessionError> {
    let mut t = Transform::start(settings, program, reason, true, Limits::default())?;
    for (letter, _) in letters {
        t.offer(letter.clone())?;
    }
    // Audited here, before the overlay shows any of it.
    t.dry_run_shown(&format!(
        "{} picked in the TUI",
        dlq_core::words::letters(letters.len())
    ))?;
    Ok(t)
}
