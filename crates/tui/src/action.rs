//! Everything that can happen to the TUI: keys (through the keymap), mouse, resize, and
//! the worker's reports. `update` is the only consumer.

use crate::tab::Tab;
use dlq_app::session::{DiscardTarget, Prepared};
use dlq_core::store::RowId;

/// Everything `update` handles, split by who caused it and then by area, so each
/// handler matches its own enum exhaustively (no catch-all arm can drop a misrouted
/// one).
#[derive(Debug)]
pub enum Action {
    /// What the user asked for (keys through the keymap, the mouse), and the terminal's
    /// own events (resize, the clock's tick).
    Intent(Intent),
    /// What the session worker and the render thread report.
    Event(Event),
}

#[derive(Debug)]
pub enum Intent {
    Nav(Nav),
    Typing(Typing),
    Act(Act),
    Replay(ReplayKey),
    View(ViewKey),
}

#[derive(Debug)]
pub enum Event {
    Scan(BrowseEvent),
    Ledger(LedgerEvent),
    Replay(ReplayEvent),
}

/// Cursor and focus moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
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
}

/// The prompt line: opening it, typing, submitting, leaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typing {
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
}

/// Actions on letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// `u`: see the selected letter unmasked (privileged, with a reason).
    StartUnmask,
    /// `e`: edit the selected letter's payload (masked) for a revision.
    StartEdit,
    /// `d`: discard the marked letters, or the selected one.
    StartDiscard,
    /// `T`: one jq program over the marked letters or the group, as revisions.
    StartTransform,
    ToggleMark,
    /// `A`: mark every letter in view (again: unmark them).
    MarkAll,
    /// `w`: why the selected group fails — since when, with which release, what is
    /// different, a suggested fix.
    Why,
    Diff,
    Copy,
    /// `L`: the selected letter's links out (`[[links]]`), to the clipboard.
    CopyLinks,
    /// `R`: browse the source again.
    Rebrowse,
}

/// The replay's keys: the dry-run screen and the kill switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayKey {
    /// `r`: the dry-run of a replay of the marked letters, or the selected group's.
    StartReplay,
    /// `K`: the kill switch of the running replay.
    KillReplay,
    /// `p`: hold the running replay where it is (again: go on at the set rate).
    TogglePause,
    /// In the dry-run screen: move between options, change one, start.
    ReplayField(i8),
    ReplayValue(i8),
    ReplayStart,
    /// PgDn/PgUp on the dry-run screen: scroll the plan.
    ReplayScroll(i8),
    /// Esc on the dry-run screen: nothing is sent.
    ReplayClose,
    /// `x`: put away the progress pane of a replay that has ended (`:replays` brings it
    /// back).
    HidePane,
}

/// What the screen shows and how: help, grouping, order, tabs, mouse, size, clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKey {
    Quit,
    ToggleHelp,
    /// j/k, PgDn/PgUp in the help: scroll it by this many lines.
    HelpScroll(i16),
    /// `z`: the focused pane takes the whole body of the screen (again: back).
    Zoom,
    /// Ctrl-Z: a key in raw mode, not job control; says what to use instead.
    Suspend,
    CycleGrouping,
    ToggleSort,
    SetTab(Tab),
    NextTab,
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
}

/// The browse: letters, progress, fetched bytes, problems, the render thread's views.
#[derive(Debug)]
pub enum BrowseEvent {
    Letters(Vec<Prepared>),
    Live(Vec<Prepared>),
    Progress {
        done: u64,
        total: Option<u64>,
    },
    ScanDone,
    ScanFailed(String),
    /// A letter read again and prepared by the session (its cached copy was evicted).
    Fetched(RowId, Result<dlq_core::payload_cache::Kept, String>),
    /// A record that could not be read (counted, listed on :problems).
    Problem(dlq_core::catalog::Problem),
    /// A container browsed in part ("browsed N of M").
    Partial(dlq_app::session::Coverage),
    /// The source is open and says what browsing does to it.
    SourceOpened(dlq_core::ports::SourceInfo),
    /// From the render thread: a big payload's view (row, unmasked, view).
    Rendered(RowId, bool, dlq_core::payload_view::PayloadView),
    /// The broker ended the browse (its held letters are back in the queue); `R`
    /// browses again.
    BrowseLost(String),
    /// A new browse starts; what the old one loaded goes.
    Rebrowsing,
    /// What a copy did (the clipboard, the terminal's OSC 52, or nothing).
    Copied(Result<String, String>),
    /// How long the broker keeps each container's letters (read after the scan).
    Retention(Vec<(String, dlq_core::retention::Retention)>),
    /// Dead letters held upstream on their way here (read every 15 s), or why that
    /// could not be read.
    Awaiting(Result<Vec<dlq_core::awaiting::Awaiting>, String>),
}

