//! Passwords kept out of argv. A password in a source URI or a `-X` flag is readable by
//! every user of the host in `/proc/PID/cmdline` and lands in shell history; so a URI may
//! name the user only (`amqp://alice@rabbit/…`), and the password comes from, in order:
//! `DLQ_TRIAGE_AMQP_PASSWORD` / `DLQ_TRIAGE_KAFKA_PASSWORD`, then the credentials file
//! `$XDG_CONFIG_HOME/dlq-triage/credentials.toml`, which must be owned by you and
//! readable by nobody else (0600):
//!
//! ```toml
//! [amqp]
//! "alice@rabbit.internal" = "…"      # user@host of the amqp URI
//! [kafka]
//! "alice@broker1:9093" = "…"         # sasl.username@first bootstrap server
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    amqp: BTreeMap<String, String>,
    #[serde(default)]
    kafka: BTreeMap<String, String>,
}

/// Which broker a password is for.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Amqp,
    Kafka,
}

/// The default credentials file.
pub fn default_path() -> Option<PathBuf> {
    crate::config::config_dir().map(|d| d.join("credentials.toml"))
}

/// The password for `user@host`, from the environment, then the credentials file.
/// `Ok(None)`: none anywhere. A credentials file others can read is refused.
pub fn lookup(
    kind: Kind,
    user: &str,
    host: &str,
    file: Option<&Path>,
) -> Result<Option<String>, String> {
    let var = match kind {
        Kind::Amqp => "DLQ_TRIAGE_AMQP_PASSWORD",
        Kind::Kafka => "DLQ_TRIAGE_KAFKA_PASSWORD",
    };
    if let Some(p) = std::env::var(var).ok().filter(|p| !p.is_empty()) {
        return Ok(Some(p));
    }
    let Some(path) = file else { return Ok(None) };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("credentials file {}: {e}", path.display())),
    };
    check_private(path)?;
    let f: File = toml::from_str(&text).map_err(|e| {
        // toml's message may quote the offending line: a password. Say where only.
        let at = e
            .span()
            .map(|s| format!(" (at byte {})", s.start))
            .unwrap_or_default();
        format!("credentials file {} is not valid TOML{at}", path.display())
    })?;
    let table = match kind {
        Kind::Amqp => &f.amqp,
        Kind::Kafka => &f.kafka,
    };
    Ok(table.get(&format!("{user}@{host}")).cloned())
}

/// Owned by the real user, no group or other permissions.
fn check_private(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mine = dlq_core::access::Os::real_uid(&crate::identity::System) == Some(m.uid());
        if !mine || m.mode() & 0o077 != 0 {
            return Err(format!(
                "credentials file {} must be yours and private (chmod 600); it is mode {:o}",
                path.display(),
                m.mode() & 0o777
            ));
        }
    }
    Ok(())
}

/// Whether an environment variable may carry one of the tool's secrets: the PostgreSQL
/// password and pgpass file, and every `DLQ_TRIAGE_*` variable (passwords, tokens, and
/// URLs that may hold userinfo — the ledger, the schema registry).
pub fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("DLQ_TRIAGE_") || matches!(upper.as_str(), "PGPASSWORD" | "PGPASSFILE")
}

/// Remove the tool's secrets from a child's environment (`watch --exec`, the editor, the
/// pager): a hook that prints its environment shows none of them.
pub fn scrub_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_none_or(is_secret_env) {
            cmd.env_remove(&name);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_come_from_a_private_file_never_a_shared_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("credentials.toml");
        std::fs::write(&p, "[amqp]\n\"alice@rabbit\" = \"s3cret\"\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = lookup(Kind::Amqp, "alice", "rabbit", Some(&p)).expect_err("shared file");
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(
            lookup(Kind::Amqp, "alice", "rabbit", Some(&p)),
            Ok(Some("s3cret".into()))
        );
        assert_eq!(lookup(Kind::Kafka, "alice", "rabbit", Some(&p)), Ok(None));
        std::fs::write(&p, "[amqp]\n\"alice@rabbit\" = s3cret-unquoted\n").expect("write");
        let err = lookup(Kind::Amqp, "alice", "rabbit", Some(&p)).expect_err("bad toml");
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn the_tools_secrets_are_told_from_other_settings() {
        for secret in [
            "PGPASSWORD",
            "PGPASSFILE",
            "DLQ_TRIAGE_AMQP_PASSWORD",
            "DLQ_TRIAGE_LEDGER",
            "dlq_triage_x",
        ] {
            assert!(is_secret_env(secret), "{secret}");
        }
        for other in ["PATH", "HOME", "PGHOST", "LESS"] {
            assert!(!is_secret_env(other), "{other}");
        }
    }
}
