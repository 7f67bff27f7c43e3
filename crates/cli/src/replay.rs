//! `dlq-triage replay SOURCE --filter EXPR`: the dry-run first (always), then, once
//! confirmed, the canary, the watch window and the ramp, with a live progress line.
//! Ctrl-C is the kill switch: no publish starts after it, confirms in flight are
//! awaited and journaled; a second Ctrl-C exits at once (the journal is consistent
//! after every write; `--resume ID` continues). Ctrl-Z pauses and suspends the process
//! at a safe point (nothing in flight, no ledger lock); `fg` continues it.

use super::context::{usage, Exit, Launch, Scan};
use super::ReplayArgs;
use dlq_app::session::{
    unsupported, Pace, PlanLetter, ReplayDraft, ReplayReport, Resume, SessionError, Start,
};
use dlq_core::access::WriteOp;
use dlq_core::journal::JournalError;
use dlq_core::ports::Target;

use dlq_core::replay::describe::{self, summary_line};
use dlq_core::replay::{Control, End, Options, Plan, Progress};
use dlq_core::sanitize::clean;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub fn run(ctx: &Launch, a: &ReplayArgs) -> anyhow::Result<()> {
    let write = if a.resume.is_some() {
        WriteOp::Resume
    } else {
        WriteOp::Replay
    };
    if let Err(e) = ctx.require_write(write, &a.source) {
        return refused(&e.to_string());
    }
    if let (Some(id), true) = (&a.resume, a.take_over) {
        // Before anything is read back or planned: the stale sender is ended first.
        let mut said_once = false;
        let said = dlq_app::team_ledger::take_over(&ctx.principal(), id, |holder| {
            if !said_once {
                eprintln!("waiting for the sender's heartbeat to age: {holder}");
                said_once = true;
            }
        })
        .map_err(held_or)?;
        eprintln!("{said}");
    }
    let opts = options(a)?;
    let (picked, mut loaded) = select(ctx, a)?;
    let session = &mut loaded.session;
    let start = match &a.resume {
        Some(id) => Start::Resume {
            id: id.clone(),
            pace: pace(a)?,
            resend_unconfirmed: a.resend_unconfirmed,
        },
        None if a.resend_unconfirmed => Start::NewResendingUnconfirmed(opts),
        None => Start::New(opts),
    };
    let draft = match ReplayDraft::new(session, picked, Vec::new(), start, ctx.now) {
        Ok(d) => d,
        Err(e) => return Err(usage_or(e)),
    };
    if let Some(r) = draft.resume() {
        if r.in_doubt() > 0 {
            eprintln!(
                "note: {} letters were being sent when it stopped and were never confirmed: each is looked up in its target first (see the plan: found ones are recorded, not sent again)",
                r.in_doubt()
            );
        }
    }
    let plan = draft.plan();
    let label = clean(&loaded.info.label);
    print_plan(plan, &label, a, draft.resume())?;
    if a.dry_run {
        return Ok(());
    }
    if let Some(why) = draft.refusal() {
        return refused(&why);
    }
    if !confirmed(plan, a, &label, ctx.config.replay.confirm_above)? {
        return refused("not confirmed: nothing was sent");
    }
    let id = plan.id.clone();
    let control = Control::default();
    arm_kill_switch(&control)?;
    arm_suspend(&control)?;
    arm_pause(&control, a.pause_file.clone(), ctx.principal(), &id);
    let mut watch = BarWatch {
        bar: Bar::new(plan.items.len()),
        crash_after: crash_hook(),
        started: false,
    };
    let report = draft.run(session, &control, &mut watch);
    watch.bar.finish();
    let report = match report {
        Ok(r) => r,
        Err(e @ SessionError::Refused { .. }) => return refused(&e.to_string()),
        // The ledger went away mid-run (a server lost, a disk full): nothing more was
        // sent after the write that failed; say what to do when it is back.
        Err(e @ SessionError::Ledger(JournalError::Storage { .. })) if watch.started => {
            return Err(anyhow::Error::from(e).context(format!(
                "replay {} stopped: nothing more is sent without its ledger (letters in flight stay `sending`, looked up on resume); when the ledger is back: dlq-triage replay {label} --resume {}",
                clean(&id),
                clean(&id)
            )))
        }
        Err(e) => return Err(held_or(e)),
    };
    report_end(&report, a.json)
}

