//! Replay in the TUI: the dry-run screen (its choices, the count to type), the progress
//! pane's state (samples for the sparklines), letters marked with their outcome, the kill
//! switch, and unfinished replays to resume or abandon. The plan and the run are the
//! session's (`core::replay`, through the worker); this only keeps what the screen shows.

use crate::action::{Command, ReplayEvent, ReplayKey, Request, Resuming};
pub(crate) mod pane;

use crate::state::{AppState, Input, Level, Pane};
use dlq_core::access::{may_write, WriteOp};
use dlq_core::journal::ReplayState;
use dlq_core::model::TriageState;
use dlq_core::replay::{Control, LetterOutcome, Progress};
use dlq_core::sanitize::clean;
use dlq_core::store::RowId;
use pane::{change, SPARK_SAMPLES};
pub use pane::{field_value, DryRun, ReplayUi, RunView, FIELDS};

/// The replay's keys.
pub(crate) fn intent(state: &mut AppState, key: ReplayKey, cmds: &mut Vec<Command>) {
    match key {
        ReplayKey::StartReplay => start(state, cmds),
        ReplayKey::KillReplay => kill(state),
        ReplayKey::TogglePause => toggle_pause(state, cmds),
        ReplayKey::HidePane => {
            match &state.replay.run {
                Some(r) if r.ended.is_some() => {
                    state.replay.hidden = state.replay.run.take();
                    state.message = Some((
                        "replay pane closed (:replays reopens it)".into(),
                        Level::Info,
                    ));
                }
                Some(_) => state.message = Some((
                    "the replay is still running: K stops it; its pane closes once it has ended"
                        .into(),
                    Level::Warn,
                )),
                None => {}
            }
        }
        ReplayKey::ReplayField(by) => {
            if let Some(d) = state.replay.dry_run.as_mut() {
                d.field = (d.field as i64 + i64::from(by)).rem_euclid(FIELDS.len() as i64) as usize;
            }
        }
        ReplayKey::ReplayValue(by) => {
            if let Some(d) = state.replay.dry_run.as_mut() {
                change(&mut d.opts, d.field, by);
                d.plan = None;
                d.error = None;
                d.asked += 1;
                state.replay.opts = Some(d.opts.clone());
                cmds.push(Command::Session(Request::Replan(d.opts.clone())));
            }
        }
        ReplayKey::ReplayStart => confirm(state, cmds),
        ReplayKey::ReplayScroll(by) => {
            if let Some(d) = state.replay.dry_run.as_mut() {
                let lines = d.plan.as_ref().map_or(0, |p| p.lines.len()) as i64;
                d.scroll =
                    (i64::from(d.scroll) + i64::from(by) * 10).clamp(0, lines.max(1) - 1) as u16;
            }
        }
        ReplayKey::ReplayClose => {
            if state.replay.dry_run.take().is_some() {
                cmds.push(Command::Session(Request::DropPlan));
                state.message = Some(("replay cancelled: nothing was sent".into(), Level::Info));
            }
        }
    }
}

/// What the worker reports of a replay's plan and run.
pub(crate) fn event(state: &mut AppState, event: ReplayEvent, cmds: &mut Vec<Command>) {
    match event {
        ReplayEvent::ReplayPlanned(view) => {
            if let Some(d) = state.replay.dry_run.as_mut() {
                d.asked = d.asked.saturating_sub(1);
                if d.asked == 0 {
                    d.opts = view.options.clone();
                    d.plan = Some(view);
                }
            }
        }
        ReplayEvent::ReplayPlanFailed(why) => match state.replay.dry_run.as_mut() {
            Some(d) => {
                d.asked = d.asked.saturating_sub(1);
                d.error = Some(why);
            }
            None => state.message = Some((why, Level::Warn)),
        },
        ReplayEvent::ReplayStarted { id, planned } => {
            if let Some(r) = state.replay.run.as_mut().filter(|r| r.id == id) {
                r.planned = planned;
            }
        }
        ReplayEvent::ReplayProgress(p) => progress(state, *p),
        ReplayEvent::ReplayLetters(changes) => letters(state, changes),
        ReplayEvent::ReplayEnded {
            id,
            state: end,
            summary,
        } => ended(state, &id, end, summary),
        ReplayEvent::ReplaysElsewhere(lines) => state.replay.elsewhere = lines,
        ReplayEvent::Approval(Ok(overlay)) => state.prompt.open_overlay(overlay),
        ReplayEvent::Approval(Err(why)) => state.message = Some((why, Level::Error)),
        ReplayEvent::ReplaysUnfinished(u) => {
            if let Some(first) = u.first() {
                let more = if u.len() > 1 {
                    format!(" (+{} more)", u.len() - 1)
                } else {
                    String::new()
                };
                state.message = Some((
                    format!(
                        "replay {} {}: {} of {} confirmed, {} left — :resume {} or :abandon {}{more}",
                        clean(&first.id),
                        first.state,
                        first.confirmed,
                        first.planned,
                        first.left.len(),
                        clean(&first.id),
                        clean(&first.id),
                    ),
                    Level::Warn,
                ));
            }
            state.replay.unfinished = u;
        }
        ReplayEvent::ResumeLetters(r, Ok(ids)) => resume_with(state, cmds, r, ids),
        ReplayEvent::ResumeLetters(_, Err(why)) => state.message = Some((why, Level::Error)),
    }
}

