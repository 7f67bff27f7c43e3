//! `update(state, action) -> commands`: all state changes, no I/O.

use crate::action::{
    Act, Action, BrowseEvent, Command, Event, Intent, LedgerEvent, Nav, Request, Typing, ViewKey,
};
use crate::state::{AppState, Detail, Input, Level, Pane, ScanStatus, Tab, GROUPINGS};
use crate::views::layout::{layout_for, Areas};
use dlq_app::session::{DiscardTarget, Prepared};
use dlq_core::access::{check, Permission};
use dlq_core::diff::diff_payloads;
use dlq_core::filter::Filter;
use dlq_core::grouping::{Dim, GroupIndex};
use dlq_core::payload_view;
use dlq_core::store::RowId;

/// Payload view output cap in the detail pane.
const DETAIL_PAYLOAD_MAX: usize = 256 * 1024;
/// Payloads up to this size are rendered on the UI thread; bigger ones are not.
const INLINE_RENDER_MAX: usize = 16 * 1024;
/// Re-sorting a huge group on every batch would stall the UI; wait for the scan.
const LIVE_LETTERS_LIMIT: usize = 200_000;

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

/// Cursor and focus moves.
fn navigate(state: &mut AppState, action: Nav) {
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
                    Some(p) if !leaf && !state.groups.expanded.contains(&p) => {
                        state.groups.expanded.insert(p);
                        refresh_visible(state);
                    }
                    _ => state.focus = Pane::Letters,
                }
            }
            Pane::Letters => {
                state.focus = Pane::Detail;
                state.letters.pinned = true;
            }
            Pane::Detail => {}
        },
        Nav::Close => match state.focus {
            Pane::Groups => {
                if let Some(node) = state.selected_node() {
                    let path = node.path.clone();
                    if state.groups.expanded.remove(&path) {
                        refresh_visible(state);
                    } else if path.len() > 1 {
                        // Jump to the parent.
                        if state.groups.select_path(&path[..path.len() - 1]) {
                            state.letters.pinned = false;
                            state.letters.dirty = true;
                        }
                    }
                }
            }
            Pane::Letters => state.focus = Pane::Groups,
            Pane::Detail => state.focus = Pane::Letters,
        },
    }
}

/// Typing in the prompt: filters, the palette, reasons.
fn input(state: &mut AppState, action: Typing, cmds: &mut Vec<Command>) {
    match action {
        Typing::StartFuzzy => state.prompt.input = Input::Fuzzy(String::new()),
        Typing::StartExpr => state.prompt.input = Input::Expr(state.filter.source().to_string()),
        Typing::StartCommand => state.prompt.input = Input::Command(String::new()),
        Typing::InputChar(c) => {
            if let Some(s) = state.prompt.input.text_mut() {
                s.push(c);
            }
        }
        Typing::InputBackspace | Typing::InputClear | Typing::InputDeleteWord => {
            let Some(s) = state.prompt.input.text_mut() else {
                return;
            };
            match action {
                Typing::InputBackspace => {
                    s.pop();
                }
                Typing::InputClear => s.clear(),
                _ => {
                    // As a shell does: the spaces before the cursor, then the word.
                    let kept = s.trim_end().len();
                    s.truncate(kept);
                    let word = s.rfind(char::is_whitespace).map_or(0, |at| at + 1);
                    s.truncate(word);
                }
            }
        }
        Typing::InputSubmit => submit(state, cmds),
        Typing::Cancel => {
            if state.prompt.input != Input::None {
                state.prompt.input = Input::None;
            } else if state.prompt.show_help || state.prompt.overlay.is_some() {
                state.prompt.show_help = false;
                state.prompt.overlay = None;
            } else if !state.filter.is_empty() {
                state.filter = Filter::all();
                rebuild_index(state);
                state.message = Some(("filter cleared".into(), Level::Info));
            }
        }
    }
}

/// Enter in the prompt: apply what was typed.
fn submit(state: &mut AppState, cmds: &mut Vec<Command>) {
    match std::mem::replace(&mut state.prompt.input, Input::None) {
        Input::Fuzzy(words) => apply_filter(state, &words),
        Input::Expr(e) => apply_filter(state, &e),
        Input::Command(c) => run_command(state, cmds, c.trim()),
        Input::EditReason(reason, row) => submit_edit(state, cmds, reason.trim(), row),
        Input::UnmaskReason(reason, row) => submit_unmask(state, cmds, reason.trim(), row),
        Input::DiscardReason(reason, rows) => submit_discard(state, cmds, reason.trim(), &rows),
        Input::ReplayCount(typed, want) => {
            crate::replaying::submit_count(state, cmds, &typed, want)
        }
        Input::None => apply_filter(state, ""),
    }
}

