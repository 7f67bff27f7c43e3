//! A Confluent-compatible schema registry client (ureq): schemas by id, with their
//! references. Credentials are sent, never shown: every error names the registry by its
//! URL without userinfo.

use crate::compiled::RawSchema;
use dlq_core::schema::Format;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to reach a registry (`--schema-registry`, `[sources.NAME] schema_registry`).
#[derive(Clone, Default)]
pub struct RegistryConfig {
    pub url: String,
    pub auth: Auth,
    /// A PEM CA file for a registry behind a private CA.
    pub ca_file: Option<PathBuf>,
    /// How long one request may take before the letters of that id are `schema pending`.
    pub timeout: Option<Duration>,
    /// Send credentials over plain `http://` to a host that is not this machine.
    pub allow_plain_http: bool,
}

/// Registry credentials. `Debug` never prints them.
#[derive(Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Basic {
        user: String,
        password: String,
    },
    Bearer(String),
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("url", &dlq_core::uri::redact(&self.url))
            .field(
                "auth",
                &match self.auth {
                    Auth::None => "none",
                    Auth::Basic { .. } => "basic",
                    Auth::Bearer(_) => "bearer",
                },
            )
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    Found(RawSchema),
    /// The registry says there is no such schema (404): the letter is a poison pill.
    Unknown(String),
    /// Try again later (unreachable, 5xx, a timeout): the letters wait as pending.
    Transient(String),
}

#[derive(Deserialize)]
struct SchemaDoc {
    schema: String,
    #[serde(rename = "schemaType", default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<Reference>,
}

#[derive(Deserialize)]
struct Reference {
    name: String,
    subject: String,
    version: i32,
}

#[derive(Deserialize)]
struct SubjectVersion {
    subject: String,
    version: i32,
}