/// The letters `--filter` selects (all of them with `--resume` alone), read once.
fn select(
    ctx: &Launch,
    a: &ReplayArgs,
) -> anyhow::Result<(Vec<PlanLetter>, super::context::Loaded)> {
    let mut filter = match &a.filter {
        Some(f) => {
            let filter = ctx.parse_filter(Some(f))?;
            if filter.is_empty() {
                return usage(
                    "--filter must select letters, e.g. --filter 'reason=timeout age>1h'",
                );
            }
            Some(filter.with_all_states())
        }
        None => None,
    };
    let now = ctx.now_ms();
    let mut picked: Vec<PlanLetter> = Vec::new();
    let loaded = ctx.scan_visit(&a.source, |catalog, row, letter| {
        let store = &catalog.store;
        let Some(r) = store.row(row) else {
            return Ok(());
        };
        if let Some(f) = filter.as_mut() {
            f.note_letter(r, &letter, catalog.masker());
        }
        if filter.as_mut().is_none_or(|f| f.matches(store, r, now)) {
            picked.push((letter, store.preview(r).to_string()));
        }
        Ok(())
    })?;
    if let Some(f) = &filter {
        super::context::note_unmatched(f, picked.len());
    }
    Ok((picked, loaded))
}

/// How the run ended, as a line (or JSON) and an exit code: 0 completed, 3 auto-stopped,
/// 4 killed, 1 failed.
fn report_end(report: &ReplayReport, json: bool) -> anyhow::Result<()> {
    let summary = summary_line(&report.id, &report.end, &report.outcome);
    for (id, why) in &report.unsettled {
        eprintln!(
            "warning: {} was replayed but its DLQ copy is not settled yet ({}); the next browse applies it",
            clean(id),
            clean(why)
        );
    }
    if json {
        let j = serde_json::json!({
            "replay_id": report.id,
            "state": report.end.state(),
            "reason": report.end.reason(),
            "outcome": report.outcome,
            "unsettled": report.unsettled.iter().map(|(i, w)| serde_json::json!({"letter_id": i, "why": w})).collect::<Vec<_>>(),
        });
        super::output::print_json(&j)?;
    } else {
        writeln!(std::io::stdout(), "{summary}")?;
        writeln!(
            std::io::stdout(),
            "details: dlq-triage replays show {}",
            clean(&report.id)
        )?;
    }
    let code = match &report.end {
        End::Completed => return Ok(()),
        End::AutoStopped(_) => 3,
        End::Killed => 4,
        End::Failed(_) => anyhow::bail!(summary),
    };
    Err(Exit {
        code,
        message: String::new(),
    }
    .into())
}

fn refused<T>(why: &str) -> anyhow::Result<T> {
    Err(Exit {
        code: 5,
        message: format!("error: refused: {why}"),
    }
    .into())
}

/// The options of a new replay: what the plan selects, and its pace.
fn options(a: &ReplayArgs) -> anyhow::Result<Options> {
    Ok(pace(a)?.over(Options {
        to: a.to.as_deref().map(parse_target).transpose()?,
        to_failed_queue: a.to_failed_queue,
        use_revisions: a.use_revisions,
        include_stale: a.include_stale,
        create_targets: a.create_topics,
        max_replay_count: a.max_replay_count,
        force_replay_count: a.force_replay_count,
        ..Options::default()
    }))
}

/// The pace flags the operator gave (checked); the rest keeps the plan's — so
/// `--resume ID --rate 2` continues more slowly under the stored plan.
fn pace(a: &ReplayArgs) -> anyhow::Result<Pace> {
    let positive = |v: Option<f64>, what: &str| -> anyhow::Result<Option<f64>> {
        match v {
            Some(v) if !(v.is_finite() && v > 0.0) => usage(format!(
                "{what} must be a positive number of letters per second"
            )),
            v => Ok(v),
        }
    };
    let watch = match &a.watch {
        None => None,
        Some(w) => {
            let ms = dlq_core::timefmt::parse_duration_ms(w).ok_or_else(|| {
                super::UsageError(format!("--watch `{}`: use e.g. 30s, 2m", clean(w)))
            })?;
            Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
        }
    };
    if a.max_failed_ratio
        .is_some_and(|r| !(0.0..=1.0).contains(&r))
    {
        return usage("--max-failed-ratio is a share between 0 and 1 (0.2 = 20%)");
    }
    Ok(Pace {
        canary: a.canary,
        canary_rate: positive(a.canary_rate, "--canary-rate")?,
        rate: positive(a.rate, "--rate")?,
        watch,
        max_failed_ratio: a.max_failed_ratio,
    })
}

