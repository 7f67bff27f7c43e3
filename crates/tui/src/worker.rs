//! The worker thread: opens the source (on this thread: the demo's mock cluster must
//! live where it is used) and drives the shared [`Session`] — scan, tail, fetch, discard,
//! history, audit — turning its results into actions. No pipeline or ledger logic lives
//! here: the CLI drives the same session.

use crate::action::{Action, Command, Resuming};
use crate::action::{BrowseEvent, LedgerEvent, ReplayEvent};
use crate::AppEvent;
use dlq_app::brokers::{self, OpenOptions};
use dlq_app::revise::UnmaskFor;
use dlq_app::session::{
    DiscardTarget, InFlight, Pace, Picked, Principal, ReplayDraft, Session, SessionEvent, Settings,
    Start,
};
use dlq_app::transform::{Limits, Transform};
use dlq_core::model::Coords;
use dlq_core::replay::{describe, Control, Options};
use dlq_core::source::SourceRef;
use dlq_core::store::RowId;
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

mod gate;
mod replays;
use gate::{ledger_only, needs, serve_closed, unavailable, Needs};
use replays::{approval_view, Replays};

pub use crate::action::Request;

impl Request {
    /// The worker's share of `update`'s commands; the others (copy, render, edit) are
    /// given back for the UI thread.
    pub fn for_command(c: Command) -> Result<Request, Box<Command>> {
        match c {
            Command::Session(r) => Ok(r),
            other => Err(Box::new(other)),
        }
    }
}

pub fn spawn(
    source: SourceRef,
    opts: OpenOptions,
    settings: Settings,
    events: Sender<AppEvent>,
    requests: Receiver<Request>,
) {
    std::thread::spawn(move || run(source, opts, settings, events, requests));
}

fn run(
    source: SourceRef,
    opts: OpenOptions,
    settings: Settings,
    events: Sender<AppEvent>,
    requests: Receiver<Request>,
) {
    let send = |a: Action| events.send(AppEvent::Action(a)).is_ok();
    let principal = settings.principal.clone();
    // One pass per browse: `R` (or a browse the broker closed, then `R`) starts another
    // on a fresh connection; the UI empties its store when it hears `Rebrowsing`.
    {
        // The full walk (seconds on a ledger of millions of entries) runs beside the
        // scan, never before it; writes check incrementally meanwhile.
        let (principal, events) = (principal.clone(), events.clone());
        std::thread::spawn(move || {
            if let Some(why) = principal.ledger_problem() {
                let unverified = Action::from(LedgerEvent::Unverified(why));
                let _ = events.send(AppEvent::Action(unverified));
            }
        });
    }
    spawn_ledger_watch(&principal, &settings.source_key, &events);
    let mut first = true;
    loop {
        if !first && !send(Action::from(BrowseEvent::Rebrowsing)) {
            return;
        }
        first = false;
        let opened = brokers::open(&source, &opts)
            .map_err(dlq_app::session::SessionError::from)
            .and_then(|src| Session::new(src, settings.clone()));
        let mut session = match opened {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "opening the source failed");
                send(Action::from(BrowseEvent::ScanFailed(e.to_string())));
                if serve_closed(&principal, &settings.source_key, &requests, &events) {
                    continue;
                }
                return;
            }
        };
        send(Action::from(BrowseEvent::SourceOpened(
            session.info().clone(),
        )));
        if let Some(why) = session.decisions_unknown() {
            send(Action::from(LedgerEvent::Unreachable(why.to_string())));
        }
        let backlog = BacklogWatch::spawn(session.backlog(), &events);
        let postponed = initial_scan(&mut session, &events, &requests);
        let notes = session.reconcile();
        send(Action::from(LedgerEvent::Decisions(session.decisions())));
        announce_unfinished(&session, &events);
        for n in &notes {
            tracing::info!(note = %n, "reconcile");
        }
        if !notes.is_empty() {
            send(Action::from(LedgerEvent::Notes(notes)));
        }
        let mut replays = Replays::default();
        let mut again = false;
        for r in postponed {
            match r {
                Request::Rebrowse => again = true,
                r => handle(&mut session, &mut replays, r, &events, &requests),
            }
        }
        if !again && !tail_until_gone(&mut session, &mut replays, &events, &requests) {
            return;
        }
        // The old browse is dropped before the next opens: on RabbitMQ its held
        // deliveries go back to the queue when its connection closes.
        drop(session);
        drop(backlog);
    }
}