pub struct Registry {
    base: String,
    /// The URL without credentials, for messages.
    pub shown: String,
    /// The `Authorization` header: never in `Debug`.
    auth: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("url", &self.shown)
            .field("auth", &self.auth.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Registry {
    pub fn new(cfg: &RegistryConfig) -> Result<Registry, String> {
        let shown = dlq_core::uri::redact(cfg.url.trim_end_matches('/'));
        let scheme_ok = ["http://", "https://"].iter().any(|p| {
            cfg.url
                .get(..p.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(p))
        });
        if !scheme_ok {
            return Err(format!(
                "schema registry `{shown}`: an http:// or https:// URL, e.g. https://schema-registry:8081"
            ));
        }
        let timeout = cfg.timeout.unwrap_or(Duration::from_secs(5));
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(timeout.min(Duration::from_secs(3)))
            .timeout(timeout);
        if cfg
            .url
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            let mut tls = native_tls::TlsConnector::builder();
            if let Some(ca) = &cfg.ca_file {
                let pem = std::fs::read(ca)
                    .map_err(|e| format!("schema registry CA file {}: {e}", ca.display()))?;
                let cert = native_tls::Certificate::from_pem(&pem)
                    .map_err(|e| format!("schema registry CA file {}: {e}", ca.display()))?;
                tls.add_root_certificate(cert);
            }
            let tls = tls
                .build()
                .map_err(|e| format!("TLS for the schema registry: {e}"))?;
            builder = builder.tls_connector(Arc::new(tls));
        }
        // Userinfo in the URL is basic auth too, and never kept in `base`.
        let (base, url_auth) = split_userinfo(cfg.url.trim_end_matches('/'));
        let auth = match &cfg.auth {
            Auth::None => url_auth,
            Auth::Basic { user, password } => Some(basic(user, password)),
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
        };
        let plain = cfg
            .url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
        if auth.is_some() && plain && !cfg.allow_plain_http && !dlq_core::uri::is_loopback(&cfg.url)
        {
            return Err(format!(
                "schema registry `{shown}`: credentials over plain http:// are refused (anyone on the path reads them); use https://, or --registry-plain-http where the network is trusted"
            ));
        }
        Ok(Registry {
            base,
            shown,
            auth,
            agent: builder.build(),
        })
    }

    /// The schema with this id, its references resolved, and its subject and version.
    pub fn by_id(&self, id: u32) -> Lookup {
        let doc: SchemaDoc = match self.get_json(&format!("/schemas/ids/{id}")) {
            Ok(d) => d,
            Err(Failure::NotFound) => return Lookup::Unknown(format!("unknown schema id {id}")),
            Err(Failure::Other(why)) => return Lookup::Transient(why),
        };
        let mut raw = match self.raw(doc, 0) {
            Ok(r) => r,
            Err(Failure::Other(why)) => return Lookup::Transient(why),
            Err(Failure::NotFound) => {
                return Lookup::Unknown(format!(
                    "schema id {id} references a subject the registry at {} does not have",
                    self.shown
                ))
            }
        };
        // Subject and version are for the reader only: a registry without this endpoint
        // (older versions) still decodes.
        if let Ok(versions) =
            self.get_json::<Vec<SubjectVersion>>(&format!("/schemas/ids/{id}/versions"))
        {
            if let Some(v) = versions.into_iter().next() {
                raw.subject = Some(v.subject);
                raw.version = Some(v.version);
            }
        }
        Lookup::Found(raw)
    }

    /// The latest version of `subject` (for unframed letters a mapping names by subject),
    /// with its id.
    pub fn latest(&self, subject: &str) -> Lookup {
        #[derive(Deserialize)]
        struct Latest {
            id: u32,
            version: i32,
            #[serde(flatten)]
            doc: SchemaDoc,
        }
        let found: Latest = match self
            .get_json(&format!("/subjects/{}/versions/latest", percent(subject)))
        {
            Ok(d) => d,
            Err(Failure::NotFound) => return Lookup::Unknown(format!("unknown subject {subject}")),
            Err(Failure::Other(why)) => return Lookup::Transient(why),
        };
        match self.raw(found.doc, 0) {
            Ok(mut raw) => {
                raw.subject = Some(subject.to_string());
                raw.version = Some(found.version);
                raw.source = format!("registry, latest id {}", found.id);
                Lookup::Found(raw)
            }
            Err(Failure::Other(why)) => Lookup::Transient(why),
            Err(Failure::NotFound) => Lookup::Unknown(format!(
                "subject {subject} references a subject the registry does not have"
            )),
        }
    }

    fn raw(&self, doc: SchemaDoc, depth: usize) -> Result<RawSchema, Failure> {
        let format = match doc.schema_type.as_deref().unwrap_or("AVRO") {
            "AVRO" => Format::Avro,
            "PROTOBUF" => Format::Protobuf,
            "JSON" => Format::JsonSchema,
            other => {
                return Err(Failure::Other(format!(
                "the registry at {} has a schema of type {other}, which this build does not read",
                self.shown
            )))
            }
        };
        let mut raw = RawSchema::new(format, doc.schema, "registry");
        if depth > 16 {
            return Err(Failure::Other(
                "schema references nested deeper than 16".into(),
            ));
        }
        for r in doc.references {
            let sub: SchemaDoc = self.get_json(&format!(
                "/subjects/{}/versions/{}",
                percent(&r.subject),
                r.version
            ))?;
            let nested = self.raw(sub, depth + 1)?;
            // A reference's own references come first (dependency order).
            raw.references.extend(nested.references);
            raw.references.push((r.name, nested.text));
        }
        Ok(raw)
    }

    fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, Failure> {
        let url = format!("{}{path}", self.base);
        let mut req = self.agent.get(&url).set(
            "Accept",
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        if let Some(a) = &self.auth {
            req = req.set("Authorization", a);
        }
        match req.call() {
            Ok(r) => {
                let text = r.into_string().map_err(|e| {
                    Failure::Other(format!(
                        "reading the schema registry at {}: {e}",
                        self.shown
                    ))
                })?;
                serde_json::from_str(&text).map_err(|e| {
                    Failure::Other(format!(
                        "the schema registry at {} answered something else than a schema: {e}",
                        self.shown
                    ))
                })
            }
            Err(ureq::Error::Status(404, _)) => Err(Failure::NotFound),
            Err(ureq::Error::Status(code @ (401 | 403), _)) => Err(Failure::Other(format!(
                "the schema registry at {} refused the credentials ({code})",
                self.shown
            ))),
            Err(ureq::Error::Status(code, _)) => Err(Failure::Other(format!(
                "the schema registry at {} answered {code}",
                self.shown
            ))),
            Err(ureq::Error::Transport(t)) => {
                let mut text = t.to_string();
                let mut source = std::error::Error::source(&t);
                while let Some(e) = source {
                    text.push_str(&format!(": {e}"));
                    source = e.source();
                }
                let why = if text.contains("certificate") {
                    "presented a certificate this host does not trust (a private CA? pass --schema-registry-ca PEM)".to_string()
                } else {
                    match t.kind() {
                        ureq::ErrorKind::Io if text.contains("timed out") => {
                            "did not answer in time".to_string()
                        }
                        ureq::ErrorKind::ConnectionFailed => "refused the connection".to_string(),
                        ureq::ErrorKind::Dns => "has a name that does not resolve".to_string(),
                        _ => t.kind().to_string(),
                    }
                };
                Err(Failure::Other(dlq_core::source::redact_uri_text(&format!(
                    "the schema registry at {} {why}",
                    self.shown
                ))))
            }
        }
    }
}

enum Failure {
    NotFound,
    Other(String),
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// `https://user:pw@host/path` → (`https://host/path`, basic auth). The userinfo ends at
/// the last `@` (`dlq_core::uri`), so a password may hold `/ ? #`.
fn split_userinfo(url: &str) -> (String, Option<String>) {
    match dlq_core::uri::split(url) {
        Some(p) if p.user.is_some() => (
            format!("{}{}", p.scheme, p.rest),
            Some(basic(
                &percent_decode(p.user.unwrap_or_default()),
                &percent_decode(p.password.unwrap_or_default()),
            )),
        ),
        _ => (url.to_string(), None),
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A subject name in a URL path.
fn percent(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_becomes_basic_auth_and_leaves_the_url() {
        let (base, auth) = split_userinfo("https://bob:s%40cret@reg.example:8081/x");
        assert_eq!(base, "https://reg.example:8081/x");
        assert_eq!(auth, Some(basic("bob", "s@cret")));
        assert_eq!(split_userinfo("http://h:1").1, None);
        let cfg = RegistryConfig {
            url: "https://bob:hunter2@reg".into(),
            auth: Auth::Bearer("tok123".into()),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok123"),
            "{shown}"
        );
    }
}
