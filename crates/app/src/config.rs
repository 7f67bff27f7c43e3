//! Configuration: XDG paths, `config.toml`, `DLQ_TRIAGE_*` environment overrides.
//!
//! Precedence, highest first: command-line flag, environment variable, config file,
//! built-in default. Flags and their environment variables are wired in clap (`env = …`);
//! this module loads the file and resolves paths.

use dlq_core::conventions::user::UserMappingConfig;
use dlq_core::conventions::UserMapping;
use dlq_core::masking::MaskConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A named source, like a k9s context: `[sources.orders] uri = "kafka://…"`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedSource {
    pub uri: String,
    /// librdkafka properties for this source (same as repeated `-X key=value`).
    #[serde(default)]
    pub kafka: BTreeMap<String, String>,
    /// This source's ledger (a file, or its team's `postgres://…`), over the global one.
    #[serde(default)]
    pub ledger: Option<String>,
    /// This source's schemas (`[sources.NAME.schemas]`), over the global `[schemas]`.
    #[serde(default)]
    pub schemas: Option<SchemasConfig>,
}

/// Where schemas come from (`[schemas]`, or `[sources.NAME.schemas]` for one source).
/// Credentials may be given here (a config file only its owner reads) or, better, in
/// `DLQ_TRIAGE_SCHEMA_REGISTRY_USER`/`_PASSWORD`/`_TOKEN`; they are never shown.
#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchemasConfig {
    /// A Confluent-compatible schema registry's URL.
    #[serde(default)]
    pub registry: Option<String>,
    /// A PEM CA file for a registry behind a private CA.
    #[serde(default)]
    pub registry_ca: Option<PathBuf>,
    #[serde(default)]
    pub registry_user: Option<String>,
    #[serde(default)]
    pub registry_password: Option<String>,
    #[serde(default)]
    pub registry_token: Option<String>,
    /// A directory of `.avsc`/`.proto`/`.json`/descriptor sets (see the README).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Letters without framing, by topic or queue: the registry subject whose latest
    /// version reads their values (`{ "orders.raw" = "orders-value" }`) or keys.
    #[serde(default)]
    pub value_subjects: BTreeMap<String, String>,
    #[serde(default)]
    pub key_subjects: BTreeMap<String, String>,
}

impl std::fmt::Debug for SchemasConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemasConfig")
            .field(
                "registry",
                &self
                    .registry
                    .as_deref()
                    .map(dlq_core::source::redact_uri_text),
            )
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    theme: Option<String>,
    #[serde(default)]
    group_by: Option<String>,
    #[serde(default)]
    roles_file: Option<PathBuf>,
    #[serde(default)]
    ledger: Option<String>,
    #[serde(default)]
    sources: BTreeMap<String, NamedSource>,
    /// Topic/queue name globs the picker and `topics` take for DLQs.
    #[serde(default)]
    dlq_patterns: Vec<String>,
    #[serde(default)]
    masking: MaskConfig,
    #[serde(default)]
    conventions: Vec<UserMappingConfig>,
    #[serde(default)]
    replay: ReplayConfig,
    #[serde(default)]
    discard: DiscardConfig,
    #[serde(default)]
    retention: RetentionConfig,
    /// Memory, in MiB, for whole letters the TUI keeps (default 256 for RabbitMQ, whose
    /// deliveries cannot be re-read, 8 for Kafka and files, which are re-read by position).
    #[serde(default)]
    payload_cache_mib: Option<usize>,
    /// `[[owners]]`: who must act on which letters.
    #[serde(default)]
    owners: Vec<dlq_core::owners::OwnerRule>,
    #[serde(default)]
    watch: WatchConfig,
    #[serde(default)]
    schemas: SchemasConfig,
    /// `[keys]`: the TUI's keys rebound (checked by the TUI at start).
    #[serde(default)]
    keys: BTreeMap<String, KeyEntry>,
    /// `[[links]]`: URL templates filled from a letter (traces, logs, releases).
    #[serde(default)]
    links: Vec<dlq_core::links::LinkTemplate>,
}

/// The keys an action is bound to in `[keys]`: one (`discard = "X"`) or several
/// (`down = ["j", "Down"]`), written as the help overlay writes them.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum KeyList {
    One(String),
    Many(Vec<String>),
}