fn apply_filter(state: &mut AppState, expr: &str) {
    match Filter::parse(expr) {
        Ok(f) => {
            state.filter = f;
            rebuild_index(state);
            let n = state.index.total();
            state.message = Some((
                if state.filter.is_empty() {
                    "filter cleared".into()
                } else {
                    format!("{} match `{expr}`", dlq_core::words::count(n, "letter"))
                },
                Level::Info,
            ));
        }
        Err(e) => state.message = Some((format!("bad filter: {e}"), Level::Error)),
    }
}

fn letter_id(state: &AppState, row: RowId) -> Option<String> {
    let store = &state.catalog.store;
    store.row(row).map(|r| store.id(r).to_string())
}

fn submit_edit(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, row: RowId) {
    let letter = state.cache.get(row).cloned();
    match (reason.is_empty(), letter, letter_id(state, row)) {
        (true, _, _) => {
            state.message = Some((
                "a revision needs a reason; nothing edited".into(),
                Level::Warn,
            ))
        }
        (false, Some(raw), Some(letter_id)) => cmds.push(Command::Edit {
            letter_id,
            payload: raw.payload,
            reason: reason.to_string(),
        }),
        _ => {
            state.message = Some((
                "open the letter first (its payload is not loaded)".into(),
                Level::Warn,
            ))
        }
    }
}

fn submit_unmask(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, row: RowId) {
    if reason.is_empty() {
        state.message = Some((
            "unmasking needs a reason; nothing shown".into(),
            Level::Warn,
        ));
    } else if let Some(letter_id) = letter_id(state, row) {
        cmds.push(Command::Session(Request::Unmask {
            row,
            letter_id,
            reason: reason.to_string(),
        }));
    }
}

fn submit_discard(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, rows: &[RowId]) {
    if reason.is_empty() {
        state.message = Some((
            "a discard needs a reason; nothing discarded".into(),
            Level::Warn,
        ));
        return;
    }
    let store = &state.catalog.store;
    let rows: Vec<(RowId, DiscardTarget)> = rows
        .iter()
        .filter_map(|r| {
            store.row(*r).map(|x| {
                (
                    *r,
                    DiscardTarget {
                        letter_id: store.id(x).to_string(),
                        binding: store.binding(x),
                        location: store.coords_label(x),
                    },
                )
            })
        })
        .collect();
    state.message = Some((format!("discarding {} letter(s)…", rows.len()), Level::Info));
    cmds.push(Command::Session(Request::Discard {
        rows,
        reason: reason.to_string(),
    }));
}

/// Actions on letters: discard, unmask, edit, mark, diff, copy.
fn act(state: &mut AppState, action: Act, cmds: &mut Vec<Command>) {
    match action {
        Act::StartUnmask => match (state.selected_row(), check(state.role, Permission::Unmask)) {
            (None, _) => state.message = Some(("select a letter to unmask".into(), Level::Warn)),
            (Some(row), Err(denied)) => refuse(state, cmds, denied, row),
            (Some(row), Ok(())) => state.prompt.input = Input::UnmaskReason(String::new(), row),
        },
        Act::StartEdit => match (state.selected_row(), check(state.role, Permission::Edit)) {
            (None, _) => state.message = Some(("select a letter to edit".into(), Level::Warn)),
            (Some(row), Err(denied)) => refuse(state, cmds, denied, row),
            (Some(row), Ok(())) => state.prompt.input = Input::EditReason(String::new(), row),
        },
        Act::StartDiscard => {
            let rows: Vec<RowId> = if state.letters.marks.is_empty() {
                state.selected_row().into_iter().collect()
            } else {
                state.letters.marks.iter().copied().collect()
            };
            if let (Err(denied), Some(row)) = (check(state.role, Permission::Discard), rows.first())
            {
                let row = *row;
                refuse(state, cmds, denied, row);
            } else if state.read_only {
                state.message = Some(("--read-only: discard is a write".into(), Level::Warn));
            } else if rows.is_empty() {
                state.message = Some(("select or mark letters to discard".into(), Level::Warn));
            } else {
                state.prompt.input = Input::DiscardReason(String::new(), rows);
            }
        }
        Act::ToggleMark => {
            if let Some(row) = state.selected_row() {
                if !state.letters.marks.remove(&row) {
                    state.letters.marks.insert(row);
                }
            }
        }
        Act::Diff => {
            state.detail.tab = Tab::Diff;
            state.detail.scroll = 0;
            if state.letters.marks.is_empty() {
                state.message = Some((
                    "mark a letter with space, select another, then D".into(),
                    Level::Warn,
                ));
            }
        }
        Act::Copy if check(state.role, Permission::ViewPayload).is_err() => {
            state.message = Some((
                "copying needs the operator role (payloads are hidden from viewers)".into(),
                Level::Warn,
            ));
        }
        Act::Copy => match &state.detail.current {
            Some(d) => {
                cmds.push(Command::Copy(d.payload.text.clone()));
                state.message = Some(("masked payload copied".into(), Level::Info));
            }
            None => state.message = Some(("nothing selected to copy".into(), Level::Warn)),
        },
        Act::Rebrowse if state.replay.running() => {
            state.message = Some((
                "a replay is running: K stops it before browsing again".into(),
                Level::Warn,
            ));
        }
        Act::Rebrowse => {
            state.message = Some((
                "browsing again on a new connection (what this browse held goes back to the queue)…".into(),
                Level::Info,
            ));
            cmds.push(Command::Session(Request::Rebrowse));
        }
    }
}

