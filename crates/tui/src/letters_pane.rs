//! The letters pane as a component: the selected group's letters in time order, the
//! cursor, the marks, and whether the list must be gathered again. Its state is its
//! own: the rest of the TUI asks it (`rows`, `selected`, `marks`) and tells it what
//! happened (`stale`, `let_go`, `fill`, `click`, `step`), never setting its fields.

use dlq_core::browse::LetterOrder;
use dlq_core::store::{LetterStore, RowId};
use std::collections::BTreeSet;

#[derive(Debug)]
pub struct LettersPane {
    /// Letters of the selected node in time order (big groups are sorted lazily: the
    /// first pages at once, the rest when paged to).
    order: LetterOrder,
    /// The list no longer matches the selected group (another group, new letters, a
    /// new order): gathered again before the next frame.
    dirty: bool,
    cursor: usize,
    /// The selected letter stays selected as letters arrive and the list re-sorts: the
    /// operator put the cursor on it (moved, clicked, opened it), or the scan is complete
    /// (a live arrival does not pull the detail away). While a scan streams in and
    /// nothing was chosen the cursor stays on the top letter, so the finished scan shows
    /// the newest, not the one that happened to be first when the scan began. Choosing
    /// another group lets go.
    pinned: bool,
    marks: BTreeSet<RowId>,
}

impl Default for LettersPane {
    fn default() -> Self {
        LettersPane {
            order: LetterOrder::default(),
            dirty: true,
            cursor: 0,
            pinned: false,
            marks: BTreeSet::new(),
        }
    }
}

impl LettersPane {
    /// The list, in order as far as it is sorted.
    pub fn rows(&self) -> &[RowId] {
        &self.order.rows
    }

    /// How many leading rows are in order.
    pub fn sorted(&self) -> usize {
        self.order.sorted
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The letter under the cursor.
    pub fn selected(&self) -> Option<RowId> {
        self.order.rows.get(self.cursor).copied()
    }

    pub fn newest_first(&self) -> bool {
        self.order.newest_first
    }

    pub fn marks(&self) -> &BTreeSet<RowId> {
        &self.marks
    }

    /// Whether the list must be gathered again before it is shown.
    pub(crate) fn is_stale(&self) -> bool {
        self.dirty
    }

    /// The letters changed under the list (arrivals, decisions, a new index).
    pub(crate) fn stale(&mut self) {
        self.dirty = true;
    }

    /// Another group was chosen: its letters, from the top.
    pub(crate) fn let_go(&mut self) {
        self.pinned = false;
        self.dirty = true;
    }

    /// The engineer chose this letter (opened it, jumped to it): it stays selected.
    pub(crate) fn pin(&mut self) {
        self.pinned = true;
    }

    pub(crate) fn set_newest_first(&mut self, newest: bool) {
        self.order.newest_first = newest;
        self.dirty = true;
    }

    /// No group selected: no letters.
    pub(crate) fn clear(&mut self) {
        self.order.rows.clear();
        self.dirty = false;
    }

    /// A group's members with their times, ordered; the pinned letter keeps the cursor
    /// (else the top). A complete scan pins what is selected.
    pub fn fill(&mut self, members: Vec<(i64, RowId)>, scan_complete: bool) {
        let keep = self.selected().filter(|_| self.pinned);
        self.order.fill(members);
        let rows = &self.order.rows;
        self.cursor = keep
            .and_then(|k| rows.iter().position(|r| *r == k))
            .unwrap_or(0)
            .min(rows.len().saturating_sub(1));
        self.pinned |= scan_complete;
        self.dirty = false;
    }

    /// Put at least the first `want` letters in order.
    pub(crate) fn sort_to(&mut self, store: &LetterStore, want: usize) {
        self.order.sort_to(store, want);
    }

    /// Move the cursor by `delta` (clamped) and pin it. Whether the rows ahead of a page
    /// or two (`lookahead`) are still unsorted.
    pub(crate) fn step(&mut self, delta: i64, lookahead: usize) -> bool {
        let len = self.order.rows.len();
        self.cursor = if len == 0 {
            0
        } else {
            (self.cursor as i64)
                .saturating_add(delta)
                .clamp(0, len as i64 - 1) as usize
        };
        self.pinned = true;
        self.cursor + lookahead >= self.order.sorted
    }

    /// A click on the `line`th row shown, in a list `height` rows high: that letter,
    /// counted from the page the view shows (`paging::list_offset`).
    pub(crate) fn click(&mut self, line: usize, height: usize) {
        let i = crate::paging::list_offset(self.cursor, height) + line;
        if i < self.order.rows.len() {
            self.cursor = i;
            self.pinned = true;
        }
    }

    /// Space: mark or unmark a letter.
    pub(crate) fn toggle_mark(&mut self, row: RowId) {
        if !self.marks.remove(&row) {
            self.marks.insert(row);
        }
    }

    pub(crate) fn unmark(&mut self, row: &RowId) {
        self.marks.remove(row);
    }

    /// Forget every mark; how many there were.
    pub(crate) fn clear_marks(&mut self) -> usize {
        let n = self.marks.len();
        self.marks.clear();
        n
    }

    /// `a`: mark every letter in view, or unmark them when all are marked already.
    /// Whether they are marked now.
    pub(crate) fn toggle_all(&mut self) -> bool {
        let view = &self.order.rows;
        if !view.is_empty() && view.iter().all(|r| self.marks.contains(r)) {
            for r in view {
                self.marks.remove(r);
            }
            return false;
        }
        self.marks.extend(view.iter().copied());
        true
    }

    /// A new browse: row ids start again, so nothing of the old list means anything.
    pub(crate) fn reset(&mut self) {
        let newest_first = self.order.newest_first;
        *self = LettersPane::default();
        self.order.newest_first = newest_first;
    }
}
