//! What the worker reports (the browse, the ledger) and what a new browse resets.

use super::*;

/// What the worker reports of the source, and the render thread's views.
pub(crate) fn scan_event(state: &mut AppState, action: BrowseEvent) {
    match action {
        BrowseEvent::BrowseLost(why) => {
            state.message = Some((
                format!(
                    "{why} — nothing is lost: what this browse held is back in the queue; R browses again"
                ),
                Level::Error,
            ));
            state.scan.lost = Some(why);
        }
        BrowseEvent::Rebrowsing => reset_browse(state),
        BrowseEvent::SourceOpened(info) => state.info = info,
        BrowseEvent::Rendered(row, unmasked, view) => state.detail.rendered(row, unmasked, view),
        BrowseEvent::Partial(c) => state.scan.partial.push(c),
        BrowseEvent::Problem(p) => {
            state.scan.problem_count += 1;
            if state.scan.problems.len() < 100 {
                state.scan.problems.push(p);
            }
        }
        BrowseEvent::Letters(batch) => ingest(state, batch, false),
        BrowseEvent::Live(batch) => ingest(state, batch, true),
        BrowseEvent::Progress { done, total } => {
            state.scan.done = state.scan.done.max(done);
            state.scan.total = total;
            if let Some(t) = total {
                state.browse.catalog.store.reserve(t);
            }
        }
        BrowseEvent::Retention(rules) => retention(state, rules),
        BrowseEvent::Awaiting(read) => awaiting(state, read),
        BrowseEvent::ScanDone => scan_done(state),
        BrowseEvent::ScanFailed(e) if !state.scan.read_any() => {
            // Could not even open it (a wrong password, a broker down): the whole error,
            // what to check, and how to get out — never a cut line and `(loading…)`.
            state.prompt.open_overlay(open_failure(&e));
            state.message = Some((
                "the source could not be opened: R tries again, q quits".into(),
                Level::Error,
            ));
            state.scan.error = Some(e);
        }
        BrowseEvent::ScanFailed(e) => {
            state.scan.error = Some(e.clone());
            state.message = Some((e, Level::Error));
        }
        BrowseEvent::Copied(result) => {
            state.message = Some(match result {
                Ok(said) => (said, Level::Info),
                Err(why) => (why, Level::Error),
            })
        }
        BrowseEvent::Fetched(row, result) => {
            state.detail.fetched(row);
            match result {
                Ok(letter) => state.cache.put(row, letter),
                Err(e) => {
                    state.message = Some((format!("could not fetch the letter: {e}"), Level::Error))
                }
            }
        }
    }
}

/// The source's retention: groups learn when the broker empties them; what is not known
/// is said in `:notes`.
fn retention(state: &mut AppState, rules: Vec<(String, dlq_core::retention::Retention)>) {
    for (c, why) in state.browse.set_retention(rules) {
        state.notes.push(format!(
            "{}: retention unknown — {}",
            dlq_core::sanitize::clean(&c),
            dlq_core::sanitize::line(&why, 200)
        ));
    }
    state.needs(Refresh::Tree);
}

/// Dead letters held upstream: the title counts them; each time there are more, the
/// status line says so and `:notes` says where and why. A read that fails once is
/// noted once (the management API down is said elsewhere too).
fn awaiting(state: &mut AppState, read: Result<Vec<dlq_core::awaiting::Awaiting>, String>) {
    use dlq_core::awaiting::total;
    let now = match read {
        Ok(now) => now,
        Err(e) => {
            let line = dlq_core::awaiting::unknown(&e);
            if state.notes.last() != Some(&line) {
                state.notes.push(line);
            }
            return;
        }
    };
    if total(&now) > total(&state.scan.awaiting) {
        for a in &now {
            state.notes.push(a.describe());
        }
        state.message = Some((
            format!(
                "{} dead letter(s) held upstream, not in this queue yet (:notes says where)",
                total(&now)
            ),
            Level::Warn,
        ));
    }
    state.scan.awaiting = now;
}

/// The scan has read everything there was.
fn scan_done(state: &mut AppState) {
    state.scan.complete = true;
    state.browse.scan_complete();
    let n = state.browse.catalog.store.len();
    state.scan.total = Some(n as u64);
    state.letters.stale();
    if state.scan.again {
        state.message = Some((
            format!(
                "browsed again: {}, scan complete",
                dlq_core::words::letters(n)
            ),
            Level::Info,
        ));
    }
}

