//! One rule for what `d` and `r` apply to: the marked letters in view, if any; else what
//! the cursor is on — on a group row the whole group, on a letter that letter. Marks
//! outside the view (another group, hidden by a filter) are never acted on silently:
//! they are counted and said in the prompt, the title counts all marks, and `Esc` clears
//! them.

use crate::state::{AppState, Pane};
use dlq_core::sanitize::clean;
use dlq_core::store::RowId;
use std::collections::HashSet;

/// What an action would apply to, and in words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Targets {
    pub rows: Vec<RowId>,
    /// `3 marked letters`, `group timeout (23 letters)`, `letter m-17`.
    pub what: String,
    /// Marks left out because they are not in view.
    pub outside: usize,
}

/// The rows the letters pane shows (the selected group, under the filter).
fn in_view(state: &AppState) -> HashSet<RowId> {
    state.letters.order.rows.iter().copied().collect()
}

/// See the module doc.
pub(crate) fn targets(state: &AppState) -> Targets {
    let view = in_view(state);
    let marked: Vec<RowId> = state
        .letters
        .marks
        .iter()
        .copied()
        .filter(|r| view.contains(r))
        .collect();
    let outside = state.letters.marks.len() - marked.len();
    if !marked.is_empty() {
        let what = dlq_core::words::count(marked.len() as u64, "marked letter");
        return Targets {
            rows: marked,
            what,
            outside,
        };
    }
    let (rows, what) = match state.focus {
        Pane::Groups => match state.selected_node() {
            Some(node) => {
                let rows = state.index.members_under(&node.path);
                let what = format!(
                    "group {} ({})",
                    clean(&node.label),
                    dlq_core::words::letters(rows.len())
                );
                (rows, what)
            }
            None => (Vec::new(), String::new()),
        },
        Pane::Letters | Pane::Detail => match state.selected_row() {
            Some(row) => {
                let id = state
                    .catalog
                    .store
                    .row(row)
                    .map(|r| clean(state.catalog.store.id(r)))
                    .unwrap_or_default();
                (vec![row], format!("letter {id}"))
            }
            None => (Vec::new(), String::new()),
        },
    };
    Targets {
        rows,
        what,
        outside,
    }
}

impl Targets {
    /// `group timeout (23 letters)`, with the marks left out said.
    pub(crate) fn describe(&self) -> String {
        if self.outside == 0 {
            return self.what.clone();
        }
        format!(
            "{} ({} marked elsewhere not included: Esc clears marks)",
            self.what, self.outside
        )
    }
}

/// `A`: mark every letter in view (again: unmark them).
pub(crate) fn mark_all_in_view(state: &mut AppState) -> String {
    let view: Vec<RowId> = state.letters.order.rows.clone();
    if !view.is_empty() && view.iter().all(|r| state.letters.marks.contains(r)) {
        for r in &view {
            state.letters.marks.remove(r);
        }
        return format!("unmarked {}", dlq_core::words::letters(view.len()));
    }
    state.letters.marks.extend(view.iter().copied());
    format!("marked {} in view", dlq_core::words::letters(view.len()))
}
