//! Schemas from a directory (`--schemas DIR`), for a bastion without registry access:
//! `.avsc`, `.proto` (imports resolved in the directory), `.json` (JSON Schema) and
//! descriptor sets (`.desc`, `.pb`). Which schema a letter was written with:
//!
//! - a file named by its registry id (`12.avsc`, `14.proto`), or `[ids]` in
//!   `DIR/schemas.toml` (`12 = "payment-v1.avsc"`);
//! - for letters without framing (or with an id the directory does not hold), `[topics]`
//!   in `schemas.toml`: `[topics."payments.dlq"] value = "payment-v1.avsc"`, `key = …`;
//!   a Protobuf message as `"orders.proto:acme.Order"`.

use crate::compiled::RawSchema;
use dlq_core::schema::{Format, Part};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Index {
    #[serde(default)]
    ids: BTreeMap<String, String>,
    #[serde(default)]
    topics: BTreeMap<String, TopicMap>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicMap {
    value: Option<String>,
    key: Option<String>,
}

/// A schema directory, read once at open.
#[derive(Debug)]
pub struct LocalDir {
    dir: PathBuf,
    ids: HashMap<u32, String>,
    topics: BTreeMap<String, TopicMap>,
    /// Every `.proto` file by its path relative to the directory (the import name).
    protos: HashMap<String, String>,
}

impl LocalDir {
    pub fn open(dir: &Path) -> Result<LocalDir, String> {
        let shown = dir.display();
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("schema directory {shown}: {e}"))?;
        let mut ids = HashMap::new();
        let mut protos = HashMap::new();
        let mut names = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.split('.').next() {
                if let (Ok(id), Some(_)) = (stem.parse::<u32>(), format_of(&name)) {
                    ids.insert(id, name.clone());
                }
            }
            names.push(name);
        }
        collect_protos(dir, "", &mut protos, 0);
        let index_path = dir.join("schemas.toml");
        let index: Index = match std::fs::read_to_string(&index_path) {
            Ok(text) => {
                toml::from_str(&text).map_err(|e| format!("{}: {e}", index_path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Index::default(),
            Err(e) => return Err(format!("{}: {e}", index_path.display())),
        };
        for (id, file) in index.ids {
            let id: u32 = id.parse().map_err(|_| {
                format!(
                    "{}: [ids] key `{id}` is not a schema id",
                    index_path.display()
                )
            })?;
            ids.insert(id, file);
        }
        for (topic, map) in &index.topics {
            for f in [&map.value, &map.key].into_iter().flatten() {
                let file = f.split_once(':').map_or(f.as_str(), |(file, _)| file);
                if !dir.join(file).is_file() {
                    return Err(format!(
                        "{}: [topics.\"{topic}\"] names {file}, which is not in {shown}",
                        index_path.display()
                    ));
                }
            }
        }
        Ok(LocalDir {
            dir: dir.to_path_buf(),
            ids,
            topics: index.topics,
            protos,
        })
    }

    /// The directory, for messages.
    pub fn shown(&self) -> String {
        self.dir.display().to_string()
    }

    /// The schema file for a registry id, if the directory holds it.
    pub fn by_id(&self, id: u32) -> Option<Result<RawSchema, String>> {
        self.ids.get(&id).map(|file| self.load(file))
    }

    /// The schema a mapping names for a topic or queue.
    pub fn for_container(&self, container: &str, part: Part) -> Option<Result<RawSchema, String>> {
        let map = self.topics.get(container)?;
        let spec = match part {
            Part::Value => map.value.as_ref()?,
            Part::Key => map.key.as_ref()?,
        };
        Some(self.load(spec))
    }

    /// `file` or `file.proto:pkg.Message`.
    fn load(&self, spec: &str) -> Result<RawSchema, String> {
        let (file, message) = match spec.split_once(':') {
            Some((f, m)) => (f, Some(m.to_string())),
            None => (spec, None),
        };
        let format = format_of(file)
            .ok_or_else(|| format!("{file}: not .avsc, .proto, .json, .desc or .pb"))?;
        let path = self.dir.join(file);
        let mut raw = if matches!(
            Path::new(file).extension().and_then(|e| e.to_str()),
            Some("desc" | "pb")
        ) {
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut r = RawSchema::new(format, String::new(), file);
            r.descriptor_set = Some(bytes);
            r
        } else {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut r = RawSchema::new(format, text, file);
            if format == Format::Protobuf {
                r.references = self
                    .protos
                    .iter()
                    .filter(|(n, _)| n.as_str() != file)
                    .map(|(n, t)| (n.clone(), t.clone()))
                    .collect();
            }
            r
        };
        raw.message = message;
        Ok(raw)
    }
}

fn format_of(file: &str) -> Option<Format> {
    match Path::new(file).extension().and_then(|e| e.to_str())? {
        "avsc" => Some(Format::Avro),
        "proto" | "desc" | "pb" => Some(Format::Protobuf),
        "json" => Some(Format::JsonSchema),
        _ => None,
    }
}

fn collect_protos(dir: &Path, prefix: &str, out: &mut HashMap<String, String>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = e.path();
        if path.is_dir() {
            collect_protos(&path, &rel, out, depth + 1);
        } else if name.ends_with(".proto") {
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.insert(rel, text);
            }
        }
    }
}
