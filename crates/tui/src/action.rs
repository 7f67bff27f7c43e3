//! Everything that can happen to the TUI: keys (through the keymap), mouse, resize, and
//! the worker's reports. `update` is the only consumer.

use crate::state::Tab;
use dlq_app::session::{DiscardTarget, Prepared};
use dlq_core::model::RawLetter;
use dlq_core::store::RowId;

#[derive(Debug)]
pub enum Action {
    Quit,
    ToggleHelp,
    FocusNext,
    FocusPrev,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Expand a group / open a letter / move right.
    Open,
    /// Collapse a group / move left.
    Close,
    StartFuzzy,
    StartExpr,
    StartCommand,
    InputChar(char),
    InputBackspace,
    /// Ctrl-U: clear the line (a filter prompt opens on the current filter).
    InputClear,
    /// Ctrl-W: delete the word before the cursor.
    InputDeleteWord,
    InputSubmit,
    /// Esc: leave input, close help, or clear the filter.
    Cancel,
    CycleGrouping,
    ToggleSort,
    ToggleMark,
    SetTab(Tab),
    NextTab,
    Copy,
    Diff,
    /// `r`: the dry-run of a replay of the marked letters, or the selected group's.
    StartReplay,
    /// `K`: the kill switch of the running replay.
    KillReplay,
    /// In the dry-run screen: move between options, change one, start.
    ReplayField(i8),
    ReplayValue(i8),
    ReplayStart,
    /// PgDn/PgUp on the dry-run screen: scroll the plan.
    ReplayScroll(i8),
    /// Esc on the dry-run screen: nothing is sent.
    ReplayClose,
    /// From the worker: the dry-run (or why there is none).
    ReplayPlanned(PlanView),
    ReplayPlanFailed(String),
    /// From the worker: the replay started, moved on, changed letters, ended.
    ReplayStarted {
        id: String,
        planned: usize,
    },
    ReplayProgress(Box<dlq_core::replay::Progress>),
    ReplayLetters(Vec<(String, dlq_core::replay::LetterOutcome)>),
    ReplayEnded {
        id: String,
        state: String,
        summary: String,
    },
    /// From the worker: replays of this source left unfinished.
    ReplaysUnfinished(Vec<dlq_app::session::Unfinished>),
    /// `R`: browse the source again.
    Rebrowse,
    /// From the worker: the broker ended the browse (its held letters are back in the
    /// queue); `R` browses again.
    BrowseLost(String),
    /// From the worker: a new browse starts; what the old one loaded goes.
    Rebrowsing,
    /// From the worker: the letters an unfinished replay has left (to resume it).
    ResumeLetters(String, Result<Vec<String>, String>),
    /// `d`: discard the marked letters, or the selected one.
    StartDiscard,
    /// `u`: see the selected letter unmasked (privileged, with a reason).
    StartUnmask,
    /// `e`: edit the selected letter's payload (masked) for a revision.
    StartEdit,
    /// After the editor: what happened.
    Edited(Result<String, String>),
    /// From the worker: a letter's ledger history.
    History(RowId, Vec<String>),
    /// From the worker: the unmask was audited (or why not).
    Unmasked(RowId, Result<(), String>),
    /// From the worker: the source is open and says what browsing does to it.
    SourceOpened(dlq_core::ports::SourceInfo),
    /// From the worker: a container browsed in part ("browsed N of M").
    Partial(dlq_app::session::Coverage),
    /// From the worker: a record that could not be read (counted, listed on :problems).
    Problem(dlq_core::catalog::Problem),
    /// From the render thread: a big payload's view (row, unmasked, view).
    Rendered(RowId, bool, dlq_core::payload_view::PayloadView),
    /// From the worker: the ledger's decisions on this source (after the scan and after
    /// each discard), for the detail's state line.
    Decisions(Vec<dlq_core::journal::Decision>),
    /// From the worker: lines the user must see (reconciled decisions, warnings).
    Notes(Vec<String>),
    /// From the worker: a discard finished (rows done, and a summary line).
    DiscardDone {
        rows: Vec<RowId>,
        message: String,
        ok: bool,
    },
    /// Mouse: click at a cell, scroll wheel.
    Click {
        column: u16,
        row: u16,
    },
    Scroll {
        column: u16,
        row: u16,
        down: bool,
    },
    Resize,
    /// Clock tick (ages move on).
    Tick(i64),
    /// From the worker.
    Letters(Vec<Prepared>),
    Live(Vec<Prepared>),
    Progress {
        done: u64,
        total: Option<u64>,
    },
    ScanDone,
    ScanFailed(String),
    Fetched(RowId, Result<RawLetter, String>),
}

/// The dry-run as the worker planned it: what the screen shows.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanView {
    pub id: String,
    pub planned: usize,
    pub options: dlq_core::replay::Options,
    /// Sanitized lines (`core::replay::describe`), the same the CLI prints.
    pub lines: Vec<String>,
    pub resuming: bool,
}

/// What `update` asks the outside world to do.
/// What `update` asks for: the session's work (one request type, handed to the worker
/// as is), or the UI thread's own (clipboard, off-thread rendering, the editor).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// For the session worker.
    Session(Request),
    /// Copy this (already masked) text to the clipboard.
    Copy(String),
    /// Render a big payload off the UI thread (masking is linear but not free).
    RenderPayload {
        row: RowId,
        payload: Vec<u8>,
        body: dlq_core::model::BodyKind,
        unmasked: bool,
    },
    /// Suspend the TUI, edit this payload, record a revision.
    Edit {
        letter_id: String,
        payload: Vec<u8>,
        reason: String,
    },
}

/// Requests the session worker serves, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Fetch a letter's bytes from where it sits.
    Fetch(RowId, dlq_core::model::Coords),
    /// Discard these letters: ledger first, then the broker (the worker's session holds
    /// the deliveries).
    Discard {
        rows: Vec<(RowId, DiscardTarget)>,
        reason: String,
    },
    /// Read a letter's ledger history.
    History(RowId, String),
    /// Unmask a letter: the app checks the role and audits before anything is shown.
    Unmask {
        row: RowId,
        letter_id: String,
        reason: String,
    },
    /// Write an audit entry (a refusal the UI saw first, a replay control).
    Audit {
        action: String,
        target: String,
        detail: String,
    },
    /// The dry-run of a replay of these letters (or of what `resume` has left).
    PlanReplay {
        picked: Vec<dlq_app::session::Picked>,
        opts: dlq_core::replay::Options,
        resume: Option<String>,
    },
    /// The same letters with other options (the dry-run screen's choices).
    Replan(dlq_core::replay::Options),
    /// Run the planned replay; `control` is the kill switch the UI holds.
    RunReplay {
        id: String,
        control: dlq_core::replay::Control,
    },
    /// The dry-run screen was closed: forget the plan.
    DropPlan,
    /// Close an unfinished replay without sending the rest.
    AbandonReplay(String),
    /// Which letters an unfinished replay has left (to resume it).
    ResumeLetters(String),
    /// Drop this browse and browse the source again on a new connection (after the
    /// broker closed it, or to refresh).
    Rebrowse,
}
