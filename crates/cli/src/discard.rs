//! `dlq-triage discard SOURCE --filter EXPR --reason TEXT`: ledger first, then the
//! broker. Each letter's decision is committed before its ack; a crash in between leaves
//! a pending decision that the next browse applies, once.

use super::context::{usage, Launch, Scan};
use super::DiscardArgs;
use dlq_app::session::DiscardTarget;
use dlq_core::access::WriteOp;
use dlq_core::model::TriageState;
use dlq_core::sanitize;
use std::io::Write;

pub fn run(ctx: &Launch, a: &DiscardArgs) -> anyhow::Result<()> {
    ctx.require_write(WriteOp::Discard, &a.source)?;
    let reason = a.reason.trim();
    if reason.is_empty() {
        return usage("--reason must say why (it is recorded in the ledger)");
    }
    let mut filter = ctx.parse_filter(Some(&a.filter))?;
    if filter.is_empty() {
        return usage(
            "--filter must select letters, e.g. --filter 'reason=amount_not_a_number age>1d'",
        );
    }
    let mut loaded = ctx.scan_filtered(&a.source, filter.needs_previews(), &mut filter)?;
    let now = ctx.now_ms();
    let store = &loaded.catalog.store;
    let rows: Vec<u32> = store
        .rows()
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state == TriageState::Open && filter.matches(store, r, now))
        .map(|(i, _)| i as u32)
        .collect();
    super::context::note_unmatched(&filter, rows.len());
    let targets: Vec<DiscardTarget> = rows
        .iter()
        .filter_map(|&i| DiscardTarget::of(store, i))
        .collect();
    let label = sanitize::clean(&loaded.info.label);
    if targets.is_empty() {
        writeln!(
            std::io::stdout(),
            "no open letters match `{}` in {label}",
            sanitize::clean(&a.filter)
        )?;
        return Ok(());
    }
    if !confirmed(
        a,
        targets.len(),
        &label,
        reason,
        ctx.config.replay.confirm_above,
    )? {
        writeln!(std::io::stdout(), "nothing discarded")?;
        return Ok(());
    }
    // Test hook: die between the ledger write and the broker (see tests/rabbitmq.rs).
    let crash_after_ledger = cfg!(feature = "test-hooks")
        && std::env::var("DLQ_TRIAGE_TEST_CRASH_AFTER_LEDGER").is_ok_and(|v| v == "1");
    let mut after_record = || {
        if crash_after_ledger {
            std::process::abort();
        }
    };
    let report = match loaded.session.discard(&targets, reason, &mut after_record) {
        Ok(r) => r,
        Err(e @ dlq_app::session::SessionError::AwaitingApproval(_)) => {
            return Err(super::context::Exit {
                code: 7,
                message: e.to_string(),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    for &i in &report.done {
        loaded
            .catalog
            .store
            .set_state(rows[i], TriageState::Discarded);
    }
    say_report(ctx, &report, &label)
}

/// What the discard did: letters pending on the broker, already decided and refused on
/// stderr, the summary and the ledger on stdout; pending or refused letters make it a
/// failure.
fn say_report(
    ctx: &Launch,
    report: &dlq_app::session::DiscardReport,
    label: &str,
) -> anyhow::Result<()> {
    for (id, e) in &report.pending {
        eprintln!(
            "warning: {}: recorded, not yet applied to the broker: {}",
            sanitize::clean(id),
            sanitize::clean(e)
        );
    }
    for line in &report.already {
        eprintln!("note: {}", sanitize::clean(line));
    }
    for line in &report.refused {
        eprintln!("refused: {}", sanitize::clean(line));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", report.summary(Some(label)))?;
    if let Some(at) = &ctx.ledger {
        writeln!(out, "ledger: {}", sanitize::clean(&at.to_string()))?;
    }
    if !report.pending.is_empty() {
        anyhow::bail!(
            "{} discards are recorded but not yet applied to the broker",
            report.pending.len()
        );
    }
    if !report.refused.is_empty() {
        anyhow::bail!(
            "{} not discarded: a replay holds them or may have sent them (see above); nothing was sent twice or discarded after a send",
            dlq_core::words::letters(report.refused.len())
        );
    }
    Ok(())
}

/// The destructive-command guard (see `confirm`): never a script's stdin as a yes.
fn confirmed(
    a: &DiscardArgs,
    n: usize,
    label: &str,
    reason: &str,
    above: usize,
) -> anyhow::Result<bool> {
    let guard = crate::confirm::Guard {
        verb: "discard",
        n,
        above,
        yes: a.yes,
        expect: a.expect,
        nothing: "nothing was discarded",
    };
    guard.confirmed(&format!(
        "Discard {} from {label} (reason: {})?\n  RabbitMQ: each is acked (removed from the DLQ) after the ledger records it.\n  Kafka, streams, files: recorded in the ledger only (one record cannot be deleted).",
        dlq_core::words::letters(n),
        sanitize::clean(reason)
    ))
}
