//! `dlq-triage replays [show ID] [--json]`: the replay journal, read from the ledger.

use super::context::{usage, Launch};
use super::ReplaysArgs;
use dlq_core::journal::{Journal, ReplayRow, ReplayState};
use dlq_core::sanitize::clean;
use std::collections::BTreeMap;
use std::io::Write;

pub fn run(ctx: &Launch, a: &ReplaysArgs) -> anyhow::Result<()> {
    let ledger = match &ctx.ledger {
        Some(p) if p.exists() => ctx.ledger()?,
        _ if a.what.is_some() => {
            return usage(format!(
                "no replay `{}`: there is no ledger yet",
                clean(a.id.as_deref().unwrap_or(""))
            ))
        }
        _ => {
            if a.json {
                writeln!(std::io::stdout(), "[]")?;
            } else {
                writeln!(std::io::stdout(), "no replays (no ledger yet)")?;
            }
            return Ok(());
        }
    };
    match (a.what.as_deref(), &a.id) {
        (Some("show"), Some(id)) => show(&*ledger, id, a.json),
        (Some("show"), None) => usage("replays show needs a replay id (see `dlq-triage replays`)"),
        _ => list(&*ledger, a.json),
    }
}

fn state(r: &ReplayRow) -> &'static str {
    dlq_app::identity::replay_state(r).as_str()
}

fn list(ledger: &dyn Journal, json: bool) -> anyhow::Result<()> {
    let rows = ledger.replays()?;
    let mut out = std::io::stdout().lock();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "source": r.source, "target": r.target, "actor": r.actor,
                    "started_at": r.started_at, "state": state(r), "running_on": r.running_on,
                    "planned": r.detail.get("planned"), "outcome": r.detail.get("outcome"),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(out, "no replays")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<24} {:<12} {:>7} {:>9} {:>6}  {:<10} {:<24} TARGET",
        "ID", "STATE", "PLANNED", "CONFIRMED", "FAILED", "ACTOR", "STARTED"
    )?;
    for r in &rows {
        let o = r.detail.get("outcome");
        let n = |k: &str| {
            o.and_then(|o| o.get(k))
                .and_then(|v| v.as_u64())
                .map_or("-".to_string(), |v| v.to_string())
        };
        writeln!(
            out,
            "{:<24} {:<12} {:>7} {:>9} {:>6}  {:<10} {:<24} {}",
            clean(&r.id),
            state(r),
            r.detail
                .get("planned")
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            n("confirmed"),
            n("failed_again"),
            clean(&r.actor),
            clean(&r.started_at),
            clean(&r.target)
        )?;
    }
    Ok(())
}

fn show(ledger: &dyn Journal, id: &str, json: bool) -> anyhow::Result<()> {
    let Some((row, items)) = ledger.replay(id)? else {
        return usage(format!(
            "no replay `{}` (see `dlq-triage replays`)",
            clean(id)
        ));
    };
    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for i in &items {
        *by_state.entry(i.state.as_str()).or_insert(0) += 1;
    }
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "id": row.id, "source": row.source, "target": row.target, "actor": row.actor,
            "started_at": row.started_at, "state": state(&row), "running_on": row.running_on,
            "detail": row.detail,
            "by_state": by_state, "letters": items,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(out, "replay {} · {}", clean(&row.id), state(&row))?;
    writeln!(out, "  source:   {}", clean(&row.source))?;
    writeln!(out, "  target:   {}", clean(&row.target))?;
    writeln!(
        out,
        "  by:       {} at {}",
        clean(&row.actor),
        clean(&row.started_at)
    )?;
    if let Some(on) = &row.running_on {
        writeln!(out, "  sender:   {}", clean(on))?;
    }
    if let Some(r) = row
        .detail
        .get("outcome")
        .and_then(|o| o.get("reason"))
        .and_then(|r| r.as_str())
    {
        writeln!(out, "  stopped:  {}", clean(r))?;
    }
    let counts: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    writeln!(out, "  letters:  {}", counts.join(", "))?;
    if matches!(
        dlq_app::identity::replay_state(&row),
        ReplayState::Interrupted | ReplayState::Killed | ReplayState::AutoStopped
    ) {
        writeln!(
            out,
            "  continue: dlq-triage replay {} --resume {} (confirmed letters are never sent again)",
            clean(&row.source),
            clean(&row.id)
        )?;
    }
    writeln!(
        out,
        "{:>5}  {:<13} {:<28} {:<24} NOTE",
        "SEQ", "STATE", "LETTER", "FROM"
    )?;
    for i in &items {
        let note = i.error.as_deref().or(i.published.as_deref()).unwrap_or("");
        writeln!(
            out,
            "{:>5}  {:<13} {:<28} {:<24} {}",
            i.seq,
            i.state,
            clean(&i.letter_id),
            clean(&i.location),
            clean(note)
        )?;
    }
    Ok(())
}
