//! `dlq-triage queues amqp://…`: the vhost's queues from the management API, with type,
//! counts and whether each looks like a DLQ, judged as the source picker judges
//! (`discovery::rabbit_queues`).

use super::context::{Launch, UsageError};
use super::table::Table;
use super::QueuesArgs;
use dlq_app::brokers::discovery::rabbit_queues;
use dlq_core::source::SourceRef;
use serde_json::json;
use std::io::Write;

pub fn run(ctx: &Launch, a: &QueuesArgs) -> anyhow::Result<()> {
    // The queue list is the point: accept the URI without `?queue=`.
    let source = match ctx.broker_only(&a.source)? {
        Some(s) => s,
        None => ctx.resolve_source(&a.source)?,
    };
    let SourceRef::Amqp { vhost, .. } = &source else {
        return Err(UsageError("queues lists RabbitMQ queues: give an amqp:// URI".into()).into());
    };
    let vhost = vhost.clone();
    let (source, opts) = ctx.plan_for(source, &a.source)?;
    let patterns = ctx.dlq_patterns();
    let rows = rabbit_queues(&source, &opts, &patterns, !a.dlq).map_err(|e| match e {
        // A management URL that is not one is the operator's to fix.
        dlq_core::ports::SourceError::Unsupported(m) => anyhow::Error::from(UsageError(m)),
        other => other.into(),
    })?;
    if a.json {
        let doc = json!({
            "vhost": dlq_core::sanitize::clean(&vhost),
            "patterns": patterns,
            "queues": rows.iter().map(|(q, dlq)| json!({
                "name": dlq_core::sanitize::clean(&q.name),
                "type": q.kind,
                "messages": q.messages,
                "ready": q.messages_ready,
                "unacked": q.messages_unacknowledged,
                "delivery_limit": q.delivery_limit(),
                // Quorum: dead-lettered at-least-once and not yet confirmed by the route.
                "held_for_dead_lettering": q.messages_dlx,
                "looks_like_dlq": dlq,
            })).collect::<Vec<_>>(),
        });
        return super::output::print_json(&doc);
    }
    let mut t = Table::new(&[
        ("QUEUE", false, 60),
        ("TYPE", false, 8),
        ("MESSAGES", true, 10),
        ("UNACKED", true, 8),
        ("DLQ?", false, 4),
        ("NOTE", false, 50),
    ]);
    for (q, dlq) in &rows {
        let mut note = match (q.kind.as_str(), q.delivery_limit()) {
            ("quorum", Some(l)) => format!("delivery-limit {l}: browsing counts redeliveries"),
            ("stream", _) => "read by offset, never consumed".to_string(),
            _ => String::new(),
        };
        if let Some(n) = q.messages_dlx.filter(|n| *n > 0) {
            // First: a stuck dead-letter route matters more than the browse's cost.
            let held = format!("{n} dead-lettered, held here until the route confirms");
            note = if note.is_empty() {
                held
            } else {
                format!("{held}; {note}")
            };
        }
        t.row(vec![
            q.name.clone(),
            q.kind.clone(),
            q.messages.map_or("-".into(), |m| m.to_string()),
            q.messages_unacknowledged
                .map_or("-".into(), |m| m.to_string()),
            if *dlq { "yes".into() } else { String::new() },
            note,
        ]);
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", t.render())?;
    writeln!(
        out,
        "{} queue(s) in vhost {}",
        rows.len(),
        dlq_core::sanitize::clean(&vhost)
    )?;
    Ok(())
}
