//! `dlq-triage audit list|verify`: the hash-chained audit log.

use super::context::Launch;
use super::table::Table;
use super::AuditArgs;
use dlq_core::journal::Journal;
use serde_json::json;
use std::io::Write;

pub fn run(ctx: &Launch, a: &AuditArgs) -> anyhow::Result<()> {
    let at = super::context::recorded_ledger(ctx, "nothing has been recorded")?;
    let ledger = ctx.ledger()?;
    match a.what.as_str() {
        "head" => head(&*ledger, a, &at),
        "verify" => verify(&*ledger, a, &at),
        _ => list(&*ledger, a, &at),
    }
}

/// `audit head`: the chain's head, to keep as an anchor.
fn head(ledger: &dyn Journal, a: &AuditArgs, at: &str) -> anyhow::Result<()> {
    match ledger.head()? {
        Some(h) if a.json => super::output::print_json(&json!({"ledger": at, "head": h})),
        Some(h) => Ok(writeln!(std::io::stdout(), "{h}")?),
        None => anyhow::bail!("the audit log is empty"),
    }
}

/// `audit verify [--expect-head H]`: the whole chain, and the anchor if given.
fn verify(ledger: &dyn Journal, a: &AuditArgs, at: &str) -> anyhow::Result<()> {
    let expect = match a.expect_head.as_deref() {
        Some(h) => Some(
            h.parse::<dlq_core::journal::Head>()
                .map_err(|e| super::context::UsageError(format!("--expect-head: {e}")))?,
        ),
        None => None,
    };
    let v = ledger.verify(expect.as_ref())?;
    let mut out = std::io::stdout().lock();
    if a.json {
        super::output::print_json(&json!({"ledger": at, "verification": v}))?;
    } else if v.ok {
        writeln!(
            out,
            "ok: {} audit entries, chain intact{} ({at})",
            v.entries,
            if expect.is_some() {
                ", anchor matches"
            } else {
                ""
            },
        )?;
    } else {
        writeln!(
            out,
            "TAMPERED: entry {} — {} ({} entries, {at})",
            v.first_bad_seq.unwrap_or(0),
            dlq_core::sanitize::clean(&v.problem.clone().unwrap_or_default()),
            v.entries,
        )?;
    }
    if !v.ok {
        anyhow::bail!(
            "the audit chain is broken at entry {}",
            v.first_bad_seq.unwrap_or(0)
        );
    }
    Ok(())
}

/// `audit list`: every entry, through the pager.
fn list(ledger: &dyn Journal, a: &AuditArgs, at: &str) -> anyhow::Result<()> {
    let entries = ledger.audit_entries()?;
    if a.json {
        return super::output::print_json(&json!({"ledger": at, "entries": entries}));
    }
    let mut t = Table::new(&[
        ("SEQ", true, 8),
        ("AT", false, 24),
        ("ACTOR", false, 20),
        ("ACTION", false, 12),
        ("TARGET", false, 36),
        ("DETAIL", false, 80),
    ]);
    let mut out = super::pager::Pager::start();
    for e in &entries {
        t.row(vec![
            e.seq.to_string(),
            e.at.clone(),
            e.actor.clone(),
            e.action.clone(),
            e.target.clone(),
            e.detail.clone(),
        ]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out, "{} entries in {at}", entries.len())?;
    Ok(())
}
