//! Actions on letters (discard, unmask, edit, mark, diff, copy) and refusals.

use super::*;

/// Actions on letters: discard, unmask, edit, mark, diff, copy.
pub(crate) fn act(state: &mut AppState, action: Act, cmds: &mut Vec<Command>) {
    match action {
        Act::StartUnmask => match (state.selected_row(), check(state.role, Permission::Unmask)) {
            (None, _) => state.message = Some(("select a letter to unmask".into(), Level::Warn)),
            (Some(row), Err(denied)) => refuse(state, cmds, denied, row),
            (Some(row), Ok(())) => state.prompt.ask(Input::UnmaskReason(String::new(), row)),
        },
        Act::StartEdit => match state.selected_row() {
            None => state.message = Some(("select a letter to edit".into(), Level::Warn)),
            Some(row) => {
                let write = dlq_core::access::WriteOp::Edit;
                let target = |s: &AppState| letter_id(s, row).unwrap_or_default();
                if crate::refusal::may_write(state, cmds, write, target) {
                    state.prompt.ask(Input::EditReason(String::new(), row));
                }
            }
        },
        Act::StartDiscard => {
            let write = dlq_core::access::WriteOp::Discard;
            if let Some((rows, what)) = selection_for(state, cmds, write, "discard") {
                let reason = String::new();
                let d = Discarding { rows, what, reason };
                state.prompt.ask(Input::DiscardReason(String::new(), d));
            }
        }
        Act::StartTransform => {
            let write = dlq_core::access::WriteOp::Transform;
            if let Some((rows, what)) = selection_for(state, cmds, write, "transform") {
                let program = String::new();
                let t = Transforming {
                    rows,
                    what,
                    program,
                };
                // From `w`: its suggestion, to read and edit; else the last one typed.
                let offered = match state.prompt.suggested() {
                    Some(p) => p.to_string(),
                    None => state.transform_program.clone(),
                };
                state.prompt.close_overlay();
                state.prompt.ask(Input::TransformProgram(offered, t));
            }
        }
        Act::MarkAll => {
            let said = crate::selection::mark_all_in_view(state);
            state.message = Some((said, Level::Info));
        }
        Act::ToggleMark => {
            if let Some(row) = state.selected_row() {
                state.letters.toggle_mark(row);
            }
        }
        Act::Diff => {
            state.detail.show_tab(Tab::Diff);
            if state.letters.marks().is_empty() {
                state.message = Some((
                    "mark a letter with space, select another, then D".into(),
                    Level::Warn,
                ));
            }
        }
        Act::Copy => copy(state, cmds),
        Act::Why => why(state),
        Act::CopyLinks => copy_links(state, cmds),
        Act::Rebrowse => rebrowse(state, cmds),
    }
}

/// `y`: the masked payload shown, to the clipboard (viewers see no payload to copy).
fn copy(state: &mut AppState, cmds: &mut Vec<Command>) {
    if check(state.role, Permission::ViewPayload).is_err() {
        state.message = Some((
            "copying needs the operator role (payloads are hidden from viewers)".into(),
            Level::Warn,
        ));
        return;
    }
    match state.detail.shown() {
        // What happened is reported by the copy itself (`BrowseEvent::Copied`).
        Some(d) => cmds.push(Command::Copy(d.payload.text.clone())),
        None => state.message = Some(("nothing selected to copy".into(), Level::Warn)),
    }
}

/// `L`: the selected letter's links, one per line, to the clipboard.
fn copy_links(state: &mut AppState, cmds: &mut Vec<Command>) {
    if state.links.is_empty() {
        state.message = Some((
            "no links: add [[links]] name/url templates to the config (docs/configuration.md#links)".into(),
            Level::Warn,
        ));
        return;
    }
    let Some(d) = state.detail.shown() else {
        state.message = Some(("no letter selected".into(), Level::Warn));
        return;
    };
    let masker = state.browse.catalog.masker();
    let urls: Vec<String> = dlq_core::links::links_for(&state.links, &d.letter, masker)
        .into_iter()
        .filter_map(Result::ok)
        .map(|l| l.url)
        .collect();
    if urls.is_empty() {
        state.message = Some((
            "none of the links can be made for this letter (see its failure tab)".into(),
            Level::Warn,
        ));
        return;
    }
    cmds.push(Command::Copy(urls.join("\n")));
}

/// Steps of `w`'s timeline: a sparkline that fits 80 columns beside a version.
const WHY_STEPS: usize = 24;

/// `w`: why the selected group fails, over the panes — since when and with which
/// release, what is different about its letters, and the program that would repair it
/// (the transform key opens it). Read from the letters in memory, masked.
fn why(state: &mut AppState) {
    let Some(node) = state.selected_node() else {
        state.message = Some(("select a group to ask why".into(), Level::Warn));
        return;
    };
    let title = format!(
        "Why: {} ({})",
        dlq_core::sanitize::line(&node.label, 60),
        dlq_core::words::letters(node.count as usize)
    );
    let rows = state.browse.index().members_under(&node.path);
    let cache = &state.cache;
    let insight = dlq_app::insight::group_insight(
        &state.browse.catalog,
        &rows,
        &|r| cache.peek(r).cloned(),
        state.role,
        state.now_ms,
        WHY_STEPS,
    );
    let lines = insight.lines(state.now_ms);
    let program = insight
        .payloads
        .ok()
        .and_then(|p| p.suggestion)
        .map(|s| s.program);
    state.prompt.open_suggesting((title, lines), program);
}

/// `R`: a new browse on a new connection — not while a replay runs on this one.
fn rebrowse(state: &mut AppState, cmds: &mut Vec<Command>) {
    if state.replay.running() {
        state.message = Some((
            "a replay is running: K stops it before browsing again".into(),
            Level::Warn,
        ));
        return;
    }
    state.message = Some((
        "browsing again on a new connection (what this browse held goes back to the queue)…".into(),
        Level::Info,
    ));
    cmds.push(Command::Session(Request::Rebrowse));
}

/// The letters a write acts on (the selection rule: marks in view, else the cursor's
/// group or letter) and how they are said, once the write is allowed and there are some;
/// otherwise the status line says why.
fn selection_for(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    write: dlq_core::access::WriteOp,
    verb: &str,
) -> Option<(Vec<RowId>, String)> {
    let t = crate::selection::targets(state);
    let first = t.rows.first().copied();
    let target = |s: &AppState| first.and_then(|r| letter_id(s, r)).unwrap_or_default();
    if !crate::refusal::may_write(state, cmds, write, target) {
        return None;
    }
    if t.rows.is_empty() {
        state.message = Some((
            format!("select a group (or mark letters) to {verb}"),
            Level::Warn,
        ));
        return None;
    }
    let what = t.describe();
    Some((t.rows, what))
}

/// Say why an action is refused, and have the refusal audited.
pub(crate) fn refuse(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    denied: dlq_core::access::Denied,
    row: RowId,
) {
    let target = letter_id(state, row).unwrap_or_default();
    crate::refusal::refuse_target(state, cmds, denied, target);
}
