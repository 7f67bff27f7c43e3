//! The RabbitMQ management HTTP API (plugin `rabbitmq_management`): queue types and
//! limits that AMQP itself does not expose, and queue listings to find DLQs.

use base64::Engine as _;
use dlq_core::ports::SourceError;
use dlq_core::source::TlsFiles;
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
    /// Quorum queues: messages dead-lettered at-least-once and held here until the
    /// dead-letter route confirms them (RabbitMQ ≥ 3.10).
    #[serde(default)]
    pub messages_dlx: Option<u64>,
    #[serde(default)]
    pub message_bytes_dlx: Option<u64>,
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

    /// How long the queue keeps a message: its TTL (argument, else policy), with the
    /// other limits that delete letters named beside it (max-length drops the oldest
    /// by default; x-expires deletes the whole queue once unused).
    pub fn retention(&self) -> dlq_core::retention::Retention {
        use dlq_core::retention::Retention;
        let named = |arg: &str, policy: &str| -> Option<String> {
            let v = self.setting(arg, policy)?;
            let from = if self.arguments.contains_key(arg) {
                arg.to_string()
            } else {
                format!(
                    "{policy} (policy {})",
                    self.policy.as_deref().unwrap_or("?")
                )
            };
            Some(format!("{from}={v}"))
        };
        let mut also: Vec<String> = [
            ("x-max-length", "max-length"),
            ("x-max-length-bytes", "max-length-bytes"),
            ("x-expires", "expires"),
        ]
        .iter()
        .filter_map(|(a, p)| named(a, p))
        .collect();
        let also = if also.is_empty() {
            String::new()
        } else {
            also.insert(0, String::new());
            also.join("; ")
        };
        match self
            .setting("x-message-ttl", "message-ttl")
            .and_then(Value::as_i64)
        {
            Some(ms) => Retention::After {
                ms,
                basis: format!(
                    "{}{also}",
                    named("x-message-ttl", "message-ttl").unwrap_or_default()
                ),
            },
            None => Retention::Kept(format!("no message TTL{also}")),
        }
    }

    /// Expires messages into a dead-letter exchange: a delay or retry queue.
    fn is_retry(&self) -> bool {
        self.setting("x-message-ttl", "message-ttl").is_some()
            && self.dead_letter_target().is_some()
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

#[derive(Clone)]
pub struct Management {
    base: String,
    /// `base` without credentials, for messages.
    shown: String,
    auth: String,
    /// The source's CA and client certificate, for an https API.
    tls: TlsFiles,
    /// Built at the first call: a browse that never calls the API (the queue type
    /// given) neither loads the system's CA store (~50 ms) nor is stopped by certificate
    /// files that do not suit the API's TLS library. Why there is no client, if not.
    agent: std::sync::OnceLock<Result<ureq::Agent, String>>,
}

use dlq_core::source::pct_encode as enc;

/// Where the management API is for a source: the operator's URL, else
/// `https://HOST:15671` for `amqps://` and `http://HOST:15672` for `amqp://`. The API
/// takes the broker password as Basic auth on every call, so plain HTTP to a host other
/// than this one is refused when the AMQP connection itself is encrypted (it would leak
/// what TLS protects) unless `allow_plain_http`. For a plain `amqp://` source the
/// password already crosses in clear, and the default stays HTTP.
pub fn plan_url(
    explicit: Option<&str>,
    tls: bool,
    host: &str,
    allow_plain_http: bool,
) -> Result<String, String> {
    let url = match explicit {
        Some(u) => u.trim_end_matches('/').to_string(),
        None if tls => format!("https://{host}:15671"),
        None => format!("http://{host}:15672"),
    };
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "--management-url must be http:// or https://, not `{}`",
            dlq_core::sanitize::clean(&dlq_core::uri::redact(&url))
        ));
    }
    if tls && lower.starts_with("http://") && !allow_plain_http && !dlq_core::uri::is_loopback(&url)
    {
        return Err(format!(
            "the management API at {} would get the broker password over plain HTTP while AMQP uses TLS: use https://, or pass --management-plain-http to accept that",
            dlq_core::sanitize::clean(&dlq_core::uri::redact(&url))
        ));
    }
    Ok(url)
}

