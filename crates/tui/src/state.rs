//! Everything the TUI shows, as plain data. Only `update` changes it.

use dlq_app::browse::Browse;
use dlq_core::browse::GroupTree;
use dlq_core::catalog::Catalog;
use dlq_core::grouping::{Dim, TreeNode};
use dlq_core::payload_cache::PayloadCache;
use dlq_core::ports::SourceInfo;
use dlq_core::store::RowId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Groups,
    Letters,
    Detail,
}

pub use crate::tab::Tab;

pub use crate::prompt::{Discarding, Input, Transforming};

/// What an action changed that the lists must follow. Handlers say it
/// (`AppState::needs`) instead of refreshing the tree themselves; the update applies the
/// largest once, before the frame (a batch of letters and the decisions it settles
/// rebuild the tree once, not twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Refresh {
    #[default]
    Nothing,
    /// Only the clock moved: inflow and sparklines, the same letters.
    Inflow,
    /// The index changed (letters, filter, grouping, retention): the tree, and the
    /// selected group's letters gathered again.
    Tree,
    /// Letters changed state outside the index's knowledge (a decision): the index is
    /// rebuilt for the grouping, filter and clock, then the tree.
    Index,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, Default)]
pub struct ScanStatus {
    pub done: u64,
    pub total: Option<u64>,
    pub complete: bool,
    pub error: Option<String>,
    /// Letters that arrived after the initial scan (tail).
    pub live: u64,
    /// Records that could not be read: the first ones, and how many in all.
    pub problems: Vec<dlq_core::catalog::Problem>,
    pub problem_count: u64,
    /// Containers browsed in part.
    pub partial: Vec<dlq_app::session::Coverage>,
    /// The broker ended the browse (why): what it held is back in the queue.
    pub lost: Option<String>,
    /// This browse is a second one (`R`): its end replaces the "browsing again…" line.
    pub again: bool,
    /// Dead letters held in quorum source queues on their way here (at-least-once
    /// dead-lettering), as the broker last said.
    pub awaiting: Vec<dlq_core::awaiting::Awaiting>,
}

impl ScanStatus {
    /// Anything was read from the source (a letter, or a complete scan of an empty one):
    /// a failure before that is a failure to open it (a wrong password, a broker down),
    /// said in full and reported by the exit code.
    pub fn read_any(&self) -> bool {
        self.complete || self.done > 0 || self.live > 0
    }
}

pub use crate::detail_pane::{Detail, DetailPane};

/// Grouping presets `b` (group by) cycles through.
pub const GROUPINGS: [&[Dim]; 6] = [
    &[Dim::Reason, Dim::Version, Dim::Age],
    &[Dim::Reason, Dim::Age],
    &[Dim::Version, Dim::Reason],
    &[Dim::Event, Dim::Reason],
    &[Dim::Origin, Dim::Reason],
    &[Dim::Consumer, Dim::Reason, Dim::Version],
];

pub use crate::letters_pane::LettersPane;

pub use crate::prompt::Prompt;

pub struct AppState {
    pub info: SourceInfo,
    pub now_ms: i64,
    /// The letters, filter, group index, retention and followed decisions (the
    /// application layer's browse model; this screen only renders it).
    pub browse: Browse,
    /// Which of `GROUPINGS` `g` last chose.
    grouping: usize,
    /// Dimensions chosen in the palette (`:group …`), overriding the presets.
    custom_dims: Option<Vec<Dim>>,
    pub groups: GroupTree,
    pub letters: LettersPane,
    pub detail: DetailPane,
    /// Letters this session discarded or replayed (and that did not fail again): the
    /// title counts them.
    pub handled: std::collections::HashSet<RowId>,
    /// The last transform program typed (`T` offers it again).
    pub transform_program: String,
    /// A group the broker empties sooner than this shows in red (`[retention] warn_below`).
    pub expiry_warn_ms: i64,
    pub prompt: Prompt,
    pub focus: Pane,
    pub cache: PayloadCache,
    pub message: Option<(String, Level)>,
    /// Lines the session reported (reconciled decisions, warnings), newest last.
    pub notes: Vec<String>,
    pub scan: ScanStatus,
    pub role: dlq_core::access::Role,
    /// The screen was used by another program (the editor): repaint everything.
    pub force_redraw: bool,
    pub read_only: bool,
    /// Normal mode's keys (`[keys]` over the defaults).
    pub(crate) keymap: std::sync::Arc<crate::keymap::Keymap>,
    /// The ledger fails verification, or could not be read (why): every write is
    /// refused; said on the second line for as long as the session lasts.
    pub ledger_alert: Option<LedgerAlert>,
    /// Who must act on which letters (`[[owners]]` in the config).
    pub owners: dlq_core::owners::Owners,
    /// Links out from a letter (`[[links]]` in the config).
    pub links: Vec<dlq_core::links::LinkTemplate>,
    /// The dry-run screen, the progress pane, unfinished replays.
    pub replay: crate::replaying::pane::ReplayUi,
    /// Rows available to the lists (set by the view on resize), for paging.
    pub page: usize,
    /// `z`: the focused pane fills the body of the screen.
    pub zoom: bool,
    /// `--since` as epoch ms: the title says the count is of that window only.
    pub since_ms: Option<i64>,
    pub quit: bool,
    /// What the tree and the letters list must follow before the next frame.
    refresh: Refresh,
}

