//! Four eyes on big actions (a team ledger): a plan over `approval_above` letters is
//! recorded as awaiting approval; a second operator — never its author — approves or
//! rejects it; its author's next start of the same plan (same letters and targets) spends
//! the approval. Every step is an audit entry, and an approval is checked against its
//! entries (MACs included) when it is about to let a replay start.

use super::*;
use crate::db::{DbError, Row};
use crate::p;
use dlq_core::journal::{Approval, ApprovalState};

const COLUMNS: &str =
    "id, source, digest, letters, plan, author, requested_at, state, approver, decided_at, note";

fn approval_row(r: Row) -> Result<Approval, DbError> {
    Ok(Approval {
        id: r.get(0)?,
        source: r.get(1)?,
        digest: r.get(2)?,
        letters: u64::try_from(r.get::<i64>(3)?).unwrap_or(0),
        plan: r.get(4)?,
        author: r.get(5)?,
        requested_at: r.get(6)?,
        state: crate::replays::parsed(&r, 7, ApprovalState::parse)?,
        approver: r.get(8)?,
        decided_at: r.get(9)?,
        note: r.get(10)?,
        facts: None,
    })
}

impl Ledger {
    fn team_only(&self) -> Result<(), JournalError> {
        if self.db.is_pg() {
            Ok(())
        } else {
            Err(self.other(
                "approvals need the team's ledger (--ledger postgres://…): on one engineer's file there is no second pair of eyes".into(),
            ))
        }
    }

    /// A plan recorded for a second operator (on the server: `dlq.approval_request`).
    pub fn request_approval(&mut self, a: &Approval) -> Result<Approval, JournalError> {
        self.team_only()?;
        self.pg_request_approval(a)
    }

    pub fn approval(&self, id: &str) -> Result<Option<Approval>, JournalError> {
        self.team_only()?;
        self.db
            .opt(
                &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
                p![id],
                approval_row,
            )
            .map_err(|e| self.err(e))
    }

    pub fn approval_for(&self, digest: &str) -> Result<Option<Approval>, JournalError> {
        self.team_only()?;
        let a = self
            .db
            .opt(
                &format!("SELECT {COLUMNS} FROM approvals WHERE digest = ?1 AND state IN ('awaiting', 'approved') ORDER BY requested_at DESC LIMIT 1"),
                p![digest],
                approval_row,
            )
            .map_err(|e| self.err(e))?;
        if let Some(a) = &a {
            self.check_approval(a)?;
        }
        Ok(a)
    }

    /// The row says what its entries say (their MACs holding): an approval edited in
    /// the table, or forged, never lets a replay start.
    fn check_approval(&self, a: &Approval) -> Result<(), JournalError> {
        let entries: Vec<AuditEntry> = self
            .history(&a.id)?
            .into_iter()
            .filter(|e| e.action.starts_with("approval-"))
            .collect();
        let macs_hold = entries
            .iter()
            .all(|e| matches!(self.first_bad_mac(std::slice::from_ref(e)), Ok(None)));
        let requested = entries.iter().find(|e| e.action == "approval-requested");
        let digest_of = |e: &AuditEntry| {
            serde_json::from_str::<serde_json::Value>(&e.detail)
                .ok()
                .and_then(|d| d.get("digest").and_then(|v| v.as_str()).map(str::to_string))
        };
        let told = match entries.last().map(|e| e.action.as_str()) {
            Some("approval-requested") => Some((ApprovalState::Awaiting, None)),
            Some("approval-granted") => Some((
                ApprovalState::Approved,
                entries.last().map(|e| e.actor.clone()),
            )),
            Some("approval-rejected") => Some((
                ApprovalState::Rejected,
                entries.last().map(|e| e.actor.clone()),
            )),
            Some("approval-used") => Some((ApprovalState::Used, None)),
            _ => None,
        };
        // Four eyes: whoever granted it is not who asked (an older ledger's team could
        // write both entries itself).
        let self_granted = entries
            .iter()
            .any(|e| e.action == "approval-granted" && e.actor == a.author)
            || a.approver.as_deref() == Some(a.author.as_str());
        let holds = macs_hold
            && !self_granted
            && requested.is_some_and(|e| {
                e.actor == a.author && digest_of(e).as_deref() == Some(a.digest.as_str())
            })
            && told.is_some_and(|(state, approver)| {
                state == a.state && (approver.is_none() || approver == a.approver)
            });
        if holds {
            return Ok(());
        }
        Err(self.other(format!(
            "approval {} does not match the audit entries that recorded it (the approvals table was edited); nothing was sent — `dlq-triage audit verify`",
            dlq_core::sanitize::clean(&a.id)
        )))
    }

    /// Every approval row against its entries, and no request without its row (a team
    /// ledger; approvals are few, so every check reads them all).
    pub(crate) fn check_approvals(
        &self,
        entries: &[AuditEntry],
    ) -> Result<Option<crate::verify::RowProblem>, JournalError> {
        if !self.db.is_pg() {
            return Ok(None);
        }
        let rows = self
            .db
            .map(
                &format!("SELECT {COLUMNS} FROM approvals"),
                p![],
                approval_row,
            )
            .map_err(|e| self.err(e))?;
        for a in &rows {
            if let Err(e) = self.check_approval(a) {
                return Ok(Some(crate::verify::RowProblem(0, e.to_string())));
            }
        }
        let have: std::collections::HashSet<&str> = rows.iter().map(|a| a.id.as_str()).collect();
        Ok(entries
            .iter()
            .find(|e| e.action == "approval-requested" && !have.contains(e.target.as_str()))
            .map(|e| {
                crate::verify::RowProblem(
                    e.seq,
                    "this approval request has no row (the approvals table was edited)".into(),
                )
            }))
    }

    pub fn decide_approval(
        &mut self,
        id: &str,
        approve: bool,
        note: &str,
    ) -> Result<Approval, JournalError> {
        let a = self.approval(id)?.ok_or_else(|| {
            self.other(format!(
                "no approval `{}` in the ledger",
                dlq_core::sanitize::clean(id)
            ))
        })?;
        self.check_approval(&a)?;
        if a.state != ApprovalState::Awaiting {
            return Err(self.other(format!(
                "approval {} is {} already ({})",
                dlq_core::sanitize::clean(id),
                a.state,
                a.approver.as_deref().unwrap_or("-")
            )));
        }
        self.pg_decide_approval(&a, approve, note)
    }

    /// Its author spends an approval (on the server: `dlq.approval_use`).
    pub fn use_approval(&mut self, id: &str) -> Result<(), JournalError> {
        self.team_only()?;
        self.pg_use_approval(id)
    }
}
