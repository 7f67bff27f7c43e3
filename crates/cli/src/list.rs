//! `dlq-triage list`: the letters, newest first, with masked previews.

use super::context::{problems_json, report_problems, Launch, Scan};
use super::table::Table;
use super::ListArgs;
use chrono::{DateTime, SecondsFormat};
use dlq_core::masking::Masker;
use dlq_core::store::{LetterStore, Row, RowId, NO_TIME};
use dlq_core::timefmt::format_age_ms;
use serde_json::{json, Value};
use std::io::Write;

pub fn run(ctx: &Launch, a: &ListArgs) -> anyhow::Result<()> {
    let mut filter = ctx.parse_filter(a.filter.as_deref())?;
    let loaded = ctx.scan_filtered(&a.source, true, &mut filter)?;
    let store = &loaded.catalog.store;
    let masker = loaded.catalog.masker();
    let now = ctx.now_ms();
    let mut ids: Vec<RowId> = store
        .rows()
        .iter()
        .enumerate()
        .filter(|(_, r)| filter.matches(store, r, now))
        .map(|(i, _)| i as RowId)
        .collect();
    let matched = ids.len();
    super::context::note_unmatched(&filter, matched);
    let at = |i: &RowId| store.row(*i).map_or(NO_TIME, |r| r.at_ms);
    match a.sort.as_str() {
        "newest" => ids.sort_by_key(|i| std::cmp::Reverse(at(i))),
        "oldest" => ids.sort_by_key(|i| (at(i) == NO_TIME, at(i))),
        _ => {}
    }
    if a.limit > 0 {
        ids.truncate(a.limit);
    }
    let may_view = ctx.may_view_payloads();
    // The ledger could not be read: no state is known (`unknown`, not `open`).
    let unknown = loaded.session.decisions_unknown().is_some();
    if a.json {
        let letters: Vec<_> = ids
            .iter()
            .filter_map(|i| store.row(*i))
            .map(|r| letter_json(store, masker, r, (may_view, unknown)))
            .collect();
        let mut doc = json!({
            "source": loaded.info.label,
            "total": store.len(),
            "matched": matched,
            "scanned_at": ctx.now.to_rfc3339_opts(SecondsFormat::Secs, true),
            "letters": letters,
            "problems": problems_json(&loaded.catalog),
            "coverage": super::context::coverage_json(&loaded.session),
        });
        if !filter.is_empty() {
            doc["filter"] = json!(filter.source());
        }
        return super::output::print_json(&doc);
    }
    let mut out = super::pager::Pager::start();
    let rows = ids.iter().filter_map(|i| store.row(*i));
    write!(
        out,
        "{}",
        table(store, masker, rows, now, (may_view, unknown)).render()
    )?;
    writeln!(
        out,
        "{} of {} letters shown{}",
        ids.len(),
        matched,
        if matched < store.len() {
            format!(" ({} in the source)", store.len())
        } else {
            String::new()
        }
    )?;
    out.flush()?;
    report_problems(&loaded.catalog);
    Ok(())
}

/// One letter of `list --json`; the preview only for those who may see payloads.
/// `(may_view, unknown)`: payloads may be shown; the ledger's states are unknown.
fn letter_json(
    store: &LetterStore,
    masker: &Masker,
    r: &Row,
    (may_view, unknown): (bool, bool),
) -> Value {
    let opt = |s: &str| {
        if s.is_empty() {
            None
        } else {
            Some(s.to_string())
        }
    };
    json!({
        "id": store.id(r),
        "coords": opt(&store.coords_label(r)),
        "key": opt(&masker.mask_text(store.key(r))),
        "dead_lettered_at": (r.at_ms != NO_TIME).then(|| DateTime::from_timestamp_millis(r.at_ms)).flatten()
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true)),
        "reason_code": store.sym(r.reason),
        "consumer_version": opt(store.sym(r.version)),
        "event_type": opt(store.sym(r.event)),
        "origin": opt(store.sym(r.origin)),
        "attempt": (r.attempt > 0).then_some(r.attempt),
        "replay_count": r.replay_count,
        "state": dlq_core::prepared::state_word(r.state, unknown),
        "body": r.body.as_str(),
        "preview": if may_view { Some(store.preview(r)) } else { None },
    })
}

fn table<'a>(
    store: &LetterStore,
    masker: &Masker,
    rows: impl Iterator<Item = &'a Row>,
    now: i64,
    (may_view, unknown): (bool, bool),
) -> Table {
    let mut t = Table::new(&[
        ("ID", false, 36),
        ("AGE", true, 7),
        ("KEY", false, 20),
        ("#", true, 4),
        ("STATE", false, 12),
        ("REASON", false, 40),
        ("PREVIEW", false, 60),
    ]);
    for r in rows {
        t.row(vec![
            store.id(r).to_string(),
            if r.at_ms == NO_TIME {
                "-".into()
            } else {
                format_age_ms(now - r.at_ms)
            },
            masker.mask_text(store.key(r)),
            if r.attempt > 0 {
                r.attempt.to_string()
            } else {
                "-".into()
            },
            dlq_core::prepared::state_word(r.state, unknown).to_string(),
            store.sym(r.reason).to_string(),
            if may_view {
                store.preview(r).to_string()
            } else {
                "(hidden: viewer)".to_string()
            },
        ]);
    }
    t
}
