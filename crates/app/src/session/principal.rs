//! Who acts: the OS user, the role the config or the team ledger gives them, whether
//! this run may write, and the ledger their decisions go to — every permission and
//! `--read-only` check, with its audit, is here.

use super::*;

/// Who acts, with which role, and where their decisions are recorded.
#[derive(Debug, Clone)]
pub struct Principal {
    pub actor: String,
    pub role: Role,
    pub read_only: bool,
    /// A file or a team's server (`--ledger`).
    pub ledger: Option<Location>,
    /// The team ledger could not be reached at start (why): the role is a stand-in
    /// (viewer), and a write is refused for this reason, not for the role.
    pub ledger_unreachable: Option<String>,
}

impl Principal {
    /// Open the ledger for writing (created on first use). Front ends get the
    /// `Journal` port, never the store behind it.
    pub fn ledger(&self) -> Result<Box<dyn Journal>, SessionError> {
        let at = self.ledger.as_ref().ok_or(SessionError::NoLedger)?;
        Ok(Box::new(self.opened(Ledger::open_at(at, &self.actor)?)))
    }

    /// The ledger to record in, verified first: nothing is written to — and so nothing is
    /// sent or settled on the strength of — a ledger whose chain or rows fail
    /// verification. No flag overrides it; reads (browse, `audit verify`) still open it.
    /// Checked since the last verified checkpoint (milliseconds on a big ledger); the
    /// full walk is `audit verify` and the TUI's check at open.
    pub fn ledger_to_write(&self) -> Result<Box<dyn Journal>, SessionError> {
        let ledger = self.ledger()?;
        let v = ledger.verify_recent()?;
        if !v.ok {
            return Err(SessionError::Tampered {
                location: ledger.location(),
                seq: v.first_bad_seq.unwrap_or_default(),
                problem: v.problem.unwrap_or_default(),
            });
        }
        Ok(ledger)
    }

    /// Why the ledger (if there is one) fails verification, for a front end to say up
    /// front that every write will be refused; `None` when it verifies or is absent.
    pub fn ledger_problem(&self) -> Option<String> {
        let ledger = self.existing_ledger().ok().flatten()?;
        match ledger.verify(None) {
            Ok(v) if v.ok => None,
            Ok(v) => Some(format!(
                "entry {}: {} (`dlq-triage audit verify`)",
                v.first_bad_seq.unwrap_or_default(),
                v.problem.unwrap_or_default()
            )),
            Err(e) => Some(e.to_string()),
        }
    }

    /// `--read-only` reaches the ledger too: not even a verified checkpoint is kept.
    fn opened(&self, l: Ledger) -> Ledger {
        if self.read_only {
            l.read_only()
        } else {
            l
        }
    }

    /// The ledger if one exists already (reads never create it).
    pub fn existing_ledger(&self) -> Result<Option<Box<dyn Journal>>, SessionError> {
        match self.ledger.as_ref().filter(|at| at.exists()) {
            Some(at) => Ok(Some(Box::new(
                self.opened(Ledger::open_at(at, &self.actor)?),
            ))),
            None => Ok(None),
        }
    }

    /// Check a permission; a refusal names the role it needs and is audited (except
    /// under --read-only, which writes nothing). `target` must already be redacted.
    pub fn require(&self, p: Permission, target: &str) -> Result<(), SessionError> {
        access::check(self.role, p).map_err(|denied| self.refused(denied, target))
    }

    /// A refusal, audited (except under --read-only, which writes nothing).
    /// With the team ledger unreachable the role is a stand-in: the refusal is that,
    /// not the role (and nothing can be audited anyway).
    fn refused(&self, denied: access::Denied, target: &str) -> SessionError {
        if let Some(why) = &self.ledger_unreachable {
            return SessionError::Unreachable(why.clone());
        }
        if !self.read_only {
            // Not into a ledger that fails verification either (best effort: a refusal
            // is refused all the same).
            if let Ok(mut l) = self.ledger_to_write() {
                let detail = serde_json::json!({"refused": denied.to_string()}).to_string();
                if let Err(e) = l.audit("denied", target, &detail) {
                    tracing::warn!(error = %e, "could not audit a refusal");
                }
            }
        }
        SessionError::Refused {
            denied,
            read_only: self.read_only,
        }
    }

    /// Check a write (`access::may_write`): under `--read-only` it is refused and nothing
    /// is written; a role that does not allow it is refused and audited.
    /// `target` must already be redacted.
    pub fn require_write(&self, w: access::WriteOp, target: &str) -> Result<(), SessionError> {
        match access::may_write(self.role, self.read_only, w) {
            Ok(()) => Ok(()),
            Err(r @ access::Refusal::ReadOnly(_)) => Err(SessionError::ReadOnly(r)),
            Err(access::Refusal::Role(denied)) => Err(self.refused(denied, target)),
        }
    }

    pub fn may(&self, p: Permission) -> bool {
        access::check(self.role, p).is_ok()
    }

    /// Write an audit entry.
    pub fn audit(
        &self,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, SessionError> {
        Ok(self.ledger_to_write()?.audit(action, target, detail)?)
    }

    /// A running replay paused (or let go on) from a UI: an entry, so the journal's gap
    /// in sending is explained.
    pub fn audit_pause(&self, replay_id: &str, paused: bool) -> Result<AuditEntry, SessionError> {
        let action = if paused {
            "replay-pause"
        } else {
            "replay-unpause"
        };
        let detail = serde_json::json!({ "replay": replay_id }).to_string();
        self.audit(action, replay_id, &detail)
    }

    /// A letter's entries in the ledger (decisions, revisions, unmasks, refusals).
    pub fn history(&self, letter_id: &str) -> Result<Vec<AuditEntry>, SessionError> {
        match self.existing_ledger()? {
            Some(l) => Ok(l.history(letter_id)?),
            None => Ok(Vec::new()),
        }
    }
}
