//! The RabbitMQ management HTTP API (plugin `rabbitmq_management`): queue types and
//! limits that AMQP itself does not expose, and queue listings to find DLQs.

use crate::core::ports::SourceError;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
pub struct QueueInfo {
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub messages: Option<u64>,
    #[serde(default)]
    pub messages_ready: Option<u64>,
    #[serde(default)]
    pub messages_unacknowledged: Option<u64>,
    #[serde(default)]
    pub arguments: Map<String, Value>,
    #[serde(default)]
    pub effective_policy_definition: Option<Map<String, Value>>,
    #[serde(default)]
    pub policy: Option<String>,
}

impl QueueInfo {
    fn setting(&self, arg: &str, policy_key: &str) -> Option<&Value> {
        self.arguments.get(arg).or_else(|| {
            self.effective_policy_definition
                .as_ref()
                .and_then(|p| p.get(policy_key))
        })
    }

    /// Quorum queues' `delivery-limit`, from the queue arguments or its policy.
    pub fn delivery_limit(&self) -> Option<i64> {
        self.setting("x-delivery-limit", "delivery-limit")
            .and_then(Value::as_i64)
    }

    /// Where this queue dead-letters to, if anywhere.
    pub fn dead_letter_target(&self) -> Option<(String, Option<String>)> {
        let ex = self
            .setting("x-dead-letter-exchange", "dead-letter-exchange")?
            .as_str()?
            .to_string();
        let rk = self
            .setting("x-dead-letter-routing-key", "dead-letter-routing-key")
            .and_then(Value::as_str)
            .map(str::to_string);
        Some((ex, rk))
    }
}

pub struct Management {
    base: String,
    /// `base` without credentials, for messages.
    shown: String,
    auth: String,
    agent: ureq::Agent,
}

use crate::core::source::pct_encode as enc;

impl Management {
    pub fn new(base_url: &str, user: &str, password: &str) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_millis(1500))
            .timeout(Duration::from_secs(10))
            .build();
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Management {
            base: base_url.trim_end_matches('/').to_string(),
            shown: crate::core::source::redact_uri_text(base_url.trim_end_matches('/')),
            auth: format!("Basic {token}"),
            agent,
        }
    }

    fn get(&self, path: &str) -> Result<String, SourceError> {
        let url = format!("{}{path}", self.base);
        match self.agent.get(&url).set("Authorization", &self.auth).call() {
            Ok(r) => r.into_string().map_err(|e| SourceError::Failed(format!("reading {}: {e}", self.shown))),
            Err(ureq::Error::Status(401, _)) => {
                Err(SourceError::Unavailable(format!("the management API at {} refused the credentials", self.shown)))
            }
            Err(ureq::Error::Status(404, _)) => Err(SourceError::Unavailable(format!("not found at {}{path}", self.shown))),
            // ureq's error text carries the URL, userinfo included.
            Err(e) => Err(SourceError::Unavailable(crate::core::source::redact_uri_text(&format!(
                "management API at {} not reachable: {e} (enable it with `rabbitmq-plugins enable rabbitmq_management`, or pass --management-url)",
                self.shown
            )))),
        }
    }

    pub fn queues(&self, vhost: &str) -> Result<Vec<QueueInfo>, SourceError> {
        let body = self.get(&format!(
            "/api/queues/{}?columns=name,type,messages,messages_ready,messages_unacknowledged,arguments,policy,effective_policy_definition",
            enc(vhost)
        ))?;
        serde_json::from_str(&body).map_err(|e| {
            SourceError::Failed(format!("unexpected answer from the management API: {e}"))
        })
    }

    pub fn queue(&self, vhost: &str, name: &str) -> Result<QueueInfo, SourceError> {
        let body = self.get(&format!("/api/queues/{}/{}", enc(vhost), enc(name)))?;
        serde_json::from_str(&body).map_err(|e| {
            SourceError::Failed(format!("unexpected answer from the management API: {e}"))
        })
    }
}

/// Does a queue look like a dead-letter queue: named like one, or the dead-letter target
/// of another queue?
pub fn looks_like_dlq(q: &QueueInfo, all: &[QueueInfo]) -> bool {
    let n = q.name.to_lowercase();
    let named = ["dlq", "dead", "error", "parking", ".dlt", "_dlt", "failed"]
        .iter()
        .any(|w| n.contains(w));
    let targeted = all.iter().any(|o| match o.dead_letter_target() {
        Some((ex, Some(rk))) => ex.is_empty() && rk == q.name,
        _ => false,
    });
    named || targeted
}
