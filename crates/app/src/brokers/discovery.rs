//! Finding DLQs on a broker, for the source picker and the `queues` / `topics` commands:
//! RabbitMQ queues through the management API (named like a DLQ, matching the DLQ
//! patterns, or where other queues' dead letters are routed), Kafka topics whose names
//! match the DLQ patterns.

use dlq_amqp::mgmt::{dlq_flags, Management, QueueInfo};
use dlq_core::ports::SourceError;
use dlq_core::source::SourceRef;
use dlq_kafka as kafka;

/// Topic and queue name patterns taken for DLQs (globs, case-sensitive).
pub const DEFAULT_PATTERNS: &[&str] = &[
    "*.dlq",
    "*.DLQ",
    "*.DLT",
    "*-dlt",
    "*_dlt",
    "*-dlq",
    "*_dlq",
    "dlq.*",
    "*-dead-letter*",
    "*.dead-letter*",
    "*deadletter*",
];

/// One DLQ a picker can open.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The source to open (credentials included; never displayed as such).
    pub source: SourceRef,
    /// Queue or topic name.
    pub name: String,
    /// `classic`, `quorum`, `stream`, `topic`.
    pub kind: String,
    /// Messages the broker reports, when it does.
    pub count: Option<u64>,
    pub looks_like_dlq: bool,
    /// Kafka: the share group whose broker-written DLQ this is (KIP-1191), from its
    /// records' `__dlq.errors.group`.
    pub share_group: Option<String>,
}

/// Whether a name matches one of the patterns.
pub fn matches_patterns(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| dlq_core::filter::glob(p, name))
}

/// The DLQs (or, with `all`, every queue/topic) of the broker a `base` source points at;
/// its own queue/topic list is ignored. Sorted: DLQs first, then by count.
pub fn discover(
    base: &SourceRef,
    opts: &super::OpenOptions,
    patterns: &[String],
    all: bool,
) -> Result<Vec<Candidate>, SourceError> {
    let mut found: Vec<Candidate> = match base {
        SourceRef::Amqp { .. } => rabbit_queues(base, opts, patterns, all)?
            .into_iter()
            .map(|(q, looks_like_dlq)| Candidate {
                source: with_target(base, &q.name),
                name: q.name,
                kind: q.kind,
                count: q.messages,
                looks_like_dlq,
                share_group: None,
            })
            .collect(),
        SourceRef::Kafka { brokers, .. } => kafka::topic_counts(brokers, &opts.kafka_props)?
            .into_iter()
            .map(|(name, count)| Candidate {
                source: with_target(base, &name),
                looks_like_dlq: matches_patterns(&name, patterns),
                name,
                kind: "topic".into(),
                count: Some(count),
                share_group: None,
            })
            .collect(),
        other => {
            return Err(SourceError::Unsupported(format!(
                "{other} has no queues or topics to pick from"
            )))
        }
    };
    if !all {
        found.retain(|c| c.looks_like_dlq);
    }
    // A DLQ topic's newest record says whether a share group's broker wrote it.
    if let SourceRef::Kafka { brokers, .. } = base {
        for c in found
            .iter_mut()
            .filter(|c| c.looks_like_dlq && c.count > Some(0))
        {
            c.share_group = kafka::share_group(brokers, &opts.kafka_props, &c.name);
        }
    }
    found.sort_by(|a, b| {
        b.looks_like_dlq
            .cmp(&a.looks_like_dlq)
            .then(b.count.cmp(&a.count))
            .then(a.name.cmp(&b.name))
    });
    Ok(found)
}

/// A RabbitMQ vhost's queues from the management API (with `all`, or only the DLQs),
/// each with whether it is taken for a DLQ: by `dlq_flags` (names, dead-letter routing
/// through the vhost's bindings) or a name matching `patterns`. What the picker and
/// `queues` list, judged once here so the two cannot disagree. The bindings are best
/// effort: without them (a user the API does not show them to) names and dead-letter
/// routing keys still judge.
pub fn rabbit_queues(
    base: &SourceRef,
    opts: &super::OpenOptions,
    patterns: &[String],
    all: bool,
) -> Result<Vec<(QueueInfo, bool)>, SourceError> {
    let SourceRef::Amqp {
        tls,
        user,
        password,
        host,
        vhost,
        tls_files,
        ..
    } = base
    else {
        return Err(SourceError::Unsupported(format!(
            "{base} is not a RabbitMQ vhost"
        )));
    };
    let url = super::rabbitmq_mgmt::plan_url(
        opts.management_url.as_deref(),
        *tls,
        host,
        opts.management_plain_http,
    )
    .map_err(SourceError::Unsupported)?;
    let mgmt = Management::new(&url, user, password, tls_files);
    let mut queues = mgmt.queues(vhost)?;
    let bindings = mgmt.bindings(vhost).unwrap_or_default();
    let flagged: Vec<bool> = dlq_flags(&queues, &bindings)
        .into_iter()
        .zip(&queues)
        .map(|(dlq, q)| dlq || matches_patterns(&q.name, patterns))
        .collect();
    fill_missing_counts(base, &mut queues, |i| all || flagged[i]);
    Ok(queues
        .into_iter()
        .zip(flagged)
        .filter(|(_, dlq)| all || *dlq)
        .collect())
}

/// The management API counts only what it has sampled: a queue made in the last seconds
/// (or before the plugin was enabled) has no count there. Those of `queues` that are
/// `wanted` (by index: the ones listed) get their ready messages from an AMQP passive
/// declare instead (a stream's declare counts nothing: it stays unknown). Best effort,
/// and bounded: once the connection fails (an AMQP port the API's host does not expose
/// would otherwise cost a connect timeout per queue) the rest stay unknown. A queue
/// deleted since the API listed it only leaves its own count unknown.
pub fn fill_missing_counts(
    base: &SourceRef,
    queues: &mut [QueueInfo],
    wanted: impl Fn(usize) -> bool,
) {
    let missing: Vec<usize> = (0..queues.len())
        .filter(|&i| queues[i].messages.is_none() && queues[i].kind != "stream" && wanted(i))
        .collect();
    let Some(target) = super::amqp_target(base).filter(|_| !missing.is_empty()) else {
        return;
    };
    let Ok(mut amqp) = super::rabbitmq::RabbitSource::new(target, Vec::new()) else {
        return;
    };
    for i in missing {
        match amqp.ready_count(&queues[i].name) {
            Ok(n) => {
                queues[i].messages = Some(n);
                queues[i].messages_ready = Some(n);
            }
            Err(_) if amqp.connected() => {}
            Err(_) => break,
        }
    }
}

/// `base` pointed at one queue or topic.
fn with_target(base: &SourceRef, name: &str) -> SourceRef {
    let mut s = base.clone();
    match &mut s {
        SourceRef::Amqp { queues, .. } => *queues = vec![name.to_string()],
        SourceRef::Kafka { topics, .. } => *topics = vec![name.to_string()],
        _ => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlq_names_match_the_default_patterns() {
        let p: Vec<String> = DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect();
        for yes in [
            "orders.dlq",
            "invoices.DLT",
            "payments-dlt",
            "dlq.orders",
            "orders-dead-letter",
        ] {
            assert!(matches_patterns(yes, &p), "{yes}");
        }
        for no in ["orders", "dlqueue-metrics", "orders.retry"] {
            assert!(!matches_patterns(no, &p), "{no}");
        }
    }
}