/// `r`: the marked letters, else the selected group's; refused for viewers and under
/// --read-only; one replay at a time.
fn start(state: &mut AppState, cmds: &mut Vec<Command>) {
    let source = |s: &AppState| s.info.label.clone();
    if !crate::refusal::may_write(state, cmds, WriteOp::Replay, source) {
        return;
    }
    if state.replay.running() {
        state.message = Some((
            "a replay is running: one at a time (K stops it)".into(),
            Level::Warn,
        ));
        return;
    }
    let t = crate::selection::targets(state);
    let what = t.describe();
    let rows = t.rows;
    if rows.is_empty() {
        state.message = Some((
            "select a group (or mark letters with space) to replay".into(),
            Level::Warn,
        ));
        return;
    }
    open(state, cmds, rows, what, None);
}

/// Open the dry-run screen on these rows and ask the worker for the plan.
fn open(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    rows: Vec<RowId>,
    what: String,
    resume: Option<Resuming>,
) {
    let (picked, by_id, unreachable) = crate::selection::picked(state, &rows);
    let opts = state.replay.opts.clone().unwrap_or_default();
    state.replay.dry_run = Some(DryRun {
        what,
        rows: by_id,
        field: 0,
        opts: opts.clone(),
        plan: None,
        error: (unreachable > 0).then(|| {
            format!("{unreachable} letters are no longer held (payload not kept) and are left out")
        }),
        resume: resume.clone(),
        asked: 1,
        scroll: 0,
        confirm_above: state.replay.confirm_above,
    });
    state.prompt.close_overlay();
    state.prompt.close_covers();
    cmds.push(Command::Session(Request::PlanReplay {
        picked,
        opts,
        resume,
    }));
}

/// Enter on the dry-run screen: start, or ask for the count above the threshold.
fn confirm(state: &mut AppState, cmds: &mut Vec<Command>) {
    let Some(d) = state.replay.dry_run.as_ref() else {
        return;
    };
    let Some(plan) = d.plan.as_ref() else {
        state.message = Some(("still planning…".into(), Level::Info));
        return;
    };
    if let Some(why) = &plan.refusal {
        state.message = Some((why.clone(), Level::Warn));
        return;
    }
    if plan.planned > state.replay.confirm_above {
        state.message = None;
        state
            .prompt
            .ask(Input::ReplayCount(String::new(), plan.planned));
        return;
    }
    run(state, cmds);
}

/// The typed count: it must be the plan's, else nothing is sent.
pub(crate) fn submit_count(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    typed: &str,
    want: usize,
) {
    if typed.trim() == want.to_string() {
        run(state, cmds);
    } else {
        let now = crate::selection::targets(state).rows.len();
        let (said, again) = crate::selection::count_mismatch(typed, want, now, "was sent");
        state.message = Some((said, Level::Warn));
        if again {
            state.prompt.ask(Input::ReplayCount(String::new(), want));
        }
    }
}

