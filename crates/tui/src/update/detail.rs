//! The detail pane: the selected letter, its payload view and diff.

use super::*;

/// Make the detail pane show the selected letter: from the cache, or ask the worker.
pub(crate) fn sync_detail(state: &mut AppState, cmds: &mut Vec<Command>) {
    let Some(row) = state.selected_row() else {
        state.detail.clear();
        return;
    };
    if state.detail.wants_history(row) {
        if let Some(id) = letter_id(state, row) {
            cmds.push(Command::Session(Request::History(row, id)));
        }
    }
    let want_diff = state.detail.tab() == Tab::Diff;
    let mark = state
        .letters
        .marks()
        .iter()
        .rev()
        .find(|m| **m != row)
        .copied();
    if state.detail.shows(row, mark) {
        return;
    }
    // The scan's preparation of the letter, shared with the cache: nothing is extracted
    // or masked again here (a fetched one was prepared by the session).
    let Some(letter) = state.cache.get(row).cloned() else {
        state.detail.clear();
        request_fetch(state, row, cmds);
        return;
    };
    // Scanned while the registry had not answered: read it again, once, so the pane
    // decodes it if the schema has arrived since (Kafka letters are re-read by offset).
    let pending = matches!(letter.schema, Some(dlq_core::schema::Decoding::Pending(_)));
    let store = &state.browse.catalog.store;
    let refetchable = store.row(row).and_then(|r| store.kafka_coords(r)).is_some();
    if pending && refetchable && state.detail.retry_schema(row) {
        request_fetch(state, row, cmds);
    }
    let diff = match mark.filter(|_| want_diff) {
        Some(m) => diff_against(state, m, &letter),
        None => None,
    };
    let payload = payload_for(state, row, &letter, cmds);
    state.detail.show(Detail {
        row,
        letter,
        payload,
        diff,
    });
}

/// Ask the worker for a letter whose bytes are not in memory (once).
pub(crate) fn request_fetch(state: &mut AppState, row: RowId, cmds: &mut Vec<Command>) {
    let store = &state.browse.catalog.store;
    let coords = store.row(row).and_then(|r| store.kafka_coords(r));
    match coords {
        Some(c) => {
            if state.detail.start_fetch(row) {
                cmds.push(Command::Session(Request::Fetch(row, c)));
            }
        }
        None => {
            state.detail.cannot_fetch(row);
            state.message = Some((
                "this letter's bytes are not in memory (payload budget) and the source cannot re-fetch them".into(),
                Level::Warn,
            ))
        }
    }
}

/// The masked diff against the marked letter, when both payloads are small enough to
/// mask on this thread; bigger ones are for `dlq-triage diff`.
pub(crate) fn diff_against(
    state: &mut AppState,
    mark: RowId,
    letter: &dlq_core::model::DeadLetter,
) -> Option<(RowId, dlq_core::diff::Diff)> {
    let other = state.cache.get(mark).cloned()?;
    let len = |l: &dlq_core::model::DeadLetter| l.readable_payload().len();
    if len(&other).max(len(letter)) > 4 * INLINE_RENDER_MAX {
        state.message = Some((
            "payloads over 64 KiB are compared with `dlq-triage diff SOURCE ID OTHER`".into(),
            Level::Warn,
        ));
        return None;
    }
    Some((
        mark,
        diff_letters(state.browse.catalog.masker(), &other, letter),
    ))
}

/// The payload view: from the render thread's last answer, rendered here when small, or
/// a placeholder while the render thread works on a big one.
pub(crate) fn payload_for(
    state: &AppState,
    row: RowId,
    letter: &std::sync::Arc<dlq_core::model::DeadLetter>,
    cmds: &mut Vec<Command>,
) -> payload_view::PayloadView {
    let unmasked = state.detail.is_unmasked(row);
    if let Some(view) = state.detail.rendered_view(row, unmasked) {
        return view.clone();
    }
    let bytes = letter.readable_payload();
    if bytes.len() <= INLINE_RENDER_MAX {
        return render_payload(state.browse.catalog.masker(), letter, unmasked);
    }
    cmds.push(Command::RenderPayload {
        row,
        letter: std::sync::Arc::clone(letter),
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
    letter: &dlq_core::model::DeadLetter,
    unmasked: bool,
) -> payload_view::PayloadView {
    if unmasked {
        payload_view::render_letter_unmasked(letter, DETAIL_PAYLOAD_MAX)
    } else {
        payload_view::render_letter(masker, letter, DETAIL_PAYLOAD_MAX)
    }
}
