//! The replay journal's vocabulary: a replay's and a letter's states, approvals, the
//! lease a running replay holds, letters in doubt, and the rows the ledger keeps.

use super::*;

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
    /// Not sent: decided elsewhere (discarded, replayed by another replay) after the
    /// plan was made; found in the transaction that would have journaled it `sending`.
    Withdrawn,
}

impl ItemState {
    pub const ALL: [ItemState; 8] = [
        ItemState::Planned,
        ItemState::Sending,
        ItemState::Confirmed,
        ItemState::Settled,
        ItemState::FailedAgain,
        ItemState::Refused,
        ItemState::HeldBack,
        ItemState::Withdrawn,
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
            ItemState::Withdrawn => "withdrawn",
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
            ItemState::Confirmed
                | ItemState::Settled
                | ItemState::FailedAgain
                | ItemState::Withdrawn
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
            ItemState::Refused
                | ItemState::HeldBack
                | ItemState::FailedAgain
                | ItemState::Withdrawn
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
    /// What a team ledger binds and renders itself (JSON: `kind`, `target`, `options`,
    /// `letters` as `[id, binding]` pairs, a discard's `reason`): sent with a request,
    /// never read back — the approver reads the server's rendering in `plan`.
    #[serde(skip)]
    pub facts: Option<String>,
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
            facts: None,
        }
    }

    /// The request with the facts a team ledger binds (see [`Approval::facts`]).
    pub fn with_facts(mut self, facts: serde_json::Value) -> Self {
        self.facts = Some(facts.to_string());
        self
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
    /// Whoever sends it — this process or another, on any host — as the ledger's lock
    /// says (the file lock, the server's lease): `running on HOST (pid N) by USER,
    /// heartbeat 2 s ago`. `None`: nobody holds it (a `running` row is interrupted).
    pub running_on: Option<String>,
}

impl ReplayRow {
    /// Its state as an operator needs it: `running` with nobody holding its lock is
    /// `interrupted`. Decided by the ledger's lock alone — never by this host's process
    /// table, which cannot see a sender on another bastion, in another pid namespace or,
    /// under `hidepid=2`, of another user.
    pub fn shown_state(&self) -> ReplayState {
        match (self.state, &self.running_on) {
            (ReplayState::Running, None) => ReplayState::Interrupted,
            (state, _) => state,
        }
    }
}

/// A planned letter the ledger would not let go (`ItemState::Withdrawn`): its seq and
/// what was decided of it since the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Withdrawn {
    pub seq: u32,
    pub why: String,
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