fn run(state: &mut AppState, cmds: &mut Vec<Command>) {
    let Some(d) = state.replay.dry_run.take() else {
        return;
    };
    let Some(plan) = d.plan else { return };
    // Marks picked these letters: they are spoken for.
    for row in d.rows.values().flatten() {
        state.letters.unmark(row);
    }
    let control = Control::default();
    state.replay.hidden = None;
    state.replay.run = Some(RunView {
        id: plan.id.clone(),
        planned: plan.planned,
        progress: None,
        rate: Vec::new(),
        failed: Vec::new(),
        second: 0,
        failed_seen: 0,
        control: control.clone(),
        rows: d.rows,
        ended: None,
        killed_at: None,
    });
    state.replay.quit_armed = false;
    state.message = Some((
        format!("replay {} started: K is the kill switch", clean(&plan.id)),
        Level::Info,
    ));
    cmds.push(Command::Session(Request::RunReplay {
        id: plan.id,
        control,
    }));
}

/// `K`: no publish starts after this; confirms in flight are awaited.
fn kill(state: &mut AppState) {
    match state.replay.run.as_mut().filter(|r| r.ended.is_none()) {
        Some(r) => {
            r.control.kill();
            r.killed_at = r.progress.as_ref().map(|p| p.elapsed);
            state.message = Some((
                "kill switch: no new publishes; waiting for confirms in flight".into(),
                Level::Warn,
            ));
        }
        None => {
            state.message = Some(("no replay is running".into(), Level::Info));
        }
    }
}

/// `p`: the pause, audited like the kill switch's use is seen in the journal.
fn toggle_pause(state: &mut AppState, cmds: &mut Vec<Command>) {
    let Some(r) = state.replay.run.as_ref().filter(|r| r.ended.is_none()) else {
        state.message = Some(("no replay is running".into(), Level::Info));
        return;
    };
    let paused = r.control.toggle_pause();
    cmds.push(Command::Session(Request::Paused {
        replay: r.id.clone(),
        paused,
    }));
    state.message = Some(if paused {
        (
            "paused: nothing is sent; confirms in flight are still collected · p resumes · K kills"
                .into(),
            Level::Warn,
        )
    } else {
        ("resumed at the set rate".into(), Level::Info)
    });
}

fn progress(state: &mut AppState, p: Progress) {
    let Some(r) = state.replay.run.as_mut().filter(|r| r.id == p.replay_id) else {
        return;
    };
    let sec = p.elapsed.as_secs();
    if r.rate.is_empty() || sec > r.second {
        // One sample per second of the run; seconds with no report repeat the last rate.
        let gap = if r.rate.is_empty() { 1 } else { sec - r.second };
        for _ in 0..gap.min(SPARK_SAMPLES as u64) {
            r.rate.push(p.rate.round() as u64);
            r.failed.push(0);
        }
        r.second = sec;
        let over = r.rate.len().saturating_sub(SPARK_SAMPLES);
        r.rate.drain(..over);
        r.failed.drain(..over);
    } else if let Some(last) = r.rate.last_mut() {
        *last = p.rate.round() as u64;
    }
    if p.failed_again > r.failed_seen {
        if let Some(last) = r.failed.last_mut() {
            *last += (p.failed_again - r.failed_seen) as u64;
        }
        r.failed_seen = p.failed_again;
    }
    r.progress = Some(p);
}

/// Mark letters with their outcome (the store's state column): replaying, replayed,
/// failed again. Refused and held-back letters stay open: they are still in the DLQ.
fn letters(state: &mut AppState, changes: Vec<(String, LetterOutcome)>) {
    if state.replay.run.is_none() {
        return;
    }
    for (id, outcome) in changes {
        let Some(r) = state.replay.run.as_ref() else {
            return;
        };
        let to = match outcome {
            LetterOutcome::Sending => TriageState::Replaying,
            LetterOutcome::Confirmed => TriageState::Replayed,
            LetterOutcome::FailedAgain => TriageState::FailedAgain,
            LetterOutcome::Refused | LetterOutcome::HeldBack => TriageState::Open,
            // Decided elsewhere since the plan: the ledger's watch says what.
            LetterOutcome::Withdrawn => continue,
        };
        let rows: Vec<RowId> = r.rows.get(&id).into_iter().flatten().copied().collect();
        for row in rows {
            state.decided(row, to);
        }
    }
}