/// What the worker reports of the source, and the render thread's views.
fn scan_event(state: &mut AppState, action: BrowseEvent) {
    match action {
        BrowseEvent::BrowseLost(why) => {
            state.message = Some((
                format!(
                    "{why} — nothing is lost: what this browse held is back in the queue; R browses again"
                ),
                Level::Error,
            ));
            state.scan.lost = Some(why);
        }
        BrowseEvent::Rebrowsing => reset_browse(state),
        BrowseEvent::SourceOpened(info) => state.info = info,
        BrowseEvent::Rendered(row, unmasked, view) => {
            if let Some(d) = state.detail.current.as_mut().filter(|d| d.row == row) {
                if state.detail.unmasked.contains(&row) == unmasked {
                    d.payload = view.clone();
                }
            }
            state.detail.rendered = Some((row, unmasked, view));
        }
        BrowseEvent::Partial(c) => state.scan.partial.push(c),
        BrowseEvent::Problem(p) => {
            state.scan.problem_count += 1;
            if state.scan.problems.len() < 100 {
                state.scan.problems.push(p);
            }
        }
        BrowseEvent::Letters(batch) => ingest(state, batch, false),
        BrowseEvent::Live(batch) => ingest(state, batch, true),
        BrowseEvent::Progress { done, total } => {
            state.scan.done = state.scan.done.max(done);
            state.scan.total = total;
            if let Some(t) = total {
                state.catalog.store.expect(t);
            }
        }
        BrowseEvent::ScanDone => {
            state.scan.complete = true;
            state.catalog.shrink_to_fit();
            let n = state.catalog.store.len();
            state.scan.total = Some(n as u64);
            state.letters.dirty = true;
            if state.scan.again {
                state.message = Some((
                    format!(
                        "browsed again: {}, scan complete",
                        dlq_core::words::letters(n)
                    ),
                    Level::Info,
                ));
            }
        }
        BrowseEvent::ScanFailed(e) => {
            state.scan.error = Some(e.clone());
            state.message = Some((e, Level::Error));
        }
        BrowseEvent::Fetched(row, result) => {
            if state.detail.pending_fetch == Some(row) {
                state.detail.pending_fetch = None;
            }
            match result {
                Ok(raw) => state.cache.put(row, raw),
                Err(e) => {
                    state.message = Some((format!("could not fetch the letter: {e}"), Level::Error))
                }
            }
            state.detail.current = None;
        }
    }
}

/// What the worker reports of the ledger: history, decisions, notes, outcomes.
fn ledger_event(state: &mut AppState, action: LedgerEvent) {
    match action {
        LedgerEvent::History(row, lines) => state.detail.history = Some((row, lines)),
        LedgerEvent::Edited(result) => {
            state.force_redraw = true;
            state.detail.history = None;
            state.message = Some(match result {
                Ok(m) => (m, Level::Info),
                Err(e) => (e, Level::Error),
            });
        }
        LedgerEvent::Unmasked(row, result) => match result {
            Ok(()) => {
                state.detail.history = None;
                state.detail.unmasked.insert(row);
                state.detail.current = None;
                state.detail.tab = Tab::Payload;
                state.message = Some(("unmasked for this session (audited)".into(), Level::Warn));
            }
            Err(e) => state.message = Some((format!("not unmasked: {e}"), Level::Error)),
        },
        LedgerEvent::Decisions(ds) => {
            state.decisions = ds
                .into_iter()
                .filter_map(|d| d.binding.clone().map(|b| (b, d)))
                .collect();
        }
        LedgerEvent::Notes(lines) => {
            if let Some(last) = lines.last() {
                let more = if lines.len() > 1 {
                    format!(" (+{} more on :notes)", lines.len() - 1)
                } else {
                    String::new()
                };
                state.message = Some((format!("{last}{more}"), Level::Warn));
            }
            state.notes.extend(lines);
        }
        LedgerEvent::DiscardDone { rows, message, ok } => {
            state.detail.history = None;
            for r in &rows {
                state
                    .catalog
                    .store
                    .set_state(*r, dlq_core::model::TriageState::Discarded);
                state.letters.marks.remove(r);
            }
            rebuild_index(state);
            state.message = Some((message, if ok { Level::Info } else { Level::Error }));
        }
    }
}

