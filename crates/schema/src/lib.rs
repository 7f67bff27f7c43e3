//! dlq-triage's schema adapter: Confluent-framed (and mapped unframed) Avro, Protobuf and
//! JSON Schema payloads decoded to JSON and written back, behind core's
//! [`PayloadCodec`] port. Schemas come from a Confluent-compatible registry, looked up
//! once per id on a background thread (a slow or down registry leaves letters `schema
//! pending`, never a stalled scan), or from a local directory.

mod avro;
mod compiled;
mod framing;
mod json_schema;
mod local;
mod protobuf;
mod registry;
pub mod serve;

pub use compiled::RawSchema;
pub use framing::{header as frame_header, write_message_indexes, MAGIC};
pub use registry::{Auth, RegistryConfig};

use compiled::{Compiled, Kind};
use dlq_core::schema::{Decoded, Decoding, EncodeError, Format, Part, PayloadCodec, SchemaInfo};
use local::LocalDir;
use registry::{Lookup, Registry};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where schemas come from, for one source.
#[derive(Debug, Clone, Default)]
pub struct SchemaSettings {
    pub registry: Option<RegistryConfig>,
    /// `--schemas DIR`.
    pub dir: Option<PathBuf>,
    /// Registry subjects for letters without framing, by topic or queue: the latest
    /// version is read with (`[schemas] value_subjects`, `key_subjects`).
    pub value_subjects: HashMap<String, String>,
    pub key_subjects: HashMap<String, String>,
}

impl SchemaSettings {
    pub fn is_empty(&self) -> bool {
        self.registry.is_none() && self.dir.is_none()
    }

    /// The registry subject a mapping names for a container's keys or values.
    fn subject(&self, container: &str, part: Part) -> Option<&String> {
        match part {
            Part::Value => self.value_subjects.get(container),
            Part::Key => self.key_subjects.get(container),
        }
    }
}

/// How long the first letter of a new id waits for the registry before it and the
/// letters after it are `schema pending` (once per id, so a hung registry costs a scan
/// this much once, not per letter).
const FIRST_WAIT: Duration = Duration::from_secs(2);
/// How long after a transient failure (unreachable, 5xx, timeout) an id is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// A compiled schema and what a decoded letter says about it, per message index path.
#[derive(Debug)]
struct Entry {
    compiled: Compiled,
    id: Option<u32>,
    container: Option<String>,
    infos: Mutex<HashMap<Vec<i32>, Arc<SchemaInfo>>>,
}

#[derive(Debug)]
enum Slot {
    Ready(Arc<Entry>),
    Failed(String),
    Fetching { since: Instant },
    Retry { at: Instant, why: String },
}

#[derive(Debug, Default)]
struct Shared {
    ids: Mutex<HashMap<u32, Slot>>,
    answered: Condvar,
}

/// A topic mapping's compiled schema, or why it does not compile.
type Mapped = Result<Arc<Entry>, String>;

/// The codec: decodes what it can, says why not for the rest.
#[derive(Debug)]
pub struct SchemaCodec {
    shared: Arc<Shared>,
    fetch: Option<Mutex<Sender<u32>>>,
    /// For messages and for subject lookups (unframed letters, made on the asking
    /// thread, once each); ids are looked up on the fetch thread.
    registry: Option<Arc<Registry>>,
    settings: SchemaSettings,
    local: Option<LocalDir>,
    mapped: Mutex<HashMap<(String, bool), Mapped>>,
}

impl SchemaCodec {
    /// Open the schema sources: a directory is read now (an error names the file); a
    /// registry is only contacted when a letter names an id.
    pub fn open(settings: &SchemaSettings) -> Result<SchemaCodec, String> {
        let local = settings.dir.as_deref().map(LocalDir::open).transpose()?;
        let shared = Arc::new(Shared::default());
        let (fetch, shared_registry) = match &settings.registry {
            Some(cfg) => {
                let registry = Arc::new(Registry::new(cfg)?);
                let for_codec = Arc::clone(&registry);
                let (tx, rx) = mpsc::channel::<u32>();
                let state = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name("schema-registry".into())
                    .spawn(move || {
                        for id in rx {
                            let slot = match registry.by_id(id) {
                                Lookup::Found(raw) => {
                                    ready(raw, Some(id), &format!("schema id {id}"))
                                }
                                Lookup::Unknown(why) => Slot::Failed(why),
                                Lookup::Transient(why) => Slot::Retry {
                                    at: Instant::now() + RETRY_AFTER,
                                    why,
                                },
                            };
                            lock(&state.ids).insert(id, slot);
                            state.answered.notify_all();
                        }
                    })
                    .map_err(|e| format!("cannot start the schema registry thread: {e}"))?;
                (Some(Mutex::new(tx)), Some(for_codec))
            }
            None => (None, None),
        };
        Ok(SchemaCodec {
            shared,
            fetch,
            registry: shared_registry,
            settings: settings.clone(),
            local,
            mapped: Mutex::new(HashMap::new()),
        })
    }

