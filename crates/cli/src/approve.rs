//! `dlq-triage approve ID [--yes] [--reject] [--note TEXT]`: the second pair of eyes on a
//! replay over `approval_above` letters (a team ledger).

use super::context::{usage, Launch};
use super::{ApproveArgs, PolicyArgs, RolesArgs};
use dlq_core::access::WriteOp;
use dlq_core::sanitize::clean;
use std::io::Write;

pub fn run(ctx: &Launch, a: &ApproveArgs) -> anyhow::Result<()> {
    ctx.require_write(WriteOp::Approve, &a.id)?;
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
pub fn roles(ctx: &Launch, a: &RolesArgs) -> anyhow::Result<()> {
    let set = match (a.what.as_str(), &a.actor, &a.role) {
        ("set", Some(actor), Some(role)) => Some((actor.as_str(), role.as_str())),
        ("set", _, _) => return usage("roles set ACTOR ROLE (viewer, operator, privileged)"),
        _ => None,
    };
    if set.is_some() {
        ctx.require_write(WriteOp::SetRoles, "roles")?;
    }
    let list = dlq_app::team_ledger::roles(&ctx.principal(), set)?;
    pairs(
        &list,
        ("actor", "role"),
        a.json,
        "no roles on the team ledger yet: each engineer's roles file decides (`roles set ACTOR ROLE`, as its owner, starts)",
    )
}

pub fn policy(ctx: &Launch, a: &PolicyArgs) -> anyhow::Result<()> {
    let set = match (a.what.as_str(), &a.key, &a.value) {
        ("set", Some(key), Some(value)) => Some((key.as_str(), Some(value.as_str()))),
        ("clear", Some(key), None) => Some((key.as_str(), None)),
        ("set" | "clear", _, _) => return usage("policy set KEY VALUE, or policy clear KEY"),
        _ => None,
    };
    if set.is_some() {
        ctx.require_write(WriteOp::SetPolicy, "policy")?;
    }
    let list = dlq_app::team_ledger::policy(&ctx.principal(), set)?;
    pairs(
        &list,
        ("key", "value"),
        a.json,
        "no policy on the team ledger: each engineer's config decides (`policy set KEY VALUE`, privileged)",
    )
}

/// Name–value pairs from the team's ledger, as a table or JSON objects.
fn pairs(
    list: &[(String, String)],
    (k, v): (&str, &str),
    json: bool,
    empty: &str,
) -> anyhow::Result<()> {
    if json {
        let doc: Vec<serde_json::Value> = list
            .iter()
            .map(|(a, b)| serde_json::json!({k: clean(a), v: clean(b)}))
            .collect();
        return super::output::print_json(&serde_json::Value::Array(doc));
    }
    let mut out = std::io::stdout().lock();
    if list.is_empty() {
        writeln!(out, "{empty}")?;
    }
    for (a, b) in list {
        writeln!(out, "{:<24} {}", clean(a), clean(b))?;
    }
    Ok(())
}