/// What the worker reports of the ledger: history, decisions, notes, outcomes.
pub(crate) fn ledger_event(state: &mut AppState, action: LedgerEvent) {
    match action {
        LedgerEvent::History(row, lines) => state.detail.set_history(row, lines),
        LedgerEvent::Edited(result) => {
            state.force_redraw = true;
            state.detail.ledger_changed();
            state.message = Some(match result {
                Ok(m) => (m, Level::Info),
                Err(e) => (e, Level::Error),
            });
        }
        LedgerEvent::Unmasked(row, result) => match result {
            Ok(()) => {
                state.detail.unmasked(row);
                state.message = Some(("unmasked for this session (audited)".into(), Level::Warn));
            }
            Err(e) => state.message = Some((format!("not unmasked: {e}"), Level::Error)),
        },
        LedgerEvent::Decisions(ds) => apply_decisions(state, ds),
        LedgerEvent::Unverified(why) => {
            state.ledger_alert = Some(crate::state::LedgerAlert::Unverified(why))
        }
        LedgerEvent::Unreachable(why) => {
            state.ledger_alert = Some(crate::state::LedgerAlert::Unreachable(why))
        }
        LedgerEvent::Notes(lines) => {
            if let Some(last) = lines.last() {
                let more = if lines.len() > 1 {
                    format!(" (+{} more on :notes)", lines.len() - 1)
                } else {
                    String::new()
                };
                state.message = Some((format!("{last}{more}"), Level::Warn));
            }
            state.notes.extend(lines);
        }
        LedgerEvent::TransformPlanned(Ok((lines, n))) => {
            let title = "Transform — dry run (nothing recorded yet)".to_string();
            let mut lines = lines;
            lines.push(String::new());
            if n == 0 {
                lines.push("nothing to record".into());
                state.prompt.drop_input();
            } else {
                lines.push("Letters that arrive later are not in this count.".into());
                lines.push("The originals stay; r with the revisions switch replays them.".into());
                state.prompt.ask(Input::TransformConfirm(String::new(), n));
            }
            state.prompt.open_overlay((title, lines));
            state.message = None;
        }
        LedgerEvent::TransformPlanned(Err(e)) | LedgerEvent::TransformRecorded(Err(e)) => {
            state.prompt.drop_input();
            state.message = Some((e, Level::Error));
        }
        LedgerEvent::TransformRecorded(Ok(line)) => {
            state.detail.ledger_changed();
            state.message = Some((line, Level::Info));
        }
        LedgerEvent::DiscardDone { rows, message, ok } => {
            state.detail.ledger_changed();
            for r in &rows {
                state.decided(*r, dlq_core::model::TriageState::Discarded);
                state.letters.unmark(r);
            }
            state.needs(Refresh::Index);
            state.message = Some((message, if ok { Level::Info } else { Level::Error }));
        }
    }
}

/// A new browse begins: forget the letters, their bytes, selections and decisions of
/// the old one (row ids start again); the filter, grouping and replay history stay.
pub(crate) fn reset_browse(state: &mut AppState) {
    state.browse.restart();
    state.cache.clear();
    state.scan = ScanStatus {
        again: true,
        ..Default::default()
    };
    state.groups = Default::default();
    state.letters.reset();
    state.detail.reset();
    state.replay.new_browse();
    state.needs(Refresh::Tree);
}

/// Index a batch of prepared letters; live ones are counted as arrivals.
pub(crate) fn ingest(state: &mut AppState, batch: Vec<Prepared>, live: bool) {
    for p in batch {
        let row = state.browse.add(&p);
        state.cache.put(row, p.letter);
        if live {
            state.scan.live += 1;
        } else {
            state.scan.done += 1;
        }
    }
    state.needs(Refresh::Tree);
}

/// The ledger's decisions on this source, as recorded (here, or by another engineer on a
/// team ledger): letters decided since the last report take their state, leave the open
/// groups, and the status line says who.
fn apply_decisions(state: &mut AppState, ds: Vec<dlq_core::journal::Decision>) {
    let followed = state.browse.follow(ds);
    if followed.letters > 0 {
        state.needs(Refresh::Tree);
        let who: Vec<String> = followed
            .by
            .iter()
            .map(|a| dlq_core::sanitize::clean(a))
            .collect();
        state.message = Some((
            format!(
                "{} decided in the ledger by {} (no longer open)",
                dlq_core::words::letters(followed.letters),
                who.join(", ")
            ),
            Level::Info,
        ));
    }
}

/// The overlay for a source that could not be opened: the error in full (wrapped by the
/// overlay), then what to check for the usual causes.
fn open_failure(e: &str) -> (String, Vec<String>) {
    let clean = dlq_core::sanitize::clean(e);
    let lower = clean.to_ascii_lowercase();
    let mut lines: Vec<String> = clean
        .split(": ")
        .map(str::to_string)
        .collect::<Vec<_>>()
        .join(":\n  ")
        .lines()
        .map(str::to_string)
        .collect();
    lines.push(String::new());
    let hint = if [
        "access_refused",
        "authentication",
        "password",
        "sasl",
        "login",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        "check the user and password (the URI, DLQ_TRIAGE_AMQP_PASSWORD / DLQ_TRIAGE_KAFKA_PASSWORD or the credentials file) and that this user may use the vhost"
    } else if [
        "refused",
        "unreachable",
        "timed out",
        "timeout",
        "resolve",
        "dns",
        "no route",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        "check that the broker runs and listens at that host and port, and that this host may reach it"
    } else if ["not found", "not_found", "no queue", "unknown topic"]
        .iter()
        .any(|w| lower.contains(w))
    {
        "check the queue or topic name (`dlq-triage queues` / `topics` lists them)"
    } else {
        "the error above is the broker's or the file's own words"
    };
    lines.push(format!("what to check: {hint}"));
    lines.push("R tries again · q quits (the exit code says it failed)".into());
    // Wrapped to fit an 80-column screen inside the overlay's border.
    (
        "Cannot open the source".into(),
        lines.iter().flat_map(|l| wrap(l, 74)).collect(),
    )
}

/// `line` in pieces of at most `width` characters, broken at spaces where it can be,
/// continuation lines indented.
fn wrap(line: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    let mut first = true;
    loop {
        let room = if first { width } else { width - 2 };
        if rest.len() <= room {
            let tail: String = rest.iter().collect();
            out.push(if first { tail } else { format!("  {tail}") });
            return out;
        }
        let cut = rest[..room]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|at| *at > room / 2)
            .unwrap_or(room);
        let head: String = rest[..cut].iter().collect();
        out.push(if first { head } else { format!("  {head}") });
        rest = rest[cut..]
            .iter()
            .skip_while(|c| **c == ' ')
            .copied()
            .collect();
        first = false;
    }
}
