//! A Confluent-compatible schema registry served in process (tiny_http), for the demo —
//! as the mock cluster stands in for Kafka — and for tests: the read endpoints a
//! deserializer uses (`/schemas/ids/{id}`, `/schemas/ids/{id}/versions`,
//! `/subjects`, `/subjects/{s}/versions`, `/subjects/{s}/versions/{v|latest}`), and
//! faults to inject per id (a status, a hang, a garbage schema).

use dlq_core::schema::Format;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One registered schema version.
#[derive(Debug, Clone)]
pub struct Registered {
    pub id: u32,
    pub subject: String,
    pub version: i32,
    pub format: Format,
    pub text: String,
    /// `(name, subject, version)` of the schemas it references.
    pub references: Vec<(String, String, i32)>,
}

/// A failure to answer with, per schema id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Status(u16),
    /// Never answer (until the server stops).
    Hang,
    /// Answer 200 with a schema that parses as nothing.
    Garbage,
}

/// A running registry; stops when dropped.
pub struct ServedRegistry {
    pub url: String,
    server: Arc<tiny_http::Server>,
    faults: Arc<Mutex<HashMap<u32, Fault>>>,
    /// The `Authorization` header every request must carry, when set.
    auth: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl ServedRegistry {
    /// Serve `schemas` on 127.0.0.1 (`port` 0: any free port).
    pub fn start(schemas: Vec<Registered>, port: u16) -> Result<ServedRegistry, String> {
        let server = tiny_http::Server::http(("127.0.0.1", port))
            .map_err(|e| format!("cannot serve the schema registry on 127.0.0.1:{port}: {e}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| "the schema registry has no IP address".to_string())?;
        let server = Arc::new(server);
        let faults: Arc<Mutex<HashMap<u32, Fault>>> = Arc::default();
        let auth: Arc<Mutex<Option<String>>> = Arc::default();
        let (srv, f, a) = (Arc::clone(&server), Arc::clone(&faults), Arc::clone(&auth));
        let thread = std::thread::Builder::new()
            .name("demo-schema-registry".into())
            .spawn(move || {
                for req in srv.incoming_requests() {
                    let wanted = a.lock().ok().and_then(|g| g.clone());
                    let given = req
                        .headers()
                        .iter()
                        .find(|h| h.field.equiv("Authorization"))
                        .map(|h| h.value.as_str().to_string());
                    let fault = match wanted {
                        Some(w) if given.as_deref() != Some(w.as_str()) => Some(Fault::Status(401)),
                        _ => fault_for(req.url(), &f),
                    };
                    if fault == Some(Fault::Hang) {
                        // Held unanswered on its own thread until the server stops.
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_secs(3600));
                            drop(req);
                        });
                        continue;
                    }
                    let (status, body) = match fault {
                        Some(Fault::Status(code)) => (
                            code,
                            format!(r#"{{"error_code":{code},"message":"injected"}}"#),
                        ),
                        Some(Fault::Garbage) => {
                            (200, r#"{"schema":"{ this is not a schema"}"#.to_string())
                        }
                        _ => answer(req.url(), &schemas),
                    };
                    let header = tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"application/vnd.schemaregistry.v1+json"[..],
                    );
                    let mut resp = tiny_http::Response::from_string(body).with_status_code(status);
                    if let Ok(h) = header {
                        resp = resp.with_header(h);
                    }
                    // A client that went away is not the registry's problem.
                    let _ = req.respond(resp);
                }
            })
            .map_err(|e| format!("cannot start the schema registry thread: {e}"))?;
        Ok(ServedRegistry {
            url: format!("http://{addr}"),
            server,
            faults,
            auth,
            thread: Some(thread),
        })
    }

    /// Refuse (401) every request without exactly this `Authorization` header.
    pub fn require_auth(&self, header: &str) {
        if let Ok(mut a) = self.auth.lock() {
            *a = Some(header.to_string());
        }
    }

    /// Answer requests for `id` with `fault` from now on.
    pub fn inject(&self, id: u32, fault: Fault) {
        if let Ok(mut f) = self.faults.lock() {
            f.insert(id, fault);
        }
    }
}

impl Drop for ServedRegistry {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn fault_for(url: &str, faults: &Mutex<HashMap<u32, Fault>>) -> Option<Fault> {
    let id: u32 = url
        .strip_prefix("/schemas/ids/")?
        .split('/')
        .next()?
        .parse()
        .ok()?;
    faults.lock().ok()?.get(&id).cloned()
}

/// A schema as the registry answers with it: its text, references and type (Avro
/// unsaid, as Confluent's registry leaves it).
fn schema_doc(s: &Registered) -> serde_json::Value {
    let mut v = serde_json::json!({
        "schema": s.text,
        "references": s.references.iter().map(|(name, subject, version)| serde_json::json!({
            "name": name, "subject": subject, "version": version,
        })).collect::<Vec<_>>(),
    });
    if s.format != Format::Avro {
        v["schemaType"] = match s.format {
            Format::Protobuf => "PROTOBUF",
            _ => "JSON",
        }
        .into();
    }
    v
}

fn answer(url: &str, schemas: &[Registered]) -> (u16, String) {
    let path = url.split('?').next().unwrap_or(url);
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let not_found = (
        404,
        r#"{"error_code":40403,"message":"Schema not found"}"#.to_string(),
    );
    match parts.as_slice() {
        ["schemas", "ids", id] => match schemas.iter().find(|s| id.parse() == Ok(s.id)) {
            Some(s) => (200, schema_doc(s).to_string()),
            None => not_found,
        },
        ["schemas", "ids", id, "versions"] => {
            let found: Vec<_> = schemas
                .iter()
                .filter(|s| id.parse() == Ok(s.id))
                .map(|s| serde_json::json!({"subject": s.subject, "version": s.version}))
                .collect();
            if found.is_empty() {
                not_found
            } else {
                (200, serde_json::Value::Array(found).to_string())
            }
        }
        ["subjects"] => {
            let mut subjects: Vec<&str> = schemas.iter().map(|s| s.subject.as_str()).collect();
            subjects.sort_unstable();
            subjects.dedup();
            (200, serde_json::json!(subjects).to_string())
        }
        ["subjects", subject, "versions"] => {
            let versions: Vec<i32> = schemas
                .iter()
                .filter(|s| s.subject == *subject)
                .map(|s| s.version)
                .collect();
            (200, serde_json::json!(versions).to_string())
        }
        ["subjects", subject, "versions", version] => {
            let of_subject = schemas.iter().filter(|s| s.subject == *subject);
            let found = if *version == "latest" {
                of_subject.max_by_key(|s| s.version)
            } else {
                of_subject
                    .into_iter()
                    .find(|s| version.parse() == Ok(s.version))
            };
            match found {
                Some(s) => {
                    let mut v = schema_doc(s);
                    v["id"] = s.id.into();
                    v["subject"] = s.subject.clone().into();
                    v["version"] = s.version.into();
                    (200, v.to_string())
                }
                None => not_found,
            }
        }
        _ => not_found,
    }
}