/// The run ended: replayed letters that did not come back during a completed run are
/// resolved; the summary stays in the pane until the next replay.
fn ended(state: &mut AppState, id: &str, end: Option<ReplayState>, summary: String) {
    let level = if end == Some(ReplayState::Completed) {
        Level::Info
    } else {
        Level::Warn
    };
    let Some(r) = state.replay.run.as_mut().filter(|r| r.id == id) else {
        state.message = Some((summary, level));
        return;
    };
    if end == Some(ReplayState::Completed) {
        for row in r.rows.values().flatten() {
            if state.browse.catalog.store.row(*row).map(|x| x.state) == Some(TriageState::Replayed)
            {
                state
                    .browse
                    .catalog
                    .store
                    .set_state(*row, TriageState::Resolved);
                state.handled.insert(*row);
            }
        }
    }
    r.ended = Some((end, summary.clone()));
    state.replay.quit_armed = false;
    state.message = Some((summary, level));
    state.needs(crate::state::Refresh::Index);
}

/// `:resume [ID] [--resend-unconfirmed]` / `:abandon [ID]`.
pub(crate) fn command(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    cmd: &str,
    args: &str,
) -> Result<String, String> {
    const RESEND: &str = "--resend-unconfirmed";
    let resend_unconfirmed = args.split_whitespace().any(|a| a == RESEND);
    if resend_unconfirmed && cmd != "resume" {
        return Err(format!("{RESEND} is for :resume"));
    }
    let mut ids = args.split_whitespace().filter(|a| *a != RESEND);
    let id = ids.next().unwrap_or_default();
    if let Some(extra) = ids.next().or_else(|| id.starts_with("--").then_some(id)) {
        return Err(format!("{cmd}: unexpected `{}`", clean(extra)));
    }
    may_write(state.role, state.read_only, WriteOp::Resume).map_err(|r| format!("{cmd}: {r}"))?;
    let id = if id.is_empty() {
        match state.replay.unfinished.first() {
            Some(u) => u.id.clone(),
            None => return Err("no unfinished replay of this source".into()),
        }
    } else {
        id.to_string()
    };
    if state.replay.running() {
        return Err("a replay is running: try again when it has ended".into());
    }
    match cmd {
        "resume" => {
            cmds.push(Command::Session(Request::ResumeLetters(Resuming {
                id: id.clone(),
                resend_unconfirmed,
            })));
            Ok(format!("reading replay {} from the ledger…", clean(&id)))
        }
        _ => {
            cmds.push(Command::Session(Request::AbandonReplay(id.clone())));
            state.replay.unfinished.retain(|u| u.id != id);
            Ok(format!("abandoning replay {}…", clean(&id)))
        }
    }
}

/// The ledger's list of what an unfinished replay has left: find those letters here
/// and open the dry-run screen on them, resuming under the same id.
fn resume_with(state: &mut AppState, cmds: &mut Vec<Command>, r: Resuming, ids: Vec<String>) {
    let id = r.id.clone();
    let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    let rows: Vec<RowId> = (0..state.browse.catalog.store.len() as RowId)
        .filter(|row| {
            state
                .browse
                .catalog
                .store
                .row(*row)
                .is_some_and(|r| wanted.contains(state.browse.catalog.store.id(r)))
        })
        .collect();
    if rows.is_empty() {
        state.message = Some((
            format!(
                "replay {}: none of its {} letters left are in this browse (replayed or discarded elsewhere?)",
                clean(&id),
                ids.len()
            ),
            Level::Warn,
        ));
        return;
    }
    state.focus = Pane::Groups;
    let what = format!(
        "resume {} ({} letters left{})",
        clean(&id),
        ids.len(),
        if r.resend_unconfirmed {
            ", resending those that may have been sent"
        } else {
            ""
        }
    );
    open(state, cmds, rows, what, Some(r));
}

