//! The group index, the tree and the selected group's letters, kept in step.

use crate::state::{AppState, Refresh};

/// Re-sorting a huge group on every batch would stall the UI; wait for the scan.
const LIVE_LETTERS_LIMIT: usize = 200_000;

/// Bring the tree and the letters list in step with what changed.
pub(crate) fn refresh(state: &mut AppState, what: Refresh) {
    if what == Refresh::Index {
        state.browse.rebuild();
    }
    if what >= Refresh::Inflow {
        refresh_inflow(state);
    }
    if what >= Refresh::Tree {
        state.letters.stale();
    }
}

/// The tree's inflow and sparklines again, keeping the selected node if it still
/// exists.
fn refresh_inflow(state: &mut AppState) {
    let nested = state.dims().len() > 1;
    state.groups.refresh(
        state.browse.index(),
        &state.browse.catalog.store,
        nested,
        &state.owners,
    );
}

/// The letters of the selected node, sorted, keeping the selected letter.
pub(crate) fn refresh_letters(state: &mut AppState) {
    let Some(path) = state.selected_node().map(|n| n.path.clone()) else {
        state.letters.clear();
        return;
    };
    let members = state.browse.index().timed_members_under(&path);
    if members.len() > LIVE_LETTERS_LIMIT
        && !state.scan.complete
        && !state.letters.rows().is_empty()
    {
        return; // stay dirty; sorted once the scan completes
    }
    state.letters.fill(members, state.scan.complete);
}

/// Put at least the first `want` letters of the list in order.
pub(crate) fn sort_letters(state: &mut AppState, want: usize) {
    state.letters.sort_to(&state.browse.catalog.store, want);
}