/// The view itself: help, grouping, sorting, tabs, mouse, clock.
fn view(state: &mut AppState, action: ViewKey, size: (u16, u16)) {
    match action {
        ViewKey::Quit if state.replay.running() && !state.replay.quit_armed => {
            state.replay.quit_armed = true;
            state.message = Some((
                "a replay is running: K stops it; q again quits now (letters in flight stay in doubt; :resume continues it)".into(),
                Level::Warn,
            ));
        }
        ViewKey::Quit => state.quit = true,
        ViewKey::ToggleHelp => state.prompt.show_help = !state.prompt.show_help,
        ViewKey::CycleGrouping => {
            state.custom_dims = None;
            state.grouping = (state.grouping + 1) % GROUPINGS.len();
            state.groups.expanded.clear();
            rebuild_index(state);
            let names: Vec<&str> = state.dims().iter().map(|d| d.name()).collect();
            state.message = Some((format!("grouped by {}", names.join(" › ")), Level::Info));
        }
        ViewKey::ToggleSort => {
            state.letters.order.newest_first = !state.letters.order.newest_first;
            state.letters.dirty = true;
        }
        ViewKey::SetTab(t) => {
            state.detail.tab = t;
            state.detail.scroll = 0;
        }
        ViewKey::NextTab => {
            let i = Tab::ALL
                .iter()
                .position(|t| *t == state.detail.tab)
                .unwrap_or(0);
            state.detail.tab = Tab::ALL[(i + 1) % Tab::ALL.len()];
            state.detail.scroll = 0;
        }
        ViewKey::Click { column, row } => {
            let a = layout_for(state, size.0, size.1);
            click(state, a, column, row)
        }
        ViewKey::Scroll { column, row, down } => {
            let a = layout_for(state, size.0, size.1);
            let delta = if down { 3 } else { -3 };
            if contains(a.groups, column, row) {
                state.focus = Pane::Groups;
                move_cursor(state, delta);
            } else if contains(a.letters, column, row) {
                state.focus = Pane::Letters;
                move_cursor(state, delta);
            } else if contains(a.detail, column, row) {
                state.detail.scroll = (i64::from(state.detail.scroll) + delta).max(0) as u16;
            }
        }
        ViewKey::Resize => {}
        // Ages move on: regroup when a minute has passed (age buckets, inflow).
        ViewKey::Tick(now_ms) => {
            if now_ms / 60_000 != state.now_ms / 60_000 {
                state.now_ms = now_ms;
                rebuild_index(state);
            }
        }
    }
}

/// After any action: page size, the letter list, the detail pane.
fn finish(state: &mut AppState, mut cmds: Vec<Command>, size: (u16, u16)) -> Vec<Command> {
    state.page = usize::from(
        layout_for(state, size.0, size.1)
            .letters
            .height
            .saturating_sub(3),
    )
    .max(1);
    if state.letters.dirty {
        refresh_letters(state);
    }
    sync_detail(state, &mut cmds);
    cmds
}

