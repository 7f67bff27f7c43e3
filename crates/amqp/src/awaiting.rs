//! Dead letters held in quorum source queues on their way to a DLQ (at-least-once
//! dead-lettering, `messages_dlx` in the management API): which of them are this DLQ's
//! business — routed here and not confirmed, or routed nowhere at all.

use crate::mgmt::{binding_routes, BindingInfo, Management, QueueInfo};
use dlq_core::awaiting::{Awaiting, Route};
use dlq_core::ports::{Backlog, SourceError};
use std::collections::{HashMap, HashSet};

/// Where an exchange sends a routing key.
#[derive(Debug, PartialEq, Eq)]
enum Routed {
    /// The exchange does not exist.
    Missing,
    /// These queues (none: routed nowhere).
    Queues(HashSet<String>),
    /// Cannot be told (the default exchange without a dead-letter routing key: the
    /// message's own key decides).
    Unknown,
}

/// The queues `exchange` routes `key` to, following exchange-to-exchange bindings. `key`
/// None (no `x-dead-letter-routing-key`: each message keeps its own) matches every
/// binding of a direct or topic exchange, so "routes here" means "may route here".
fn routed(
    exchange: &str,
    key: Option<&str>,
    exchanges: &HashMap<String, String>,
    bindings: &[BindingInfo],
    queues: &HashSet<&str>,
) -> Routed {
    if exchange.is_empty() {
        return match key {
            Some(k) if queues.contains(k) => Routed::Queues(HashSet::from([k.to_string()])),
            Some(_) => Routed::Queues(HashSet::new()),
            None => Routed::Unknown,
        };
    }
    if !exchanges.contains_key(exchange) {
        return Routed::Missing;
    }
    let mut found = HashSet::new();
    let mut seen: HashSet<&str> = HashSet::from([exchange]);
    let mut todo = vec![exchange];
    while let Some(ex) = todo.pop() {
        let kind = exchanges.get(ex).map_or("direct", String::as_str);
        for b in bindings.iter().filter(|b| b.source == ex) {
            // Another exchange type (a plugin's) is taken to route like a direct one.
            let matches = key.is_none_or(|k| {
                binding_routes(kind, &b.routing_key, k).unwrap_or(b.routing_key == k)
            });
            if !matches {
                continue;
            }
            if b.destination_type == "exchange" {
                if seen.insert(b.destination.as_str()) {
                    todo.push(b.destination.as_str());
                }
            } else {
                found.insert(b.destination.clone());
            }
        }
    }
    Routed::Queues(found)
}

/// Of a vhost's `queues`, those holding dead letters for one of `dlqs` (their route
/// reaches it) or for no queue at all (the exchange is missing or routes nowhere: every
/// DLQ of the vhost is told, as nothing else will be). Largest first.
pub fn awaiting_for(
    dlqs: &[String],
    queues: &[QueueInfo],
    bindings: &[BindingInfo],
    exchanges: &HashMap<String, String>,
) -> Vec<Awaiting> {
    let names: HashSet<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    let mut out: Vec<Awaiting> = queues
        .iter()
        .filter(|q| q.messages_dlx.unwrap_or(0) > 0)
        .filter_map(|q| {
            let (exchange, key) = q.dead_letter_target().unwrap_or_default();
            let route = match routed(&exchange, key.as_deref(), exchanges, bindings, &names) {
                Routed::Missing => Route::NoExchange,
                Routed::Queues(to) if to.is_empty() => Route::Nowhere,
                Routed::Queues(to) if dlqs.iter().any(|d| to.contains(d)) => Route::Here,
                Routed::Queues(_) | Routed::Unknown => return None,
            };
            Some(Awaiting {
                queue: q.name.clone(),
                messages: q.messages_dlx.unwrap_or(0),
                bytes: q.message_bytes_dlx,
                exchange,
                route,
            })
        })
        .collect();
    out.sort_by(|a, b| b.messages.cmp(&a.messages).then(a.queue.cmp(&b.queue)));
    out
}

