//! `update(state, action) -> commands`: all state changes, no I/O.

use crate::action::{
    Act, Action, BrowseEvent, Command, Event, Intent, LedgerEvent, Nav, Request, Typing, ViewKey,
};
use crate::state::{
    AppState, Detail, Discarding, Input, Level, Pane, Refresh, ScanStatus, Tab, Transforming,
};
use crate::views::layout::{layout_for, Areas};
use dlq_app::session::{DiscardTarget, Prepared};
use dlq_core::access::{check, Permission};
use dlq_core::diff::diff_letters;
use dlq_core::filter::Filter;
use dlq_core::grouping::Dim;
use dlq_core::payload_view;
use dlq_core::store::RowId;

mod act;
mod detail;
mod events;
mod nav;
mod palette;
mod typing;

pub(crate) use crate::lists::*;
use act::*;
use detail::*;
use events::*;
use nav::*;
use palette::*;
use typing::*;

pub use detail::render_payload;

/// Payload view output cap in the detail pane.
const DETAIL_PAYLOAD_MAX: usize = 256 * 1024;
/// Payloads up to this size are rendered on the UI thread; bigger ones are not.
const INLINE_RENDER_MAX: usize = 16 * 1024;

/// Dispatch by cause and area: each handler owns one enum and matches all of it.
pub fn update(state: &mut AppState, action: impl Into<Action>, size: (u16, u16)) -> Vec<Command> {
    let mut cmds = Vec::new();
    match action.into() {
        Action::Intent(Intent::Nav(a)) => navigate(state, a),
        Action::Intent(Intent::Typing(a)) => input(state, a, &mut cmds),
        Action::Intent(Intent::Act(a)) => act(state, a, &mut cmds),
        Action::Intent(Intent::Replay(a)) => crate::replaying::intent(state, a, &mut cmds),
        Action::Intent(Intent::View(a)) => view(state, a, size),
        Action::Event(Event::Scan(e)) => scan_event(state, e),
        Action::Event(Event::Ledger(e)) => ledger_event(state, e),
        Action::Event(Event::Replay(e)) => crate::replaying::event(state, e, &mut cmds),
    }
    finish(state, cmds, size)
}

/// The view itself: help, grouping, sorting, tabs, mouse, clock.
fn view(state: &mut AppState, action: ViewKey, size: (u16, u16)) {
    match action {
        ViewKey::Quit if state.replay.arm_quit() => {
            state.message = Some((
                "a replay is running: K stops it; q again quits now (letters in flight stay in doubt; :resume continues it)".into(),
                Level::Warn,
            ));
        }
        ViewKey::Quit => state.quit = true,
        ViewKey::ToggleHelp => {
            state.prompt.toggle_help();
        }
        ViewKey::HelpScroll(by) => state.prompt.scroll_help(by),
        ViewKey::Zoom => {
            state.zoom = !state.zoom;
            state.message = Some((
                if state.zoom {
                    "zoomed: the focused pane fills the screen · z restores"
                } else {
                    "zoom off"
                }
                .into(),
                Level::Info,
            ));
        }
        ViewKey::Suspend => {
            state.message = Some((
                "Ctrl-Z does not suspend the TUI: p pauses a replay, q quits".into(),
                Level::Info,
            ));
        }
        ViewKey::CycleGrouping => {
            state.next_grouping();
            state.needs(Refresh::Tree);
            let names: Vec<&str> = state.dims().iter().map(|d| d.name()).collect();
            state.message = Some((format!("grouped by {}", names.join(" › ")), Level::Info));
        }
        ViewKey::ToggleSort => {
            let newest = state.letters.newest_first();
            state.letters.set_newest_first(!newest);
        }
        ViewKey::SetTab(t) => state.detail.show_tab(t),
        ViewKey::NextTab => state.detail.next_tab(),
        ViewKey::Click { column, row } => {
            let a = layout_for(state, size.0, size.1);
            click(state, a, column, row)
        }
        ViewKey::Scroll { column, row, down } => scroll(state, size, (column, row), down),
        ViewKey::Resize => {}
        ViewKey::Tick(now_ms) => tick(state, now_ms),
    }
}