/// The `:` palette.
fn run_command(state: &mut AppState, cmds: &mut Vec<Command>, line: &str) {
    let (cmd, arg) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(c, a)| (c, a.trim()));
    let result: Result<String, String> = match cmd {
        "group" | "g" => Dim::parse_list(arg).map(|dims| {
            state.custom_dims = Some(dims);
            state.groups.expanded.clear();
            rebuild_index(state);
            let names: Vec<&str> = state.dims().iter().map(|d| d.name()).collect();
            format!("grouped by {}", names.join(" › "))
        }),
        "filter" | "f" => Filter::parse(arg)
            .map_err(|e| format!("bad filter: {e}"))
            .map(|f| {
                state.filter = f;
                rebuild_index(state);
                format!(
                    "{} match",
                    dlq_core::words::count(state.index.total(), "letter")
                )
            }),
        "clear" => {
            state.filter = Filter::all();
            rebuild_index(state);
            Ok("filter cleared".into())
        }
        "sort" => match arg {
            "newest" | "" => Ok(true),
            "oldest" => Ok(false),
            other => Err(format!("sort takes newest or oldest, not `{other}`")),
        }
        .map(|newest| {
            state.letters.order.newest_first = newest;
            state.letters.dirty = true;
            format!("{} first", if newest { "newest" } else { "oldest" })
        }),
        "tab" => match Tab::ALL
            .iter()
            .find(|t| t.title().eq_ignore_ascii_case(arg))
        {
            Some(t) => {
                state.detail.tab = *t;
                state.detail.scroll = 0;
                Ok(format!("{} tab", t.title()))
            }
            None => Err(format!(
                "tab takes failure, headers, payload, diff or history, not `{arg}`"
            )),
        },
        "help" | "?" => {
            state.prompt.show_help = true;
            Ok(String::new())
        }
        "problems" => {
            state.prompt.overlay = Some(problems_overlay(state));
            Ok(String::new())
        }
        "notes" => {
            let lines = if state.notes.is_empty() {
                vec!["nothing to report".to_string()]
            } else {
                state.notes.clone()
            };
            state.prompt.overlay = Some(("Session notes".into(), lines));
            Ok(String::new())
        }
        "resume" | "abandon" => crate::replaying::command(state, cmds, cmd, arg),
        "replays" => {
            state.prompt.overlay = Some(crate::replaying::unfinished_overlay(state));
            Ok(String::new())
        }
        "quit" | "q" => {
            state.quit = true;
            Ok(String::new())
        }
        "" => Ok(String::new()),
        other => Err(format!(
            "unknown command `{other}`: {}",
            crate::keymap::palette_hint()
        )),
    };
    state.message = match result {
        Ok(m) if m.is_empty() => None,
        Ok(m) => Some((m, Level::Info)),
        Err(e) => Some((e, Level::Error)),
    };
}

/// `:problems`: the unreadable records the scan reported.
fn problems_overlay(state: &AppState) -> (String, Vec<String>) {
    let (shown, all) = (&state.scan.problems, state.scan.problem_count);
    let mut lines: Vec<String> = shown
        .iter()
        .map(|p| format!("{}: {}", p.location, p.message))
        .collect();
    if all > shown.len() as u64 {
        lines.push(format!("… and {} more", all - shown.len() as u64));
    }
    if lines.is_empty() {
        lines.push("every record was read".into());
    }
    (format!("Unreadable records ({all})"), lines)
}

fn contains(r: ratatui::layout::Rect, column: u16, row: u16) -> bool {
    column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height
}

fn click(state: &mut AppState, a: Areas, column: u16, row: u16) {
    // Lists start one row below their border (two for the letters header row).
    if contains(a.groups, column, row) {
        state.focus = Pane::Groups;
        let i = state.groups.offset + usize::from(row.saturating_sub(a.groups.y + 1));
        if i < state.groups.visible.len() {
            state.groups.cursor = i;
            state.letters.pinned = false;
            state.letters.dirty = true;
        }
    } else if contains(a.letters, column, row) {
        state.focus = Pane::Letters;
        let i = state.letters.offset + usize::from(row.saturating_sub(a.letters.y + 2));
        if i < state.letters.order.rows.len() {
            state.letters.cursor = i;
            state.letters.pinned = true;
        }
    } else if contains(a.detail, column, row) {
        state.focus = Pane::Detail;
    }
}

fn move_cursor(state: &mut AppState, delta: i64) {
    let step = |cur: usize, len: usize| -> usize {
        if len == 0 {
            return 0;
        }
        (cur as i64).saturating_add(delta).clamp(0, len as i64 - 1) as usize
    };
    match state.focus {
        Pane::Groups => {
            let new = step(state.groups.cursor, state.groups.visible.len());
            if new != state.groups.cursor {
                state.groups.cursor = new;
                state.letters.pinned = false;
                state.letters.dirty = true;
            }
        }
        Pane::Letters => {
            state.letters.cursor = step(state.letters.cursor, state.letters.order.rows.len());
            state.letters.pinned = true;
            if state.letters.cursor + 2 * state.page >= state.letters.order.sorted {
                sort_letters(state, usize::MAX);
            }
        }
        Pane::Detail => {
            state.detail.scroll =
                (i64::from(state.detail.scroll) + delta).clamp(0, i64::from(u16::MAX)) as u16;
        }
    }
}

