//! The worker thread: opens the source (on this thread: the demo's mock cluster must
//! live where it is used) and drives the shared [`Session`] — scan, tail, fetch, discard,
//! history, audit — turning its results into actions. No pipeline or ledger logic lives
//! here: the CLI drives the same session.

use crate::brokers::{self, OpenOptions};
use crate::core::model::Coords;
use crate::core::session::{DiscardTarget, Principal, Session, SessionEvent, Settings};
use crate::core::source::SourceRef;
use crate::core::store::RowId;
use crate::tui::action::Action;
use crate::tui::AppEvent;
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

/// Requests from the UI.
#[derive(Debug)]
pub enum Request {
    Fetch(RowId, Coords),
    /// Discard these letters: ledger first, then the broker (here, where the session
    /// holds the deliveries).
    Discard {
        rows: Vec<(RowId, DiscardTarget)>,
        reason: String,
    },
    /// A letter's ledger history.
    History(RowId, String),
    /// Write an audit entry; for an unmask, answer whether it was recorded.
    Audit {
        action: String,
        target: String,
        detail: String,
        unmask_row: Option<RowId>,
    },
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
    let opened = brokers::open(&source, &opts)
        .map_err(crate::core::session::SessionError::from)
        .and_then(|src| Session::new(src, settings));
    let mut session = match opened {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "opening the source failed");
            send(Action::ScanFailed(e.to_string()));
            serve_closed(&principal, &requests, &events);
            return;
        }
    };
    send(Action::SourceOpened(session.info().clone()));
    let postponed = initial_scan(&mut session, &events, &requests);
    let notes = session.reconcile();
    send(Action::Decisions(session.decisions()));
    for n in &notes {
        tracing::info!(note = %n, "reconcile");
    }
    if !notes.is_empty() {
        send(Action::Notes(notes));
    }
    for r in postponed {
        handle(&mut session, r, &events);
    }
    tail_until_gone(&mut session, &events, &requests);
}

/// The initial scan, streamed to the UI; requests that arrive meanwhile are kept for
/// after it (the source is busy).
fn initial_scan(
    session: &mut Session,
    events: &Sender<AppEvent>,
    requests: &Receiver<Request>,
) -> Vec<Request> {
    let mut postponed = Vec::new();
    let mut gone = false;
    let result = session.scan(true, &mut |ev| {
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
    let done = match result {
        Ok(()) => Action::ScanDone,
        Err(e) => {
            tracing::warn!(error = %e, "the scan failed");
            Action::ScanFailed(e.to_string())
        }
    };
    let _ = events.send(AppEvent::Action(done));
    postponed
}

/// Tail new arrivals until the UI goes away, pausing to serve requests; a source that
/// cannot be tailed serves requests only.
fn tail_until_gone(session: &mut Session, events: &Sender<AppEvent>, requests: &Receiver<Request>) {
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
            (Ok(()), Some(r)) => handle(session, r, events),
            (Ok(()), None) => return,
            (Err(e), pending) => {
                tracing::info!(error = %e, "tailing stopped; serving requests only");
                // A browse the broker closed is news: the letters went back to the queue
                // and nothing settles until it is browsed again.
                if !matches!(
                    e,
                    crate::core::session::SessionError::Source(
                        crate::core::ports::SourceError::Unsupported(_)
                    )
                ) {
                    let _ = events.send(AppEvent::Action(Action::Notes(vec![format!(
                        "{e}; nothing is lost — quit and reopen to browse again"
                    )])));
                }
                if let Some(r) = pending {
                    handle(session, r, events);
                }
                for r in requests.iter() {
                    handle(session, r, events);
                }
                return;
            }
        }
    }
}

/// Turn a session event into an action; false once the UI is gone.
fn forward(events: &Sender<AppEvent>, ev: SessionEvent, live: bool) -> bool {
    let a = match ev {
        SessionEvent::Letters(b) if live => Action::Live(b),
        SessionEvent::Letters(b) => Action::Letters(b),
        SessionEvent::Progress { done, total } => Action::Progress { done, total },
        SessionEvent::Partial(c) => Action::Partial(c),
        SessionEvent::Problem(p) => {
            tracing::warn!(location = %crate::core::sanitize::clean(&p.location), "unreadable record");
            Action::Problem(p)
        }
    };
    events.send(AppEvent::Action(a)).is_ok()
}

fn handle(session: &mut Session, r: Request, events: &Sender<AppEvent>) {
    let action = match r {
        Request::Fetch(row, coords) => {
            Action::Fetched(row, session.fetch(&coords).map_err(|e| e.to_string()))
        }
        Request::Discard { rows, reason } => {
            let done = discard(session, rows, &reason);
            let _ = events.send(AppEvent::Action(Action::Decisions(session.decisions())));
            done
        }
        other => {
            let principal = session.principal().clone();
            ledger_only(&principal, other, events);
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
                tracing::warn!(letter = %crate::core::sanitize::clean(id), error = %e, "discard recorded, not applied");
            }
            let mut message = report.summary(None);
            if let Some(first) = report.already.first() {
                message.push_str(&format!(" — {first}"));
            }
            Action::DiscardDone {
                rows: report
                    .done
                    .iter()
                    .filter_map(|&i| rows.get(i).copied())
                    .collect(),
                message,
                ok: report.pending.is_empty() && report.already.is_empty(),
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "discard failed");
            Action::DiscardDone {
                rows: Vec::new(),
                message: format!("discard stopped: {e}"),
                ok: false,
            }
        }
    }
}

/// History and audit entries need the ledger, not the source.
fn ledger_only(principal: &Principal, r: Request, events: &Sender<AppEvent>) {
    let action = match r {
        Request::History(row, id) => {
            let lines = match principal.history(&id) {
                Ok(entries) if entries.is_empty() => {
                    vec!["nothing recorded for this letter".to_string()]
                }
                Ok(entries) => entries
                    .iter()
                    .map(|e| format!("{} · {} · {} · {}", e.at, e.actor, e.action, e.detail))
                    .collect(),
                Err(e) => vec![format!("cannot read the ledger: {e}")],
            };
            Action::History(row, lines)
        }
        Request::Audit {
            action,
            target,
            detail,
            unmask_row,
        } => {
            let written = principal
                .audit(&action, &target, &detail)
                .map(|_| ())
                .map_err(|e| e.to_string());
            if let Err(e) = &written {
                tracing::warn!(error = %e, action = %action, "audit entry not written");
            }
            match unmask_row {
                Some(row) => Action::Unmasked(row, written),
                None => return,
            }
        }
        Request::Fetch(row, _) => Action::Fetched(row, Err("the source is not open".into())),
        Request::Discard { .. } => Action::DiscardDone {
            rows: Vec::new(),
            message: "the source is not open; nothing discarded".into(),
            ok: false,
        },
    };
    let _ = events.send(AppEvent::Action(action));
}

/// The source never opened: answer requests (history and audit still work) until the
/// UI goes away.
fn serve_closed(principal: &Principal, requests: &Receiver<Request>, events: &Sender<AppEvent>) {
    for r in requests.iter() {
        ledger_only(principal, r, events);
    }
}