impl KeyList {
    pub fn keys(&self) -> Vec<&str> {
        match self {
            KeyList::One(k) => vec![k.as_str()],
            KeyList::Many(ks) => ks.iter().map(String::as_str).collect(),
        }
    }
}

/// An entry of `[keys]`: a normal-mode action's keys, or a mode's own table
/// (`[keys.dry-run]`, `[keys.help]`, `[keys.typing]`; `[keys.normal]` too).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum KeyEntry {
    Keys(KeyList),
    Mode(BTreeMap<String, KeyList>),
}

/// `[watch]`: the rules `dlq-triage watch` evaluates besides `--rule`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    #[serde(default)]
    pub rules: Vec<WatchRuleConfig>,
}

/// `[[watch.rules]]`: `rule = "reason=amount_* rate > 5/min for 5m"`, a name and a
/// severity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchRuleConfig {
    pub rule: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub severity: Option<String>,
}

/// `[replay]`: how replays are confirmed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// Above this many letters, the operator types the count (TUI) or passes
    /// `--expect N` with `--yes` (CLI).
    #[serde(default = "default_confirm_above")]
    pub confirm_above: usize,
    /// Four eyes (team ledger only): a replay over this many letters waits for a second
    /// operator's `dlq-triage approve ID`.
    #[serde(default)]
    pub approval_above: Option<usize>,
    /// Where `--to` may send a replay instead of each letter's origin
    /// (`["invoices", "queue:orders.*"]`); none: origins only.
    #[serde(default)]
    pub allowed_targets: Vec<String>,
}

fn default_confirm_above() -> usize {
    dlq_core::replay::CONFIRM_COUNT_ABOVE
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            confirm_above: default_confirm_above(),
            approval_above: None,
            allowed_targets: Vec::new(),
        }
    }
}

/// `[retention]`: the broker's deletion clock on groups.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Groups whose first letter the broker deletes sooner than this show in red.
    #[serde(default = "default_warn_below")]
    pub warn_below: String,
}

fn default_warn_below() -> String {
    "6h".into()
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            warn_below: default_warn_below(),
        }
    }
}

/// `[discard]`: four eyes on big discards (team ledger only).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscardConfig {
    /// A discard of more than this many letters waits for a second operator's
    /// `dlq-triage approve ID`.
    #[serde(default)]
    pub approval_above: Option<usize>,
}

impl Config {
    /// The team's policy from its ledger (`key`, `value`) over this config: a threshold
    /// is the lower of the two, targets those both allow. A config tightens the team's
    /// policy, never loosens it. A value the server holds that does not parse is
    /// reported and the config's kept (the server enforces its own anyway).
    pub fn tighten_with(&mut self, policy: &[(String, String)]) -> Vec<String> {
        let mut notes = Vec::new();
        let lower =
            |mine: Option<usize>, theirs: usize| Some(mine.map_or(theirs, |m| m.min(theirs)));
        for (key, value) in policy {
            let number = value.parse::<usize>().ok();
            match (key.as_str(), number) {
                ("approval_above", Some(n)) => {
                    self.replay.approval_above = lower(self.replay.approval_above, n);
                }
                ("discard_approval_above", Some(n)) => {
                    self.discard.approval_above = lower(self.discard.approval_above, n);
                }
                ("confirm_above", Some(n)) => {
                    self.replay.confirm_above = self.replay.confirm_above.min(n);
                }
                ("allowed_targets", _) => match serde_json::from_str::<Vec<String>>(value) {
                    Ok(team) if self.replay.allowed_targets.is_empty() => {
                        self.replay.allowed_targets = team;
                    }
                    Ok(team) => self.replay.allowed_targets.retain(|t| team.contains(t)),
                    Err(_) => notes.push(format!(
                        "the team's allowed_targets is not a JSON list of names: {}",
                        dlq_core::sanitize::line(value, 80)
                    )),
                },
                (other, _) => notes.push(format!(
                    "the team's policy `{}` = `{}` is not understood by this build: ignored",
                    dlq_core::sanitize::clean(other),
                    dlq_core::sanitize::line(value, 80)
                )),
            }
        }
        notes
    }
}

