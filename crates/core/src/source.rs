//! Source URIs: `kafka://`, `amqp://`/`amqps://`, `file://` or a `.ndjson` path, `demo`.

use std::fmt;
use std::path::PathBuf;

/// A source argument that is not one: the message says what a valid one looks like
/// (and never repeats a password it was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSource(pub String);

impl From<String> for BadSource {
    fn from(s: String) -> Self {
        BadSource(s)
    }
}

impl From<&str> for BadSource {
    fn from(s: &str) -> Self {
        BadSource(s.to_string())
    }
}

#[derive(Clone, PartialEq, Eq)]
pub enum SourceRef {
    Kafka {
        brokers: Vec<String>,
        topics: Vec<String>,
    },
    Amqp {
        tls: bool,
        user: String,
        password: String,
        host: String,
        port: u16,
        vhost: String,
        queues: Vec<String>,
        /// `amqps://` only: a private CA and a client certificate (mutual TLS).
        tls_files: TlsFiles,
    },
    File {
        path: PathBuf,
    },
    Demo,
}

impl SourceRef {
    pub fn kind(&self) -> &'static str {
        match self {
            SourceRef::Kafka { .. } => "kafka",
            SourceRef::Amqp { .. } => "rabbitmq",
            SourceRef::File { .. } => "file",
            SourceRef::Demo => "demo",
        }
    }

    /// Parse a source argument. Errors say what a valid one looks like.
    pub fn parse(s: &str) -> Result<SourceRef, BadSource> {
        let s = s.trim();
        if s == "demo" {
            return Ok(SourceRef::Demo);
        }
        if let Some(rest) = s.strip_prefix("kafka://") {
            return parse_kafka(rest);
        }
        if let Some(rest) = s.strip_prefix("amqps://") {
            return parse_amqp(rest, true);
        }
        if let Some(rest) = s.strip_prefix("amqp://") {
            return parse_amqp(rest, false);
        }
        if let Some(rest) = s.strip_prefix("file://") {
            if rest.is_empty() {
                return Err("file:// needs a path, e.g. file://dump.ndjson".into());
            }
            return Ok(SourceRef::File {
                path: PathBuf::from(rest),
            });
        }
        if s.contains("://") {
            return Err(BadSource(format!(
                "unknown source scheme in `{}`: use kafka://, amqp://, amqps://, file:// or demo (lower case)",
                crate::sanitize::clean(&crate::uri::redact(s))
            )));
        }
        if s.ends_with(".ndjson") || s.ends_with(".jsonl") {
            return Ok(SourceRef::File {
                path: PathBuf::from(s),
            });
        }
        // Text with userinfo but no scheme may be a mistyped URI with a password.
        let shown = if s.contains('@') {
            "(an argument with `@`, not shown)".to_string()
        } else {
            format!("`{}`", crate::sanitize::clean(s))
        };
        Err(BadSource(format!(
            "{shown} is not a source: use kafka://host:9092/topic, amqp://user:pass@host:5672/vhost?queue=q, a .ndjson dump, or demo (or a named source from config.toml)"
        )))
    }
}

fn parse_kafka(rest: &str) -> Result<SourceRef, BadSource> {
    // Topic names cannot hold `@`: any `@` is userinfo, wherever a `/` put it.
    if rest.contains('@') {
        return Err("kafka:// takes no user or password in the URI: use -X sasl.username=… with the password in DLQ_TRIAGE_KAFKA_PASSWORD or a credentials file (see docs/commands.md)".into());
    }
    let (hosts, topics) = rest
        .split_once('/')
        .ok_or("kafka:// needs topics: kafka://host:9092/topic[,topic2]")?;
    let brokers: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect();
    // Each topic once: a topic named twice would be read twice, and its letters planned
    // twice in one replay.
    let mut topics: Vec<String> = topics
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    dedup_in_order(&mut topics);
    if brokers.is_empty() {
        return Err("kafka:// needs at least one host:port".into());
    }
    if brokers.iter().any(|b| b.contains('@')) {
        return Err("kafka:// takes no user or password in the URI: use -X sasl.username=… with the password in DLQ_TRIAGE_KAFKA_PASSWORD or a credentials file (see docs/commands.md)".into());
    }
    if topics.is_empty() {
        return Err("kafka:// needs at least one topic after the `/`".into());
    }
    Ok(SourceRef::Kafka { brokers, topics })
}

/// Keep the first of each name, in order.
fn dedup_in_order(names: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
}

/// Credentials removed from every URI in a text (see `crate::uri::redact_uri_text`).
pub use crate::uri::redact_uri_text;

/// Everything but RFC 3986's unreserved characters is encoded.
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encode everything but unreserved characters (RFC 3986), for URIs and paths.
pub fn pct_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

