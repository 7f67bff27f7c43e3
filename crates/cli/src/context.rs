//! The CLI's side of a launch: its exit codes, the scan bar and notes on stderr, and
//! unreadable records and coverage as text or JSON. What a launch *is* (config, roles,
//! ledger, sources) is assembled by `dlq_app::launch`.

pub use dlq_app::launch::{Launch, Loaded, UsageError};
use dlq_core::catalog::Catalog;
use dlq_core::model::DeadLetter;
use dlq_core::sanitize;
use dlq_core::store::RowId;
use std::sync::Arc;

/// A run that ended in a state scripts must tell apart (replay: auto-stopped 3, killed
/// 4, refused 5); the message is printed as the error line.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

pub fn usage<T>(msg: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(msg.into()).into())
}

/// Scans as the CLI runs them: the progress bar on a terminal, the scan's notes on
/// stderr afterwards.
pub(crate) trait Scan {
    /// Scan the whole source into a catalog.
    fn scan(&self, arg: &str, previews: bool) -> anyhow::Result<Loaded>;
    /// Scan for `filter` (see `Launch::load_filtered`).
    fn scan_filtered(
        &self,
        arg: &str,
        previews: bool,
        filter: &mut dlq_core::filter::Filter,
    ) -> anyhow::Result<Loaded>;
    /// Scan with previews, visiting every full letter (see `Launch::load_with`).
    fn scan_visit(
        &self,
        arg: &str,
        visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded>;
    /// Scan, visiting every full letter (see `Launch::load_with`).
    fn scan_with(
        &self,
        arg: &str,
        previews: bool,
        visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded>;
}

impl Scan for Launch {
    fn scan(&self, arg: &str, previews: bool) -> anyhow::Result<Loaded> {
        said(Launch::load(
            self,
            arg,
            previews,
            &mut super::progress::ScanBar::new(),
        ))
    }

    fn scan_filtered(
        &self,
        arg: &str,
        previews: bool,
        filter: &mut dlq_core::filter::Filter,
    ) -> anyhow::Result<Loaded> {
        said(Launch::load_filtered(
            self,
            arg,
            previews,
            filter,
            &mut super::progress::ScanBar::new(),
        ))
    }

    fn scan_visit(
        &self,
        arg: &str,
        visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        Scan::scan_with(self, arg, true, visit)
    }

    fn scan_with(
        &self,
        arg: &str,
        previews: bool,
        visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        said(Launch::load_with(
            self,
            arg,
            previews,
            &mut super::progress::ScanBar::new(),
            visit,
        ))
    }
}

/// The ledger's location, if something was ever recorded there; else `nothing` said.
pub(crate) fn recorded_ledger(ctx: &Launch, nothing: &str) -> anyhow::Result<String> {
    let path = ctx
        .ledger
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no ledger location"))?;
    if !path.exists() {
        anyhow::bail!(
            "no ledger at {} yet: {nothing}",
            dlq_core::sanitize::clean(&path.to_string())
        );
    }
    Ok(dlq_core::sanitize::clean(&path.to_string()))
}

/// The scan's notes on stderr.
fn said(loaded: anyhow::Result<Loaded>) -> anyhow::Result<Loaded> {
    if let Ok(l) = &loaded {
        for n in &l.notes {
            eprintln!("{n}");
        }
    }
    loaded
}

/// A filter that matched nothing says why on stderr, when whole letters tell: bare
/// words that are only in payloads, header names no letter carries.
pub(crate) fn note_unmatched(filter: &dlq_core::filter::Filter, matched: usize) {
    for note in filter.unmatched_notes(matched as u64) {
        eprintln!("note: {note}");
    }
}

/// Report unreadable records on stderr (human output only; JSON carries them inline).
pub(crate) fn report_problems(catalog: &Catalog) {
    let (problems, count) = catalog.problems();
    if count == 0 {
        return;
    }
    eprintln!("warning: {count} record(s) could not be read and are not counted:");
    for p in problems.iter().take(5) {
        eprintln!(
            "  {}: {}",
            sanitize::clean(&p.location),
            sanitize::line(&p.message, 200)
        );
    }
    if count > 5 {
        eprintln!("  … and {} more", count - 5);
    }
}

/// Coverage as JSON: `{"complete": bool, "decisions_known": bool, "partial":
/// [{"location", "browsed", "total", "why"}], "notices": [{"location", "message"}]}` —
/// `complete` is false when any container was browsed in part, `decisions_known` when
/// the ledger could not be read.
pub fn coverage_json(session: &dlq_app::session::Session) -> serde_json::Value {
    let partial = session.partial();
    serde_json::json!({
        "complete": partial.is_empty(),
        // False when the ledger could not be read: no letter's state is known.
        "decisions_known": session.decisions_unknown().is_none(),
        "partial": partial.iter().map(|c| serde_json::json!({
            "location": sanitize::clean(&c.location),
            "browsed": c.browsed,
            "total": c.total,
            "why": sanitize::line(&c.why, 300),
        })).collect::<Vec<_>>(),
        "notices": session.notices().iter().map(|n| serde_json::json!({
            "location": sanitize::clean(&n.location),
            "message": sanitize::line(&n.message, 500),
        })).collect::<Vec<_>>(),
    })
}

/// Problems as JSON: `{"count": N, "first": [{"location", "message"}]}`.
pub(crate) fn problems_json(catalog: &Catalog) -> serde_json::Value {
    let (problems, count) = catalog.problems();
    serde_json::json!({
        "count": count,
        "first": problems.iter().take(20).map(|p| serde_json::json!({
            "location": p.location,
            "message": sanitize::line(&p.message, 500),
        })).collect::<Vec<_>>(),
    })
}
