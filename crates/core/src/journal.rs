//! The journal port: every decision, revision, replay step and audit entry, written
//! before the broker is touched. Core's decisions and replay engine, and the app's
//! session, speak only this trait; `dlq-ledger` implements it on SQLite, and a team
//! ledger on a server is a second implementation with no change above it.

use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

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
    #[error("replay {replay_id} is being sent by {holder} (as {actor}, heartbeat {heartbeat_at}): one sender per replay; wait for it to end, or stop it (K in its TUI, Ctrl-C in its CLI)")]
    LeaseHeld {
        replay_id: String,
        holder: String,
        actor: String,
        heartbeat_at: String,
    },
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

/// How a replay stands in the journal. Spelled (`as_str`) only where it is stored or
/// printed: the ledger's rows, JSON, the screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayState {
    Running,
    Completed,
    AutoStopped,
    Killed,
    Failed,
    /// The operator gave up on the letters it left (they stay in the DLQ).
    Abandoned,
    /// Never stored: `Running` with no live process behind it (see `shown_state`).
    Interrupted,
}

impl ReplayState {
    pub const ALL: [ReplayState; 7] = [
        ReplayState::Running,
        ReplayState::Completed,
        ReplayState::AutoStopped,
        ReplayState::Killed,
        ReplayState::Failed,
        ReplayState::Abandoned,
        ReplayState::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReplayState::Running => "running",
            ReplayState::Completed => "completed",
            ReplayState::AutoStopped => "auto-stopped",
            ReplayState::Killed => "killed",
            ReplayState::Failed => "failed",
            ReplayState::Abandoned => "abandoned",
            ReplayState::Interrupted => "interrupted",
        }
    }

    /// The stored spelling back (the ledger's edge); `None` for anything else.
    pub fn parse(s: &str) -> Option<ReplayState> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Stopped with letters left that a `--resume` may send.
    pub fn resumable(self) -> bool {
        matches!(
            self,
            ReplayState::Running
                | ReplayState::Interrupted
                | ReplayState::Killed
                | ReplayState::AutoStopped
                | ReplayState::Failed
        )
    }
}

impl std::fmt::Display for ReplayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where one planned letter of a replay stands in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ItemState {
    /// Not sent (yet, or again: journaled as sending but stopped before the publish).
    Planned,
    /// The publish was about to start: in doubt until confirmed.
    Sending,
    /// Confirmed by the broker; its DLQ copy not yet settled.
    Confirmed,
    /// Confirmed and its DLQ copy settled (or nothing to settle: Kafka).
    Settled,
    /// Sent, then back in the DLQ.
    FailedAgain,
    /// The broker refused the publish.
    Refused,
    /// Not sent: the stale-key check or the plan held it back.
    HeldBack,
}

impl ItemState {
    pub const ALL: [ItemState; 7] = [
        ItemState::Planned,
        ItemState::Sending,
        ItemState::Confirmed,
        ItemState::Settled,
        ItemState::FailedAgain,
        ItemState::Refused,
        ItemState::HeldBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Planned => "planned",
            ItemState::Sending => "sending",
            ItemState::Confirmed => "confirmed",
            ItemState::Settled => "settled",
            ItemState::FailedAgain => "failed-again",
            ItemState::Refused => "refused",
            ItemState::HeldBack => "held-back",
        }
    }

    /// The stored spelling back (the ledger's edge); `None` for anything else.
    pub fn parse(s: &str) -> Option<ItemState> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Finished for good: never sent again by a resume.
    pub fn done(self) -> bool {
        matches!(
            self,
            ItemState::Confirmed | ItemState::Settled | ItemState::FailedAgain
        )
    }

    /// The broker has it (confirmed, whether or not settled since).
    pub fn delivered(self) -> bool {
        matches!(self, ItemState::Confirmed | ItemState::Settled)
    }

    /// A state whose note is an error worth keeping on the item.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            ItemState::Refused | ItemState::HeldBack | ItemState::FailedAgain
        )
    }
}

impl std::fmt::Display for ItemState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where a four-eyes approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalState {
    Awaiting,
    Approved,
    Rejected,
    /// Approved, and its author started the replay (an approval is spent once).
    Used,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Awaiting => "awaiting",
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Used => "used",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ApprovalState::Awaiting,
            ApprovalState::Approved,
            ApprovalState::Rejected,
            ApprovalState::Used,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }
}

impl std::fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plan over `approval_above` letters, as recorded for a second operator to approve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Approval {
    /// The replay id its author planned.
    pub id: String,
    pub source: String,
    /// What was approved: the plan's letters and targets (`Plan::digest`).
    pub digest: String,
    pub letters: u64,
    /// The dry-run as its author saw it (masked), for the approver.
    pub plan: String,
    pub author: String,
    pub requested_at: String,
    pub state: ApprovalState,
    pub approver: Option<String>,
    pub decided_at: Option<String>,
    pub note: Option<String>,
}

