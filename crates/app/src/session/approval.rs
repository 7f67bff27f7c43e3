//! Four eyes on big replays: where `[replay] approval_above` is set, a plan over that
//! many letters is recorded for a second operator (`dlq-triage approve ID`) and nothing
//! is sent; the author's next start of the same letters, once approved, spends the
//! approval and runs. One rule for the CLI and the TUI (both start through `replay`).

use super::{Session, SessionError};
use dlq_core::journal::{Approval, ApprovalState, Journal};
use dlq_core::replay::{describe, Plan};
use dlq_core::sanitize::clean;

impl Session {
    /// Pass, or say why not (recorded for approval, or still awaiting it).
    pub(super) fn approval_gate(
        &self,
        ledger: &mut dyn Journal,
        plan: &Plan,
    ) -> Result<(), SessionError> {
        let Some(above) = self.settings.approval_above else {
            return Ok(());
        };
        let n = plan.items.len();
        if n <= above {
            return Ok(());
        }
        let digest = plan.digest();
        match ledger.approval_for(&digest)? {
            Some(a) if a.state == ApprovalState::Approved && a.author == ledger.actor() => {
                ledger.use_approval(&a.id)?;
                Ok(())
            }
            Some(a) => Err(SessionError::AwaitingApproval(format!(
                "{n} letters is more than approval_above ({above}): this plan awaits approval by a second operator since {} (`dlq-triage approve {}`; it was requested by {}); nothing was sent",
                clean(&a.requested_at),
                clean(&a.id),
                clean(&a.author)
            ))),
            None => {
                let text = describe::plan_lines(plan, &self.info().label, false, "Ctrl-C").join("\n");
                let a = ledger.request_approval(&Approval {
                    id: plan.id.clone(),
                    source: self.settings.source_key.clone(),
                    digest,
                    letters: n as u64,
                    plan: text,
                    author: String::new(),
                    requested_at: String::new(),
                    state: ApprovalState::Awaiting,
                    approver: None,
                    decided_at: None,
                    note: None,
                })?;
                Err(SessionError::AwaitingApproval(format!(
                    "{n} letters is more than approval_above ({above}): recorded for a second operator — `dlq-triage approve {}` (or :approve in the TUI); start it again once approved. Nothing was sent",
                    clean(&a.id)
                )))
            }
        }
    }
}
