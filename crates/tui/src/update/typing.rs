//! The prompt line: filters, the palette, reasons — and what Enter does with them.

use super::*;

/// Typing in the prompt: filters, the palette, reasons.
pub(crate) fn input(state: &mut AppState, action: Typing, cmds: &mut Vec<Command>) {
    match action {
        Typing::StartFuzzy => state.prompt.ask(Input::Fuzzy(String::new())),
        Typing::StartExpr => state
            .prompt
            .ask(Input::Expr(state.browse.filter().source().to_string())),
        Typing::StartCommand => state.prompt.ask(Input::Command(String::new())),
        Typing::InputChar(c) => {
            if let Some(s) = state.prompt.text_mut() {
                s.push(c);
            }
        }
        Typing::InputBackspace | Typing::InputClear | Typing::InputDeleteWord => {
            let Some(s) = state.prompt.text_mut() else {
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
            if let Input::TransformConfirm(..) = state.prompt.input() {
                state.prompt.drop_input();
                state.prompt.close_overlay();
                state.message = Some(("transform dropped: nothing recorded".into(), Level::Info));
                cmds.push(Command::Session(Request::DropTransform));
            } else if state.prompt.typing() {
                state.prompt.drop_input();
            } else if state.prompt.close_covers() {
            } else if !state.browse.filter().is_empty() {
                state.browse.set_filter(Filter::all());
                state.needs(Refresh::Tree);
                state.message = Some(("filter cleared".into(), Level::Info));
            } else if !state.letters.marks().is_empty() {
                let n = state.letters.clear_marks();
                state.message = Some((
                    format!("{} cleared", dlq_core::words::count(n as u64, "mark")),
                    Level::Info,
                ));
            }
        }
    }
}

/// Enter in the prompt: apply what was typed.
pub(crate) fn submit(state: &mut AppState, cmds: &mut Vec<Command>) {
    match state.prompt.take_input() {
        Input::Fuzzy(words) => apply_filter(state, &words),
        Input::Expr(e) => apply_filter(state, &e),
        Input::Command(c) => run_command(state, cmds, c.trim()),
        Input::EditReason(reason, row) => submit_edit(state, cmds, reason.trim(), row),
        Input::UnmaskReason(reason, row) => submit_unmask(state, cmds, reason.trim(), row),
        Input::DiscardReason(reason, d) => ask_discard(state, cmds, reason.trim(), d),
        Input::DiscardCount(typed, d) => {
            let want = d.rows.len();
            if typed.trim() == want.to_string() {
                submit_discard(state, cmds, &d.reason, &d.rows);
            } else {
                let now = crate::selection::targets(state).rows.len();
                let (said, again) =
                    crate::selection::count_mismatch(&typed, want, now, "discarded");
                state.message = Some((said, Level::Warn));
                if again {
                    state.prompt.ask(Input::DiscardCount(String::new(), d));
                }
            }
        }
        Input::ReplayCount(typed, want) => {
            crate::replaying::submit_count(state, cmds, &typed, want)
        }
        Input::TransformProgram(program, t) => {
            if program.trim().is_empty() {
                state.message = Some((
                    "a transform needs a jq program, e.g. .payload.amount |= tonumber".into(),
                    Level::Warn,
                ));
            } else {
                state.transform_program = program.trim().to_string();
                state.prompt.ask(Input::TransformReason(
                    String::new(),
                    Transforming {
                        program: program.trim().to_string(),
                        ..t
                    },
                ));
            }
        }
        Input::TransformReason(reason, t) => submit_transform(state, cmds, reason.trim(), t),
        Input::TransformConfirm(typed, n) => {
            state.prompt.close_overlay();
            let want = if n > state.replay.confirm_above() {
                n.to_string()
            } else {
                "yes".to_string()
            };
            let typed = typed.trim();
            if typed == want || (want == "yes" && typed == "y") {
                state.message = Some((format!("recording {n} revisions…"), Level::Info));
                cmds.push(Command::Session(Request::RecordTransform));
            } else {
                state.message = Some((
                    format!(
                        "typed `{}`, not {want}: nothing recorded",
                        dlq_core::sanitize::line(typed, 40)
                    ),
                    Level::Warn,
                ));
                cmds.push(Command::Session(Request::DropTransform));
            }
        }
        Input::None => apply_filter(state, ""),
    }
}

/// A filter the TUI can judge on what it indexed (no `payload.…` terms).
pub(crate) fn parse_filter(expr: &str) -> Result<Filter, String> {
    let f = Filter::parse(expr).map_err(|e| format!("bad filter: {e}"))?;
    if f.needs_letters() {
        return Err(format!(
            "bad filter: {}",
            dlq_core::filter::PAYLOAD_TERMS_NEED_LETTERS
        ));
    }
    Ok(f)
}

pub(crate) fn apply_filter(state: &mut AppState, expr: &str) {
    match parse_filter(expr) {
        Ok(f) => {
            state.browse.set_filter(f);
            state.needs(Refresh::Tree);
            let n = state.browse.index().total();
            let matched = format!("{} match `{expr}`", dlq_core::words::count(n, "letter"));
            state.message = Some(if state.browse.filter().is_empty() {
                ("filter cleared".into(), Level::Info)
            } else if let Some(why) = (n == 0).then(|| words_in_held_payloads(state)).flatten() {
                (format!("{matched} — {why}"), Level::Warn)
            } else {
                (matched, Level::Info)
            });
        }
        Err(e) => state.message = Some((e, Level::Error)),
    }
}

/// Letters looked through for a bare word the summary did not hold: the UI thread
/// masks each payload, so a bounded sample of what is in memory.
const HINT_SAMPLE: usize = 5_000;

/// Bare words that matched nothing where they look (id, key, reason, preview) but are
/// in the payloads of letters held in memory: said, with how to search there.
fn words_in_held_payloads(state: &AppState) -> Option<String> {
    if state.browse.filter().fuzzy_words().is_empty() {
        return None;
    }
    let mut probe = state.browse.filter().clone();
    let store = &state.browse.catalog.store;
    for (row, letter) in state.cache.held().take(HINT_SAMPLE) {
        if let Some(r) = store.row(row) {
            probe.note_letter(r, letter, state.browse.catalog.masker());
        }
    }
    let note = probe.unmatched_notes(0).into_iter().next()?;
    Some(format!(
        "{note} (of the letters held in memory; payload.… terms work in list, summary, export, discard and replay)"
    ))
}

pub(crate) fn letter_id(state: &AppState, row: RowId) -> Option<String> {
    let store = &state.browse.catalog.store;
    store.row(row).map(|r| store.id(r).to_string())
}

pub(crate) fn submit_edit(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, row: RowId) {
    let letter = state.cache.get(row).cloned();
    match (reason.is_empty(), letter, letter_id(state, row)) {
        (true, _, _) => {
            state.message = Some((
                "a revision needs a reason; nothing edited".into(),
                Level::Warn,
            ))
        }
        (false, Some(letter), Some(letter_id)) => cmds.push(Command::Edit {
            letter_id,
            letter,
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

pub(crate) fn submit_unmask(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    reason: &str,
    row: RowId,
) {
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

/// A program and a reason: ask the worker for the dry-run of these letters.
fn submit_transform(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, t: Transforming) {
    if reason.is_empty() {
        state.message = Some((
            "a transform needs a reason (recorded with every revision); nothing run".into(),
            Level::Warn,
        ));
        return;
    }
    let (picked, _, unreachable) = crate::selection::picked(state, &t.rows);
    let mut said = format!("running the program on {}…", t.what);
    if unreachable > 0 {
        said.push_str(&format!(" ({unreachable} no longer held are left out)"));
    }
    state.message = Some((said, Level::Info));
    cmds.push(Command::Session(Request::PlanTransform {
        picked,
        program: t.program,
        reason: reason.to_string(),
    }));
}

/// A reason given: above `confirm_above` letters the count must be typed too (the rule
/// replay has, and the CLI's `--expect`).
fn ask_discard(state: &mut AppState, cmds: &mut Vec<Command>, reason: &str, d: Discarding) {
    if !reason.is_empty() && d.rows.len() > state.replay.confirm_above() {
        state.message = None;
        state.prompt.ask(Input::DiscardCount(
            String::new(),
            Discarding {
                reason: reason.to_string(),
                ..d
            },
        ));
        return;
    }
    submit_discard(state, cmds, reason, &d.rows);
}

pub(crate) fn submit_discard(
    state: &mut AppState,
    cmds: &mut Vec<Command>,
    reason: &str,
    rows: &[RowId],
) {
    if reason.is_empty() {
        state.message = Some((
            "a discard needs a reason; nothing discarded".into(),
            Level::Warn,
        ));
        return;
    }
    let store = &state.browse.catalog.store;
    let rows: Vec<(RowId, DiscardTarget)> = rows
        .iter()
        .filter_map(|r| DiscardTarget::of(store, *r).map(|t| (*r, t)))
        .collect();
    state.message = Some((format!("discarding {} letter(s)…", rows.len()), Level::Info));
    cmds.push(Command::Session(Request::Discard {
        rows,
        reason: reason.to_string(),
    }));
}
