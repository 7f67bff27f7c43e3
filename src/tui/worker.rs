//! The worker thread: opens the source (on this thread: the demo's mock cluster must
//! live where it is used), scans it, prepares letters (conventions, masked preview) off
//! the render thread, tails new arrivals, and fetches letters the views ask for.

use crate::brokers::{self, OpenOptions};
use crate::core::catalog::prepare_letter;
use crate::core::conventions::UserMapping;
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
) {
    std::thread::spawn(move || {
        let send = |a: Action| events.send(AppEvent::Action(a)).is_ok();
        let mut src = match brokers::open(&source, &opts) {
            Ok(s) => s,
            Err(e) => {
                send(Action::ScanFailed(e.to_string()));
                serve(None, &requests, &events);
                return;
            }
        };
        let mut batch = Vec::with_capacity(BATCH);
        let mut last = Instant::now();
        let mut postponed = Vec::new();
        let mut gone = false;
        let result = src.scan(&mut |ev| {
            match ev {
                ScanEvent::Letter(raw) => batch.push(prepare_letter(&masker, &mappings, raw)),
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
        for r in postponed {
            handle(src.as_mut(), r, &events);
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
                (Ok(()), Some(r)) => handle(src.as_mut(), r, &events),
                (Ok(()), None) => return,
                (Err(SourceError::Unsupported(_)), _) | (Err(_), _) => {
                    serve(Some(src.as_mut()), &requests, &events);
                    return;
                }
            }
        }
    });
}

fn handle(src: &mut dyn DlqSource, r: Request, events: &Sender<AppEvent>) {
    match r {
        Request::Fetch(row, coords) => {
            let result = src.fetch(&coords).map_err(|e| e.to_string());
            let _ = events.send(AppEvent::Action(Action::Fetched(row, result)));
        }
    }
}

/// Serve fetches (or refuse them) until the UI goes away.
fn serve(
    mut src: Option<&mut dyn DlqSource>,
    requests: &Receiver<Request>,
    events: &Sender<AppEvent>,
) {
    for r in requests.iter() {
        match (src.as_deref_mut(), r) {
            (Some(s), r) => handle(s, r, events),
            (None, Request::Fetch(row, _)) => {
                let _ = events.send(AppEvent::Action(Action::Fetched(
                    row,
                    Err("the source is not open".into()),
                )));
            }
        }
    }
}