/// A new browse begins: forget the letters, their bytes, selections and decisions of
/// the old one (row ids start again); the filter, grouping and replay history stay.
fn reset_browse(state: &mut AppState) {
    let masker = state.catalog.masker().clone();
    let mappings = state.catalog.mappings().to_vec();
    state.catalog = dlq_core::catalog::Catalog::new(masker, mappings);
    state.cache.clear();
    state.decisions.clear();
    state.scan = ScanStatus {
        again: true,
        ..Default::default()
    };
    state.groups = Default::default();
    state.letters.order.rows.clear();
    state.letters.marks.clear();
    state.letters.cursor = 0;
    state.letters.pinned = false;
    state.letters.offset = 0;
    state.letters.order.sorted = 0;
    state.letters.dirty = true;
    state.detail.current = None;
    state.detail.pending_fetch = None;
    state.detail.not_kept = None;
    state.detail.rendered = None;
    state.detail.history = None;
    state.detail.unmasked.clear();
    // A finished run's rows belonged to the old browse.
    if !state.replay.running() {
        state.replay.run = None;
    }
    state.replay.dry_run = None;
    rebuild_index(state);
}

/// Index a batch of prepared letters; live ones are counted as arrivals.
fn ingest(state: &mut AppState, batch: Vec<Prepared>, live: bool) {
    for p in batch {
        let row = state.catalog.push_prepared(&p);
        if p.state != dlq_core::model::TriageState::Open {
            state.catalog.store.set_state(row, p.state);
        }
        state.cache.put(row, p.letter.raw);
        if let Some(r) = state.catalog.store.row(row).copied() {
            if state.filter.matches(&state.catalog.store, &r, state.now_ms) {
                state.index.add(row, &r);
            }
        }
        if live {
            state.scan.live += 1;
        } else {
            state.scan.done += 1;
        }
    }
    refresh_tree(state);
}

/// Rebuild the group index for the current grouping, filter and clock.
pub(crate) fn rebuild_index(state: &mut AppState) {
    let dims: Vec<Dim> = state.dims().to_vec();
    state.index = GroupIndex::build(
        &state.catalog.store,
        &dims,
        state.now_ms,
        Some(&mut state.filter),
    );
    refresh_tree(state);
}

/// Recompute the tree from the index, keeping the selected node if it still exists.
pub(crate) fn refresh_tree(state: &mut AppState) {
    let nested = state.dims().len() > 1;
    state
        .groups
        .refresh(&state.index, &state.catalog.store, nested, &state.owners);
    state.letters.dirty = true;
}

/// Which tree nodes are visible given the expanded set.
pub(crate) fn refresh_visible(state: &mut AppState) {
    state.groups.refresh_visible();
    state.letters.dirty = true;
}

/// The letters of the selected node, sorted, keeping the selected letter.
fn refresh_letters(state: &mut AppState) {
    let Some(path) = state.selected_node().map(|n| n.path.clone()) else {
        state.letters.order.rows.clear();
        state.letters.dirty = false;
        return;
    };
    let members = state.index.timed_members_under(&path);
    if members.len() > LIVE_LETTERS_LIMIT
        && !state.scan.complete
        && !state.letters.order.rows.is_empty()
    {
        return; // stay dirty; sorted once the scan completes
    }
    let keep = state.selected_row().filter(|_| state.letters.pinned);
    state.letters.order.fill(members);
    let rows = &state.letters.order.rows;
    state.letters.cursor = keep
        .and_then(|k| rows.iter().position(|r| *r == k))
        .unwrap_or(0)
        .min(rows.len().saturating_sub(1));
    state.letters.pinned |= state.scan.complete;
    state.letters.dirty = false;
}

/// Say why an action is refused, and have the refusal audited.
fn refuse(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    denied: dlq_core::access::Denied,
    row: RowId,
) {
    let target = letter_id(state, row).unwrap_or_default();
    let detail = serde_json::json!({"refused": denied.to_string()}).to_string();
    cmds.push(Command::Session(Request::Audit {
        action: "denied".into(),
        target,
        detail,
    }));
    state.message = Some((format!("refused: {denied}"), Level::Error));
}

/// Put at least the first `want` letters of the list in order.
pub(crate) fn sort_letters(state: &mut AppState, want: usize) {
    state.letters.order.sort_to(&state.catalog.store, want);
}