/// The loaded configuration.
#[derive(Debug, Default)]
pub struct Config {
    /// The file it came from, if any.
    pub path: Option<PathBuf>,
    pub theme: Option<String>,
    pub group_by: Option<String>,
    pub roles_file: Option<PathBuf>,
    /// A file path or `postgres://…` (parsed by `ledger_location::Location`).
    pub ledger: Option<String>,
    pub sources: BTreeMap<String, NamedSource>,
    pub dlq_patterns: Vec<String>,
    pub masking: MaskConfig,
    pub conventions: Vec<UserMapping>,
    pub replay: ReplayConfig,
    pub discard: DiscardConfig,
    pub retention: RetentionConfig,
    pub payload_cache_mib: Option<usize>,
    pub owners: dlq_core::owners::Owners,
    pub watch: WatchConfig,
    pub schemas: SchemasConfig,
    /// `[keys]`: action name → its keys, replacing the defaults for that action (normal
    /// mode), and `[keys.MODE]` tables for the other modes.
    pub keys: BTreeMap<String, KeyEntry>,
    /// `[[links]]`, checked: links out from a letter (`show`, the TUI's failure tab).
    pub links: Vec<dlq_core::links::LinkTemplate>,
}

/// `$XDG_CONFIG_HOME/dlq-triage`, else `~/.config/dlq-triage`.
pub fn config_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config")
}

/// `$XDG_STATE_HOME/dlq-triage`, else `~/.local/state/dlq-triage`.
pub fn state_dir() -> Option<PathBuf> {
    xdg_dir("XDG_STATE_HOME", ".local/state")
}

fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    let base = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)))?;
    Some(base.join("dlq-triage"))
}

impl Config {
    /// Load from an explicit path (must exist) or the default location (may be absent).
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let (path, must_exist) = match explicit {
            Some(p) => (p.to_path_buf(), true),
            None => match config_dir() {
                Some(d) => (d.join("config.toml"), false),
                None => return Ok(Config::default()),
            },
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if !must_exist && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config::default())
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Config::parse(&text, &path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let file: ConfigFile =
            toml::from_str(text).map_err(|e| invalid(dlq_core::sanitize::toml_error(text, &e)))?;
        let conventions = file
            .conventions
            .into_iter()
            .map(UserMapping::try_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        if let Some(g) = &file.group_by {
            dlq_core::grouping::Dim::parse_list(g)
                .map_err(|e| invalid(format!("group_by: {e}")))?;
        }
        for (name, s) in &file.sources {
            dlq_core::source::SourceRef::parse(&s.uri)
                .map_err(|e| invalid(format!("sources.{name}.uri: {e}")))?;
        }
        for r in &file.watch.rules {
            dlq_core::watch::Rule::parse(&r.rule, r.name.as_deref(), r.severity.as_deref())
                .map_err(|e| invalid(format!("watch.rules: {e}")))?;
        }
        if dlq_core::timefmt::parse_duration_ms(&file.retention.warn_below).is_none() {
            return Err(invalid(format!(
                "retention.warn_below `{}`: use a duration such as 6h",
                file.retention.warn_below
            )));
        }
        for l in &file.links {
            l.check().map_err(invalid)?;
        }
        // Validate masking classes now rather than at first use.
        dlq_core::masking::Masker::new(&file.masking, Vec::new()).map_err(invalid)?;
        Ok(Config {
            path: Some(path.to_path_buf()),
            theme: file.theme,
            group_by: file.group_by,
            roles_file: file.roles_file,
            ledger: file.ledger,
            sources: file.sources,
            dlq_patterns: file.dlq_patterns,
            masking: file.masking,
            replay: file.replay,
            discard: file.discard,
            retention: file.retention,
            payload_cache_mib: file.payload_cache_mib,
            owners: dlq_core::owners::Owners(file.owners),
            watch: file.watch,
            schemas: file.schemas,
            keys: file.keys,
            links: file.links,
            conventions,
        })
    }
}

/// The per-installation key for keyed-hash masking, created on first use (mode 0600) so
/// hashes stay comparable across runs and exports. Falls back to a per-process key.
pub fn mask_hash_key() -> Vec<u8> {
    if let Ok(k) = std::env::var("DLQ_TRIAGE_MASK_KEY") {
        if !k.is_empty() {
            return k.into_bytes();
        }
    }
    let Some(dir) = state_dir() else {
        return random_key();
    };
    let path = dir.join("mask.key");
    if let Ok(k) = std::fs::read(&path) {
        if k.len() >= 16 {
            return k;
        }
    }
    let key = random_key();
    let written = std::fs::create_dir_all(&dir).and_then(|_| write_private(&path, &key));
    if written.is_err() {
        // Unwritable state dir: hashes are comparable within this run only.
        return key;
    }
    key
}

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)?.write_all(data)
}

