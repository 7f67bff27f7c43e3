//! `dlq-triage report SOURCE [--since 6h]`: the incident as Markdown for a postmortem —
//! what failed since when, each decision and replay with who, when and how it ended,
//! what is still open (assembled by `dlq_app::report`; masked).

use super::context::{Launch, Loaded, Scan};
use super::ReportArgs;
use dlq_app::browse::Browse;
use dlq_app::report::{incident_report, ReportInput};
use dlq_core::grouping::Dim;
use std::io::Write;

pub fn run(ctx: &Launch, a: &ReportArgs) -> anyhow::Result<()> {
    super::context::recorded_ledger(
        ctx,
        "nothing was decided, so there is no incident to report (summary says what is failing)",
    )?;
    let mut filter = ctx.parse_filter(None)?;
    let Loaded {
        catalog,
        mut session,
        info,
        source_key,
        ..
    } = ctx.scan_filtered(&a.source, false, &mut filter)?;
    let now = ctx.now_ms();
    let mut browse = Browse::scanned(
        catalog,
        &[Dim::Reason],
        now,
        filter,
        session.retention().to_vec(),
    );
    let ledger = ctx.ledger()?;
    browse.follow(ledger.decisions(&source_key)?);
    let principal = ctx.principal();
    let md = incident_report(&ReportInput {
        label: &info.label,
        source_key: &source_key,
        browse: &browse,
        journal: &*ledger,
        since_ms: ctx.since().map(|s| s.timestamp_millis()),
        now_ms: now,
        by: &principal.actor,
    })?;
    let mut out = std::io::stdout().lock();
    out.write_all(md.as_bytes())?;
    Ok(())
}