/// The system's store, plus the source's CA and client certificate when it names them.
fn https_connector(files: &TlsFiles) -> Result<native_tls::TlsConnector, SourceError> {
    let read = crate::read_tls_file;
    let mut b = native_tls::TlsConnector::builder();
    if let Some(ca) = &files.ca {
        let pem = read("cacertfile", ca)?;
        let cert = native_tls::Certificate::from_pem(&pem)
            .map_err(|e| SourceError::failed(format!("cacertfile={}: {e}", ca.display())))?;
        b.add_root_certificate(cert);
    }
    if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
        let identity = native_tls::Identity::from_pkcs8(&read("certfile", cert)?, &read("keyfile", key)?)
            .map_err(|e| {
                SourceError::failed(format!(
                    "certfile={} with keyfile={} for the management API: {e} (the key must be PKCS#8 PEM, `BEGIN PRIVATE KEY`; `openssl pkcs8 -topk8 -nocrypt` converts one)",
                    cert.display(),
                    key.display()
                ))
            })?;
        b.identity(identity);
    }
    b.build()
        .map_err(|e| SourceError::failed_by("TLS for the management API", e))
}

impl Management {
    /// `tls` names the amqps:// source's CA and client certificate: the API behind the
    /// same private CA (or requiring the same client certificate) is reached with them.
    pub fn new(base_url: &str, user: &str, password: &str, tls: &TlsFiles) -> Self {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Management {
            base: base_url.trim_end_matches('/').to_string(),
            shown: dlq_core::uri::redact(base_url.trim_end_matches('/')),
            auth: format!("Basic {token}"),
            tls: tls.clone(),
            agent: std::sync::OnceLock::new(),
        }
    }

    fn agent(&self) -> Result<&ureq::Agent, SourceError> {
        self.agent
            .get_or_init(|| {
                let builder = ureq::AgentBuilder::new()
                    .timeout_connect(Duration::from_millis(1500))
                    .timeout(Duration::from_secs(10));
                // The system's CA store only for an https API.
                if self
                    .base
                    .get(..8)
                    .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
                {
                    https_connector(&self.tls)
                        .map(|tls| builder.tls_connector(std::sync::Arc::new(tls)).build())
                        .map_err(|e| e.to_string())
                } else {
                    Ok(builder.build())
                }
            })
            .as_ref()
            .map_err(|e| SourceError::failed(e.clone()))
    }

    fn get(&self, path: &str) -> Result<String, SourceError> {
        let url = format!("{}{path}", self.base);
        let agent = self.agent()?;
        // The API answers 500 now and then while a queue is being deleted under it:
        // asked once more before it counts.
        let mut answer = agent.get(&url).set("Authorization", &self.auth).call();
        if matches!(answer, Err(ureq::Error::Status(500..=599, _))) {
            std::thread::sleep(Duration::from_millis(250));
            answer = agent.get(&url).set("Authorization", &self.auth).call();
        }
        match answer {
            Ok(r) => r
                .into_string()
                .map_err(|e| SourceError::failed(format!("reading {}: {e}", self.shown))),
            Err(ureq::Error::Status(401, _)) => Err(SourceError::unavailable(format!(
                "the management API at {} refused the credentials",
                self.shown
            ))),
            Err(ureq::Error::Status(404, _)) => Err(SourceError::unavailable(format!(
                "not found at {}{path}",
                self.shown
            ))),
            // ureq's error text carries the URL, userinfo included.
            Err(e) => {
                let text = e.to_string();
                let hint = if text.contains("certificate") {
                    format!("the API's certificate was refused: {}", crate::PRIVATE_CA)
                } else {
                    "enable it with `rabbitmq-plugins enable rabbitmq_management`, or pass --management-url".into()
                };
                Err(SourceError::unavailable(dlq_core::uri::scrub(
                    &format!(
                        "management API at {} not reachable: {text} ({hint})",
                        self.shown
                    ),
                    &self.base,
                )))
            }
        }
    }

    /// GET `path` and read the answer as `T`.
    fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, SourceError> {
        serde_json::from_str(&self.get(path)?)
            .map_err(|e| SourceError::failed_by("unexpected answer from the management API", e))
    }

