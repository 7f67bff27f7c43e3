//! `dlq-triage queues amqp://…`: the vhost's queues from the management API, with type,
//! counts and whether each looks like a DLQ (named like one, or another queue's
//! dead-letter target).

use super::context::{Context, UsageError};
use super::table::Table;
use super::QueuesArgs;
use crate::brokers::rabbitmq_mgmt::{looks_like_dlq, Management};
use crate::core::source::SourceRef;
use serde_json::json;
use std::io::Write;

pub fn run(ctx: &Context, a: &QueuesArgs) -> anyhow::Result<()> {
    // The queue list is the point: accept the URI without `?queue=`.
    let source = match ctx.broker_only(&a.source)? {
        Some(s) => s,
        None => ctx.resolve_source(&a.source)?,
    };
    let SourceRef::Amqp {
        tls,
        user,
        password,
        host,
        vhost,
        tls_files,
        ..
    } = source.clone()
    else {
        return Err(UsageError("queues lists RabbitMQ queues: give an amqp:// URI".into()).into());
    };
    let base = crate::brokers::rabbitmq_mgmt::plan_url(
        ctx.management_url.as_deref(),
        tls,
        &host,
        ctx.management_plain_http,
    )
    .map_err(UsageError)?;
    let mgmt = Management::new(&base, &user, &password, &tls_files);
    let mut all = mgmt.queues(&vhost)?;
    // Judged once (each judgement scans every queue's dead-letter target), for the count
    // fill, the filter and the DLQ column.
    let flagged: Vec<bool> = all.iter().map(|q| looks_like_dlq(q, &all)).collect();
    crate::brokers::discovery::fill_missing_counts(&source, &mut all, |i| !a.dlq || flagged[i]);
    let rows: Vec<_> = all
        .iter()
        .zip(flagged)
        .filter(|(_, dlq)| !a.dlq || *dlq)
        .collect();
    if a.json {
        let doc = json!({
            "vhost": vhost,
            "queues": rows.iter().map(|(q, dlq)| json!({
                "name": q.name,
                "type": q.kind,
                "messages": q.messages,
                "ready": q.messages_ready,
                "unacked": q.messages_unacknowledged,
                "delivery_limit": q.delivery_limit(),
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
        let note = match (q.kind.as_str(), q.delivery_limit()) {
            ("quorum", Some(l)) => format!("delivery-limit {l}: browsing counts redeliveries"),
            ("stream", _) => "read by offset, never consumed".to_string(),
            _ => String::new(),
        };
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
        crate::core::sanitize::clean(&vhost)
    )?;
    Ok(())
}
