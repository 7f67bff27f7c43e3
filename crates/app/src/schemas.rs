//! Which schemas a run decodes with: `--schema-registry`/`--schemas` over the named
//! source's `[sources.NAME.schemas]` over `[schemas]`; registry credentials from the
//! environment over the config. Opened once per run and shared by the session's threads.

use crate::config::{Config, SchemasConfig};
use dlq_core::schema::Codec;
use dlq_schema::{Auth, RegistryConfig, SchemaCodec, SchemaSettings};
use std::path::PathBuf;
use std::sync::Arc;

/// What the command line said.
#[derive(Debug, Clone, Default)]
pub struct SchemaFlags {
    pub registry: Option<String>,
    pub registry_ca: Option<PathBuf>,
    pub dir: Option<PathBuf>,
    /// Credentials may go over plain `http://` to a remote registry (a trusted network).
    pub registry_plain_http: bool,
}

/// The named source's value, else the global one.
fn pick<T>(
    named: Option<&SchemasConfig>,
    global: &SchemasConfig,
    f: impl Fn(&SchemasConfig) -> Option<T>,
) -> Option<T> {
    named.and_then(&f).or_else(|| f(global))
}

/// The codec for a run, or `None` when no schema source is configured.
pub fn open(
    flags: &SchemaFlags,
    config: &Config,
    source: Option<&str>,
) -> Result<Option<Codec>, String> {
    let named = source
        .and_then(|s| config.sources.get(s))
        .and_then(|n| n.schemas.as_ref());
    let global = &config.schemas;
    let mut registry = flags
        .registry
        .clone()
        .or_else(|| pick(named, global, |c| c.registry.clone()));
    // The demo reads its Avro topic through its own in-process registry.
    if registry.is_none() && source.map(str::trim) == Some("demo") {
        registry = Some(
            crate::brokers::demo_schemas::registry()
                .map_err(|e| e.to_string())?
                .url
                .clone(),
        );
    }
    let dir = flags
        .dir
        .clone()
        .or_else(|| pick(named, global, |c| c.dir.clone()));
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let registry = registry.map(|url| {
        let user = env("DLQ_TRIAGE_SCHEMA_REGISTRY_USER")
            .or_else(|| pick(named, global, |c| c.registry_user.clone()));
        let password = env("DLQ_TRIAGE_SCHEMA_REGISTRY_PASSWORD")
            .or_else(|| pick(named, global, |c| c.registry_password.clone()));
        let token = env("DLQ_TRIAGE_SCHEMA_REGISTRY_TOKEN")
            .or_else(|| pick(named, global, |c| c.registry_token.clone()));
        let auth = match (token, user) {
            (Some(t), _) => Auth::Bearer(t),
            (None, Some(user)) => Auth::Basic {
                user,
                password: password.unwrap_or_default(),
            },
            (None, None) => Auth::None,
        };
        RegistryConfig {
            url,
            auth,
            ca_file: flags
                .registry_ca
                .clone()
                .or_else(|| pick(named, global, |c| c.registry_ca.clone())),
            timeout: None,
            allow_plain_http: flags.registry_plain_http,
        }
    });
    // A source's own mappings over the global ones, container by container.
    let subjects = |f: fn(&SchemasConfig) -> &std::collections::BTreeMap<String, String>| {
        let mut all: std::collections::HashMap<String, String> =
            f(&config.schemas).clone().into_iter().collect();
        if let Some(n) = named {
            all.extend(f(n).clone());
        }
        all
    };
    let settings = SchemaSettings {
        registry,
        dir,
        value_subjects: subjects(|c| &c.value_subjects),
        key_subjects: subjects(|c| &c.key_subjects),
    };
    if settings.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(SchemaCodec::open(&settings)?)))
}
