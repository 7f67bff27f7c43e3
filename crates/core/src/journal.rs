//! The journal port: every decision, revision, replay step and audit entry, written
//! before the broker is touched. Core's decisions and replay engine, and the app's
//! session, speak only this trait; `dlq-ledger` implements it on SQLite, and a team
//! ledger on a server is a second implementation with no change above it.

use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

pub mod follows;
mod replays;
pub use replays::*;

/// How often a running replay renews its lease. A lease not renewed for five of these is
/// taken for dead (a holder on another host that lost its network); on the holder's own
/// host a lease whose process is gone is dead at once.
pub const LEASE_HEARTBEAT: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The store behind the journal failed (SQLite, a server): where, and its error.
    #[error("ledger {path}: {source}")]
    Storage {
        path: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("ledger {path}: {message}")]
    Other { path: String, message: String },
    /// Another writer held the ledger's write lock past the bounded wait: who, in what
    /// state, and what frees it. Nothing was recorded (and so nothing sent).
    #[error("ledger {path}: busy: {holder}")]
    Busy { path: String, holder: String },
    /// Letters of a plan about to start that another process took since it was made:
    /// held by another live replay, or replayed meanwhile (letter id, binding).
    #[error("{} held by another running replay{}, {} replayed since the plan was made", crate::words::letters(claims.len()), claims.first().map(|c| format!(" ({})", c.describe())).unwrap_or_default(), replayed.len())]
    Claimed {
        claims: Vec<Claim>,
        replayed: Vec<(String, String)>,
    },
    /// The replay is being sent by another live process (or took this one's lease).
    #[error("replay {replay_id} is {holder}: one sender per replay; wait for it to end, or stop it (K in its TUI, Ctrl-C in its CLI)")]
    LeaseHeld {
        replay_id: String,
        holder: String,
        actor: String,
        heartbeat_at: String,
    },
    /// The ledger holds something of these letters that the step may not follow (see
    /// [`follows::FOLLOWS`]): a discard of letters a live replay holds, a revision of
    /// letters a replay may have sent. Nothing was written.
    #[error("{}", conflicts.iter().take(3).map(follows::Conflict::describe).collect::<Vec<_>>().join("; ") + &if conflicts.len() > 3 { format!(" (and {} more)", conflicts.len() - 3) } else { String::new() })]
    Decided { conflicts: Vec<follows::Conflict> },
    /// Another decision already covers this exact letter (a concurrent run, or earlier).
    #[error("{letter_id} was already {kind}ed by {actor} at {at} (reason: {reason})")]
    AlreadyDecided {
        letter_id: String,
        kind: DecisionKind,
        actor: String,
        at: String,
        reason: String,
    },
}

/// One audit entry; what is hashed is everything but `hash` itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub detail: String,
    pub prev_hash: String,
    pub hash: String,
}

/// Outcome of `verify`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verification {
    pub ok: bool,
    pub entries: i64,
    /// The first entry that does not check out, and why.
    pub first_bad_seq: Option<i64>,
    pub problem: Option<String>,
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub id: i64,
    pub source: String,
    pub letter_id: String,
    pub coords: Option<String>,
    /// The exact letter the decision was made on (see `core::decisions::binding`).
    pub binding: Option<String>,
    pub kind: DecisionKind,
    pub reason: String,
    pub actor: String,
    pub at: String,
    pub applied_at: Option<String>,
    pub audit_seq: i64,
}

/// What was decided on a letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionKind {
    Discard,
    /// Replayed: the broker confirmed the copy sent to its target.
    Replay,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Discard => "discard",
            DecisionKind::Replay => "replay",
        }
    }

    /// The stored spelling back (the ledger's edge); `None` for anything else.
    pub fn parse(s: &str) -> Option<DecisionKind> {
        [DecisionKind::Discard, DecisionKind::Replay]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The newest audit entry: an anchor to paste into a ticket and check later with
/// `audit verify --expect-head`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
}

impl std::fmt::Display for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

impl std::str::FromStr for Head {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (seq, hash) = s
            .trim()
            .split_once(':')
            .ok_or("a head is SEQ:HASH, as `audit head` prints it")?;
        let seq = seq
            .parse()
            .map_err(|_| format!("`{seq}` is not an entry number"))?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("the hash of a head is 64 hex digits".into());
        }
        Ok(Head {
            seq,
            hash: hash.to_ascii_lowercase(),
        })
    }
}

/// Changes to a shared ledger as they are committed (another engineer's discard, a
/// replay's progress): what the TUI listens to, so its view follows the team's.
pub trait LedgerWatch: Send {
    /// Whether anything changed within `timeout` (changes close together are reported
    /// once).
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, JournalError>;
}