/// The management API, asked on every refresh for the DLQs of one source.
pub struct MgmtBacklog {
    pub mgmt: Management,
    pub vhost: String,
    pub dlqs: Vec<String>,
}

impl Backlog for MgmtBacklog {
    fn awaiting(&mut self) -> Result<Vec<Awaiting>, SourceError> {
        let queues = self.mgmt.queues(&self.vhost)?;
        // Nothing held anywhere (the common case): no more calls.
        if queues.iter().all(|q| q.messages_dlx.unwrap_or(0) == 0) {
            return Ok(Vec::new());
        }
        let bindings = self.mgmt.bindings(&self.vhost)?;
        let exchanges = self.mgmt.exchanges(&self.vhost)?;
        Ok(awaiting_for(&self.dlqs, &queues, &bindings, &exchanges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(name: &str, dlx: Option<(&str, Option<&str>)>, held: u64) -> QueueInfo {
        let mut args = serde_json::Map::new();
        if let Some((ex, rk)) = dlx {
            args.insert("x-dead-letter-exchange".into(), json!(ex));
            if let Some(rk) = rk {
                args.insert("x-dead-letter-routing-key".into(), json!(rk));
            }
        }
        serde_json::from_value(json!({
            "name": name, "type": "quorum", "messages_dlx": held,
            "message_bytes_dlx": held * 10, "arguments": args,
        }))
        .expect("queue info")
    }

    fn bind(source: &str, to: &str, kind: &str, key: &str) -> BindingInfo {
        BindingInfo {
            source: source.into(),
            destination: to.into(),
            destination_type: kind.into(),
            routing_key: key.into(),
        }
    }

    #[test]
    fn held_letters_are_this_dlqs_when_routed_here_or_nowhere() {
        let exchanges: HashMap<String, String> = [
            ("dlx", "direct"),
            ("dlx.topic", "topic"),
            ("hop", "fanout"),
            ("empty", "direct"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let bindings = vec![
            bind("dlx", "orders.dlq", "queue", "orders"),
            bind("dlx", "other.dlq", "queue", "other"),
            bind("dlx.topic", "hop", "exchange", "billing.#"),
            bind("hop", "orders.dlq", "queue", ""),
        ];
        let queues = vec![
            queue("orders", Some(("dlx", Some("orders"))), 3),
            queue("other", Some(("dlx", Some("other"))), 5),
            queue("billing", Some(("dlx.topic", Some("billing.eu"))), 2),
            queue("lost", Some(("gone", None)), 4),
            queue("unbound", Some(("empty", Some("x"))), 1),
            queue("calm", Some(("dlx", Some("orders"))), 0),
            queue("selfish", Some(("", None)), 9),
            queue("orders.dlq", None, 0),
            queue("other.dlq", None, 0),
        ];
        let got = awaiting_for(&["orders.dlq".into()], &queues, &bindings, &exchanges);
        let seen: Vec<(&str, u64, Route)> = got
            .iter()
            .map(|a| (a.queue.as_str(), a.messages, a.route))
            .collect();
        // `other` goes to another DLQ, `calm` holds none, `selfish` cannot be told.
        assert_eq!(
            seen,
            vec![
                ("lost", 4, Route::NoExchange),
                ("orders", 3, Route::Here),
                ("billing", 2, Route::Here),
                ("unbound", 1, Route::Nowhere),
            ]
        );
        assert_eq!(got[1].bytes, Some(30));
    }

    #[test]
    fn the_default_exchange_routes_by_queue_name() {
        let queues = vec![
            queue("a", Some(("", Some("a.dlq"))), 2),
            queue("b", Some(("", Some("no-such-queue"))), 1),
            queue("a.dlq", None, 0),
        ];
        let got = awaiting_for(&["a.dlq".into()], &queues, &[], &HashMap::new());
        let routes: Vec<(&str, Route)> = got.iter().map(|a| (a.queue.as_str(), a.route)).collect();
        assert_eq!(routes, vec![("a", Route::Here), ("b", Route::Nowhere)]);
    }
}