    pub fn queues(&self, vhost: &str) -> Result<Vec<QueueInfo>, SourceError> {
        self.get_json(&format!(
            "/api/queues/{}?columns=name,type,messages,messages_ready,messages_unacknowledged,messages_dlx,message_bytes_dlx,arguments,policy,effective_policy_definition",
            enc(vhost)
        ))
    }

    /// The vhost's bindings, to see where dead letters are routed.
    pub fn bindings(&self, vhost: &str) -> Result<Vec<BindingInfo>, SourceError> {
        self.get_json(&format!(
            "/api/bindings/{}?columns=source,destination,destination_type,routing_key",
            enc(vhost)
        ))
    }

    /// The broker's version (`3.10.8`, `4.3.1`), from the overview.
    pub fn version(&self) -> Result<String, SourceError> {
        #[derive(Deserialize)]
        struct Overview {
            #[serde(default)]
            rabbitmq_version: String,
        }
        let o: Overview = self.get_json("/api/overview?columns=rabbitmq_version")?;
        Ok(o.rabbitmq_version)
    }

    /// The vhost's exchanges by name, with their types.
    pub fn exchanges(
        &self,
        vhost: &str,
    ) -> Result<std::collections::HashMap<String, String>, SourceError> {
        #[derive(Deserialize)]
        struct Ex {
            name: String,
            #[serde(rename = "type", default)]
            kind: String,
        }
        let list: Vec<Ex> =
            self.get_json(&format!("/api/exchanges/{}?columns=name,type", enc(vhost)))?;
        Ok(list.into_iter().map(|e| (e.name, e.kind)).collect())
    }

    /// An exchange's type (`direct`, `topic`, `fanout`, `headers`, …).
    pub fn exchange_type(&self, vhost: &str, name: &str) -> Result<String, SourceError> {
        #[derive(Deserialize)]
        struct Ex {
            #[serde(rename = "type", default)]
            kind: String,
        }
        let e: Ex = self.get_json(&format!("/api/exchanges/{}/{}", enc(vhost), enc(name)))?;
        Ok(e.kind)
    }

    /// The bindings whose source is `exchange`, with their routing keys.
    pub fn bindings_from(
        &self,
        vhost: &str,
        exchange: &str,
    ) -> Result<Vec<BindingInfo>, SourceError> {
        self.get_json(&format!(
            "/api/exchanges/{}/{}/bindings/source",
            enc(vhost),
            enc(exchange)
        ))
    }

    pub fn queue(&self, vhost: &str, name: &str) -> Result<QueueInfo, SourceError> {
        self.get_json(&format!("/api/queues/{}/{}", enc(vhost), enc(name)))
    }
}

/// One binding of the vhost: `source` exchange to a queue or another exchange.
#[derive(Debug, Clone, Deserialize)]
pub struct BindingInfo {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub destination: String,
    #[serde(default)]
    pub destination_type: String,
    #[serde(default)]
    pub routing_key: String,
}

/// Who a replay to an exchange and routing key reaches, from the management API's
/// bindings: the default exchange reaches the queue named by the key; a direct
/// exchange, the bindings with that key; a topic exchange, the patterns that match it
/// (`*` one word, `#` any number); fanout and headers, every binding (a headers
/// exchange routes by headers the plan does not evaluate — said so).
pub struct MgmtReach {
    pub mgmt: Management,
    pub vhost: String,
}

impl dlq_core::ports::Reach for MgmtReach {
    fn reaches(
        &mut self,
        target: &dlq_core::ports::Target,
        _named: &[String],
    ) -> Result<dlq_core::ports::Reached, SourceError> {
        use dlq_core::ports::{Reached, Target};
        let Target::Amqp {
            exchange,
            routing_key,
        } = target
        else {
            return Err(SourceError::Unsupported(
                "RabbitMQ does not route to Kafka".into(),
            ));
        };
        if exchange.is_empty() {
            return Ok(Reached::Queues {
                exchange_type: "default".into(),
                queues: vec![routing_key.clone()],
                exchanges: Vec::new(),
            });
        }
        let kind = self.mgmt.exchange_type(&self.vhost, exchange)?;
        let (mut queues, mut exchanges) = (Vec::new(), Vec::new());
        for b in self.mgmt.bindings_from(&self.vhost, exchange)? {
            // Another exchange type (a plugin's) may route anything.
            if binding_routes(&kind, &b.routing_key, routing_key).unwrap_or(true) {
                match b.destination_type.as_str() {
                    "exchange" => exchanges.push(b.destination),
                    _ => queues.push(b.destination),
                }
            }
        }
        queues.sort();
        queues.dedup();
        exchanges.sort();
        exchanges.dedup();
        Ok(Reached::Queues {
            exchange_type: kind,
            queues,
            exchanges,
        })
    }
}