/// Durable decisions, revisions, the replay journal and the keyed audit chain.
///
/// Ledger first, broker second: every method that records returns only once the record
/// is durable. Object safe, so the session holds `Box<dyn Journal>`.
pub trait Journal: Send {
    /// Where the journal lives, for messages (never with credentials).
    fn location(&self) -> String;
    /// Who writes: recorded on every entry.
    fn actor(&self) -> &str;
    /// A free-standing audit entry (unmask, export, refusals, replay control).
    fn audit(
        &mut self,
        action: &str,
        target: &str,
        detail: &str,
    ) -> Result<AuditEntry, JournalError>;
    /// A discard of one exact letter; `AlreadyDecided` when someone decided it first.
    fn record_discard(
        &mut self,
        source: &str,
        letter_id: &str,
        binding: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> Result<Decision, JournalError>;
    /// A new revision of a letter's payload; returns its number.
    fn record_revision(
        &mut self,
        source: &str,
        letter_id: &str,
        reason: &str,
        changed_paths: &[String],
        before: &[u8],
        after: &[u8],
    ) -> Result<i64, JournalError> {
        let rev = NewRevision {
            letter_id: letter_id.into(),
            reason: reason.into(),
            changed_paths: changed_paths.to_vec(),
            sha256_before: crate::revision::sha256_hex(before),
            after: after.to_vec(),
            program: None,
        };
        let numbers = self.record_revisions(source, std::slice::from_ref(&rev))?;
        numbers.first().copied().ok_or_else(|| JournalError::Other {
            path: String::new(),
            message: "no revision number came back".into(),
        })
    }
    /// New revisions of many letters in one transaction (a transform's batch); their
    /// numbers, in order. All or none are recorded.
    fn record_revisions(
        &mut self,
        source: &str,
        batch: &[NewRevision],
    ) -> Result<Vec<i64>, JournalError>;
    /// The payload of revision `number`, if recorded.
    fn revision(
        &self,
        source: &str,
        letter_id: &str,
        number: i64,
    ) -> Result<Option<Vec<u8>>, JournalError>;
    /// The broker carried a decision out (`how`: acked, ledger-only, …).
    fn mark_applied(&mut self, decision: &Decision, how: &str) -> Result<(), JournalError>;
    /// Every decision on a source.
    fn decisions(&self, source: &str) -> Result<Vec<Decision>, JournalError>;
    /// Decisions recorded but not yet applied to the broker.
    fn pending(&self, source: &str) -> Result<Vec<Decision>, JournalError>;
    /// The whole audit log, in order.
    fn audit_entries(&self) -> Result<Vec<AuditEntry>, JournalError>;
    /// A letter's entries (decisions, revisions, unmasks, refusals).
    fn history(&self, letter_id: &str) -> Result<Vec<AuditEntry>, JournalError>;
    /// The newest entry, to anchor the chain.
    fn head(&self) -> Result<Option<Head>, JournalError>;
    /// Check the chain and every row bound to it (against an anchor, if given).
    fn verify(&self, expect_head: Option<&Head>) -> Result<Verification, JournalError>;
    /// Check what changed since the last clean verification (the store keeps a keyed
    /// checkpoint), falling back to the full `verify` when anything is out of place: what
    /// every write path runs first. Stores without checkpoints verify everything.
    fn verify_recent(&self) -> Result<Verification, JournalError> {
        self.verify(None)
    }
    /// Changes made by other clients as they happen (a server ledger); `None` where no
    /// one else writes while this process runs, or the store cannot tell.
    fn watch(&self) -> Result<Option<Box<dyn LedgerWatch>>, JournalError> {
        Ok(None)
    }
    /// Four eyes (a team ledger): record a plan for a second operator to approve.
    fn request_approval(&mut self, request: &Approval) -> Result<Approval, JournalError>;
    /// The live approval (awaiting or approved) of a plan with this digest, checked
    /// against its audit entries.
    fn approval_for(&self, digest: &str) -> Result<Option<Approval>, JournalError>;
    /// One approval by its replay id.
    fn approval(&self, id: &str) -> Result<Option<Approval>, JournalError>;
    /// Approve or reject an awaiting plan; never its author's own.
    fn decide_approval(
        &mut self,
        id: &str,
        approve: bool,
        note: &str,
    ) -> Result<Approval, JournalError>;
    /// Its author starts the approved replay: the approval is spent.
    fn use_approval(&mut self, id: &str) -> Result<(), JournalError>;
    /// The team's roles (actor, role) where the ledger keeps them (a server); `None`
    /// where a roles file decides.
    fn team_roles(&self) -> Result<Option<Vec<(String, String)>>, JournalError>;
    /// Change one actor's role on the team's ledger (privileged; audited there).
    fn set_team_role(&mut self, actor: &str, role: &str) -> Result<(), JournalError>;
    /// The team's policy (key, value: `approval_above`, …) where the ledger keeps it (a
    /// server); `None` where the config file decides.
    fn team_policy(&self) -> Result<Option<Vec<(String, String)>>, JournalError>;
    /// Set (or, `None`, clear) one key of the team's policy (privileged; audited there).
    fn set_team_policy(&mut self, key: &str, value: Option<&str>) -> Result<(), JournalError>;
    /// Journal a replay's plan before anything is sent, and take its lease. `Claimed`
    /// (nothing written) when another live replay holds any of its letters.
    fn replay_start(
        &mut self,
        id: &str,
        source: &str,
        target: &str,
        detail: &serde_json::Value,
        items: &[PlannedItem<'_>],
    ) -> Result<AuditEntry, JournalError>;
    /// A resumed replay, with letters added to its plan; takes its lease. `LeaseHeld`
    /// (nothing written) when a live process still sends it; `Claimed` when another
    /// live replay holds letters it would send.
    fn replay_resume(
        &mut self,
        id: &str,
        detail: &serde_json::Value,
        added: &[PlannedItem<'_>],
    ) -> Result<(), JournalError>;
    /// These items' publishes are about to start. In the same transaction each is
    /// checked against what the ledger holds of its letter now (see [`follows`]): a
    /// letter discarded or replayed since the plan is journaled `withdrawn` instead and
    /// returned — the engine must not publish those.
    fn replay_sending(&mut self, id: &str, seqs: &[u32]) -> Result<Vec<Withdrawn>, JournalError>;
    /// The broker confirmed these letters: each gets a `replay` decision.
    fn replay_confirmed(
        &mut self,
        id: &str,
        source: &str,
        letters: &[ConfirmedLetter<'_>],
    ) -> Result<Vec<Decision>, JournalError>;
    /// The DLQ copy of a confirmed letter was settled.
    fn replay_settled(
        &mut self,
        id: &str,
        seq: u32,
        decision: &Decision,
        how: &str,
    ) -> Result<(), JournalError>;
    /// Any other item state (refused, held-back, failed-again, planned), with a note.
    fn replay_item(
        &mut self,
        id: &str,
        seq: u32,
        letter_id: &str,
        state: ItemState,
        note: Option<&str>,
    ) -> Result<(), JournalError>;
    /// The replay ended: its state and outcome.
    fn replay_finish(
        &mut self,
        id: &str,
        state: ReplayState,
        outcome: &serde_json::Value,
    ) -> Result<(), JournalError>;
    /// The running replay is alive: renew its lease. `LeaseHeld` when another process
    /// took the lease over (this one was taken for dead): stop sending at once.
    fn replay_heartbeat(&mut self, id: &str) -> Result<(), JournalError>;
    /// `--take-over`: end replay `id`'s sender once its heartbeat, on the ledger's clock,
    /// is older than the lease allows (frozen, cut off, its bastion gone), so that a
    /// resume takes it as from a dead one; what was done, in words. `LeaseHeld` while
    /// the heartbeat is fresh. A team ledger's (the server ends the sender's session).
    fn replay_take_over(&mut self, id: &str) -> Result<String, JournalError>;
    /// Letters of `source` held by live replays (see [`Claim`]).
    fn claims(&self, source: &str) -> Result<Vec<Claim>, JournalError>;
    /// Letters of `source` in doubt in replays that are not live (see [`InDoubt`]).
    fn in_doubt(&self, source: &str) -> Result<Vec<InDoubt>, JournalError>;
    /// Every replay, newest last.
    fn replays(&self) -> Result<Vec<ReplayRow>, JournalError>;
    /// One replay with its items.
    fn replay(&self, id: &str) -> Result<Option<(ReplayRow, Vec<ReplayItemRow>)>, JournalError>;
    /// How many times each letter of a source was replayed.
    fn replay_counts(&self, source: &str) -> Result<HashMap<String, u32>, JournalError>;
    /// The latest revision of each letter of a source, checked against its entry.
    fn latest_revisions(
        &self,
        source: &str,
    ) -> Result<HashMap<String, LatestRevision>, JournalError>;
}

/// A revision to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRevision {
    pub letter_id: String,
    pub reason: String,
    /// JSON pointers the revision changed.
    pub changed_paths: Vec<String>,
    /// Of the payload it was made from (the original or the revision before it).
    pub sha256_before: String,
    pub after: Vec<u8>,
    /// The jq program of a transform (recorded in full with its digest).
    pub program: Option<String>,
}

/// A letter's newest revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestRevision {
    pub number: i64,
    pub payload: Vec<u8>,
    /// `sha256_hex` of the transform program that made it, if a transform did.
    pub program_sha256: Option<String>,
    /// Who wrote it (a replay of another engineer's revisions needs an approver who
    /// may see them: see the team ledger's four eyes).
    pub actor: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state reads back from its stored spelling, and JSON spells it the same.
    #[test]
    fn states_round_trip_through_their_stored_spelling() {
        for s in ItemState::ALL {
            assert_eq!(ItemState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).ok(), Some(s.as_str().into()));
        }
        for s in ReplayState::ALL {
            assert_eq!(ReplayState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).ok(), Some(s.as_str().into()));
        }
        assert_eq!(ItemState::parse("failed again"), None);
        for k in [DecisionKind::Discard, DecisionKind::Replay] {
            assert_eq!(DecisionKind::parse(k.as_str()), Some(k));
        }
    }
}
