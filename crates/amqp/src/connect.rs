//! Connecting: the runtime lapin runs on, the AMQP (and TLS) handshake, and what a
//! refused certificate means in words.

use super::*;

/// Where and how to connect.
#[derive(Clone)]
pub struct AmqpTarget {
    pub tls: bool,
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub vhost: String,
    /// amqps://: a CA beside the system's store, a client certificate and key.
    pub tls_files: TlsFiles,
}

impl AmqpTarget {
    pub(crate) fn uri(&self) -> String {
        let enc = dlq_core::source::pct_encode;
        let scheme = if self.tls { "amqps" } else { "amqp" };
        format!(
            "{scheme}://{}:{}@{}:{}/{}",
            enc(&self.user),
            enc(&self.password),
            self.host,
            self.port,
            enc(&self.vhost)
        )
    }

    pub(crate) fn display(&self) -> String {
        let scheme = if self.tls { "amqps" } else { "amqp" };
        let vh = if self.vhost == "/" {
            "%2f".to_string()
        } else {
            self.vhost.clone()
        };
        format!(
            "{scheme}://{}:***@{}:{}/{vh}",
            self.user, self.host, self.port
        )
    }
}

/// A runtime with its own worker thread, so lapin's I/O loop keeps running between our
/// calls: heartbeats go out while a browse sits open in the TUI, and a connection or
/// channel closed by the server is noticed at once (a current-thread runtime would only
/// run it inside `block_on`, and an ack on a dead channel would look like success).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, SourceError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("dlq-triage-amqp")
        .enable_all()
        .build()
        .map_err(|e| SourceError::failed_by("starting the AMQP runtime", e))
}

