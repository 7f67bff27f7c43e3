//! One rule for what `d` and `r` apply to: the marked letters in view, if any; else what
//! the cursor is on — on a group row the whole group, on a letter that letter. Marks
//! outside the view (another group, hidden by a filter) are never acted on silently:
//! they are counted and said in the prompt, the title counts all marks, and `Esc` clears
//! them.

use crate::state::{AppState, Pane};
use dlq_app::session::Picked;
use dlq_core::sanitize::clean;
use dlq_core::store::RowId;
use std::collections::{HashMap, HashSet};

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
    state.letters.rows().iter().copied().collect()
}

/// See the module doc.
pub(crate) fn targets(state: &AppState) -> Targets {
    let view = in_view(state);
    let marked: Vec<RowId> = state
        .letters
        .marks()
        .iter()
        .copied()
        .filter(|r| view.contains(r))
        .collect();
    let outside = state.letters.marks().len() - marked.len();
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
                let rows = state.browse.index().members_under(&node.path);
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
                    .browse
                    .catalog
                    .store
                    .row(row)
                    .map(|r| clean(state.browse.catalog.store.id(r)))
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

/// The letters behind these rows for the worker (replay, transform): the scan's
/// preparation where the cache still holds it (shared, never prepared again), else
/// where to fetch it. Also the rows by letter id, and how many are neither held nor
/// fetchable (left out).
pub(crate) fn picked(
    state: &AppState,
    rows: &[RowId],
) -> (Vec<Picked>, HashMap<String, Vec<RowId>>, usize) {
    let mut by_id: HashMap<String, Vec<RowId>> = HashMap::new();
    let mut picked = Vec::with_capacity(rows.len());
    let mut unreachable = 0usize;
    for &row in rows {
        let Some(r) = state.browse.catalog.store.row(row).copied() else {
            continue;
        };
        match state.cache.peek(row).cloned() {
            Some(letter) => {
                let preview = state.browse.catalog.store.preview(&r).to_string();
                picked.push(Picked::Held(letter, preview))
            }
            None => match state.browse.catalog.store.kafka_coords(&r) {
                Some(c) => picked.push(Picked::At(c)),
                None => {
                    unreachable += 1;
                    continue;
                }
            },
        }
        by_id
            .entry(state.browse.catalog.store.id(&r).to_string())
            .or_default()
            .push(row);
    }
    (picked, by_id, unreachable)
}

/// A typed count that is not the one asked for: what to say, and whether to ask again.
/// Typing how many letters match *now* — letters arrived since the plan or the prompt —
/// is answered with what changed (they are not in it) and the prompt stays; any other
/// answer cancels. `what`: what did not happen (`was sent`, `discarded`).
pub(crate) fn count_mismatch(typed: &str, want: usize, now: usize, what: &str) -> (String, bool) {
    let typed = typed.trim();
    match typed.parse::<usize>() {
        Ok(n) if n == now && now > want => (
            format!(
                "{now} match now: {} arrived since and are not in it — type {want} for the {want} asked about, or Esc",
                now - want
            ),
            true,
        ),
        _ => (
            format!(
                "typed `{}`, not {want}: nothing {what}",
                dlq_core::sanitize::line(typed, 40)
            ),
            false,
        ),
    }
}

/// `A`: mark every letter in view (again: unmark them).
pub(crate) fn mark_all_in_view(state: &mut AppState) -> String {
    let n = state.letters.rows().len();
    if state.letters.toggle_all() {
        format!("marked {} in view", dlq_core::words::letters(n))
    } else {
        format!("unmarked {}", dlq_core::words::letters(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_the_count_that_matches_now_says_what_arrived_and_asks_again() {
        let (said, again) = count_mismatch("629", 612, 629, "was sent");
        assert!(again);
        assert!(
            said.starts_with("629 match now: 17 arrived since"),
            "{said}"
        );
        assert!(said.contains("type 612"), "{said}");
        let (said, again) = count_mismatch("12", 612, 629, "was sent");
        assert!(!again);
        assert_eq!(said, "typed `12`, not 612: nothing was sent");
    }
}
