//! The RabbitMQ management HTTP API (plugin `rabbitmq_management`): queue types and
//! limits that AMQP itself does not expose, and queue listings to find DLQs.

use crate::core::ports::SourceError;
use crate::core::source::TlsFiles;
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
    pub(crate) fn delivery_limit(&self) -> Option<i64> {
        self.setting("x-delivery-limit", "delivery-limit")
            .and_then(Value::as_i64)
    }

    /// Where this queue dead-letters to, if anywhere.
    pub(crate) fn dead_letter_target(&self) -> Option<(String, Option<String>)> {
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

pub(crate) struct Management {
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

use crate::core::source::pct_encode as enc;

/// Where the management API is for a source: the operator's URL, else
/// `https://HOST:15671` for `amqps://` and `http://HOST:15672` for `amqp://`. The API
/// takes the broker password as Basic auth on every call, so plain HTTP to a host other
/// than this one is refused when the AMQP connection itself is encrypted (it would leak
/// what TLS protects) unless `allow_plain_http`. For a plain `amqp://` source the
/// password already crosses in clear, and the default stays HTTP.
pub(crate) fn plan_url(
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
            crate::core::sanitize::clean(&crate::core::source::redact_uri_text(&url))
        ));
    }
    if tls && lower.starts_with("http://") && !allow_plain_http && !is_loopback(&url) {
        return Err(format!(
            "the management API at {} would get the broker password over plain HTTP while AMQP uses TLS: use https://, or pass --management-plain-http to accept that",
            crate::core::sanitize::clean(&crate::core::source::redact_uri_text(&url))
        ));
    }
    Ok(url)
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        hostport.rsplit_once(':').map_or(hostport, |(h, _)| h)
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The system's store, plus the source's CA and client certificate when it names them.
fn https_connector(files: &TlsFiles) -> Result<native_tls::TlsConnector, SourceError> {
    let read = super::rabbitmq::read_tls_file;
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
            shown: crate::core::source::redact_uri_text(base_url.trim_end_matches('/')),
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
        match self
            .agent()?
            .get(&url)
            .set("Authorization", &self.auth)
            .call()
        {
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
                    format!(
                        "the API's certificate was refused: {}",
                        super::rabbitmq::PRIVATE_CA
                    )
                } else {
                    "enable it with `rabbitmq-plugins enable rabbitmq_management`, or pass --management-url".into()
                };
                Err(SourceError::unavailable(
                    crate::core::source::redact_uri_text(&format!(
                        "management API at {} not reachable: {text} ({hint})",
                        self.shown
                    )),
                ))
            }
        }
    }

    pub fn queues(&self, vhost: &str) -> Result<Vec<QueueInfo>, SourceError> {
        let body = self.get(&format!(
            "/api/queues/{}?columns=name,type,messages,messages_ready,messages_unacknowledged,arguments,policy,effective_policy_definition",
            enc(vhost)
        ))?;
        serde_json::from_str(&body)
            .map_err(|e| SourceError::failed_by("unexpected answer from the management API", e))
    }

    pub fn queue(&self, vhost: &str, name: &str) -> Result<QueueInfo, SourceError> {
        let body = self.get(&format!("/api/queues/{}/{}", enc(vhost), enc(name)))?;
        serde_json::from_str(&body)
            .map_err(|e| SourceError::failed_by("unexpected answer from the management API", e))
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

#[cfg(test)]
mod tests {
    use super::*;

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