/// Whether a binding with `binding_key` on an exchange of `kind` routes `key`: a direct
/// exchange compares, a topic exchange matches the pattern, fanout and headers route
/// every message (headers by headers not evaluated here). None for another type (a
/// plugin's), whose rule is its own: each caller says what it takes it for.
pub fn binding_routes(kind: &str, binding_key: &str, key: &str) -> Option<bool> {
    match kind {
        "direct" => Some(binding_key == key),
        "topic" => Some(topic_matches(binding_key, key)),
        "fanout" | "headers" => Some(true),
        _ => None,
    }
}

/// An AMQP topic pattern against a routing key: words split on `.`, `*` one word,
/// `#` zero or more.
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(p: &[&str], k: &[&str]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(&"#"), _) => go(&p[1..], k) || (!k.is_empty() && go(p, &k[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &k[1..]),
            (Some(w), Some(x)) if w == x => go(&p[1..], &k[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = if key.is_empty() {
        Vec::new()
    } else {
        key.split('.').collect()
    };
    go(&p, &k)
}

/// Named like a DLQ: `dlq` or `dead-letter` anywhere (`OrdersDLQ`, `orders.dead_letter`),
/// or one of the words below standing alone between separators (`orders.error`,
/// `payments-parked`; not `deadline-jobs` or `errorbudget`).
pub fn named_like_dlq(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "dlt",
        "dead",
        "error",
        "errors",
        "failed",
        "failures",
        "parking",
        "parked",
        "poison",
        "undeliverable",
        "quarantine",
        "expired",
    ];
    let n = name.to_ascii_lowercase();
    let squashed: String = n.chars().filter(char::is_ascii_alphanumeric).collect();
    n.contains("dlq")
        || squashed.contains("deadletter")
        || n.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| WORDS.contains(&w))
}

/// Which of `queues` are dead-letter queues: named like one, or where another queue's
/// dead letters go — the target of a dead-letter routing key on the default exchange,
/// or a queue bound (directly, or through exchange-to-exchange bindings) to an exchange
/// some queue dead-letters to. A queue with a message TTL and a dead-letter exchange is
/// a delay or retry queue: what it expires goes back to work, so the queues behind its
/// exchange are not DLQs by that alone (`expired` in a name still counts). Judged for
/// the whole vhost at once: linear in queues and bindings, for vhosts of thousands.
pub fn dlq_flags(queues: &[QueueInfo], bindings: &[BindingInfo]) -> Vec<bool> {
    use std::collections::HashSet;
    // Routing keys on the default exchange name their queue.
    let mut targets: HashSet<String> = HashSet::new();
    let mut exchanges: HashSet<String> = HashSet::new();
    for q in queues {
        match q.dead_letter_target() {
            Some((ex, Some(rk))) if ex.is_empty() => {
                targets.insert(rk);
            }
            Some((ex, _)) if !ex.is_empty() && !q.is_retry() => {
                exchanges.insert(ex);
            }
            _ => {}
        }
    }
    // Exchange-to-exchange bindings carry dead letters on; follow them to a fixed point.
    loop {
        let before = exchanges.len();
        for b in bindings.iter().filter(|b| b.destination_type == "exchange") {
            if exchanges.contains(&b.source) {
                exchanges.insert(b.destination.clone());
            }
        }
        if exchanges.len() == before {
            break;
        }
    }
    let bound: HashSet<&str> = bindings
        .iter()
        .filter(|b| b.destination_type == "queue" && exchanges.contains(&b.source))
        .map(|b| b.destination.as_str())
        .collect();
    queues
        .iter()
        .map(|q| {
            named_like_dlq(&q.name) || targets.contains(&q.name) || bound.contains(q.name.as_str())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(name: &str, args: Value) -> QueueInfo {
        serde_json::from_value(json!({"name": name, "arguments": args})).expect("queue")
    }

    fn binding(source: &str, destination: &str, kind: &str) -> BindingInfo {
        BindingInfo {
            source: source.into(),
            destination: destination.into(),
            destination_type: kind.into(),
            routing_key: String::new(),
        }
    }

    #[test]
    fn topic_patterns_match_as_rabbitmq_routes() {
        for (p, k, want) in [
            ("orders.*", "orders.created", true),
            ("orders.*", "orders.created.eu", false),
            ("orders.#", "orders", true),
            ("orders.#", "orders.created.eu", true),
            ("#", "anything.at.all", true),
            ("*.created", "orders.created", true),
            ("*.created", "created", false),
            ("#.eu", "orders.created.eu", true),
            ("orders", "orders", true),
            ("orders", "payments", false),
        ] {
            assert_eq!(topic_matches(p, k), want, "{p} ~ {k}");
        }
    }

    #[test]
    fn dlq_names_are_words_not_substrings() {
        for yes in [
            "orders.dlq",
            "OrdersDLQ",
            "orders.dead_letter",
            "orders-DeadLetters",
            "orders.error",
            "payments-parked",
            "billing.failed",
            "invoices_DLT",
            "poison",
            "orders.expired",
        ] {
            assert!(named_like_dlq(yes), "{yes}");
        }
        for no in [
            "orders",
            "deadline-jobs",
            "errorbudget.metrics",
            "dltech-sync",
            "orders.retry",
            "unfailed",
        ] {
            assert!(!named_like_dlq(no), "{no}");
        }
    }

    #[test]
    fn dead_letter_routing_finds_dlqs_whatever_their_names() {
        let queues = vec![
            // Work queues dead-letter to `dlx` and, by routing key, to `lot`.
            queue("orders", json!({"x-dead-letter-exchange": "dlx"})),
            queue(
                "invoices",
                json!({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "lot"}),
            ),
            queue("held-for-review", json!({})),
            queue("lot", json!({})),
            queue("behind-e2e", json!({})),
            // A retry loop: `wait` expires into `work-x`, whose queue is back at work.
            queue(
                "wait",
                json!({"x-message-ttl": 5000, "x-dead-letter-exchange": "work-x"}),
            ),
            queue("consumer", json!({"x-dead-letter-exchange": "dlx"})),
            queue("unrelated", json!({})),
        ];
        let bindings = vec![
            binding("dlx", "held-for-review", "queue"),
            binding("dlx", "dlx-fanout", "exchange"),
            binding("dlx-fanout", "behind-e2e", "queue"),
            binding("work-x", "consumer", "queue"),
            binding("other", "unrelated", "queue"),
        ];
        let flags = dlq_flags(&queues, &bindings);
        let flagged: Vec<&str> = queues
            .iter()
            .zip(&flags)
            .filter(|(_, f)| **f)
            .map(|(q, _)| q.name.as_str())
            .collect();
        assert_eq!(flagged, ["held-for-review", "lot", "behind-e2e"]);
        // Without bindings (the API would not show them), routing keys still judge.
        let flags = dlq_flags(&queues, &[]);
        assert_eq!(flags.iter().filter(|f| **f).count(), 1);
    }

    #[test]
    fn the_management_api_is_https_for_amqps_and_plain_http_is_opt_in() {
        assert_eq!(
            plan_url(None, true, "rabbit", false).as_deref(),
            Ok("https://rabbit:15671")
        );
        assert_eq!(
            plan_url(None, false, "rabbit", false).as_deref(),
            Ok("http://rabbit:15672")
        );
        let err = plan_url(Some("http://u:pw@rabbit:15672"), true, "rabbit", false)
            .expect_err("plain http with amqps");
        assert!(
            err.contains("--management-plain-http") && !err.contains("pw@"),
            "{err}"
        );
        assert!(plan_url(Some("http://rabbit:15672"), true, "rabbit", true).is_ok());
        assert!(plan_url(Some("http://127.0.0.1:15672"), true, "h", false).is_ok());
        assert!(plan_url(Some("http://[::1]:15672"), true, "h", false).is_ok());
        assert!(plan_url(Some("ftp://x"), false, "h", false).is_err());
    }
}