impl AppState {
    pub fn new(info: SourceInfo, catalog: Catalog, now_ms: i64, cache_budget: usize) -> Self {
        let dims = GROUPINGS[0];
        AppState {
            info,
            now_ms,
            browse: Browse::new(catalog, dims, now_ms),
            grouping: 0,
            custom_dims: None,
            groups: GroupTree::default(),
            letters: LettersPane::default(),
            detail: DetailPane::default(),
            handled: Default::default(),
            transform_program: String::new(),
            expiry_warn_ms: 6 * 3_600_000,
            prompt: Prompt::default(),
            focus: Pane::Groups,
            cache: PayloadCache::new(cache_budget),
            message: None,
            notes: Vec::new(),
            scan: ScanStatus::default(),
            role: dlq_core::access::Role::Operator,
            force_redraw: false,
            read_only: false,
            keymap: Default::default(),
            ledger_alert: None,
            replay: Default::default(),
            owners: Default::default(),
            links: Vec::new(),
            page: 10,
            zoom: false,
            since_ms: None,
            quit: false,
            refresh: Default::default(),
        }
    }

    pub fn dims(&self) -> &[Dim] {
        match &self.custom_dims {
            Some(d) => d,
            None => GROUPINGS[self.grouping % GROUPINGS.len()],
        }
    }

    /// `g`: the next preset grouping (the caller refreshes the tree).
    pub(crate) fn next_grouping(&mut self) {
        self.custom_dims = None;
        self.grouping = (self.grouping + 1) % GROUPINGS.len();
        self.groups.collapse_all();
        self.browse.set_dims(GROUPINGS[self.grouping]);
    }

    /// `:group …`: dimensions of the engineer's choosing (the caller refreshes the tree).
    pub(crate) fn group_by(&mut self, dims: Vec<Dim>) {
        self.browse.set_dims(&dims);
        self.custom_dims = Some(dims);
        self.groups.collapse_all();
    }

    /// The tree node under the group cursor.
    pub fn selected_node(&self) -> Option<&TreeNode> {
        self.groups.selected()
    }

    /// A decision of this session changed a letter's state: the store and the title's
    /// count of handled letters follow.
    pub fn decided(&mut self, row: RowId, to: dlq_core::model::TriageState) {
        self.browse.set_state(row, to);
        if to.unhandled() || to == dlq_core::model::TriageState::Replaying {
            self.handled.remove(&row);
        } else {
            self.handled.insert(row);
        }
    }

    /// An action changed what the lists show: applied once, before the frame.
    pub(crate) fn needs(&mut self, what: Refresh) {
        self.refresh = self.refresh.max(what);
    }

    /// What the lists must follow, once.
    pub(crate) fn take_refresh(&mut self) -> Refresh {
        std::mem::take(&mut self.refresh)
    }

    pub fn selected_row(&self) -> Option<RowId> {
        self.letters.selected()
    }
}

/// What is wrong with the ledger for the whole session (the second line says it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerAlert {
    /// It fails verification: every write is refused.
    Unverified(String),
    /// It could not be read when the browse started: no letter's decision is known
    /// (shown `unknown`), and nothing can be recorded.
    Unreachable(String),
}

impl LedgerAlert {
    /// The second line's words.
    pub fn line(&self) -> String {
        match self {
            LedgerAlert::Unverified(why) => format!("ledger fails verification: read-only · {why}"),
            LedgerAlert::Unreachable(why) => {
                format!("ledger unreachable: decisions unknown, nothing can be recorded · {why}")
            }
        }
    }
}
