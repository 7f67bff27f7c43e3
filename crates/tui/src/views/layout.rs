//! Where everything goes, as a pure function of the terminal size (used by rendering and
//! by mouse handling, so both agree).

use ratatui::layout::Rect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub title: Rect,
    pub effect: Rect,
    pub groups: Rect,
    pub letters: Rect,
    pub detail: Rect,
    /// The replay progress pane, full width above the footer (zero height when none).
    pub progress: Rect,
    pub footer: Rect,
}

/// Rows the replay progress pane takes when it is shown.
pub const PROGRESS_ROWS: u16 = 7;

/// The areas for this state: with the progress pane while a replay is shown.
pub fn layout_for(s: &crate::state::AppState, width: u16, height: u16) -> Areas {
    let rows = if s.replay.run().is_some() && height >= PROGRESS_ROWS + 12 {
        PROGRESS_ROWS
    } else {
        0
    };
    let mut a = layout_with(width, height, rows);
    if s.zoom {
        // The focused pane takes the body; the others get no room (nothing is drawn
        // there and no click lands there).
        let body = Rect::new(a.groups.x, a.groups.y, width, a.groups.height);
        let none = Rect::new(0, body.y, 0, 0);
        let (g, l, d) = match s.focus {
            crate::state::Pane::Groups => (body, none, none),
            crate::state::Pane::Letters => (none, body, none),
            crate::state::Pane::Detail => (none, none, body),
        };
        a.groups = g;
        a.letters = l;
        a.detail = d;
    }
    a
}

pub fn layout(width: u16, height: u16) -> Areas {
    layout_with(width, height, 0)
}

/// The panes over `height` minus `progress` rows kept for the progress pane.
pub fn layout_with(width: u16, height: u16, progress: u16) -> Areas {
    let full = Rect::new(0, 0, width, height);
    let line = |y: u16| {
        Rect::new(
            0,
            y.min(height.saturating_sub(1)),
            width,
            u16::from(height > y),
        )
    };
    let body_h = height.saturating_sub(3).saturating_sub(progress);
    let body = Rect::new(0, 2.min(height), width, body_h);
    let groups_w = if width >= 120 {
        width * 36 / 100
    } else {
        width * 42 / 100
    };
    let right_x = groups_w;
    let right_w = width.saturating_sub(groups_w);
    let letters_h = (body_h * 45 / 100).max(5.min(body_h));
    Areas {
        title: line(0),
        effect: line(1),
        groups: Rect::new(0, body.y, groups_w, body_h),
        letters: Rect::new(right_x, body.y, right_w, letters_h),
        detail: Rect::new(
            right_x,
            body.y + letters_h,
            right_w,
            body_h.saturating_sub(letters_h),
        ),
        progress: Rect::new(0, body.y + body_h, width, progress),
        footer: if height == 0 { full } else { line(height - 1) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panes_tile_the_screen_at_common_sizes() {
        for (w, h) in [(80, 24), (200, 60), (20, 5), (0, 0)] {
            let a = layout(w, h);
            assert!(a.groups.x + a.groups.width <= w.max(1));
            assert!(a.letters.x + a.letters.width <= w.max(1) || w == 0);
            assert!(a.detail.y + a.detail.height <= h.max(1) || h == 0);
        }
    }
}