/// Make the detail pane show the selected letter: from the cache, or ask the worker.
fn sync_detail(state: &mut AppState, cmds: &mut Vec<Command>) {
    let Some(row) = state.selected_row() else {
        state.detail.current = None;
        return;
    };
    if state.detail.tab == Tab::History && state.detail.history.as_ref().map(|h| h.0) != Some(row) {
        if let Some(id) = letter_id(state, row) {
            state.detail.history = Some((row, vec!["reading the ledger…".into()]));
            cmds.push(Command::Session(Request::History(row, id)));
        }
    }
    let want_diff = state.detail.tab == Tab::Diff;
    let mark = state
        .letters
        .marks
        .iter()
        .rev()
        .find(|m| **m != row)
        .copied();
    if let Some(d) = &state.detail.current {
        let diff_ok = !want_diff || d.diff.as_ref().map(|x| x.0) == mark;
        if d.row == row && diff_ok {
            return;
        }
    }
    let Some(raw) = state.cache.get(row).cloned() else {
        state.detail.current = None;
        request_fetch(state, row, cmds);
        return;
    };
    let diff = match mark.filter(|_| want_diff) {
        Some(m) => diff_against(state, m, &raw.payload),
        None => None,
    };
    let letter =
        dlq_core::catalog::extract_masked(state.catalog.masker(), state.catalog.mappings(), raw);
    let payload = payload_for(state, row, &letter, cmds);
    if state.detail.current.as_ref().map(|d| d.row) != Some(row) {
        state.detail.scroll = 0;
    }
    state.detail.current = Some(Detail {
        row,
        letter,
        payload,
        diff,
    });
}

/// Ask the worker for a letter whose bytes are not in memory (once).
fn request_fetch(state: &mut AppState, row: RowId, cmds: &mut Vec<Command>) {
    if state.detail.pending_fetch == Some(row) {
        return;
    }
    let store = &state.catalog.store;
    let coords = store.row(row).and_then(|r| store.kafka_coords(r));
    match coords {
        Some(c) => {
            state.detail.pending_fetch = Some(row);
            cmds.push(Command::Session(Request::Fetch(row, c)));
        }
        None => {
            state.detail.not_kept = Some(row);
            state.message = Some((
                "this letter's bytes are not in memory (payload budget) and the source cannot re-fetch them".into(),
                Level::Warn,
            ))
        }
    }
}

/// The masked diff against the marked letter, when both payloads are small enough to
/// mask on this thread; bigger ones are for `dlq-triage diff`.
fn diff_against(
    state: &mut AppState,
    mark: RowId,
    payload: &[u8],
) -> Option<(RowId, dlq_core::diff::Diff)> {
    let other = state.cache.get(mark).cloned()?;
    if other.payload.len().max(payload.len()) > 4 * INLINE_RENDER_MAX {
        state.message = Some((
            "payloads over 64 KiB are compared with `dlq-triage diff SOURCE ID OTHER`".into(),
            Level::Warn,
        ));
        return None;
    }
    Some((
        mark,
        diff_payloads(state.catalog.masker(), &other.payload, payload),
    ))
}

/// The payload view: from the render thread's last answer, rendered here when small, or
/// a placeholder while the render thread works on a big one.
fn payload_for(
    state: &AppState,
    row: RowId,
    letter: &dlq_core::model::DeadLetter,
    cmds: &mut Vec<Command>,
) -> payload_view::PayloadView {
    let unmasked = state.detail.unmasked.contains(&row);
    if let Some((_, _, view)) = state
        .detail
        .rendered
        .as_ref()
        .filter(|r| r.0 == row && r.1 == unmasked)
    {
        return view.clone();
    }
    let bytes = &letter.raw.payload;
    if bytes.len() <= INLINE_RENDER_MAX {
        return render_payload(state.catalog.masker(), bytes, letter.body, unmasked);
    }
    cmds.push(Command::RenderPayload {
        row,
        payload: bytes.clone(),
        body: letter.body,
        unmasked,
    });
    payload_view::PayloadView {
        kind: payload_view::ViewKind::Text,
        text: format!(
            "rendering {} of payload{}…",
            dlq_core::sanitize::human_bytes(bytes.len() as u64),
            if unmasked { "" } else { " (masking)" }
        ),
        total_bytes: bytes.len(),
        truncated: false,
    }
}

