//! Protobuf: `.proto` text compiled in process by protox (no protoc), descriptor sets
//! read as they are, messages decoded and re-encoded by prost-reflect, shown in the
//! canonical proto3 JSON mapping (fields with default values included, so a zero amount
//! shows).

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions, Value};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};
use std::collections::HashMap;

/// Confluent's `meta.proto`, for schemas that tag fields with `(confluent.field_meta)`.
const CONFLUENT_META: &str = include_str!("../proto/confluent/meta.proto");

/// A compiled schema: its descriptors and the file whose messages the framing indexes.
#[derive(Debug)]
pub struct ProtoSchema {
    pool: DescriptorPool,
    /// The schema's own file (message indexes count its messages).
    file: String,
    pub pii: Vec<String>,
}

/// Sources by import name, for the compiler.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(text) => File::from_source(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

impl ProtoSchema {
    /// Compile `main` (named `name`) with the files it imports (`imports`: import name →
    /// text, the registry's references or a schema directory's files).
    pub fn compile(
        name: &str,
        main: &str,
        imports: &HashMap<String, String>,
    ) -> Result<Self, String> {
        let mut files = imports.clone();
        files.insert(name.to_string(), main.to_string());
        files
            .entry("confluent/meta.proto".into())
            .or_insert_with(|| CONFLUENT_META.to_string());
        let mut chain = ChainFileResolver::new();
        chain.add(Sources(files));
        chain.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(chain);
        compiler.include_imports(true);
        compiler.open_file(name).map_err(|e| format!("{e}"))?;
        let pool = compiler.descriptor_pool();
        Self::from_pool(pool, name)
    }

    /// A schema from a serialized `FileDescriptorSet` (`protoc --descriptor_set_out`),
    /// whose messages are looked up by full name.
    pub fn from_descriptor_set(bytes: &[u8]) -> Result<Self, String> {
        let pool =
            DescriptorPool::decode(bytes).map_err(|e| format!("not a descriptor set: {e}"))?;
        let file = pool
            .files()
            .last()
            .map(|f| f.name().to_string())
            .unwrap_or_default();
        Self::from_pool(pool, &file)
    }

    fn from_pool(pool: DescriptorPool, file: &str) -> Result<Self, String> {
        let mut pii = Vec::new();
        let meta = pool.get_extension_by_name("confluent.field_meta");
        for m in pool.all_messages() {
            for f in m.fields() {
                let opts = f.options();
                let redact = opts
                    .get_field_by_name("debug_redact")
                    .is_some_and(|v| v.as_bool() == Some(true));
                let tagged = meta.as_ref().is_some_and(|ext| {
                    opts.has_extension(ext)
                        && match opts.get_extension(ext).as_ref() {
                            Value::Message(meta) => {
                                meta.get_field_by_name("tags").is_some_and(|t| {
                                    t.as_list().is_some_and(|l| {
                                        l.iter().any(|v| {
                                            v.as_str()
                                                .is_some_and(|s| s.eq_ignore_ascii_case("pii"))
                                        })
                                    })
                                })
                            }
                            _ => false,
                        }
                });
                if redact || tagged {
                    pii.push(f.name().to_string());
                    if f.json_name() != f.name() {
                        pii.push(f.json_name().to_string());
                    }
                }
            }
        }
        pii.sort();
        pii.dedup();
        Ok(ProtoSchema {
            pool,
            file: file.to_string(),
            pii,
        })
    }

    /// The message the framing's indexes name: `[i]` the file's i-th message, `[i, j]`
    /// its j-th nested message, and so on.
    pub fn by_indexes(&self, indexes: &[i32]) -> Result<MessageDescriptor, String> {
        let file = self
            .pool
            .get_file_by_name(&self.file)
            .ok_or_else(|| format!("the schema file {} is missing", self.file))?;
        let mut current: Option<MessageDescriptor> = None;
        for &i in indexes {
            let i = usize::try_from(i).map_err(|_| format!("message index {i}"))?;
            let next = match &current {
                None => file.messages().nth(i),
                Some(m) => m.child_messages().nth(i),
            };
            current = Some(next.ok_or_else(|| {
                format!(
                    "message index {i} is not in {} (indexes {indexes:?})",
                    self.file
                )
            })?);
        }
        current.ok_or_else(|| format!("{} defines no message", self.file))
    }

    /// A message by full name, or the file's first when `name` is empty.
    pub fn by_name(&self, name: &str) -> Result<MessageDescriptor, String> {
        if name.is_empty() {
            return self.by_indexes(&[0]);
        }
        self.pool
            .get_message_by_name(name)
            .ok_or_else(|| format!("no message {name} in the schema"))
    }

    /// The indexes of a message in its file (for writing the framing back).
    pub fn indexes_of(&self, desc: &MessageDescriptor) -> Vec<i32> {
        let full = desc.full_name();
        let Some(file) = self.pool.get_file_by_name(desc.parent_file().name()) else {
            return vec![0];
        };
        fn find(
            ms: &mut dyn Iterator<Item = MessageDescriptor>,
            full: &str,
            path: &mut Vec<i32>,
        ) -> bool {
            for (i, m) in ms.enumerate() {
                path.push(i as i32);
                if m.full_name() == full || find(&mut m.child_messages(), full, path) {
                    return true;
                }
                path.pop();
            }
            false
        }
        let mut path = Vec::new();
        if find(&mut file.messages(), full, &mut path) {
            path
        } else {
            vec![0]
        }
    }

    pub fn decode(desc: &MessageDescriptor, bytes: &[u8]) -> Result<String, String> {
        let msg = DynamicMessage::decode(desc.clone(), bytes)
            .map_err(|e| format!("Protobuf for {} does not decode: {e}", desc.full_name()))?;
        let mut ser = serde_json::Serializer::new(Vec::with_capacity(bytes.len() * 2));
        msg.serialize_with_options(
            &mut ser,
            &SerializeOptions::new().skip_default_fields(false),
        )
        .map_err(|e| format!("Protobuf for {} has no JSON form: {e}", desc.full_name()))?;
        String::from_utf8(ser.into_inner()).map_err(|e| e.to_string())
    }

    pub fn encode(desc: &MessageDescriptor, json: &str) -> Result<Vec<u8>, String> {
        let mut de = serde_json::Deserializer::from_str(json);
        let msg = DynamicMessage::deserialize(desc.clone(), &mut de)
            .map_err(|e| format!("does not fit {}: {e}", desc.full_name()))?;
        de.end().map_err(|e| format!("not JSON: {e}"))?;
        Ok(msg.encode_to_vec())
    }
}
