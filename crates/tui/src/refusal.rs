//! Refusals as the TUI says them: one rule for both front ends (`access::may_write`),
//! the audit by the application layer (`Request::Refused`).

use crate::action::{Command, Request};
use crate::state::{AppState, Level};

/// Say a refusal; the application layer audits it (`Request::Refused`).
pub(crate) fn refuse_target(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    denied: dlq_core::access::Denied,
    target: String,
) {
    cmds.push(Command::Session(Request::Refused {
        permission: denied.permission,
        target,
    }));
    state.message = Some((format!("refused: {denied}"), Level::Error));
}

/// Whether a write may be made (`access::may_write`, the one rule both front ends use):
/// `--read-only` is said and writes nothing; a role's refusal is said and audited.
pub(crate) fn may_write(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    write: dlq_core::access::WriteOp,
    target: impl FnOnce(&AppState) -> String,
) -> bool {
    // A browse the broker closed holds nothing any more (its letters went back to the
    // queue): a decision on what it showed waits for the next browse.
    if let (Some(why), dlq_core::access::WriteOp::Discard | dlq_core::access::WriteOp::Replay) =
        (&state.scan.lost, write)
    {
        state.message = Some((
            format!(
                "refused: this browse was closed by the broker ({}) and its letters went back to the queue — R browses again, then decide",
                dlq_core::sanitize::line(why, 120)
            ),
            Level::Warn,
        ));
        return false;
    }
    match dlq_core::access::may_write(state.role, state.read_only, write) {
        Ok(()) => true,
        Err(r @ dlq_core::access::Refusal::ReadOnly(_)) => {
            state.message = Some((r.to_string(), Level::Warn));
            false
        }
        Err(dlq_core::access::Refusal::Role(denied)) => {
            let target = target(state);
            refuse_target(state, cmds, denied, target);
            false
        }
    }
}