    /// A codec over one registry without credentials (the demo's, a test's).
    pub fn for_registry(url: &str) -> Result<SchemaCodec, String> {
        SchemaCodec::open(&SchemaSettings {
            registry: Some(RegistryConfig {
                url: url.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// A codec over one schema directory (a bastion's, a test's, the bench's).
    pub fn for_dir(dir: &std::path::Path) -> Result<SchemaCodec, String> {
        SchemaCodec::open(&SchemaSettings {
            dir: Some(dir.to_path_buf()),
            ..Default::default()
        })
    }

    /// The schema for a framed id: ready, still pending, or why not.
    fn by_id(&self, id: u32) -> Result<Arc<Entry>, Decoding> {
        let mut ids = lock(&self.shared.ids);
        if let std::collections::hash_map::Entry::Vacant(slot) = ids.entry(id) {
            if let Some(found) = self.local.as_ref().and_then(|l| l.by_id(id)) {
                slot.insert(match found {
                    Ok(raw) => ready(raw, Some(id), &format!("schema id {id}")),
                    Err(why) => Slot::Failed(why),
                });
            } else if self.fetch.is_none() {
                slot.insert(Slot::Failed(match &self.local {
                    Some(l) => {
                        format!("unknown schema id {id}\n{} has no schema for it", l.shown())
                    }
                    None => format!("unknown schema id {id}"),
                }));
            }
        }
        loop {
            match ids.get(&id) {
                Some(Slot::Ready(e)) => return Ok(Arc::clone(e)),
                Some(Slot::Failed(why)) => return Err(Decoding::Undecodable(why.clone())),
                Some(Slot::Retry { at, why }) if Instant::now() < *at => {
                    return Err(Decoding::Pending(why.clone()))
                }
                Some(Slot::Fetching { since }) => {
                    let left = FIRST_WAIT.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        return Err(Decoding::Pending(format!(
                            "waiting for schema id {id} from {}",
                            self.registry
                                .as_ref()
                                .map_or("the registry", |r| r.shown.as_str())
                        )));
                    }
                    ids = match self.shared.answered.wait_timeout(ids, left) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
                // Not asked yet, or a retry is due.
                _ => {
                    ids.insert(
                        id,
                        Slot::Fetching {
                            since: Instant::now(),
                        },
                    );
                    let sent = self
                        .fetch
                        .as_ref()
                        .is_some_and(|tx| lock(tx).send(id).is_ok());
                    if !sent {
                        ids.insert(id, Slot::Failed(format!("unknown schema id {id}")));
                    }
                }
            }
        }
    }

    /// The schema a mapping names for a container — a directory's `[topics]`, else a
    /// registry subject's latest version — compiled once. A registry that does not
    /// answer leaves the letter pending and is asked again by a later letter.
    fn mapped(&self, container: &str, part: Part) -> Option<Result<Arc<Entry>, Decoding>> {
        let key = (container.to_string(), part == Part::Key);
        if let Some(found) = lock(&self.mapped).get(&key) {
            return Some(found.clone().map_err(Decoding::Undecodable));
        }
        let raw = match self
            .local
            .as_ref()
            .and_then(|l| l.for_container(container, part))
        {
            Some(raw) => raw,
            None => {
                let subject = self.settings.subject(container, part)?;
                let registry = self.registry.as_ref()?;
                match registry.latest(subject) {
                    Lookup::Found(raw) => Ok(raw),
                    Lookup::Unknown(why) => Err(why),
                    Lookup::Transient(why) => return Some(Err(Decoding::Pending(why))),
                }
            }
        };
        let entry = raw.and_then(|raw| {
            let label = raw.source.clone();
            entry(raw, None, Some(container.to_string()), &label)
        });
        lock(&self.mapped).insert(key, entry.clone());
        Some(entry.map_err(Decoding::Undecodable))
    }

    fn decode_with(&self, entry: &Entry, framed: bool, bytes: &[u8]) -> Decoding {
        match decode_entry(entry, framed, bytes) {
            Ok(d) => Decoding::Decoded(d),
            Err(why) => Decoding::Undecodable(why),
        }
    }

    /// The entry an edited letter's schema names.
    fn entry_for(&self, info: &SchemaInfo) -> Result<Arc<Entry>, EncodeError> {
        match (info.id, &info.container) {
            (_, Some(container)) => {
                let part = Part::Value;
                match self.mapped(container, part) {
                    Some(Ok(e)) => Ok(e),
                    Some(Err(d)) => Err(EncodeError(d.describe())),
                    None => Err(EncodeError(format!(
                        "no schema is mapped for {container} any more"
                    ))),
                }
            }
            (Some(id), None) => self.by_id(id).map_err(|d| EncodeError(d.describe())),
            (None, None) => Err(EncodeError("the letter's schema is not known".into())),
        }
    }
}

impl PayloadCodec for SchemaCodec {
    fn decode(&self, container: &str, part: Part, bytes: &[u8]) -> Option<Decoding> {
        if let Some(f) = framing::parse(bytes) {
            return Some(match self.by_id(f.id) {
                Ok(entry) => self.decode_with(&entry, true, f.rest),
                Err(pending @ Decoding::Pending(_)) => pending,
                // The directory's mapping may still read an id nobody registered.
                Err(failed) => match self.mapped(container, part) {
                    Some(Ok(entry)) => self.decode_with(&entry, true, f.rest),
                    _ => failed,
                },
            });
        }
        match self.mapped(container, part) {
            Some(Ok(entry)) => Some(self.decode_with(&entry, false, bytes)),
            Some(Err(d)) => Some(d),
            // Unframed text stays what it is (a JSON letter on a mixed queue); unframed
            // binary where schemas are expected is the classic poison pill.
            None if part == Part::Value && looks_binary(bytes) => {
                Some(Decoding::Undecodable(dlq_core::schema::NOT_FRAMED.into()))
            }
            None => None,
        }
    }

    fn encode(&self, info: &SchemaInfo, json: &str) -> Result<Vec<u8>, EncodeError> {
        let entry = self.entry_for(info)?;
        let body = match &entry.compiled.kind {
            Kind::Avro(a) => a.encode(json),
            Kind::Json(j) => j.encode(json),
            // The message the letter was decoded as; a caller naming none gives the
            // framing's message indexes (`SchemaInfo::framed`).
            Kind::Proto(p) => if info.name.is_empty() {
                p.by_indexes(&info.message_indexes)
            } else {
                p.by_name(&info.name)
            }
            .and_then(|desc| protobuf::ProtoSchema::encode(&desc, json)),
        }
        .map_err(EncodeError)?;
        if !info.framed {
            return Ok(body);
        }
        let id = info
            .id
            .ok_or_else(|| EncodeError("a framed letter without a schema id".into()))?;
        let mut out = framing::header(id);
        if info.format == Format::Protobuf {
            framing::write_message_indexes(&info.message_indexes, &mut out);
        }
        out.extend_from_slice(&body);
        Ok(out)
    }
}

fn decode_entry(entry: &Entry, framed: bool, bytes: &[u8]) -> Result<Decoded, String> {
    let raw = &entry.compiled.raw;
    let (json, indexes, name) = match &entry.compiled.kind {
        Kind::Avro(a) => (
            a.decode(bytes, &label(&a.name, raw.version))?,
            Vec::new(),
            a.name.clone(),
        ),
        Kind::Json(j) => (j.decode(bytes)?, Vec::new(), j.name.clone()),
        Kind::Proto(p) => {
            let (desc, indexes, rest) = if framed {
                let (indexes, rest) = framing::message_indexes(bytes)?;
                (p.by_indexes(&indexes)?, indexes, rest)
            } else {
                let desc = p.by_name(raw.message.as_deref().unwrap_or(""))?;
                let indexes = p.indexes_of(&desc);
                (desc, indexes, bytes)
            };
            let json = protobuf::ProtoSchema::decode(&desc, rest)?;
            (json, indexes, desc.full_name().to_string())
        }
    };
    if json.len() > dlq_core::schema::MAX_DECODED {
        return Err(format!(
            "{} (shown as bytes)\n{} bytes decode to {} of JSON",
            dlq_core::schema::TOO_BIG,
            bytes.len(),
            json.len()
        ));
    }
    let schema = {
        let mut infos = lock(&entry.infos);
        let info = infos.entry(indexes.clone()).or_insert_with(|| {
            Arc::new(SchemaInfo {
                format: raw.format,
                id: entry.id,
                subject: raw.subject.clone(),
                version: raw.version,
                name,
                framed,
                message_indexes: indexes.clone(),
                pii_fields: entry.compiled.pii().to_vec(),
                source: raw.source.clone(),
                container: entry.container.clone(),
            })
        });
        Arc::clone(info)
    };
    Ok(Decoded { json, schema })
}

fn label(name: &str, version: Option<i32>) -> String {
    match version {
        Some(v) => format!("{name} v{v}"),
        None => name.to_string(),
    }
}

/// A schema compiled for use, or why not (`what` names it: `schema id 12`, a file).
fn entry(
    raw: RawSchema,
    id: Option<u32>,
    container: Option<String>,
    what: &str,
) -> Result<Arc<Entry>, String> {
    let compiled = Compiled::compile(raw).map_err(|why| format!("{what} {why}"))?;
    Ok(Arc::new(Entry {
        compiled,
        id,
        container,
        infos: Mutex::new(HashMap::new()),
    }))
}

/// [`entry`] as an id's slot.
fn ready(raw: RawSchema, id: Option<u32>, what: &str) -> Slot {
    match entry(raw, id, None, what) {
        Ok(e) => Slot::Ready(e),
        Err(why) => Slot::Failed(why),
    }
}

/// Not text: a control byte other than whitespace, or invalid UTF-8, in the first bytes.
fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    match std::str::from_utf8(head) {
        Ok(s) => s.chars().any(|c| c.is_control() && !c.is_whitespace()),
        Err(e) => e.error_len().is_some(),
    }
}

/// A poisoned lock is still usable: the data behind it is a cache.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
