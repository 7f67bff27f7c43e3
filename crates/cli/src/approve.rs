//! `dlq-triage approve ID [--yes] [--reject] [--note TEXT]`: the second pair of eyes on a
//! replay over `approval_above` letters (a team ledger).

use super::context::{usage, Context};
use super::{ApproveArgs, RolesArgs};
use dlq_core::sanitize::clean;
use std::io::Write;

pub fn run(ctx: &Context, a: &ApproveArgs) -> anyhow::Result<()> {
    if ctx.read_only {
        return usage("--read-only: approve writes the ledger");
    }
    let decide = a.yes.then_some((!a.reject, a.note.as_str()));
    let approval = dlq_app::team_ledger::approve(&ctx.principal(), &a.id, decide)?;
    if a.json {
        return super::output::print_json(&serde_json::to_value(&approval)?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "replay {} · {} letters · planned by {} at {} · {}",
        clean(&approval.id),
        approval.letters,
        clean(&approval.author),
        clean(&approval.requested_at),
        approval.state
    )?;
    for line in approval.plan.lines() {
        writeln!(out, "  {}", clean(line))?;
    }
    match (decide, &approval.approver) {
        (Some(_), Some(by)) => writeln!(
            out,
            "{} by {}: {} may start it now (the same letters; it runs once)",
            approval.state,
            clean(by),
            clean(&approval.author)
        )?,
        _ => writeln!(
            out,
            "nothing recorded: --yes approves it, --yes --reject refuses it (you cannot approve your own plan)"
        )?,
    }
    Ok(())
}

/// `dlq-triage roles [set ACTOR ROLE]` (the team's ledger).
pub fn roles(ctx: &Context, a: &RolesArgs) -> anyhow::Result<()> {
    let set = match (a.what.as_str(), &a.actor, &a.role) {
        ("set", Some(actor), Some(role)) => Some((actor.as_str(), role.as_str())),
        ("set", _, _) => return usage("roles set ACTOR ROLE (viewer, operator, privileged)"),
        _ => None,
    };
    if set.is_some() && ctx.read_only {
        return usage("--read-only: roles set writes the ledger");
    }
    let list = dlq_app::team_ledger::roles(&ctx.principal(), set)?;
    if a.json {
        let doc: Vec<serde_json::Value> = list
            .iter()
            .map(|(actor, role)| serde_json::json!({"actor": clean(actor), "role": role}))
            .collect();
        return super::output::print_json(&serde_json::Value::Array(doc));
    }
    let mut out = std::io::stdout().lock();
    if list.is_empty() {
        writeln!(out, "no roles on the team ledger yet: each engineer's roles file decides (`roles set ACTOR ROLE`, as its owner, starts)")?;
    }
    for (actor, role) in list {
        writeln!(out, "{:<24} {role}", clean(&actor))?;
    }
    Ok(())
}