/// The mouse wheel over a pane: it takes the focus and moves (the detail scrolls).
fn scroll(state: &mut AppState, size: (u16, u16), (column, row): (u16, u16), down: bool) {
    let a = layout_for(state, size.0, size.1);
    let delta = if down { 3 } else { -3 };
    if contains(a.groups, column, row) {
        state.focus = Pane::Groups;
        move_cursor(state, delta);
    } else if contains(a.letters, column, row) {
        state.focus = Pane::Letters;
        move_cursor(state, delta);
    } else if contains(a.detail, column, row) {
        state.detail.scroll_by(delta);
    }
}

/// Ages on screen move every second (a letter that just arrived never reads as from
/// the future), and so do age buckets, inflow and age filters: the index moves only the
/// letters whose age crossed one of their edges since the last tick.
fn tick(state: &mut AppState, now_ms: i64) {
    state.now_ms = now_ms;
    let moved = state.browse.advance(now_ms);
    if moved.regrouped {
        state.needs(Refresh::Tree);
    } else if moved.inflow {
        state.needs(Refresh::Inflow);
    }
}

/// After any action: page size, the letter list, the detail pane; a status message too
/// long for the footer is kept whole in `:notes`.
fn finish(state: &mut AppState, mut cmds: Vec<Command>, size: (u16, u16)) -> Vec<Command> {
    if let Some((m, _)) = &state.message {
        if m.chars().count() + 1 > usize::from(size.0) && state.notes.last() != Some(m) {
            state.notes.push(m.clone());
        }
    }
    state.page = usize::from(
        layout_for(state, size.0, size.1)
            .letters
            .height
            .saturating_sub(3),
    )
    .max(1);
    let what = state.take_refresh();
    crate::lists::refresh(state, what);
    if state.letters.is_stale() {
        refresh_letters(state);
    }
    sync_detail(state, &mut cmds);
    cmds
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::access::Role;
    use dlq_core::catalog::{prepare_letter, Catalog, Problem};
    use dlq_core::masking::Masker;
    use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
    use dlq_core::ports::SourceInfo;

    const SIZE: (u16, u16) = (120, 40);
    const NOW: i64 = 1_764_000_000_000;

    fn state(n: usize) -> AppState {
        let masker = dlq_core::fixtures::masker();
        let batch = dlq_core::fixtures::even_odd(n, NOW, &|_| br#"{"a":1}"#.to_vec());
        let info = SourceInfo {
            label: "t".into(),
            browse_effect: String::new(),
        };
        let mut s = AppState::new(info, Catalog::new(masker, Vec::new()), NOW, 1 << 20);
        s.role = Role::Operator;
        update(&mut s, BrowseEvent::Letters(batch), SIZE);
        update(&mut s, BrowseEvent::ScanDone, SIZE);
        s
    }

    /// The letters `state(n)` holds, prepared again, to feed another state.
    fn prepared(n: usize) -> Vec<Prepared> {
        let full = state(n);
        (0..n as u32)
            .filter_map(|i| {
                let raw = full.cache.peek(i)?.raw.clone();
                Some(prepare_letter(full.browse.catalog.masker(), &[], raw).into())
            })
            .collect()
    }

    /// Letters of reason "r" dead-lettered `ages_s` seconds before NOW, prepared.
    fn aged(ages_s: &[i64]) -> Vec<Prepared> {
        let masker = Masker::with_key(vec![1]);
        ages_s
            .iter()
            .enumerate()
            .map(|(i, age)| {
                let raw = RawLetter {
                    coords: Some(Coords::Kafka {
                        topic: "t".into(),
                        partition: 0,
                        offset: i as i64,
                    }),
                    headers: vec![Header::new("x-reason-code", HeaderValue::text("r"))],
                    payload: br#"{}"#.to_vec(),
                    timestamp: chrono::DateTime::from_timestamp_millis(NOW - age * 1000),
                    ..RawLetter::default()
                };
                prepare_letter(&masker, &[], raw).into()
            })
            .collect()
    }

    /// While a scan streams in and the operator has not picked a letter, the cursor
    /// stays at the top: a scan whose first batch held old letters ends showing the
    /// newest (a 1,000,000-letter RabbitMQ browse ended showing the first letter
    /// delivered, deep in the list). Once the scan is complete, or a letter was picked,
    /// the selection stays put as live letters arrive.
    #[test]
    fn the_list_shows_the_newest_until_a_letter_is_chosen() {
        let at = |s: &AppState| {
            s.selected_row()
                .and_then(|r| s.browse.catalog.store.row(r))
                .map(|r| (NOW - r.at_ms) / 1000)
        };
        let mut s = state(0);
        s.scan.complete = false;
        update(&mut s, BrowseEvent::Letters(aged(&[500, 400])), SIZE);
        assert_eq!(at(&s), Some(400));
        update(&mut s, BrowseEvent::Letters(aged(&[30, 20, 10])), SIZE);
        assert_eq!(
            at(&s),
            Some(10),
            "the top follows the newest while scanning"
        );
        update(&mut s, BrowseEvent::ScanDone, SIZE);
        assert_eq!(at(&s), Some(10));
        assert_eq!(s.letters.cursor(), 0);
        // Complete: a live arrival goes on top, the selection stays.
        update(&mut s, BrowseEvent::Live(aged(&[5])), SIZE);
        assert_eq!(at(&s), Some(10));
        assert_eq!(s.letters.cursor(), 1);
        // Picked: the same.
        update(&mut s, Nav::FocusNext, SIZE);
        update(&mut s, Nav::Down, SIZE);
        assert_eq!(at(&s), Some(20));
        update(&mut s, BrowseEvent::Live(aged(&[1])), SIZE);
        assert_eq!(at(&s), Some(20));
        assert_eq!(s.letters.cursor(), 3);
        // Another group opens at its top.
        update(&mut s, Nav::FocusPrev, SIZE);
        update(&mut s, Nav::Down, SIZE);
        assert_eq!(s.letters.cursor(), 0);
    }

    /// `R` says a second browse is under way until it ends, then says it ended: the
    /// "browsing again…" line must not outlive the browse it announced.
    #[test]
    fn a_second_browse_says_when_it_is_done() {
        let mut s = state(6);
        update(
            &mut s,
            BrowseEvent::BrowseLost("the broker closed the browse".into()),
            SIZE,
        );
        update(&mut s, Act::Rebrowse, SIZE);
        assert!(s
            .message
            .as_ref()
            .is_some_and(|(m, _)| m.starts_with("browsing again")));
        update(&mut s, BrowseEvent::Rebrowsing, SIZE);
        update(&mut s, BrowseEvent::Letters(prepared(4)), SIZE);
        assert!(s
            .message
            .as_ref()
            .is_some_and(|(m, _)| m.starts_with("browsing again")));
        update(&mut s, BrowseEvent::ScanDone, SIZE);
        assert_eq!(
            s.message,
            Some((
                "browsed again: 4 letters, scan complete".into(),
                Level::Info
            ))
        );
        // A first browse's end says nothing over what is on the line.
        let mut first = state(0);
        first.message = Some(("kept".into(), Level::Warn));
        update(&mut first, BrowseEvent::ScanDone, SIZE);
        assert_eq!(first.message, Some(("kept".into(), Level::Warn)));
    }

    #[test]
    fn top_level_groups_carry_their_owner_and_follow_new_letters() {
        use dlq_core::owners::{OwnerRule, Owners};
        let mut s = state(0);
        s.owners = Owners(vec![OwnerRule {
            reason: Some("ev*".into()),
            ..OwnerRule::new("team-even")
        }]);
        update(&mut s, BrowseEvent::Letters(prepared(6)), SIZE);
        let mut owners: Vec<String> = s
            .groups
            .nodes()
            .iter()
            .filter_map(|n| s.groups.owner(&n.path).map(str::to_string))
            .collect();
        owners.sort();
        assert_eq!(owners, ["(unowned)", "team-even"]);
        let count = s
            .groups
            .nodes()
            .iter()
            .find(|n| s.groups.owner(&n.path) == Some("team-even"))
            .map(|n| n.count)
            .expect("even");
        assert_eq!(count, 3);
    }

    #[test]
    fn navigate_cycles_panes_and_keeps_the_cursor_in_bounds() {
        let mut s = state(4);
        navigate(&mut s, Nav::FocusNext);
        assert_eq!(s.focus, Pane::Letters);
        navigate(&mut s, Nav::FocusPrev);
        assert_eq!(s.focus, Pane::Groups);
        navigate(&mut s, Nav::Bottom);
        let last = s.groups.cursor();
        navigate(&mut s, Nav::Down);
        assert_eq!(s.groups.cursor(), last, "past the end");
        navigate(&mut s, Nav::Top);
        assert_eq!(s.groups.cursor(), 0);
    }

    #[test]
    fn input_types_edits_and_cancels() {
        let mut s = state(2);
        let mut cmds = Vec::new();
        input(&mut s, Typing::StartFuzzy, &mut cmds);
        for c in "evx".chars() {
            input(&mut s, Typing::InputChar(c), &mut cmds);
        }
        input(&mut s, Typing::InputBackspace, &mut cmds);
        assert_eq!(*s.prompt.input(), Input::Fuzzy("ev".into()));
        input(&mut s, Typing::InputSubmit, &mut cmds);
        assert_eq!(*s.prompt.input(), Input::None);
        assert_eq!(s.browse.filter().fuzzy_words(), ["ev"]);
        input(&mut s, Typing::Cancel, &mut cmds);
        assert!(s.browse.filter().is_empty(), "Esc clears the filter");
        assert!(cmds.is_empty());
    }

    /// The prompt edits as a shell line does: Ctrl-W deletes the last word (and the
    /// spaces before the cursor), Ctrl-U the whole line — a filter prompt opens on the
    /// current filter, and Ctrl-U did nothing, so a new filter was typed onto the old.
    #[test]
    fn ctrl_w_and_ctrl_u_edit_the_prompt_line() {
        use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let mut s = state(2);
        let mut cmds = Vec::new();
        let mut key = |s: &mut AppState, code: KeyCode, m: KeyModifiers| {
            let a = crate::dispatch::action_for(s, &KeyEvent::new(code, m))
                .expect("a key in the prompt does something");
            let Action::Intent(Intent::Typing(a)) = a else {
                panic!("a key in the prompt types: {a:?}")
            };
            input(s, a, &mut cmds);
        };
        key(&mut s, KeyCode::Char('f'), KeyModifiers::NONE);
        for c in "age<5m reason=amount*  ".chars() {
            key(&mut s, KeyCode::Char(c), KeyModifiers::NONE);
        }
        key(&mut s, KeyCode::Char('w'), KeyModifiers::CONTROL);
        assert_eq!(*s.prompt.input(), Input::Expr("age<5m ".into()));
        key(&mut s, KeyCode::Char('u'), KeyModifiers::CONTROL);
        assert_eq!(*s.prompt.input(), Input::Expr(String::new()));
        key(&mut s, KeyCode::Char('w'), KeyModifiers::CONTROL);
        assert_eq!(*s.prompt.input(), Input::Expr(String::new()));
    }

    #[test]
    fn act_refuses_a_viewer_with_an_audit_and_asks_an_operator_why() {
        let mut s = state(2);
        navigate(&mut s, Nav::FocusNext);
        finish(&mut s, Vec::new(), SIZE);
        s.role = Role::Viewer;
        let mut cmds = Vec::new();
        act(&mut s, Act::StartDiscard, &mut cmds);
        assert!(
            matches!(&cmds[..], [Command::Session(Request::Refused { permission, .. })] if *permission == Permission::Discard)
        );
        assert!(s
            .message
            .as_ref()
            .is_some_and(|m| m.0.contains("needs the operator role")));
        s.role = Role::Operator;
        cmds.clear();
        act(&mut s, Act::StartDiscard, &mut cmds);
        assert!(matches!(s.prompt.input(), Input::DiscardReason(_, ref d) if d.rows.len() == 1));
        s.prompt.drop_input();
        s.read_only = true;
        act(&mut s, Act::StartDiscard, &mut cmds);
        assert_eq!(*s.prompt.input(), Input::None);
    }

    #[test]
    fn scan_and_ledger_events_update_counts_notes_and_decisions() {
        let mut s = state(3);
        scan_event(
            &mut s,
            BrowseEvent::Problem(Problem {
                location: "line 4".into(),
                message: "broken".into(),
            }),
        );
        assert_eq!(s.scan.problem_count, 1);
        ledger_event(
            &mut s,
            LedgerEvent::Notes(vec!["a".into(), "reconciled b".into()]),
        );
        assert_eq!(s.notes.len(), 2);
        assert!(s
            .message
            .as_ref()
            .is_some_and(|m| m.0.contains("+1 more on :notes")));
        run_command(&mut s, &mut Vec::new(), "problems");
        assert!(s
            .prompt
            .overlay()
            .is_some_and(|o| o.1[0].contains("line 4")));
    }

    #[test]
    fn view_changes_tabs_grouping_and_ticks() {
        let mut s = state(3);
        view(&mut s, ViewKey::NextTab, SIZE);
        assert_eq!(s.detail.tab(), Tab::Headers);
        let before = s.dims().to_vec();
        view(&mut s, ViewKey::CycleGrouping, SIZE);
        assert_ne!(s.dims(), &before[..]);
        view(&mut s, ViewKey::Tick(NOW + 120_000), SIZE);
        assert_eq!(s.now_ms, NOW + 120_000);
        assert_eq!(s.browse.index().now_ms(), NOW + 120_000);
        view(&mut s, ViewKey::Tick(NOW + 121_000), SIZE);
        assert_eq!(s.now_ms, NOW + 121_000, "ages on screen move by the second");
        assert_eq!(
            s.browse.index().now_ms(),
            NOW + 121_000,
            "and so does the index"
        );
        view(&mut s, ViewKey::Quit, SIZE);
        assert!(s.quit);
    }

    #[test]
    fn a_source_that_cannot_be_opened_is_said_in_full_with_what_to_check() {
        let masker = Masker::with_key(vec![1]);
        let info = SourceInfo {
            label: "amqp://guest@127.0.0.1:5672/%2f?queue=q".into(),
            browse_effect: String::new(),
        };
        let mut s = AppState::new(info, Catalog::new(masker, Vec::new()), NOW, 1 << 20);
        let e = "connecting to amqp://guest@127.0.0.1:5672/%2f: ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.";
        update(
            &mut s,
            Action::from(BrowseEvent::ScanFailed(e.into())),
            SIZE,
        );
        let (title, lines) = s.prompt.overlay().cloned().expect("an overlay");
        assert_eq!(title, "Cannot open the source");
        let all = lines.join("\n");
        assert!(all.contains("ACCESS_REFUSED - Login was refused"), "{all}");
        assert!(all.contains("check the user and password"), "{all}");
        assert!(!all.contains("hidden"), "{all}");
        // Once letters were read, a later failure is a status line, not this.
        let mut s = state(1);
        s.prompt.close_overlay();
        update(
            &mut s,
            Action::from(BrowseEvent::ScanFailed("later".into())),
            SIZE,
        );
        assert!(s.prompt.overlay().is_none());
    }
}