/// What the ledger recorded or holds.
#[derive(Debug)]
pub enum LedgerEvent {
    /// A letter's ledger history.
    History(RowId, Vec<String>),
    /// After the editor: what happened.
    Edited(Result<String, String>),
    /// The unmask was audited (or why not).
    Unmasked(RowId, Result<(), String>),
    /// The ledger's decisions on this source (after the scan and after each discard),
    /// for the detail's state line.
    Decisions(Vec<dlq_core::journal::Decision>),
    /// Lines the user must see (reconciled decisions, warnings).
    Notes(Vec<String>),
    /// The ledger fails verification: why (every write will be refused).
    Unverified(String),
    /// The ledger could not be read when the browse started: why (decisions unknown).
    Unreachable(String),
    /// A discard finished (rows done, and a summary line).
    DiscardDone {
        rows: Vec<RowId>,
        message: String,
        ok: bool,
    },
    /// A transform's dry-run: its lines and how many revisions confirming records.
    TransformPlanned(Result<(Vec<String>, usize), String>),
    /// A transform recorded (the line to show), or why not.
    TransformRecorded(Result<String, String>),
}

/// A replay's plan and run, as the worker reports them.
#[derive(Debug)]
pub enum ReplayEvent {
    /// The dry-run (or why there is none).
    ReplayPlanned(PlanView),
    ReplayPlanFailed(String),
    /// The replay started, moved on, changed letters, ended.
    ReplayStarted {
        id: String,
        planned: usize,
    },
    ReplayProgress(Box<dlq_core::replay::Progress>),
    ReplayLetters(Vec<(String, dlq_core::replay::LetterOutcome)>),
    ReplayEnded {
        id: String,
        /// How it ended; `None`: it never started (nothing was sent).
        state: Option<dlq_core::journal::ReplayState>,
        summary: String,
    },
    /// Replays of this source left unfinished.
    ReplaysUnfinished(Vec<dlq_app::session::Unfinished>),
    /// Replays of this source other processes are sending now (a team ledger): a line
    /// each, with who and how far.
    ReplaysElsewhere(Vec<String>),
    /// `:approve ID`: the plan awaiting approval (title, lines), or why not.
    Approval(Result<(String, Vec<String>), String>),
    /// The letters an unfinished replay has left (to resume it).
    ResumeLetters(Resuming, Result<Vec<String>, String>),
}

macro_rules! into_action {
    ($($ty:ident => $top:ident :: $var:ident),* $(,)?) => {$(
        impl From<$ty> for Action {
            fn from(a: $ty) -> Action {
                Action::$top($top::$var(a))
            }
        }
    )*};
}

into_action!(
    Nav => Intent::Nav,
    Typing => Intent::Typing,
    Act => Intent::Act,
    ReplayKey => Intent::Replay,
    ViewKey => Intent::View,
    BrowseEvent => Event::Scan,
    LedgerEvent => Event::Ledger,
    ReplayEvent => Event::Replay,
);

/// The dry-run as the worker planned it: what the screen shows.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanView {
    pub id: String,
    pub planned: usize,
    pub options: dlq_core::replay::Options,
    /// Sanitized lines (`core::replay::describe`), the same the CLI prints.
    pub lines: Vec<String>,
    pub resuming: bool,
    /// Why it cannot run (`ReplayDraft::refusal`), if it cannot.
    pub refusal: Option<String>,
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
        letter: std::sync::Arc<dlq_core::model::DeadLetter>,
        unmasked: bool,
    },
    /// Suspend the TUI, edit this payload, record a revision.
    Edit {
        letter_id: String,
        letter: std::sync::Arc<dlq_core::model::DeadLetter>,
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
    /// A refusal the UI saw first: the application layer checks it again and audits it.
    Refused {
        permission: dlq_core::access::Permission,
        target: String,
    },
    /// A running replay was paused (`true`) or let go on: audited by the application layer.
    Paused { replay: String, paused: bool },
    /// The dry-run of a replay of these letters (or of what `resume` has left).
    PlanReplay {
        picked: Vec<dlq_app::session::Picked>,
        opts: dlq_core::replay::Options,
        resume: Option<Resuming>,
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
    ResumeLetters(Resuming),
    /// `:approve ID [--yes [--reject]]`: show a plan awaiting approval, or decide it.
    Approve { id: String, decide: Option<bool> },
    /// Drop this browse and browse the source again on a new connection (after the
    /// broker closed it, or to refresh).
    Rebrowse,
    /// A transform's dry-run on these letters (the worker keeps it until recorded or
    /// dropped).
    PlanTransform {
        picked: Vec<dlq_app::session::Picked>,
        program: String,
        reason: String,
    },
    /// Record the planned transform's revisions.
    RecordTransform,
    /// The transform's dry-run was closed: nothing recorded.
    DropTransform,
}

/// `:resume ID [--resend-unconfirmed]`: which replay, and whether the letters that may
/// have been sent before a crash (a destination that cannot be read back) go again.
#[derive(Debug, Clone, PartialEq)]
pub struct Resuming {
    pub id: String,
    pub resend_unconfirmed: bool,
}
