//! Cursor and focus: keys, clicks and the wheel.

use super::*;

/// Cursor and focus moves.
pub(crate) fn navigate(state: &mut AppState, action: Nav) {
    match action {
        Nav::FocusNext => {
            state.focus = match state.focus {
                Pane::Groups => Pane::Letters,
                Pane::Letters => Pane::Detail,
                Pane::Detail => Pane::Groups,
            }
        }
        Nav::FocusPrev => {
            state.focus = match state.focus {
                Pane::Groups => Pane::Detail,
                Pane::Letters => Pane::Groups,
                Pane::Detail => Pane::Letters,
            }
        }
        Nav::Up => move_cursor(state, -1),
        Nav::Down => move_cursor(state, 1),
        Nav::PageUp => move_cursor(state, -(state.page.max(1) as i64)),
        Nav::PageDown => move_cursor(state, state.page.max(1) as i64),
        Nav::Top => move_cursor(state, i64::MIN / 2),
        Nav::Bottom => move_cursor(state, i64::MAX / 2),
        Nav::Open => match state.focus {
            Pane::Groups => {
                let path = state.selected_node().map(|n| n.path.clone());
                let leaf = path.as_ref().is_some_and(|p| p.len() == state.dims().len());
                match path {
                    Some(p) if !leaf && !state.groups.is_expanded(&p) => {
                        state.groups.expand(p);
                        state.letters.stale();
                    }
                    _ => state.focus = Pane::Letters,
                }
            }
            Pane::Letters => {
                state.focus = Pane::Detail;
                state.letters.pin();
            }
            Pane::Detail => {}
        },
        Nav::Close => match state.focus {
            Pane::Groups => {
                if let Some(node) = state.selected_node() {
                    let path = node.path.clone();
                    if state.groups.collapse(&path) {
                        state.letters.stale();
                    } else if path.len() > 1 {
                        // Jump to the parent.
                        if state.groups.select_path(&path[..path.len() - 1]) {
                            state.letters.let_go();
                        }
                    }
                }
            }
            Pane::Letters => state.focus = Pane::Groups,
            Pane::Detail => state.focus = Pane::Letters,
        },
    }
}

pub(crate) fn contains(r: ratatui::layout::Rect, column: u16, row: u16) -> bool {
    column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height
}

/// A click on a row of a list selects what that row shows. The rows a list shows start
/// at the page its cursor is on (`paging::list_offset`, as the views draw them),
/// one row below the border (two for the letters' header row).
pub(crate) fn click(state: &mut AppState, a: Areas, column: u16, row: u16) {
    if contains(a.groups, column, row) {
        state.focus = Pane::Groups;
        let height = usize::from(a.groups.height.saturating_sub(2));
        let top = crate::paging::list_offset(state.groups.cursor(), height);
        let i = top + usize::from(row.saturating_sub(a.groups.y + 1));
        if state.groups.set_cursor(i) {
            state.letters.let_go();
        }
    } else if contains(a.letters, column, row) {
        state.focus = Pane::Letters;
        let height = usize::from(a.letters.height.saturating_sub(3)).max(1);
        state
            .letters
            .click(usize::from(row.saturating_sub(a.letters.y + 2)), height);
    } else if contains(a.detail, column, row) {
        state.focus = Pane::Detail;
    }
}

pub(crate) fn move_cursor(state: &mut AppState, delta: i64) {
    let step = |cur: usize, len: usize| -> usize {
        if len == 0 {
            return 0;
        }
        (cur as i64).saturating_add(delta).clamp(0, len as i64 - 1) as usize
    };
    match state.focus {
        Pane::Groups => {
            let new = step(state.groups.cursor(), state.groups.visible_len());
            if state.groups.set_cursor(new) {
                state.letters.let_go();
            }
        }
        Pane::Letters => {
            if state.letters.step(delta, 2 * state.page) {
                sort_letters(state, usize::MAX);
            }
        }
        Pane::Detail => {
            state.detail.scroll_by(delta);
        }
    }
}