/// A request the session found wrong (an unknown replay, another source's, a target
/// off the broker, a broker that cannot replay) is a usage problem: exit 2.
fn usage_or(e: SessionError) -> anyhow::Error {
    match (&e, unsupported(&e)) {
        (_, Some(m)) => super::UsageError(m.to_string()).into(),
        (SessionError::Invalid(m), _) => super::UsageError(m.clone()).into(),
        _ => held_or(e),
    }
}

/// A replay another live process sends (or whose every letter it holds) exits 6:
/// nothing was sent, and a script can wait and try again.
fn held_or(e: SessionError) -> anyhow::Error {
    match &e {
        SessionError::Held(_) | SessionError::Ledger(JournalError::LeaseHeld { .. }) => Exit {
            code: 6,
            message: format!(
                "error: {e}\n(a sender frozen or cut off on another bastion: `--resume ID --take-over` ends it once its heartbeat is older than {} s, on a team ledger)",
                dlq_app::team_ledger::TAKE_OVER_AFTER_S
            ),
        }
        .into(),
        SessionError::AwaitingApproval(_) => Exit {
            code: 7,
            message: format!("{e}"),
        }
        .into(),
        _ => e.into(),
    }
}

/// `kafka:TOPIC`, `amqp:EXCHANGE/ROUTING_KEY`, `queue:NAME`.
fn parse_target(s: &str) -> anyhow::Result<Target> {
    let bad = || {
        usage(format!(
            "--to `{}`: use kafka:TOPIC, amqp:EXCHANGE/ROUTING_KEY or queue:NAME",
            clean(s)
        ))
    };
    match s.split_once(':') {
        Some(("kafka", t)) if !t.is_empty() => Ok(Target::Kafka {
            topic: t.to_string(),
        }),
        Some(("amqp", rest)) => match rest.split_once('/') {
            Some((ex, rk)) => Ok(Target::Amqp {
                exchange: ex.to_string(),
                routing_key: rk.to_string(),
            }),
            None => bad(),
        },
        Some(("queue", q)) if !q.is_empty() => Ok(Target::Amqp {
            exchange: String::new(),
            routing_key: q.to_string(),
        }),
        _ => bad(),
    }
}