/// The payload view of the detail pane; the render thread runs the same function.
pub fn render_payload(
    masker: &dlq_core::masking::Masker,
    payload: &[u8],
    body: dlq_core::model::BodyKind,
    unmasked: bool,
) -> payload_view::PayloadView {
    if unmasked {
        payload_view::render_unmasked(payload, body, DETAIL_PAYLOAD_MAX)
    } else {
        payload_view::render(masker, payload, body, DETAIL_PAYLOAD_MAX)
    }
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
        let masker = Masker::with_key(vec![1]);
        let batch = (0..n)
            .map(|i| {
                let raw = RawLetter {
                    coords: Some(Coords::Kafka {
                        topic: "t".into(),
                        partition: 0,
                        offset: i as i64,
                    }),
                    headers: vec![Header::new(
                        "x-reason-code",
                        HeaderValue::text(if i % 2 == 0 { "even" } else { "odd" }),
                    )],
                    payload: br#"{"a":1}"#.to_vec(),
                    timestamp: chrono::DateTime::from_timestamp_millis(NOW - i as i64 * 1000),
                    ..RawLetter::default()
                };
                prepare_letter(&masker, &[], raw).into()
            })
            .collect();
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
                let raw = full.cache.peek(i)?.clone();
                Some(prepare_letter(full.catalog.masker(), &[], raw).into())
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
                .and_then(|r| s.catalog.store.row(r))
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
        assert_eq!(s.letters.cursor, 0);
        // Complete: a live arrival goes on top, the selection stays.
        update(&mut s, BrowseEvent::Live(aged(&[5])), SIZE);
        assert_eq!(at(&s), Some(10));
        assert_eq!(s.letters.cursor, 1);
        // Picked: the same.
        update(&mut s, Nav::FocusNext, SIZE);
        update(&mut s, Nav::Down, SIZE);
        assert_eq!(at(&s), Some(20));
        update(&mut s, BrowseEvent::Live(aged(&[1])), SIZE);
        assert_eq!(at(&s), Some(20));
        assert_eq!(s.letters.cursor, 3);
        // Another group opens at its top.
        update(&mut s, Nav::FocusPrev, SIZE);
        update(&mut s, Nav::Down, SIZE);
        assert_eq!(s.letters.cursor, 0);
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
        let mut owners: Vec<String> = s.groups.owners.values().map(|(_, o)| o.clone()).collect();
        owners.sort();
        assert_eq!(owners, ["(unowned)", "team-even"]);
        let (count, _) = s
            .groups
            .owners
            .iter()
            .find(|(_, (_, o))| o == "team-even")
            .map(|(_, v)| v.clone())
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
        let last = s.groups.cursor;
        navigate(&mut s, Nav::Down);
        assert_eq!(s.groups.cursor, last, "past the end");
        navigate(&mut s, Nav::Top);
        assert_eq!(s.groups.cursor, 0);
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
        assert_eq!(s.prompt.input, Input::Fuzzy("ev".into()));
        input(&mut s, Typing::InputSubmit, &mut cmds);
        assert_eq!(s.prompt.input, Input::None);
        assert_eq!(s.filter.fuzzy_words(), ["ev"]);
        input(&mut s, Typing::Cancel, &mut cmds);
        assert!(s.filter.is_empty(), "Esc clears the filter");
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
            let a = crate::keymap::action_for(s, &KeyEvent::new(code, m))
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
        assert_eq!(s.prompt.input, Input::Expr("age<5m ".into()));
        key(&mut s, KeyCode::Char('u'), KeyModifiers::CONTROL);
        assert_eq!(s.prompt.input, Input::Expr(String::new()));
        key(&mut s, KeyCode::Char('w'), KeyModifiers::CONTROL);
        assert_eq!(s.prompt.input, Input::Expr(String::new()));
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
            matches!(&cmds[..], [Command::Session(Request::Audit { action, .. })] if action == "denied")
        );
        assert!(s
            .message
            .as_ref()
            .is_some_and(|m| m.0.contains("needs the operator role")));
        s.role = Role::Operator;
        cmds.clear();
        act(&mut s, Act::StartDiscard, &mut cmds);
        assert!(matches!(s.prompt.input, Input::DiscardReason(_, ref rows) if rows.len() == 1));
        s.prompt.input = Input::None;
        s.read_only = true;
        act(&mut s, Act::StartDiscard, &mut cmds);
        assert_eq!(s.prompt.input, Input::None);
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
            .overlay
            .as_ref()
            .is_some_and(|o| o.1[0].contains("line 4")));
    }

    #[test]
    fn view_changes_tabs_grouping_and_ticks() {
        let mut s = state(3);
        view(&mut s, ViewKey::NextTab, SIZE);
        assert_eq!(s.detail.tab, Tab::Headers);
        let before = s.dims().to_vec();
        view(&mut s, ViewKey::CycleGrouping, SIZE);
        assert_ne!(s.dims(), &before[..]);
        view(&mut s, ViewKey::Tick(NOW + 120_000), SIZE);
        assert_eq!(s.now_ms, NOW + 120_000);
        view(&mut s, ViewKey::Tick(NOW + 120_500), SIZE);
        assert_eq!(s.now_ms, NOW + 120_000, "within the minute nothing moves");
        view(&mut s, ViewKey::Quit, SIZE);
        assert!(s.quit);
    }
}
