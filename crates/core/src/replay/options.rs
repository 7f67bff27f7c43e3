//! What the operator chose for a replay (which letters, which payloads, the pace), and
//! its JSON form in the journal, so a resume plans under the same choices.

use crate::ports::Target;
use std::time::Duration;

/// What the operator chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Overrides every letter's origin.
    pub to: Option<Target>,
    /// RabbitMQ: each letter to the queue it failed in (its `x-death` queue, through
    /// the default exchange) instead of its exchange and routing key, so the other
    /// queues bound to them do not get it again.
    pub to_failed_queue: bool,
    pub use_revisions: bool,
    pub include_stale: bool,
    /// Letters replayed this many times already are refused unless `force_replay_count`.
    pub max_replay_count: u32,
    pub force_replay_count: bool,
    pub canary: usize,
    /// Letters/s during the canary.
    pub canary_rate: f64,
    /// Letters/s after it.
    pub rate: f64,
    pub watch: Duration,
    pub max_failed_ratio: f64,
    /// Records read per origin partition for the stale-key check.
    pub stale_budget: u64,
    /// Send to targets that do not exist (a broker that auto-creates topics creates
    /// them, with its defaults): refused unless asked.
    pub create_targets: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            to: None,
            to_failed_queue: false,
            use_revisions: false,
            include_stale: false,
            max_replay_count: 3,
            force_replay_count: false,
            canary: 5,
            canary_rate: 1.0,
            rate: 10.0,
            watch: Duration::from_secs(30),
            max_failed_ratio: 0.2,
            stale_budget: 100_000,
            create_targets: false,
        }
    }
}

impl Options {
    /// As stored with the replay (for `replays show` and `--resume`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "to": self.to.as_ref().map(target_json),
            "to_failed_queue": self.to_failed_queue,
            "use_revisions": self.use_revisions,
            "include_stale": self.include_stale,
            "max_replay_count": self.max_replay_count,
            "force_replay_count": self.force_replay_count,
            "canary": self.canary,
            "canary_rate": self.canary_rate,
            "rate": self.rate,
            "watch_s": self.watch.as_secs_f64(),
            "max_failed_ratio": self.max_failed_ratio,
            "create_targets": self.create_targets,
        })
    }

    /// Back from [`Options::to_json`]; missing fields take their defaults.
    pub fn from_json(v: &serde_json::Value) -> Options {
        let d = Options::default();
        let f = |k: &str| v.get(k).and_then(|x| x.as_f64());
        let b = |k: &str, dflt: bool| v.get(k).and_then(|x| x.as_bool()).unwrap_or(dflt);
        Options {
            to: v.get("to").and_then(target_from_json),
            to_failed_queue: b("to_failed_queue", d.to_failed_queue),
            use_revisions: b("use_revisions", d.use_revisions),
            include_stale: b("include_stale", d.include_stale),
            max_replay_count: f("max_replay_count").map_or(d.max_replay_count, |x| x as u32),
            force_replay_count: b("force_replay_count", d.force_replay_count),
            create_targets: b("create_targets", d.create_targets),
            canary: f("canary").map_or(d.canary, |x| x as usize),
            canary_rate: f("canary_rate").unwrap_or(d.canary_rate),
            rate: f("rate").unwrap_or(d.rate),
            watch: f("watch_s").map_or(d.watch, Duration::from_secs_f64),
            max_failed_ratio: f("max_failed_ratio").unwrap_or(d.max_failed_ratio),
            stale_budget: d.stale_budget,
        }
    }
}

/// How `--to` spells a target: `kafka:TOPIC`, `queue:NAME`, `amqp:EXCHANGE/ROUTING_KEY`.
pub fn target_spec(t: &Target) -> String {
    match t {
        Target::Kafka { topic } => format!("kafka:{topic}"),
        Target::Amqp {
            exchange,
            routing_key,
        } if exchange.is_empty() => format!("queue:{routing_key}"),
        Target::Amqp {
            exchange,
            routing_key,
        } => format!("amqp:{exchange}/{routing_key}"),
    }
}

/// Whether `[replay] allowed_targets` lets a replay go to `t` instead of each letter's
/// origin. An entry with a scheme (`queue:orders.*`) is a glob over the spelled target;
/// one without (`invoices`) over its name (topic, queue, `EXCHANGE/ROUTING_KEY`). No
/// entries: origins only.
pub fn target_allowed(t: &Target, allowed: &[String]) -> bool {
    let spec = target_spec(t);
    let name = spec.split_once(':').map_or(spec.as_str(), |(_, n)| n);
    allowed.iter().any(|a| {
        let a = a.trim();
        if a.contains(':') {
            crate::filter::glob(a, &spec)
        } else {
            crate::filter::glob(a, name)
        }
    })
}

pub fn target_json(t: &Target) -> serde_json::Value {
    match t {
        Target::Kafka { topic } => serde_json::json!({"kafka": {"topic": topic}}),
        Target::Amqp {
            exchange,
            routing_key,
        } => serde_json::json!({"amqp": {"exchange": exchange, "routing_key": routing_key}}),
    }
}

fn target_from_json(v: &serde_json::Value) -> Option<Target> {
    if let Some(k) = v.get("kafka") {
        return Some(Target::Kafka {
            topic: k.get("topic")?.as_str()?.to_string(),
        });
    }
    let a = v.get("amqp")?;
    Some(Target::Amqp {
        exchange: a.get("exchange")?.as_str()?.to_string(),
        routing_key: a.get("routing_key")?.as_str()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_targets_match_by_name_or_by_spelled_glob_and_none_means_origins_only() {
        let allowed = vec!["invoices".to_string(), "queue:orders.*".to_string()];
        let kafka = |t: &str| Target::Kafka { topic: t.into() };
        let queue = |q: &str| Target::Amqp {
            exchange: String::new(),
            routing_key: q.into(),
        };
        assert!(target_allowed(&kafka("invoices"), &allowed));
        assert!(!target_allowed(&kafka("invoices-eu"), &allowed));
        assert!(target_allowed(&queue("orders.retry"), &allowed));
        assert!(!target_allowed(&kafka("orders.retry"), &allowed));
        assert!(!target_allowed(&queue("payments"), &allowed));
        assert!(!target_allowed(&kafka("invoices"), &[]));
    }
}
