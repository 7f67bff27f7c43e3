//! Who a replay reaches: on Kafka, the consumer groups that read each target topic (with
//! their lag), looked up once per draft — every one of them gets the letters again, not
//! only the consumer that failed them.

use super::*;

impl ReplayDraft {
    /// `plan.reaches`, read once (a replan with other options reuses it).
    pub(super) fn mark_readers(&mut self, plan: &mut Plan) {
        if self.reaches.is_none() {
            self.reaches = Some(self.read_readers(plan));
        }
        plan.reaches = self.reaches.clone().unwrap_or_default();
    }

    fn read_readers(&mut self, plan: &Plan) -> Vec<String> {
        let clean = dlq_core::sanitize::clean;
        let named: Vec<String> = self
            .letters
            .iter()
            .filter_map(|(l, _)| l.failure.consumer.as_ref().map(|c| c.value.clone()))
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        let kafka = self.ports.kafka;
        let Some(log) = in_doubt::kafka_log(&mut self.ports.origin_log, kafka) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for topic in kafka_targets(plan) {
            match log.readers(&topic, &named) {
                Ok(r) => out.extend(reader_lines(&topic, &r, &named)),
                Err(SourceError::Unsupported(_)) => {}
                Err(e) => out.push(format!(
                    "{}: who reads it is not known ({e})",
                    clean(&topic)
                )),
            }
        }
        out
    }
}

fn kafka_targets(plan: &Plan) -> BTreeSet<String> {
    plan.items
        .iter()
        .filter_map(|i| match &i.outgoing.target {
            Target::Kafka { topic } => Some(topic.clone()),
            Target::Amqp { .. } => None,
        })
        .collect()
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