/// Decode %-escapes; a `%` not followed by two hex digits is an error (the crate would
/// keep it literally, and a mistyped escape in a password should say so).
fn pct_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let bad = b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if bad {
        return Err(format!("bad %-escape in `{s}`"));
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| format!("%-escapes in `{s}` are not UTF-8"))
}

/// Files for an `amqps://` connection, named as in RabbitMQ's own URI query parameters
/// (`cacertfile`, `certfile`, `keyfile`): a CA to trust beside the system's store, and a
/// client certificate with its key (PEM) for brokers that require one. Paths, not
/// secrets: the key file's contents are read at connect time and never shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }
}

fn parse_amqp(rest: &str, tls: bool) -> Result<SourceRef, BadSource> {
    let usage = "amqp://user:pass@host:5672/vhost?queue=q1[,q2] (amqps:// also takes &cacertfile=PATH, &certfile=PATH&keyfile=PATH)";
    // The userinfo ends at the last `@` (a password may hold `/ ? #`): `crate::uri`.
    let (userinfo, rest) = match rest.rsplit_once('@') {
        Some((u, r)) => (Some(u), r),
        None => (None, rest),
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hostport, path) = before_query.split_once('/').unwrap_or((before_query, ""));
    let (user, password) = match userinfo {
        Some(u) => {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            (
                pct_decode(user)
                    .map_err(|_| "bad %-escape in the user name of the amqp URI".to_string())?,
                pct_decode(pass).map_err(|_| {
                    "bad %-escape in the password of the amqp URI (not shown)".to_string()
                })?,
            )
        }
        None => ("guest".to_string(), "guest".to_string()),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (
            h.to_string(),
            p.parse::<u16>()
                .map_err(|_| BadSource(format!("bad port `{p}` in {usage}")))?,
        ),
        None => (hostport.to_string(), if tls { 5671 } else { 5672 }),
    };
    if host.is_empty() {
        return Err(BadSource(format!("amqp source needs a host: {usage}")));
    }
    let vhost = if path.is_empty() {
        "/".to_string()
    } else {
        pct_decode(path)?
    };
    let (mut queues, tls_files) = amqp_query(query, tls, usage)?;
    dedup_in_order(&mut queues);
    if queues.is_empty() {
        return Err(BadSource(format!("amqp source needs ?queue=NAME: {usage}")));
    }
    if tls_files.cert.is_some() != tls_files.key.is_some() {
        return Err(BadSource(
            "a client certificate needs both `certfile` and `keyfile`".into(),
        ));
    }
    Ok(SourceRef::Amqp {
        tls,
        user,
        password,
        host,
        port,
        vhost,
        queues,
        tls_files,
    })
}

/// An amqp URI's query: its queues (`queue=a,b`, repeatable) and, for amqps, its TLS
/// files. Anything else is refused with `usage`.
fn amqp_query(query: &str, tls: bool, usage: &str) -> Result<(Vec<String>, TlsFiles), BadSource> {
    let mut queues = Vec::new();
    let mut tls_files = TlsFiles::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("queue", v)) => {
                for q in v.split(',').filter(|q| !q.is_empty()) {
                    queues.push(pct_decode(q)?);
                }
            }
            Some((name @ ("cacertfile" | "certfile" | "keyfile"), v)) => {
                if !tls {
                    return Err(BadSource(format!(
                        "`{name}` is for amqps:// (TLS); this URI is amqp://"
                    )));
                }
                let path = Some(PathBuf::from(pct_decode(v)?));
                match name {
                    "cacertfile" => tls_files.ca = path,
                    "certfile" => tls_files.cert = path,
                    _ => tls_files.key = path,
                }
            }
            _ => {
                return Err(BadSource(format!(
                    "unknown amqp source parameter `{pair}`: {usage}"
                )))
            }
        }
    }
    Ok((queues, tls_files))
}

/// Display never shows the password.
impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceRef::Kafka { brokers, topics } => {
                write!(f, "kafka://{}/{}", brokers.join(","), topics.join(","))
            }
            SourceRef::Amqp {
                tls,
                user,
                host,
                port,
                vhost,
                queues,
                ..
            } => {
                let scheme = if *tls { "amqps" } else { "amqp" };
                let vh = if vhost == "/" {
                    "%2f".to_string()
                } else {
                    vhost.clone()
                };
                write!(
                    f,
                    "{scheme}://{user}:***@{host}:{port}/{vh}?queue={}",
                    queues.join(",")
                )
            }
            SourceRef::File { path } => write!(f, "file://{}", path.display()),
            SourceRef::Demo => f.write_str("demo"),
        }
    }
}