impl Approval {
    /// A request for approval: what the author proposes; the ledger fills in who and
    /// when (the server's actor and time), and its state.
    pub fn request(id: String, source: String, digest: String, letters: u64, plan: String) -> Self {
        Approval {
            id,
            source,
            digest,
            letters,
            plan,
            author: String::new(),
            requested_at: String::new(),
            state: ApprovalState::Awaiting,
            approver: None,
            decided_at: None,
            note: None,
        }
    }
}

/// One replay as `replays` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayRow {
    pub id: String,
    pub source: String,
    pub target: String,
    pub actor: String,
    pub started_at: String,
    pub state: ReplayState,
    pub detail: serde_json::Value,
    /// Being sent by another live process (`pid N on HOST, heartbeat …`): it may not be
    /// resumed or abandoned from here.
    pub held_by: Option<String>,
}

impl ReplayRow {
    /// Its state as an operator needs it: `running` with no live process behind it
    /// (the pid journaled at start or resume; `alive` asks the OS) is `interrupted`.
    pub fn shown_state(&self, alive: &dyn Fn(u64) -> bool) -> ReplayState {
        if self.state != ReplayState::Running {
            return self.state;
        }
        match self.detail.get("pid").and_then(|p| p.as_u64()) {
            Some(p) if alive(p) => ReplayState::Running,
            _ => ReplayState::Interrupted,
        }
    }
}

/// A letter a live replay holds: planned or being sent by a process whose lease is
/// fresh. A second replay of it waits, so each letter has one sender.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    pub letter_id: String,
    pub binding: String,
    pub replay_id: String,
    pub actor: String,
    /// When that replay started.
    pub since: String,
    /// `pid N on HOST`.
    pub holder: String,
    /// That replay's letters confirmed so far, and planned in all.
    pub confirmed: usize,
    pub planned: usize,
}

impl Claim {
    /// `replaying by alice · r-… · since 10:42 · 212 of 540 confirmed (pid 7 on bastion-1)`
    pub fn describe(&self) -> String {
        crate::sanitize::clean(&format!(
            "replaying by {} · {} · since {} · {} of {} confirmed ({})",
            self.actor, self.replay_id, self.since, self.confirmed, self.planned, self.holder
        ))
    }
}

/// A letter a replay that is not running (killed, lost, abandoned) had `sending` when it
/// stopped: it may have reached the broker. Nobody may send it again before reading its
/// target back for that replay's id (or, where the target cannot be read, being told
/// `--resend-unconfirmed`): see `Plan::read_back`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InDoubt {
    pub letter_id: String,
    pub binding: String,
    pub replay_id: String,
    pub seq: u32,
    pub actor: String,
    /// That replay's journaled detail (`origin_from`: where its targets ended when it
    /// was planned, to read back from).
    pub detail: serde_json::Value,
}

impl InDoubt {
    /// The claim it makes on its letter, as a refused start says it.
    pub fn as_claim(&self) -> Claim {
        Claim {
            letter_id: self.letter_id.clone(),
            binding: self.binding.clone(),
            replay_id: self.replay_id.clone(),
            actor: self.actor.clone(),
            since: String::new(),
            holder: "nobody: it stopped with this letter in flight (in doubt)".into(),
            confirmed: 0,
            planned: 0,
        }
    }
}

/// One planned letter of a replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayItemRow {
    pub seq: u32,
    pub letter_id: String,
    pub binding: String,
    pub location: String,
    pub state: ItemState,
    pub at: Option<String>,
    pub published: Option<String>,
    pub error: Option<String>,
}

/// A letter the broker confirmed.
pub struct ConfirmedLetter<'a> {
    pub seq: u32,
    pub letter_id: &'a str,
    pub binding: &'a str,
    pub location: &'a str,
    pub published: Option<&'a str>,
    /// Nothing to settle on the broker (Kafka): applied in the ledger at once.
    pub ledger_only: bool,
}

/// One planned letter as the replay journal records it: its place in the plan, id,
/// binding (the exact letter) and where it sits.
pub type PlannedItem<'a> = (u32, &'a str, &'a str, &'a str);

/// Durable decisions, revisions, the replay journal and the keyed audit chain.
///
/// Ledger first, broker second: every method that records returns only once the record
/// is durable. Object safe, so the session holds `Box<dyn Journal>`.
/// Changes to a shared ledger as they are committed (another engineer's discard, a
/// replay's progress): what the TUI listens to, so its view follows the team's.
pub trait LedgerWatch: Send {
    /// Whether anything changed within `timeout` (changes close together are reported
    /// once).
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, JournalError>;
}

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
    /// These items' publishes are about to start.
    fn replay_sending(&mut self, id: &str, seqs: &[u32]) -> Result<(), JournalError>;
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
