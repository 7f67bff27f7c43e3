//! Who a replay reaches: on Kafka, the consumer groups that read each target topic (with
//! their lag); on RabbitMQ, the queues the exchange routes the routing key to — looked
//! up once per draft. Every one of them gets the letters again, not only the consumer
//! that failed them.

use super::*;
use dlq_core::ports::Reached;

impl ReplayDraft {
    /// `plan.reaches`, read once (a replan with other options reuses it).
    pub(super) fn mark_readers(&mut self, plan: &mut Plan) {
        if self.reaches.is_none() {
            self.reaches = Some(self.read_reaches(plan));
        }
        let (reaches, missing) = self.reaches.clone().unwrap_or_default();
        plan.reaches = reaches;
        plan.missing_targets = missing;
    }

    /// The lines of who each target reaches, and the targets that do not exist.
    fn read_reaches(&mut self, plan: &Plan) -> (Vec<String>, Vec<String>) {
        let clean = dlq_core::sanitize::clean;
        let named: Vec<String> = self
            .letters
            .iter()
            .filter_map(|(l, _)| l.failure.consumer.as_ref().map(|c| c.value.clone()))
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        let Some(reach) = self.ports.reach.as_deref_mut() else {
            return (Vec::new(), Vec::new());
        };
        let (mut out, mut missing) = (Vec::new(), Vec::new());
        for target in targets(plan) {
            let said = target_words(&target);
            match reach.reaches(&target, &named) {
                Ok(Reached::Groups(r)) => out.extend(reader_lines(&said, &r, &named)),
                Ok(Reached::Queues {
                    exchange_type,
                    queues,
                    exchanges,
                }) => out.extend(queue_lines(&said, &exchange_type, &queues, &exchanges)),
                Ok(Reached::Missing) => missing.push(said),
                Err(SourceError::Unsupported(_)) => {}
                Err(e) => out.push(format!(
                    "{}: who it reaches is not known ({e})",
                    clean(&said)
                )),
            }
        }
        (out, missing)
    }
}

fn targets(plan: &Plan) -> BTreeSet<Target> {
    plan.items
        .iter()
        .map(|i| i.outgoing.target.clone())
        .collect()
}

/// `invoices`, `exchange orders, routing key orders.created`, `the default exchange to
/// orders`.
fn target_words(t: &Target) -> String {
    match t {
        Target::Kafka { topic } => topic.clone(),
        Target::Amqp {
            exchange,
            routing_key,
        } if exchange.is_empty() => format!("the default exchange to {routing_key}"),
        Target::Amqp {
            exchange,
            routing_key,
        } => format!("exchange {exchange}, routing key {routing_key}"),
    }
}

/// `exchange orders, routing key orders.created (topic): queues billing, audit — each
/// gets the letters again`.
fn queue_lines(said: &str, kind: &str, queues: &[String], exchanges: &[String]) -> Vec<String> {
    let clean = dlq_core::sanitize::clean;
    let list = |v: &[String]| v.iter().map(|q| clean(q)).collect::<Vec<_>>().join(", ");
    let mut out = vec![match queues.len() {
        0 => format!(
            "{} ({kind}): no queue is bound for it — the letters would be dropped",
            clean(said)
        ),
        1 => format!("{} ({kind}): queue {}", clean(said), list(queues)),
        n => format!(
            "{} ({kind}): {n} queues — each gets the letters again: {}",
            clean(said),
            list(queues)
        ),
    }];
    if !exchanges.is_empty() {
        out.push(format!("(and exchanges {}, not followed)", list(exchanges)));
    }
    if kind == "headers" {
        out.push(
            "(a headers exchange routes by the letters' headers: every binding is listed)".into(),
        );
    }
    out
}

/// `invoices: read by invoice-worker (lag 0), audit-sink (lag 12) — each gets the
/// letters again`, and what was not checked.
fn reader_lines(topic: &str, r: &dlq_core::ports::Readers, named: &[String]) -> Vec<String> {
    let clean = dlq_core::sanitize::clean;
    let lag = |l: &Option<i64>| l.map_or("lag unknown".to_string(), |n| format!("lag {n}"));
    let mut out = vec![match r.groups.len() {
        0 => format!("{}: no consumer group has offsets on it", clean(topic)),
        1 => format!(
            "{}: consumer group {} ({})",
            clean(topic),
            clean(&r.groups[0].0),
            lag(&r.groups[0].1)
        ),
        _ => format!(
            "{}: {} consumer groups — each gets the letters again: {}",
            clean(topic),
            r.groups.len(),
            r.groups
                .iter()
                .map(|(g, l)| format!("{} ({})", clean(g), lag(l)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }];
    if !r.listed {
        let names: Vec<String> = named.iter().map(|n| clean(n)).collect();
        out.push(format!(
            "(the broker does not list its groups: only {} checked; others may read it)",
            if names.is_empty() {
                "no group was".to_string()
            } else {
                format!("{} named by the letters", names.join(", "))
            }
        ));
    }
    if r.unchecked > 0 {
        out.push(format!("(+{} more groups not checked)", r.unchecked));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::ports::Readers;

    #[test]
    fn queues_are_said_with_the_exchange_type() {
        let qs = ["billing".to_string(), "audit".into()];
        assert_eq!(
            queue_lines("exchange orders, routing key orders.created", "topic", &qs, &[]),
            ["exchange orders, routing key orders.created (topic): 2 queues — each gets the letters again: billing, audit"]
        );
        assert_eq!(
            queue_lines("the default exchange to orders", "default", &qs[..1], &[]),
            ["the default exchange to orders (default): queue billing"]
        );
        assert_eq!(
            queue_lines("exchange x, routing key k", "direct", &[], &["y".into()]),
            [
                "exchange x, routing key k (direct): no queue is bound for it — the letters would be dropped",
                "(and exchanges y, not followed)"
            ]
        );
    }

    #[test]
    fn readers_are_said_with_their_lag_and_what_was_not_checked() {
        let named = ["invoice-worker".to_string()];
        let one = Readers {
            groups: vec![("invoice-worker".into(), Some(0))],
            listed: false,
            checked: 1,
            unchecked: 0,
        };
        assert_eq!(
            reader_lines("invoices", &one, &named),
            [
                "invoices: consumer group invoice-worker (lag 0)",
                "(the broker does not list its groups: only invoice-worker named by the letters checked; others may read it)",
            ]
        );
        let many = Readers {
            groups: vec![("a".into(), Some(3)), ("b\u{1b}[2J".into(), None)],
            listed: true,
            checked: 100,
            unchecked: 7,
        };
        assert_eq!(
            reader_lines("t", &many, &named),
            [
                "t: 2 consumer groups — each gets the letters again: a (lag 3), b\\x1b[2J (lag unknown)",
                "(+7 more groups not checked)",
            ]
        );
        let none = Readers {
            listed: true,
            ..Readers::default()
        };
        assert_eq!(
            reader_lines("t", &none, &named),
            ["t: no consumer group has offsets on it"]
        );
    }
}