impl fmt::Debug for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A topic or queue named twice is read (and planned) once.
    #[test]
    fn a_topic_or_queue_named_twice_is_one() {
        let k =
            SourceRef::parse("kafka://b:9092/payments.dlq,orders.dlq,payments.dlq").expect("valid");
        assert_eq!(k.to_string(), "kafka://b:9092/payments.dlq,orders.dlq");
        let a = SourceRef::parse("amqp://u@r/%2f?queue=a,b,a").expect("valid");
        let SourceRef::Amqp { queues, .. } = a else {
            panic!("not amqp: {a}");
        };
        assert_eq!(queues, vec!["a".to_string(), "b".to_string()]);
    }

    /// RabbitMQ's own TLS query parameters, for amqps:// only, a certificate with its key.
    #[test]
    fn amqps_takes_a_ca_and_a_client_certificate() {
        let a = SourceRef::parse(
            "amqps://u@rabbit/%2f?queue=q&cacertfile=/etc/ca%20dir/ca.pem&certfile=c.pem&keyfile=c.key",
        )
        .expect("valid");
        let SourceRef::Amqp { tls_files, .. } = a else {
            panic!("not amqp: {a}");
        };
        assert_eq!(
            tls_files,
            TlsFiles {
                ca: Some("/etc/ca dir/ca.pem".into()),
                cert: Some("c.pem".into()),
                key: Some("c.key".into()),
            }
        );
        for (uri, says) in [
            ("amqp://h/v?queue=q&cacertfile=ca.pem", "is for amqps://"),
            (
                "amqps://h/v?queue=q&certfile=c.pem",
                "both `certfile` and `keyfile`",
            ),
            (
                "amqps://h/v?queue=q&keyfile=c.key",
                "both `certfile` and `keyfile`",
            ),
        ] {
            let err = SourceRef::parse(uri).expect_err(uri).0;
            assert!(err.contains(says), "{uri}: {err}");
        }
    }

    #[test]
    fn parses_all_kinds() {
        assert_eq!(
            SourceRef::parse("kafka://a:9092,b:9092/invoices.dlq,payments.dlq"),
            Ok(SourceRef::Kafka {
                brokers: vec!["a:9092".into(), "b:9092".into()],
                topics: vec!["invoices.dlq".into(), "payments.dlq".into()],
            })
        );
        let a = SourceRef::parse("amqp://u:p%40ss@rabbit:5673/%2f?queue=q1,q2").expect("valid");
        assert_eq!(
            a,
            SourceRef::Amqp {
                tls: false,
                user: "u".into(),
                password: "p@ss".into(),
                host: "rabbit".into(),
                port: 5673,
                vhost: "/".into(),
                queues: vec!["q1".into(), "q2".into()],
                tls_files: TlsFiles::default(),
            }
        );
        assert!(!a.to_string().contains("p@ss"), "{a}");
        assert!(matches!(
            SourceRef::parse("amqps://h/v?queue=q"),
            Ok(SourceRef::Amqp {
                tls: true,
                port: 5671,
                ..
            })
        ));
        assert_eq!(
            SourceRef::parse("x.ndjson"),
            Ok(SourceRef::File {
                path: "x.ndjson".into()
            })
        );
        assert_eq!(
            SourceRef::parse("file://d/x.txt"),
            Ok(SourceRef::File {
                path: "d/x.txt".into()
            })
        );
        assert_eq!(SourceRef::parse("demo"), Ok(SourceRef::Demo));
    }

    #[test]
    fn percent_encoding_round_trips() {
        assert_eq!(pct_encode("/"), "%2F");
        assert_eq!(pct_encode("p@ss word"), "p%40ss%20word");
        assert_eq!(
            pct_decode(&pct_encode("ünï/côde")).as_deref(),
            Ok("ünï/côde")
        );
    }

    #[test]
    fn credentials_never_show_in_messages_or_labels() {
        for bad in [
            "AMQP://u:hunter2@h/v?queue=q",
            "amqp://u:hun%zzter2@h/v?queue=q",
            "amqp://u:hunter2@h:notaport/v?queue=q",
            "kafka://u:hunter2@h:9092/t",
            "nats://u:hunter2@h",
            "u:hunter2@h",
        ] {
            let e = SourceRef::parse(bad).expect_err(bad);
            assert!(
                !e.0.contains("hunter2") && !e.0.contains("zzter"),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            redact_uri_text("GET http://admin:s3cret@mgmt:15672/api failed; amqps://tok@h"),
            "GET http://admin:***@mgmt:15672/api failed; amqps://***@h"
        );
        assert_eq!(redact_uri_text("no uri here"), "no uri here");
    }

    #[test]
    fn explains_bad_sources() {
        assert!(SourceRef::parse("kafka://host").is_err_and(|e| e.0.contains("topic")));
        assert!(SourceRef::parse("amqp://h/v").is_err_and(|e| e.0.contains("queue")));
        assert!(SourceRef::parse("nats://x").is_err_and(|e| e.0.contains("scheme")));
        assert!(SourceRef::parse("orders").is_err());
    }
}