fn random_key() -> Vec<u8> {
    use std::io::Read;
    let mut k = vec![0u8; 32];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut k))
        .is_err()
    {
        // No urandom: derive from the process's randomly seeded hasher state.
        use std::hash::{BuildHasher, Hasher};
        for chunk in k.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(std::process::id() as u64);
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/config")
            .join(name)
    }

    #[test]
    fn valid_config_loads_every_section() {
        let c = Config::load(Some(&fixture("valid.toml"))).expect("valid config");
        assert_eq!(c.theme.as_deref(), Some("high-contrast"));
        assert_eq!(c.sources["orders"].uri, "kafka://127.0.0.1:9092/orders.dlq");
        assert_eq!(c.sources["orders"].kafka["security.protocol"], "SASL_SSL");
        assert_eq!(c.conventions.len(), 1);
        assert_eq!(c.conventions[0].name, "acme");
        assert_eq!(c.masking.extra_fields, vec!["internal_note".to_string()]);
        assert_eq!(c.replay.confirm_above, 20);
        assert_eq!(Config::default().replay.confirm_above, 100);
        assert_eq!(c.payload_cache_mib, Some(32));
        assert_eq!(Config::default().payload_cache_mib, None);
    }

    #[test]
    fn invalid_configs_name_the_problem() {
        for (file, needle) in [
            ("unknown-key.toml", "colour"),
            ("bad-mapping.toml", "json:error"),
            ("bad-field.toml", "reason_cod"),
            ("bad-group.toml", "colour"),
            ("bad-source.toml", "sources.broken.uri"),
            ("bad-mask-class.toml", "emial"),
            ("not-toml.toml", "invalid"),
        ] {
            let err = Config::load(Some(&fixture(file)))
                .expect_err(file)
                .to_string();
            assert!(err.contains(needle), "{file}: {err}");
            assert!(
                err.contains(file),
                "{file}: error should name the file: {err}"
            );
        }
    }

    #[test]
    fn missing_default_is_fine_missing_explicit_is_not() {
        assert!(Config::load(Some(Path::new("/nonexistent/dlq-triage.toml"))).is_err());
    }

    /// The team's policy is a floor: a config tightens it, never loosens it.
    #[test]
    fn the_teams_policy_tightens_and_is_never_loosened() {
        let team = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        // No threshold in the config: the team's applies.
        let mut c = Config::default();
        c.tighten_with(&team(&[("approval_above", "20"), ("confirm_above", "50")]));
        assert_eq!(c.replay.approval_above, Some(20));
        assert_eq!(c.replay.confirm_above, 50);
        // A looser config is tightened; a tighter one is kept.
        let mut c = Config::default();
        c.replay.approval_above = Some(500);
        c.discard.approval_above = Some(5);
        c.tighten_with(&team(&[
            ("approval_above", "20"),
            ("discard_approval_above", "40"),
        ]));
        assert_eq!(c.replay.approval_above, Some(20));
        assert_eq!(c.discard.approval_above, Some(5));
        // Targets: those both allow; the team's where the config names none.
        let mut c = Config::default();
        c.replay.allowed_targets = vec!["invoices".into(), "anything".into()];
        c.tighten_with(&team(&[("allowed_targets", r#"["invoices","orders"]"#)]));
        assert_eq!(c.replay.allowed_targets, vec!["invoices".to_string()]);
        let mut c = Config::default();
        c.tighten_with(&team(&[("allowed_targets", r#"["orders"]"#)]));
        assert_eq!(c.replay.allowed_targets, vec!["orders".to_string()]);
        // What this build does not understand is said, not guessed.
        let notes = Config::default().tighten_with(&team(&[("max_rate", "9")]));
        assert!(notes[0].contains("not understood"), "{notes:?}");
    }
}
