//! A letter ready to index, and its ledger state: what preparation (at scan, on the
//! session's workers) hands every front end, once per letter.

use crate::handover::{InFlight, Receipt};
use crate::journal::{Decision, DecisionKind};
use crate::model::{DeadLetter, TriageState};
use std::sync::Arc;

/// One letter, ready to index: extracted, previewed (masked), with its ledger state.
#[derive(Debug)]
pub struct Prepared {
    /// Behind a pointer: a letter is ~1.5 KB and a prepared one is moved several times
    /// between the preparing thread and the front end (memmove was ~8% of a
    /// 1,000,000-letter scan). Shared, not boxed: the TUI keeps it in its payload cache
    /// and the detail pane and a replay plan use that same preparation (never redone).
    pub letter: Arc<DeadLetter>,
    pub preview: String,
    pub state: TriageState,
    /// Content digest of a letter without a stable position (RabbitMQ queues), computed
    /// once here on the preparing threads (see `binding::content_fp`).
    pub fp: Option<u64>,
    /// Set when the batch was handed to a consumer that may fall behind (`InFlight`).
    pub receipt: Option<Receipt>,
}

impl From<(DeadLetter, String)> for Prepared {
    /// A letter prepared outside a session (benches, tests): no ledger state.
    fn from((letter, preview): (DeadLetter, String)) -> Self {
        let fp = crate::binding::content_fp(&letter.raw);
        Prepared {
            letter: Arc::new(letter),
            preview,
            state: TriageState::Open,
            fp,
            receipt: None,
        }
    }
}

/// A letter's state in the ledger, and the decision behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct LetterState {
    pub state: TriageState,
    pub decision: Option<Decision>,
    /// The ledger could not be read: `state` is a stand-in (`open`), and every view says
    /// `unknown (ledger unreachable)` instead.
    pub unknown: bool,
}

impl LetterState {
    /// The state a decision (or none) gives a letter.
    pub fn of(decision: Option<&Decision>) -> LetterState {
        match decision {
            Some(d) if d.kind == DecisionKind::Discard => LetterState {
                state: TriageState::Discarded,
                decision: Some(d.clone()),
                unknown: false,
            },
            Some(d) if d.kind == DecisionKind::Replay => LetterState {
                state: TriageState::Replayed,
                decision: Some(d.clone()),
                unknown: false,
            },
            _ => LetterState {
                state: TriageState::Open,
                decision: None,
                unknown: false,
            },
        }
    }

    /// A replayed letter as its replay ended: `Resolved` when the run completed and the
    /// letter did not come back, `FailedAgain` when it did (the ledger's replay journal,
    /// so a restart shows what the session that ran it showed).
    pub fn after_replay(mut self, outcome: Option<TriageState>) -> Self {
        if let (TriageState::Replayed, Some(o)) = (self.state, outcome) {
            self.state = o;
        }
        self
    }

    /// Nothing known: the ledger could not be read.
    pub fn unknown() -> LetterState {
        LetterState {
            state: TriageState::Open,
            decision: None,
            unknown: true,
        }
    }

    /// The state's word as shown: `unknown` where the ledger could not be read.
    pub fn word(&self) -> &'static str {
        state_word(self.state, self.unknown)
    }

    /// One line: `discarded by alice at … (reason: …)`, or `open`.
    pub fn describe(&self) -> String {
        if self.unknown {
            return "unknown (ledger unreachable)".into();
        }
        match &self.decision {
            Some(d) => format!(
                "{} by {} at {} (reason: {}){}",
                self.state.as_str(),
                d.actor,
                d.at,
                d.reason,
                if d.applied_at.is_some() {
                    ""
                } else {
                    " — not yet applied to the broker"
                }
            ),
            None => self.state.as_str().to_string(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "state": self.word(),
            "decision": self.decision.as_ref().map(|d| serde_json::json!({
                "kind": d.kind, "actor": d.actor, "at": d.at, "reason": d.reason,
                "applied_at": d.applied_at, "audit_seq": d.audit_seq,
            })),
        })
    }
}

/// A state as every view shows it: `unknown` when the ledger could not be read (the
/// stored `state` is then a stand-in), else its own word.
pub fn state_word(state: TriageState, unknown: bool) -> &'static str {
    if unknown {
        "unknown"
    } else {
        state.as_str()
    }
}

/// Hand `batch` over to a consumer that may fall behind: it counts in `in_flight` until
/// every one of its letters has been dropped.
pub fn hand_over(batch: &mut [Prepared], in_flight: &InFlight) {
    if let Some(share) = in_flight.issue(batch.len()) {
        for p in batch {
            p.receipt = Some(share.clone());
        }
    }
}
