//! Which requests the worker serves when: each request's needs decided once, and the one
//! answer to a request turned away.

use super::*;

/// What a request needs of the worker: decided here, once, for every place it is gated
/// (the source never opened, a replay running).
pub(super) enum Needs {
    /// The ledger only: served whatever the source's state.
    Ledger,
    /// The open source (a fetch may run beside a replay: it reads one letter).
    Source,
    /// The DLQ itself: the open source and no replay running.
    Dlq,
}

pub(super) fn needs(r: &Request) -> Needs {
    match r {
        Request::History(..)
        | Request::Unmask { .. }
        | Request::Refused { .. }
        | Request::Paused { .. }
        | Request::Approve { .. } => Needs::Ledger,
        Request::Fetch(..) => Needs::Source,
        Request::Discard { .. }
        | Request::PlanReplay { .. }
        | Request::Replan(_)
        | Request::RunReplay { .. }
        | Request::DropPlan
        | Request::AbandonReplay(_)
        | Request::ResumeLetters(_)
        | Request::Rebrowse
        | Request::PlanTransform { .. }
        | Request::RecordTransform
        | Request::DropTransform => Needs::Dlq,
    }
}

/// The answer to a request that cannot be served now, `why` saying why (`the source is
/// not open`, `a replay is running (K stops it)`); `None` where no answer is wanted.
pub(super) fn unavailable(r: &Request, why: &str) -> Option<Action> {
    Some(match r {
        Request::Fetch(row, _) => Action::from(BrowseEvent::Fetched(*row, Err(why.to_string()))),
        Request::Discard { .. } => Action::from(LedgerEvent::DiscardDone {
            rows: Vec::new(),
            message: format!("{why}: nothing discarded"),
            ok: false,
        }),
        Request::PlanReplay { .. } | Request::Replan(_) | Request::RunReplay { .. } => {
            Action::from(ReplayEvent::ReplayPlanFailed(format!(
                "{why}: nothing replayed"
            )))
        }
        Request::PlanTransform { .. } | Request::RecordTransform => Action::from(
            LedgerEvent::TransformPlanned(Err(format!("{why}: nothing run"))),
        ),
        Request::AbandonReplay(_) | Request::ResumeLetters(_) | Request::Rebrowse => Action::from(
            LedgerEvent::Notes(vec![format!("{why}: try again when it has ended")]),
        ),
        Request::DropPlan | Request::DropTransform => return None,
        Request::History(..)
        | Request::Unmask { .. }
        | Request::Refused { .. }
        | Request::Paused { .. }
        | Request::Approve { .. } => return None,
    })
}

/// A request that needs the ledger only (`Needs::Ledger`).
pub(super) fn ledger_only(
    principal: &Principal,
    source_key: &str,
    r: Request,
    events: &Sender<AppEvent>,
) {
    let action = match r {
        Request::History(row, id) => {
            let lines = match principal.history(&id) {
                Ok(entries) if entries.is_empty() => {
                    vec!["nothing recorded for this letter".to_string()]
                }
                Ok(entries) => entries
                    .iter()
                    .map(dlq_core::letter_view::history_line)
                    .collect(),
                Err(e) => vec![format!("cannot read the ledger: {e}")],
            };
            Action::from(LedgerEvent::History(row, lines))
        }
        Request::Unmask {
            row,
            letter_id,
            reason,
        } => Action::from(LedgerEvent::Unmasked(
            row,
            principal
                .unmask(source_key, &letter_id, &reason, UnmaskFor::View)
                .map_err(|e| e.to_string()),
        )),
        Request::Refused { permission, target } => {
            // Refused again, and audited, by the application layer.
            if principal.require(permission, &target).is_ok() {
                tracing::warn!(?permission, "the UI refused what the principal allows");
            }
            return;
        }
        Request::Paused { replay, paused } => {
            if let Err(e) = principal.audit_pause(&replay, paused) {
                tracing::warn!(error = %e, "the pause was not audited");
            }
            return;
        }
        Request::Approve { id, decide } => {
            Action::from(ReplayEvent::Approval(approval_view(principal, &id, decide)))
        }
        other => match unavailable(&other, "not a ledger request") {
            Some(a) => a,
            None => return,
        },
    };
    let _ = events.send(AppEvent::Action(action));
}

/// The source never opened: answer requests (history and audit still work) until the
/// UI goes away (false) or asks to try again (true).
pub(super) fn serve_closed(
    principal: &Principal,
    source_key: &str,
    requests: &Receiver<Request>,
    events: &Sender<AppEvent>,
) -> bool {
    for r in requests.iter() {
        match (needs(&r), r) {
            (_, Request::Rebrowse) => return true,
            (Needs::Ledger, r) => ledger_only(principal, source_key, r, events),
            (_, r) => {
                if let Some(a) = unavailable(&r, "the source is not open") {
                    let _ = events.send(AppEvent::Action(a));
                }
            }
        }
    }
    false
}
