//! Four eyes on big actions: where `[replay] approval_above` / `[discard]
//! approval_above` is set, a replay or discard over that many letters is recorded for a
//! second operator (`dlq-triage approve ID`, `:approve ID`) and nothing is sent or
//! removed; the author's next attempt at the same letters, once approved, spends the
//! approval and runs. One rule for the CLI and the TUI (both act through the session).

use super::{DiscardTarget, Session, SessionError};
use dlq_core::journal::{Approval, ApprovalState, Journal};
use dlq_core::replay::{describe, Plan};
use dlq_core::sanitize::clean;

/// What is proposed, for the gate.
struct Proposal {
    /// `replay`, `discard`.
    what: &'static str,
    /// What a team ledger binds (see `Approval::facts`).
    facts: serde_json::Value,
    id: String,
    digest: String,
    letters: usize,
    above: Option<usize>,
    /// Who wrote the revisions it would send, when not its author (a team ledger): a
    /// privileged approver must see them, whatever the size.
    others_revisions: Option<String>,
}

impl Session {
    /// A replay plan past the gate, or why not (recorded for approval, or awaiting it).
    pub(super) fn approval_gate(
        &self,
        ledger: &mut dyn Journal,
        plan: &Plan,
    ) -> Result<(), SessionError> {
        let p = Proposal {
            what: "replay",
            id: plan.id.clone(),
            digest: plan.digest(),
            letters: plan.items.len(),
            above: self.settings.approval_above,
            others_revisions: self.others_revisions(ledger, plan)?,
            facts: serde_json::json!({
                "kind": "replay",
                "target": super::replaying::run::targets(plan),
                "options": plan.options.to_json(),
                "letters": plan.items.iter().map(|i| [&i.letter_id, &i.binding]).collect::<Vec<_>>(),
            }),
        };
        self.gate(ledger, p, || {
            describe::plan_lines(plan, &self.info().label, false, "Ctrl-C").join("\n")
        })
    }

    /// A discard past the gate, or why not.
    pub(super) fn discard_gate(
        &self,
        ledger: &mut dyn Journal,
        targets: &[DiscardTarget],
        reason: &str,
    ) -> Result<(), SessionError> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for field in std::iter::once(self.settings.source_key.as_str())
            .chain(std::iter::once(reason))
            .chain(
                targets
                    .iter()
                    .flat_map(|t| [t.letter_id.as_str(), t.binding.as_str()]),
            )
        {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let p = Proposal {
            what: "discard",
            id: format!("d-{}", &digest[..12]),
            digest,
            letters: targets.len(),
            above: self.settings.discard_approval_above,
            others_revisions: None,
            facts: serde_json::json!({
                "kind": "discard",
                "reason": reason,
                "letters": targets.iter().map(|t| [&t.letter_id, &t.binding]).collect::<Vec<_>>(),
            }),
        };
        self.gate(ledger, p, || {
            let mut lines = vec![format!(
                "Discard {} from {} (reason: {})",
                dlq_core::words::letters(targets.len()),
                clean(&self.info().label),
                clean(reason)
            )];
            lines.extend(
                targets
                    .iter()
                    .take(20)
                    .map(|t| format!("  {}  {}", clean(&t.letter_id), clean(&t.location))),
            );
            if targets.len() > 20 {
                lines.push(format!("  … and {} more", targets.len() - 20));
            }
            lines.join("\n")
        })
    }

    /// On a team ledger, the engineers other than this one whose revisions `plan` would
    /// send (the server refuses such a start without a privileged approver's approval).
    fn others_revisions(
        &self,
        ledger: &dyn Journal,
        plan: &Plan,
    ) -> Result<Option<String>, SessionError> {
        let team = matches!(
            self.settings.principal.ledger,
            Some(dlq_core::ledger_location::Location::Server(_))
        );
        if !team || !plan.options.use_revisions || plan.items.iter().all(|i| i.revision.is_none()) {
            return Ok(None);
        }
        let latest = ledger.latest_revisions(&self.settings.source_key)?;
        let others: std::collections::BTreeSet<&str> = plan
            .items
            .iter()
            .filter(|i| i.revision.is_some())
            .filter_map(|i| latest.get(&i.letter_id))
            .map(|r| r.actor.as_str())
            .filter(|a| *a != ledger.actor())
            .collect();
        Ok((!others.is_empty())
            .then(|| others.into_iter().map(clean).collect::<Vec<_>>().join(", ")))
    }

    fn gate(
        &self,
        ledger: &mut dyn Journal,
        p: Proposal,
        text: impl FnOnce() -> String,
    ) -> Result<(), SessionError> {
        let n = p.letters;
        let what = p.what;
        let why = match (&p.others_revisions, p.above) {
            (Some(who), _) => format!(
                "it sends revisions written by {who}, which a privileged engineer must see and approve"
            ),
            (None, Some(above)) if n > above => {
                format!("{n} letters is more than the {what} approval_above ({above})")
            }
            _ => return Ok(()),
        };
        match ledger.approval_for(&p.digest)? {
            Some(a) if a.state == ApprovalState::Approved && a.author == ledger.actor() => {
                ledger.use_approval(&a.id)?;
                Ok(())
            }
            Some(a) => Err(SessionError::AwaitingApproval(format!(
                "{why}: it awaits approval by a second operator since {} (`dlq-triage approve {}`; requested by {}); nothing was done",
                clean(&a.requested_at),
                clean(&a.id),
                clean(&a.author)
            ))),
            None => {
                let a = ledger.request_approval(
                    &Approval::request(
                        p.id,
                        self.settings.source_key.clone(),
                        p.digest,
                        n as u64,
                        text(),
                    )
                    .with_facts(p.facts),
                )?;
                Err(SessionError::AwaitingApproval(format!(
                    "{why}: recorded for a second operator — `dlq-triage approve {}` (or :approve in the TUI); do it again once approved. Nothing was done",
                    clean(&a.id)
                )))
            }
        }
    }
}