/// Replays of this source left unfinished (a crash, a kill, a lost connection).
fn announce_unfinished(session: &Session, events: &Sender<AppEvent>) {
    match session.unfinished_replays() {
        Ok(u) => {
            let _ = events.send(AppEvent::Action(Action::from(
                ReplayEvent::ReplaysUnfinished(u),
            )));
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the replay journal"),
    }
}

/// Letters sent to the UI and not yet indexed, beyond which the scan waits: two
/// batches, so the UI always has the next one at hand. Each costs ~3 KB until indexed, more
/// in the allocator's pages: at 12,288 the TUI's peak at 1,000,000 Kafka letters was
/// ~430 MB, at 8,192 ~385 MB; 4,096 (with the 8 MiB letter cache and no transparent huge
/// pages) 291-309 MB, the scan as fast (5.8-6.1 s against 5.9-6.3 s).
pub const UI_BACKLOG: usize = 4_096;

/// The initial scan, streamed to the UI; requests that arrive meanwhile are kept for
/// after it (the source is busy).
fn initial_scan(
    session: &mut Session,
    events: &Sender<AppEvent>,
    requests: &Receiver<Request>,
) -> Vec<Request> {
    let mut postponed = Vec::new();
    let mut gone = false;
    // The UI thread indexes what it is sent between frames; if its frames are slow (a
    // slow terminal over SSH) the scan waits rather than piling letters up in memory.
    let in_flight = InFlight::default();
    let result = session.scan(true, &mut |mut ev| {
        if let SessionEvent::Letters(batch) = &mut ev {
            in_flight.wait_below(UI_BACKLOG);
            dlq_core::prepared::hand_over(batch, &in_flight);
        }
        gone |= !forward(events, ev, false);
        while let Ok(r) = requests.try_recv() {
            postponed.push(r);
        }
        if gone {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    let scanned = result.is_ok();
    let done = match result {
        Ok(()) => Action::from(BrowseEvent::ScanDone),
        Err(e) => {
            tracing::warn!(error = %e, "the scan failed");
            Action::from(BrowseEvent::ScanFailed(e.to_string()))
        }
    };
    let _ = events.send(AppEvent::Action(done));
    if scanned {
        // After the scan (a broker may take seconds to answer, or not at all).
        let rules = session.retention().to_vec();
        let _ = events.send(AppEvent::Action(Action::from(BrowseEvent::Retention(
            rules,
        ))));
    }
    postponed
}

/// Tail new arrivals until the UI goes away, pausing to serve requests; a source that
/// cannot be tailed serves requests only.
/// Returns whether to browse again (`R`); false once the UI is gone.
fn tail_until_gone(
    session: &mut Session,
    replays: &mut Replays,
    events: &Sender<AppEvent>,
    requests: &Receiver<Request>,
) -> bool {
    loop {
        let mut pending: Option<Request> = None;
        let tailed = session.tail(&mut |ev| {
            if !forward(events, ev, true) {
                return ControlFlow::Break(());
            }
            match requests.try_recv() {
                Ok(r) => {
                    pending = Some(r);
                    ControlFlow::Break(())
                }
                Err(TryRecvError::Disconnected) => ControlFlow::Break(()),
                Err(TryRecvError::Empty) => ControlFlow::Continue(()),
            }
        });
        match (tailed, pending) {
            (Ok(()), Some(Request::Rebrowse)) => return true,
            (Ok(()), Some(r)) => handle(session, replays, r, events, requests),
            (Ok(()), None) => return false,
            (Err(e), pending) => {
                tracing::info!(error = %e, "tailing stopped; serving requests only");
                // A browse the broker closed is news: the letters went back to the queue
                // and nothing settles until it is browsed again (`R`).
                if !matches!(
                    e,
                    dlq_app::session::SessionError::Source(
                        dlq_core::ports::SourceError::Unsupported(_)
                    )
                ) {
                    let _ = events.send(AppEvent::Action(Action::from(BrowseEvent::BrowseLost(
                        e.to_string(),
                    ))));
                }
                let mut next = pending;
                loop {
                    match next.take().map_or_else(|| requests.recv().ok(), Some) {
                        None => return false,
                        Some(Request::Rebrowse) => return true,
                        Some(r) => handle(session, replays, r, events, requests),
                    }
                }
            }
        }
    }
}

/// Turn a session event into an action; false once the UI is gone.
fn forward(events: &Sender<AppEvent>, ev: SessionEvent, live: bool) -> bool {
    let a = match ev {
        SessionEvent::Letters(b) if live => Action::from(BrowseEvent::Live(b)),
        SessionEvent::Letters(b) => Action::from(BrowseEvent::Letters(b)),
        SessionEvent::Progress { done, total } => {
            Action::from(BrowseEvent::Progress { done, total })
        }
        SessionEvent::Partial(c) => Action::from(BrowseEvent::Partial(c)),
        SessionEvent::Notice(n) => Action::from(LedgerEvent::Notes(vec![format!(
            "{}: {}",
            dlq_core::sanitize::clean(&n.location),
            dlq_core::sanitize::line(&n.message, 200)
        )])),
        SessionEvent::Problem(p) => {
            tracing::warn!(location = %dlq_core::sanitize::clean(&p.location), "unreadable record");
            Action::from(BrowseEvent::Problem(p))
        }
    };
    events.send(AppEvent::Action(a)).is_ok()
}

fn handle(
    session: &mut Session,
    replays: &mut Replays,
    r: Request,
    events: &Sender<AppEvent>,
    requests: &Receiver<Request>,
) {
    let action = match r {
        Request::PlanReplay {
            picked,
            opts,
            resume,
        } => replays.plan(session, picked, opts, resume),
        Request::Replan(opts) => replays.replan(session, opts),
        Request::DropPlan => {
            replays.pending = None;
            return;
        }
        Request::PlanTransform {
            picked,
            program,
            reason,
        } => replays.plan_transform(session, picked, &program, &reason),
        Request::RecordTransform => replays.record_transform(),
        Request::DropTransform => {
            replays.transform = None;
            return;
        }
        Request::RunReplay { id, control } => {
            let done = replays.run(session, &id, control, events, requests);
            let _ = events.send(AppEvent::Action(done));
            let _ = events.send(AppEvent::Action(Action::from(LedgerEvent::Decisions(
                session.decisions(),
            ))));
            announce_unfinished(session, events);
            return;
        }
        Request::AbandonReplay(id) => {
            let done = match session.abandon_replay(&id) {
                Ok(line) => Action::from(LedgerEvent::Notes(vec![line])),
                Err(e) => Action::from(LedgerEvent::Notes(vec![format!("not abandoned: {e}")])),
            };
            let _ = events.send(AppEvent::Action(done));
            announce_unfinished(session, events);
            return;
        }
        Request::ResumeLetters(r) => Action::from(ReplayEvent::ResumeLetters(
            r.clone(),
            match session.resume_of(&r.id) {
                Ok(Some(r)) if r.row.source == session.source_key() => Ok(r.left()),
                Ok(_) => Err(format!(
                    "no replay {} of this source in the ledger",
                    dlq_core::sanitize::clean(&r.id)
                )),
                Err(e) => Err(e.to_string()),
            },
        )),
        Request::Fetch(row, coords) => Action::from(BrowseEvent::Fetched(
            row,
            session.fetch_prepared(&coords).map_err(|e| e.to_string()),
        )),
        Request::Discard { rows, reason } => {
            let done = discard(session, rows, &reason);
            let _ = events.send(AppEvent::Action(Action::from(LedgerEvent::Decisions(
                session.decisions(),
            ))));
            done
        }
        other => {
            let principal = session.principal().clone();
            ledger_only(&principal, session.source_key(), other, events);
            return;
        }
    };
    let _ = events.send(AppEvent::Action(action));
}

fn discard(session: &mut Session, rows: Vec<(RowId, DiscardTarget)>, reason: &str) -> Action {
    let (rows, targets): (Vec<RowId>, Vec<DiscardTarget>) = rows.into_iter().unzip();
    match session.discard(&targets, reason, &mut || {}) {
        Ok(report) => {
            for (id, e) in &report.pending {
                tracing::warn!(letter = %dlq_core::sanitize::clean(id), error = %e, "discard recorded, not applied");
            }
            let mut message = report.summary(None);
            if let Some(first) = report.refused.first().or(report.already.first()) {
                message.push_str(&format!(" — {first}"));
            }
            Action::from(LedgerEvent::DiscardDone {
                rows: report
                    .done
                    .iter()
                    .filter_map(|&i| rows.get(i).copied())
                    .collect(),
                message,
                ok: report.pending.is_empty()
                    && report.already.is_empty()
                    && report.refused.is_empty(),
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, "discard failed");
            Action::from(LedgerEvent::DiscardDone {
                rows: Vec::new(),
                message: format!("discard stopped: {e}"),
                ok: false,
            })
        }
    }
}

/// On a team ledger: follow other engineers' decisions as they are committed (the
/// server announces each change), so a letter alice discards turns `discarded by alice`
/// here without a restart. Ends when the UI is gone or the server connection is.
/// Asks the broker every 15 s for dead letters held upstream on their way here (see
/// `dlq_core::awaiting`), on its own thread: the management API may take seconds, and
/// neither the scan nor the frames wait for it. Stops when dropped (a new browse asks
/// with its own) or when the UI is gone.
struct BacklogWatch(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl BacklogWatch {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(15);

    fn spawn(
        backlog: Option<Box<dyn dlq_core::ports::Backlog>>,
        events: &Sender<AppEvent>,
    ) -> BacklogWatch {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(mut backlog) = backlog {
            let (stop, events) = (stop.clone(), events.clone());
            std::thread::spawn(move || loop {
                let read = backlog.awaiting().map_err(|e| e.to_string());
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let event = AppEvent::Action(Action::from(BrowseEvent::Awaiting(read)));
                if events.send(event).is_err() {
                    return;
                }
                let started = std::time::Instant::now();
                while started.elapsed() < Self::EVERY {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            });
        }
        BacklogWatch(stop)
    }
}

impl Drop for BacklogWatch {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn spawn_ledger_watch(principal: &Principal, source_key: &str, events: &Sender<AppEvent>) {
    let (principal, key, events) = (principal.clone(), source_key.to_string(), events.clone());
    std::thread::spawn(move || {
        let Ok(Some(ledger)) = principal.existing_ledger() else {
            return;
        };
        let mut watch = match ledger.watch() {
            Ok(Some(w)) => w,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "not following the team ledger");
                return;
            }
        };
        loop {
            match watch.wait(std::time::Duration::from_secs(5)) {
                Ok(false) => continue,
                Ok(true) => match ledger.decisions(&key) {
                    Ok(ds) => {
                        let event = AppEvent::Action(Action::from(LedgerEvent::Decisions(ds)));
                        let elsewhere = dlq_app::team_ledger::running_elsewhere(&*ledger, &key);
                        let others = AppEvent::Action(Action::from(ReplayEvent::ReplaysElsewhere(
                            elsewhere,
                        )));
                        if events.send(event).is_err() || events.send(others).is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "reading the team ledger"),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "the team ledger's change feed stopped");
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One gate: a request that needs the DLQ gets one answer saying why, wherever it
    /// is turned away; ledger requests are never turned away.
    #[test]
    fn requests_are_gated_by_what_they_need() {
        let why = "a replay is running (K stops it)";
        let discard = Request::Discard {
            rows: Vec::new(),
            reason: "x".into(),
        };
        assert!(matches!(needs(&discard), Needs::Dlq));
        match unavailable(&discard, why) {
            Some(Action::Event(crate::action::Event::Ledger(LedgerEvent::DiscardDone {
                message,
                ok: false,
                ..
            }))) => assert_eq!(message, format!("{why}: nothing discarded")),
            other => panic!("{other:?}"),
        }
        let history = Request::History(0, "m-1".into());
        assert!(matches!(needs(&history), Needs::Ledger));
        assert!(unavailable(&history, why).is_none());
        let approve = Request::Approve {
            id: "a-1".into(),
            decide: None,
        };
        assert!(matches!(needs(&approve), Needs::Ledger));
        assert!(unavailable(&Request::DropPlan, why).is_none());
        assert!(matches!(
            unavailable(&Request::Rebrowse, "the source is not open"),
            Some(Action::Event(crate::action::Event::Ledger(
                LedgerEvent::Notes(_)
            )))
        ));
    }
}