/// Connect with a bounded wait and a message that says what to check. The connection is
/// named, so operators can see (and close) it in the management UI and `rabbitmqctl`.
pub(crate) fn connect(
    rt: &tokio::runtime::Runtime,
    t: &AmqpTarget,
    name: &str,
) -> Result<Connection, SourceError> {
    let uri = t.uri();
    let props = ConnectionProperties::default()
        .with_connection_name(LongString::from(name.as_bytes().to_vec()));
    let tls = tls_config(&t.tls_files)?;
    let res = rt.block_on(async {
        let connecting = async {
            match tls {
                None => Connection::connect(&uri, props).await,
                Some(tls) => {
                    lapin::DefaultConnectionBuilder::new()?
                        .with_uri_str(uri.clone())
                        .with_properties(props)
                        .with_tls_config(tls)
                        .connect()
                        .await
                }
            }
        };
        tokio::time::timeout(CONNECT_TIMEOUT, connecting).await
    });
    match res {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => {
            let mut msg = e.to_string();
            // A peer that answers in something else (an HTTP port, a proxy) surfaces as
            // the frame parser's debug dump: say what it means instead.
            if msg.contains("Parsing Error") || msg.contains("failed to parse") {
                msg = format!(
                    "{}:{} answered, but not in AMQP 0-9-1 (an HTTP port or a proxy? AMQP listens on 5672, AMQPS on 5671, the management API on 15672)",
                    t.host, t.port
                );
            }
            let hint = if let Some(why) = tls_hint(&msg, t) {
                why
            } else if msg.contains("ACCESS_REFUSED") || msg.to_lowercase().contains("auth") {
                format!("RabbitMQ refused the credentials for user `{}`", t.user)
            } else if msg.contains("NOT_ALLOWED") || msg.contains("vhost") {
                format!(
                    "vhost `{}` does not exist or user `{}` may not use it",
                    t.vhost, t.user
                )
            } else {
                "check the address, port and TLS (amqps://)".to_string()
            };
            Err(SourceError::unavailable(format!(
                "cannot connect to {}: {msg}. {hint}",
                t.display()
            )))
        }
        Err(_) => Err(SourceError::unavailable(format!(
            "cannot connect to {} within {}s: check the address and network",
            t.display(),
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// The files an amqps:// URI names, read now so a missing or unreadable one is said by
/// its parameter's name; `None` when it names none (the system's store, no client
/// certificate).
pub(crate) fn tls_config(
    files: &TlsFiles,
) -> Result<Option<lapin::tcp::OwnedTLSConfig>, SourceError> {
    if files.is_empty() {
        return Ok(None);
    }
    let read = read_tls_file;
    let cert_chain = match &files.ca {
        Some(p) => Some(String::from_utf8(read("cacertfile", p)?).map_err(|_| {
            SourceError::failed(format!("cacertfile={} is not a PEM file", p.display()))
        })?),
        None => None,
    };
    let identity = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(lapin::tcp::OwnedIdentity::PKCS8 {
            pem: read("certfile", cert)?,
            key: read("keyfile", key)?,
        }),
        _ => None,
    };
    Ok(Some(lapin::tcp::OwnedTLSConfig {
        identity,
        cert_chain,
    }))
}

/// One of an amqps:// URI's files, or why not, named by its parameter (`keyfile=PATH`):
/// missing, or not the PEM it must be (a key given as the certificate, a DER file), said
/// here rather than as a TLS library's parse error or, for a CA file with no
/// certificate in it, as an untrusted server later.
pub fn read_tls_file(param: &str, path: &std::path::Path) -> Result<Vec<u8>, SourceError> {
    let bytes = std::fs::read(path)
        .map_err(|e| SourceError::failed(format!("reading {param}={}: {e}", path.display())))?;
    let (marker, what) = if param == "keyfile" {
        ("PRIVATE KEY-----", "a PEM private key")
    } else {
        ("-----BEGIN CERTIFICATE-----", "a PEM certificate")
    };
    if !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()) {
        return Err(SourceError::failed(format!(
            "{param}={} is not {what}: no `{marker}` in it",
            path.display()
        )));
    }
    Ok(bytes)
}

/// What to do about a certificate from a CA outside the system's store: the URI's
/// `cacertfile` serves AMQP and the management API alike; SSL_CERT_FILE (read by rustls,
/// which lapin uses, and by OpenSSL, which the API's client uses) replaces the store.
pub const PRIVATE_CA: &str =
    "for a private CA, add &cacertfile=PATH (its PEM file) to the amqps:// URI, or set SSL_CERT_FILE, or add it to the system's store";

/// What a failed TLS connection means, in words an operator can act on; rustls' own
/// text (`invalid peer certificate: UnknownIssuer`) stays in the message before it.
pub(crate) fn tls_hint(msg: &str, t: &AmqpTarget) -> Option<String> {
    if !t.tls {
        return None;
    }
    let why = if msg.contains("UnknownIssuer") {
        format!(
            "the server's certificate is signed by a CA this machine does not trust: {PRIVATE_CA}"
        )
    } else if msg.contains("not valid for name") || msg.contains("NotValidForName") {
        format!(
            "the server's certificate does not name `{}`: connect by a name the certificate carries",
            t.host
        )
    } else if msg.contains("certificate expired")
        || msg.contains("not valid yet")
        || msg.contains("Expired")
        || msg.contains("NotValidYet")
    {
        "the server's certificate is outside its validity period (or this machine's clock is wrong)"
            .to_string()
    } else if msg.contains("InvalidContentType") || msg.contains("corrupt message") {
        format!(
            "{}:{} did not answer in TLS: is it the plain AMQP port? (amqp:// listens on 5672, amqps:// on 5671)",
            t.host, t.port
        )
    } else if msg.contains("CertificateRequired")
        || msg.contains("alert: BadCertificate")
        || msg.contains("alert: UnknownCA")
    {
        "the server requires a client certificate it trusts: add &certfile=PATH&keyfile=PATH (PEM) to the amqps:// URI".to_string()
    } else if msg.contains("invalid peer certificate") {
        "the server's certificate was refused".to_string()
    } else {
        return None;
    };
    Some(why)
}