/// `:replays`: the unfinished replays of this source, and what to do about them.
pub(crate) fn unfinished_overlay(state: &AppState) -> (String, Vec<String>) {
    let mut lines: Vec<String> = state
        .replay
        .unfinished
        .iter()
        .map(|u| {
            format!(
                "{}  {}  {} of {} confirmed, {} left{}",
                clean(&u.id),
                u.state,
                u.confirmed,
                u.planned,
                u.left.len(),
                if u.in_doubt > 0 {
                    format!(" ({} in doubt: read back on resume)", u.in_doubt)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    if !state.replay.elsewhere.is_empty() {
        lines.push("being sent elsewhere (the team's ledger):".into());
        lines.extend(
            state
                .replay
                .elsewhere
                .iter()
                .map(|l| format!("  {}", clean(l))),
        );
        lines.push(String::new());
    }
    if lines.is_empty() {
        lines.push("no unfinished replay of this source".into());
    } else {
        lines.push(String::new());
        lines.push(":resume ID continues one (dry-run first) · :abandon ID closes it".into());
        lines.push(
            "letters in doubt are looked up in the target; those that cannot be (an exchange) are left out as `may have been sent` — :resume ID --resend-unconfirmed sends them"
                .into(),
        );
    }
    ("Unfinished replays".into(), lines)
}

/// `:approve ID [--yes [--reject]]` (a team ledger): without `--yes` the plan is shown.
pub(crate) fn approve_command(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    args: &str,
) -> Result<String, String> {
    may_write(state.role, state.read_only, WriteOp::Approve).map_err(|r| r.to_string())?;
    let words: Vec<&str> = args.split_whitespace().collect();
    let id = words
        .iter()
        .find(|w| !w.starts_with("--"))
        .ok_or("approve ID (from the author's message)")?;
    if let Some(odd) = words
        .iter()
        .find(|w| w.starts_with("--") && !matches!(**w, "--yes" | "--reject"))
    {
        return Err(format!("approve: unexpected `{}`", clean(odd)));
    }
    let decide = words
        .contains(&"--yes")
        .then(|| !words.contains(&"--reject"));
    cmds.push(Command::Session(Request::Approve {
        id: id.to_string(),
        decide,
    }));
    Ok(format!("reading approval {} from the ledger…", clean(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::catalog::Catalog;
    use dlq_core::masking::{MaskConfig, Masker};
    use dlq_core::ports::SourceInfo;

    fn state() -> AppState {
        let masker = Masker::new(&MaskConfig::default(), vec![7; 32]).expect("masker");
        let info = SourceInfo {
            label: "demo".into(),
            browse_effect: String::new(),
        };
        AppState::new(info, Catalog::new(masker, Vec::new()), 0, 1 << 20)
    }

    #[test]
    fn resume_takes_the_resend_flag_and_abandon_refuses_it() {
        let mut s = state();
        let mut cmds = Vec::new();
        command(&mut s, &mut cmds, "resume", "r-1 --resend-unconfirmed").expect("resume");
        command(&mut s, &mut cmds, "resume", "r-2").expect("resume");
        let asked: Vec<Resuming> = cmds
            .into_iter()
            .filter_map(|c| match c {
                Command::Session(Request::ResumeLetters(r)) => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(
            asked,
            vec![
                Resuming {
                    id: "r-1".into(),
                    resend_unconfirmed: true
                },
                Resuming {
                    id: "r-2".into(),
                    resend_unconfirmed: false
                }
            ]
        );
        let mut cmds = Vec::new();
        for (cmd, args) in [
            ("abandon", "r-1 --resend-unconfirmed"),
            ("resume", "--resend-everything"),
            ("resume", "r-1 r-2"),
        ] {
            assert!(
                command(&mut s, &mut cmds, cmd, args).is_err(),
                "{cmd} {args}"
            );
        }
        assert!(cmds.is_empty());
    }

    #[test]
    fn approve_shows_or_decides_and_refuses_what_it_does_not_know() {
        let mut s = state();
        let mut cmds = Vec::new();
        approve_command(&mut s, &mut cmds, "r-9").expect("show");
        approve_command(&mut s, &mut cmds, "r-9 --yes").expect("approve");
        approve_command(&mut s, &mut cmds, "--yes --reject r-9").expect("reject");
        let asked: Vec<(String, Option<bool>)> = cmds
            .into_iter()
            .filter_map(|c| match c {
                Command::Session(Request::Approve { id, decide }) => Some((id, decide)),
                _ => None,
            })
            .collect();
        assert_eq!(
            asked,
            vec![
                ("r-9".to_string(), None),
                ("r-9".to_string(), Some(true)),
                ("r-9".to_string(), Some(false))
            ]
        );
        let mut cmds = Vec::new();
        assert!(approve_command(&mut s, &mut cmds, "").is_err());
        assert!(approve_command(&mut s, &mut cmds, "r-9 --force").is_err());
        s.read_only = true;
        assert!(approve_command(&mut s, &mut cmds, "r-9 --yes").is_err());
        assert!(cmds.is_empty());
    }
}