fn plan_json(plan: &Plan, dry_run: bool) -> serde_json::Value {
    serde_json::json!({
        "replay_id": plan.id,
        "source": plan.source,
        "dry_run": dry_run,
        "planned": plan.items.len(),
        "excluded": plan.excluded_counts().iter().map(|(w, n)| (w.as_str().to_string(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
        "by_group": plan.breakdown.iter().map(|((g, t), n)| serde_json::json!({"group": g, "target": t, "count": n})).collect::<Vec<_>>(),
        "warnings": plan.warnings.iter().map(|w| serde_json::json!({"kind": w.kind, "message": w.message, "count": w.count, "examples": w.examples})).collect::<Vec<_>>(),
        "stale_check": {"checked": plan.stale.checked, "stale": plan.stale.stale, "partial": plan.stale.partial, "unchecked": plan.stale.unchecked},
        "estimate_s": plan.estimate().as_secs(),
        "missing_targets": plan.missing_targets,
        "options": plan.options.to_json(),
        "sample": plan.sample.iter().map(|(i, g, t, p)| serde_json::json!({"letter_id": i, "group": g, "target": t, "preview": p})).collect::<Vec<_>>(),
        "letters": plan.items.iter().map(|i| serde_json::json!({"seq": i.seq, "letter_id": i.letter_id, "location": i.location, "target": i.outgoing.target.to_string(), "revision": i.revision})).collect::<Vec<_>>(),
    })
}

fn print_plan(
    plan: &Plan,
    label: &str,
    a: &ReplayArgs,
    resume: Option<&Resume>,
) -> anyhow::Result<()> {
    if a.json && a.dry_run {
        super::output::print_json(&plan_json(plan, true))?;
        return Ok(());
    }
    // The plan goes to stderr when JSON is the run's report, so stdout stays one document.
    let mut out: Box<dyn Write> = if a.json {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    for line in describe::plan_lines(plan, label, resume.is_some(), "Ctrl-C") {
        writeln!(out, "{line}")?;
    }
    if a.dry_run {
        writeln!(out, "dry run: nothing was sent")?;
    }
    Ok(())
}

fn confirmed(plan: &Plan, a: &ReplayArgs, label: &str, above: usize) -> anyhow::Result<bool> {
    let n = plan.items.len();
    let guard = crate::confirm::Guard {
        verb: "replay",
        n,
        above,
        yes: a.yes,
        expect: a.expect,
        nothing: "nothing was sent",
    };
    guard.confirmed(&format!(
        "Replay {} from {label}?",
        dlq_core::words::letters(n)
    ))
}

/// First Ctrl-C: the kill switch. Second: exit now (the journal is consistent after
/// every write; letters in flight are left `sending`, in doubt, for `--resume`).
fn arm_kill_switch(control: &Control) -> anyhow::Result<()> {
    let control = control.clone();
    let hits = std::sync::atomic::AtomicU32::new(0);
    ctrlc::set_handler(move || {
        if hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            control.kill();
            eprintln!("\nkill switch: no new publishes; waiting for confirms in flight (Ctrl-C again to exit now)");
        } else {
            eprintln!("\nexiting now: letters in flight stay `sending` in the journal (resume with --resume)");
            std::process::exit(130);
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot arm the kill switch (Ctrl-C handler): {e}"))
}

/// The pause without suspending the process (Ctrl-Z suspends it at a safe point, see
/// `arm_suspend`): `p` + Enter on a terminal toggles it, and `--pause-file` pauses while the
/// file exists. Each acts on its own changes, so either can resume what the other paused.
fn arm_pause(
    control: &Control,
    pause_file: Option<std::path::PathBuf>,
    principal: dlq_app::session::Principal,
    replay: &str,
) {
    let replay = replay.to_string();
    let say = move |paused: bool| {
        if let Err(e) = principal.audit_pause(&replay, paused) {
            eprintln!("\nwarning: the pause was not audited: {e}");
        }
        eprintln!(
            "\n{}",
            if paused {
                "paused: nothing is sent; confirms in flight are still collected (p + Enter, or remove the pause file, resumes; Ctrl-C kills)"
            } else {
                "resumed at the set rate"
            }
        );
    };
    if std::io::stdin().is_terminal() {
        let (control, say) = (control.clone(), say.clone());
        let _ = std::thread::Builder::new()
            .name("pause-key".into())
            .spawn(move || {
                for line in std::io::stdin().lines() {
                    match line {
                        Ok(l) if l.trim() == "p" => say(control.toggle_pause()),
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            });
    }
    if let Some(path) = pause_file {
        let control = control.clone();
        let _ = std::thread::Builder::new()
            .name("pause-file".into())
            .spawn(move || {
                let mut was = false;
                loop {
                    let now = path.exists();
                    if now != was {
                        control.set_paused(now);
                        say(now);
                        was = now;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            });
    }
}

/// Test hook: abort once this many letters are journaled as confirmed (a crash mid-replay).
fn crash_hook() -> Option<usize> {
    if !cfg!(feature = "test-hooks") {
        return None;
    }
    std::env::var("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// `[#####...] ramping 120/500 confirmed · …`, sanitized: a stop reason can quote a
/// letter id or a broker's error, which are untrusted.
fn bar_line(p: &Progress, planned: usize) -> String {
    let width = 24usize;
    let filled = (p.confirmed * width)
        .checked_div(planned)
        .unwrap_or(0)
        .min(width);
    format!(
        "[{}{}] {}",
        "#".repeat(filled),
        ".".repeat(width - filled),
        clean(&p.line())
    )
}

/// The CLI's view of a running replay: the progress bar (and the crash test hook).
struct BarWatch {
    bar: Bar,
    crash_after: Option<usize>,
    /// The engine reported a step: the replay was journaled and under way.
    started: bool,
}

impl dlq_app::session::ReplayWatcher for BarWatch {
    fn progress(&mut self, p: &Progress) {
        self.started = true;
        self.bar.draw(p);
        if self.crash_after.is_some_and(|n| p.confirmed >= n) {
            std::process::abort();
        }
    }

    /// Job control's stop, at the safe point the session found: the replay keeps its
    /// lease (nobody takes it over meanwhile) and holds no lock of the ledger's.
    fn suspend(&mut self) {
        eprintln!(
            "\nsuspended at a safe point: nothing in flight, no ledger lock held; the replay stays yours (`fg` continues it)"
        );
        if let Err(e) = signal_hook::low_level::raise(signal_hook::consts::SIGSTOP) {
            eprintln!("warning: could not suspend ({e}); going on");
        }
        eprintln!("continued");
    }
}

/// Ctrl-Z (SIGTSTP) pauses the run and suspends it at the next safe point, instead of
/// the default stop mid-flight (which could leave a ledger transaction open, holding the
/// team's write lock, with confirms in flight).
fn arm_suspend(control: &Control) -> anyhow::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTSTP])
        .map_err(|e| anyhow::anyhow!("cannot take Ctrl-Z (SIGTSTP): {e}"))?;
    let control = control.clone();
    std::thread::Builder::new()
        .name("suspend".into())
        .spawn(move || {
            for _ in signals.forever() {
                if !control.suspend_requested() {
                    eprintln!("\nCtrl-Z: pausing; suspending once the letters in flight are confirmed and journaled");
                }
                control.request_suspend();
            }
        })
        .map_err(|e| anyhow::anyhow!("cannot take Ctrl-Z (SIGTSTP): {e}"))?;
    Ok(())
}

/// The progress display: a redrawn bar on a terminal, a line a second otherwise.
struct Bar {
    tty: bool,
    last: Option<Instant>,
    drawn: bool,
    ended: bool,
    planned: usize,
}

impl Bar {
    fn new(planned: usize) -> Self {
        Bar {
            tty: std::io::stderr().is_terminal(),
            last: None,
            drawn: false,
            ended: false,
            planned,
        }
    }

    fn draw(&mut self, p: &Progress) {
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(1)
        };
        if self.ended {
            return;
        }
        let due = self.last.is_none_or(|t| t.elapsed() >= every) || p.end.is_some();
        if !due {
            return;
        }
        self.ended = p.end.is_some() && p.phase == dlq_core::replay::Phase::Done;
        self.last = Some(Instant::now());
        let mut err = std::io::stderr().lock();
        if self.tty {
            // Cut to the terminal's width: a line that wraps is not redrawn in place, and
            // an 80-column terminal filled with one line per tick.
            let cols = crossterm::terminal::size().map_or(80, |(c, _)| usize::from(c));
            let line =
                dlq_core::sanitize::fit(&bar_line(p, self.planned), cols.saturating_sub(1).max(20));
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{}", clean(&p.line()));
        }
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::replay::Phase;

    #[test]
    fn the_progress_bar_fills_and_never_prints_a_letters_escape_sequences() {
        let p = Progress {
            replay_id: "r-1".into(),
            phase: Phase::Done,
            planned: 10,
            sent: 5,
            confirmed: 5,
            failed_again: 0,
            refused: 1,
            held_back: 0,
            withdrawn: 0,
            in_flight: 0,
            remaining: 5,
            rate: 1.0,
            target_rate: 1.0,
            elapsed: Duration::from_secs(5),
            eta: None,
            watch_left: None,
            end: Some(End::AutoStopped(
                "the broker did not take \x1b]0;pwned\x07m-\x1b[31m1: unroutable".into(),
            )),
            paused: false,
            first_send_start: None,
            last_send_start: None,
        };
        let line = bar_line(&p, 10);
        assert!(
            line.starts_with("[############............] done"),
            "{line}"
        );
        assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
        assert!(line.contains("unroutable"));
    }
}
