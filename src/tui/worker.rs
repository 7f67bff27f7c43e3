//! The worker thread: opens the source (on this thread: the demo's mock cluster must
//! live where it is used), scans it, prepares letters (conventions, masked preview) off
//! the render thread, tails new arrivals, and fetches letters the views ask for.

use crate::brokers::{self, OpenOptions};
use crate::core::catalog::prepare_letter;
use crate::core::conventions::UserMapping;
use crate::core::decisions::{discard, reconcile, Discarded, Target};
use crate::core::ledger::{current_actor, Ledger};
use crate::core::masking::Masker;
use crate::core::model::Coords;
use crate::core::ports::{DlqSource, ScanEvent, SourceError};
use crate::core::source::SourceRef;
use crate::core::store::RowId;
use crate::tui::action::Action;
use crate::tui::AppEvent;
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// Requests from the UI.
#[derive(Debug)]
pub enum Request {
    Fetch(RowId, Coords),
    /// Discard these letters: ledger first, then the broker (here, where the source
    /// holds the deliveries).
    Discard {
        rows: Vec<(RowId, String)>,
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

/// Where decisions are recorded, for this source.
#[derive(Debug, Clone, Default)]
pub struct LedgerPlan {
    pub path: Option<std::path::PathBuf>,
    pub source_key: String,
    pub read_only: bool,
}

/// Letters per batch sent to the UI, and the longest a partial batch waits.
const BATCH: usize = 2048;
const BATCH_WAIT: Duration = Duration::from_millis(100);

pub fn spawn(
    source: SourceRef,
    opts: OpenOptions,
    masker: Masker,
    mappings: Vec<UserMapping>,
    events: Sender<AppEvent>,
    requests: Receiver<Request>,
    ledger: LedgerPlan,
) {
    std::thread::spawn(move || {
        // Coordinates by letter id, where settling needs them (RabbitMQ holds at most
        // 10,000 deliveries per queue; Kafka and files settle in the ledger only).
        let keep_coords = matches!(source, SourceRef::Amqp { .. });
        let mut coords_by_id: std::collections::HashMap<String, Vec<Coords>> =
            std::collections::HashMap::new();
        let send = |a: Action| events.send(AppEvent::Action(a)).is_ok();
        let mut src = match brokers::open(&source, &opts) {
            Ok(s) => s,
            Err(e) => {
                send(Action::ScanFailed(e.to_string()));
                serve(
                    None,
                    &requests,
                    &events,
                    &mut Decisions {
                        plan: ledger,
                        coords_by_id: Default::default(),
                    },
                );
                return;
            }
        };
        let mut batch = Vec::with_capacity(BATCH);
        let mut last = Instant::now();
        let mut postponed = Vec::new();
        let mut gone = false;
        let result = src.scan(&mut |ev| {
            match ev {
                ScanEvent::Letter(raw) => {
                    let prepared = prepare_letter(&masker, &mappings, raw);
                    if keep_coords {
                        if let Some(c) = &prepared.0.raw.coords {
                            coords_by_id
                                .entry(prepared.0.id.value.0.clone())
                                .or_default()
                                .push(c.clone());
                        }
                    }
                    batch.push(prepared);
                }
                ScanEvent::Progress { done, total } => {
                    gone |= !send(Action::Progress { done, total })
                }
                ScanEvent::Problem { .. } => {}
            }
            if batch.len() >= BATCH || (!batch.is_empty() && last.elapsed() > BATCH_WAIT) {
                gone |= !send(Action::Letters(std::mem::take(&mut batch)));
                last = Instant::now();
            }
            // The source is busy scanning: fetches wait until it is done.
            while let Ok(r) = requests.try_recv() {
                postponed.push(r);
            }
            if gone {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        if !batch.is_empty() {
            send(Action::Letters(std::mem::take(&mut batch)));
        }
        match result {
            Ok(()) => send(Action::ScanDone),
            Err(e) => send(Action::ScanFailed(e.to_string())),
        };
        let mut ctx = Decisions {
            plan: ledger,
            coords_by_id,
        };
        ctx.after_scan(src.as_mut(), &events);
        for r in postponed {
            handle(src.as_mut(), r, &events, &mut ctx);
        }
        // Tail until the UI goes away, pausing to serve fetches.
        loop {
            let mut pending: Option<Request> = None;
            let mut live = Vec::new();
            let mut last = Instant::now();
            let tailed = src.tail(&mut |ev| {
                if let ScanEvent::Letter(raw) = ev {
                    live.push(prepare_letter(&masker, &mappings, raw));
                }
                if !live.is_empty() && (live.len() >= 256 || last.elapsed() > BATCH_WAIT) {
                    if !send(Action::Live(std::mem::take(&mut live))) {
                        return ControlFlow::Break(());
                    }
                    last = Instant::now();
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
            if !live.is_empty() {
                send(Action::Live(live));
            }
            match (tailed, pending) {
                (Ok(()), Some(r)) => handle(src.as_mut(), r, &events, &mut ctx),
                (Ok(()), None) => return,
                (Err(SourceError::Unsupported(_)), _) | (Err(_), _) => {
                    serve(Some(src.as_mut()), &requests, &events, &mut ctx);
                    return;
                }
            }
        }
    });
}

/// The worker's view of the ledger.
struct Decisions {
    plan: LedgerPlan,
    coords_by_id: std::collections::HashMap<String, Vec<Coords>>,
}

impl Decisions {
    fn open(&self) -> Result<Ledger, String> {
        let path = self
            .plan
            .path
            .as_ref()
            .ok_or("no ledger location (set --ledger)")?;
        Ledger::open(path, &current_actor()).map_err(|e| e.to_string())
    }

    /// Show recorded states, and apply decisions a crash left pending.
    fn after_scan(&mut self, src: &mut dyn DlqSource, events: &Sender<AppEvent>) {
        if !self.plan.path.as_ref().is_some_and(|p| p.exists()) {
            return;
        }
        let Ok(mut ledger) = self.open() else { return };
        if let Ok(ds) = ledger.decisions(&self.plan.source_key) {
            let _ = events.send(AppEvent::Action(Action::Discarded(
                ds.into_iter().map(|d| d.letter_id).collect(),
            )));
        }
        if !self.plan.read_only {
            let coords = &self.coords_by_id;
            let coords_of = |id: &str| coords.get(id).cloned().unwrap_or_default();
            let _ = reconcile(&mut ledger, src, &self.plan.source_key, &coords_of);
        }
    }

    fn discard(
        &mut self,
        src: &mut dyn DlqSource,
        rows: Vec<(RowId, String)>,
        reason: &str,
    ) -> Action {
        let mut ledger = match self.open() {
            Ok(l) => l,
            Err(e) => {
                return Action::DiscardDone {
                    rows: Vec::new(),
                    message: format!("discard refused: {e}"),
                    ok: false,
                }
            }
        };
        let (mut removed, mut only, mut pending, mut done) = (0, 0, 0, Vec::new());
        for (row, id) in rows {
            let coords = self.coords_by_id.get(&id).and_then(|v| v.first()).cloned();
            match discard(
                &mut ledger,
                src,
                &self.plan.source_key,
                Target {
                    letter_id: &id,
                    coords: coords.as_ref(),
                    location: None,
                },
                reason,
                &mut || {},
            ) {
                Ok(Discarded::Removed) => removed += 1,
                Ok(Discarded::LedgerOnly) => only += 1,
                Ok(Discarded::Pending(_)) => pending += 1,
                Err(e) => {
                    return Action::DiscardDone {
                        rows: done,
                        message: format!("ledger error, stopped: {e}"),
                        ok: false,
                    }
                }
            }
            done.push(row);
        }
        let message = format!(
            "discarded {}: {removed} removed from the DLQ, {only} in the ledger only{}",
            done.len(),
            if pending > 0 {
                format!(", {pending} pending (applied on the next browse)")
            } else {
                String::new()
            }
        );
        Action::DiscardDone {
            rows: done,
            message,
            ok: pending == 0,
        }
    }
}

/// Ledger reads and audit entries need no source.
fn handle_audit_only(r: Request, events: &Sender<AppEvent>, ctx: &mut Decisions) {
    if let Request::History(row, id) = &r {
        let lines = match ctx
            .plan
            .path
            .as_ref()
            .filter(|p| p.exists())
            .map(|_| ctx.open())
        {
            None => vec!["nothing recorded for this letter (no ledger yet)".to_string()],
            Some(Err(e)) => vec![format!("cannot read the ledger: {e}")],
            Some(Ok(l)) => match l.history(id) {
                Ok(entries) if entries.is_empty() => {
                    vec!["nothing recorded for this letter".to_string()]
                }
                Ok(entries) => entries
                    .iter()
                    .map(|e| format!("{} · {} · {} · {}", e.at, e.actor, e.action, e.detail))
                    .collect(),
                Err(e) => vec![format!("cannot read the ledger: {e}")],
            },
        };
        let _ = events.send(AppEvent::Action(Action::History(*row, lines)));
        return;
    }
    if let Request::Audit {
        action,
        target,
        detail,
        unmask_row,
    } = r
    {
        let written = ctx.open().and_then(|mut l| {
            l.audit(&action, &target, &detail)
                .map_err(|e| e.to_string())
        });
        if let Some(row) = unmask_row {
            let _ = events.send(AppEvent::Action(Action::Unmasked(row, written.map(|_| ()))));
        }
    }
}

fn handle(src: &mut dyn DlqSource, r: Request, events: &Sender<AppEvent>, ctx: &mut Decisions) {
    let action = match r {
        Request::Fetch(row, coords) => {
            Action::Fetched(row, src.fetch(&coords).map_err(|e| e.to_string()))
        }
        Request::Discard { rows, reason } => ctx.discard(src, rows, &reason),
        r @ (Request::Audit { .. } | Request::History(..)) => {
            handle_audit_only(r, events, ctx);
            return;
        }
    };
    let _ = events.send(AppEvent::Action(action));
}

/// Serve fetches (or refuse them) until the UI goes away.
fn serve(
    mut src: Option<&mut dyn DlqSource>,
    requests: &Receiver<Request>,
    events: &Sender<AppEvent>,
    ctx: &mut Decisions,
) {
    for r in requests.iter() {
        let action = match (src.as_deref_mut(), r) {
            (Some(s), r) => {
                handle(s, r, events, ctx);
                continue;
            }
            (None, Request::Fetch(row, _)) => {
                Action::Fetched(row, Err("the source is not open".into()))
            }
            (None, Request::Discard { .. }) => Action::DiscardDone {
                rows: Vec::new(),
                message: "the source is not open; nothing discarded".into(),
                ok: false,
            },
            (None, r @ (Request::Audit { .. } | Request::History(..))) => {
                handle_audit_only(r, events, ctx);
                continue;
            }
        };
        let _ = events.send(AppEvent::Action(action));
    }
}
