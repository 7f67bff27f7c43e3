//! Roles and the one permission check used by the CLI and the TUI.
//!
//! `viewer`: metadata and groups only — no payload, no actions. `operator`: masked
//! payloads, discard, replay, edit. `privileged`: also unmask. Without a roles file
//! everyone is an operator; with one, users it does not list are viewers. `--read-only`
//! caps anyone at viewer.

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Viewer,
    Operator,
    Privileged,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Privileged => "privileged",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See payloads (masked): previews, show, diff, export, the payload tab.
    ViewPayload,
    Discard,
    Replay,
    Edit,
    /// See a payload unmasked (with a reason, audited).
    Unmask,
}

impl Permission {
    pub fn needs(self) -> Role {
        match self {
            Permission::Unmask => Role::Privileged,
            _ => Role::Operator,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Permission::ViewPayload => "seeing payloads",
            Permission::Discard => "discarding",
            Permission::Replay => "replaying",
            Permission::Edit => "editing payloads",
            Permission::Unmask => "unmasking",
        }
    }
}

/// A refused action: what was asked, what it needs, what the user has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub permission: Permission,
    pub needed: Role,
    pub have: Role,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs the {} role; you are {}",
            self.permission.describe(),
            self.needed,
            self.have
        )
    }
}

pub fn check(role: Role, p: Permission) -> Result<(), Denied> {
    if role >= p.needs() {
        Ok(())
    } else {
        Err(Denied {
            permission: p,
            needed: p.needs(),
            have: role,
        })
    }
}

/// `roles.toml`: who has which role, by user name, `group:NAME`, or `*`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolesFile {
    #[serde(default)]
    pub privileged: Vec<String>,
    #[serde(default)]
    pub operator: Vec<String>,
    /// Accepted so a file can list viewers explicitly; anyone not listed above is a
    /// viewer anyway.
    #[serde(default)]
    #[allow(dead_code)]
    pub viewer: Vec<String>,
}

/// The default roles file, used when it exists.
pub const DEFAULT_ROLES_FILE: &str = "/etc/dlq-triage/roles.toml";

/// Why the roles could not be decided. Every variant stops the command: without roles
/// nobody can be told what they may do.
#[derive(Debug, thiserror::Error)]
pub enum RolesError {
    #[error("a roles file can only be chosen by root: roles come from {DEFAULT_ROLES_FILE} (remove --roles-file, DLQ_TRIAGE_ROLES_FILE or roles_file in config)")]
    NotRoot,
    #[error("{DEFAULT_ROLES_FILE} must be owned by root and writable by root only (it is uid {uid} mode {mode:o}): fix it with chown root: and chmod 644")]
    Unsafe { uid: u32, mode: u32 },
    #[error("roles file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("roles file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The process's real uid (not the effective one: a setuid wrapper must not change who
/// acts), from /proc.
pub fn real_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

/// Which roles file decides. Roles bind people to what they may see and do, so a user
/// must not be able to pick a file they wrote: only root (or a test build) may name one
/// (flag, environment or config); everyone else gets the system file, which must be owned
/// by root and writable by nobody else.
pub fn roles_file_for(
    explicit: Option<&Path>,
    uid: Option<u32>,
    overrides_allowed: bool,
) -> Result<Option<PathBuf>, RolesError> {
    if let Some(p) = explicit {
        if uid == Some(0) || overrides_allowed {
            return Ok(Some(p.to_path_buf()));
        }
        return Err(RolesError::NotRoot);
    }
    let system = Path::new(DEFAULT_ROLES_FILE);
    match std::fs::metadata(system) {
        Err(_) => Ok(None),
        Ok(m) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                if m.uid() != 0 || m.mode() & 0o022 != 0 {
                    return Err(RolesError::Unsafe {
                        uid: m.uid(),
                        mode: m.mode() & 0o777,
                    });
                }
            }
            #[cfg(not(unix))]
            let _ = m;
            Ok(Some(system.to_path_buf()))
        }
    }
}

/// Resolve the user's role. `explicit` (flag/env/config) must exist; the default path
/// may be absent (then: operator).
pub fn resolve(
    explicit: Option<&Path>,
    user: &str,
    groups: &[String],
    read_only: bool,
) -> Result<Role, RolesError> {
    let path = explicit.unwrap_or(Path::new(DEFAULT_ROLES_FILE));
    let role = match std::fs::read_to_string(path) {
        Ok(text) => {
            let f: RolesFile = toml::from_str(&text).map_err(|e| RolesError::Invalid {
                path: path.to_path_buf(),
                message: crate::sanitize::toml_error(&text, &e),
            })?;
            let listed = |list: &[String]| {
                list.iter().any(|e| {
                    e == "*"
                        || e == user
                        || e.strip_prefix("group:")
                            .is_some_and(|g| groups.iter().any(|x| x == g))
                })
            };
            if listed(&f.privileged) {
                Role::Privileged
            } else if listed(&f.operator) {
                Role::Operator
            } else {
                Role::Viewer
            }
        }
        Err(e) if explicit.is_none() && e.kind() == std::io::ErrorKind::NotFound => Role::Operator,
        Err(source) => {
            return Err(RolesError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    Ok(if read_only {
        role.min(Role::Viewer)
    } else {
        role
    })
}

/// The user's groups from /etc/group (and the primary group from /etc/passwd).
pub fn os_groups(user: &str) -> Vec<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let primary_gid = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == user).then(|| f[3].to_string())
    });
    group
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let member = f.get(3).is_some_and(|m| m.split(',').any(|u| u == user));
            let primary = f
                .get(2)
                .is_some_and(|gid| Some(gid.to_string()) == primary_gid);
            (f.len() > 2 && (member || primary)).then(|| f[0].to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("roles.toml");
        std::fs::write(&p, text).expect("write");
        (d, p)
    }

    #[test]
    fn roles_from_the_file_and_caps() {
        let (_d, p) =
            file("privileged = [\"alice\"]\noperator = [\"group:oncall\"]\nviewer = [\"*\"]\n");
        let r = |u: &str, g: &[&str], ro| {
            resolve(
                Some(&p),
                u,
                &g.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                ro,
            )
        };
        assert_eq!(r("alice", &[], false).ok(), Some(Role::Privileged));
        assert_eq!(r("bob", &["oncall"], false).ok(), Some(Role::Operator));
        assert_eq!(r("carol", &["sales"], false).ok(), Some(Role::Viewer));
        assert_eq!(
            r("alice", &[], true).ok(),
            Some(Role::Viewer),
            "--read-only caps at viewer"
        );
        let (_d2, p2) = file("operator = [\"bob\"]\n");
        assert_eq!(
            resolve(Some(&p2), "mallory", &[], false).ok(),
            Some(Role::Viewer),
            "unlisted users are viewers"
        );
    }

    #[test]
    fn only_root_chooses_the_roles_file() {
        let mine = Path::new("/home/alice/mine.toml");
        let err = roles_file_for(Some(mine), Some(1000), false).expect_err("user override");
        assert!(matches!(err, RolesError::NotRoot));
        assert!(err.to_string().contains("only be chosen by root"), "{err}");
        assert_eq!(
            roles_file_for(Some(mine), Some(0), false).ok(),
            Some(Some(mine.to_path_buf()))
        );
        assert_eq!(
            roles_file_for(Some(mine), Some(1000), true).ok(),
            Some(Some(mine.to_path_buf())),
            "test builds may"
        );
        assert!(real_uid().is_some());
    }

    #[test]
    fn missing_files_and_checks() {
        assert!(resolve(Some(Path::new("/nonexistent/roles.toml")), "a", &[], false).is_err());
        let (_d, bad) = file("admins = [\"x\"]\n");
        assert!(
            resolve(Some(&bad), "a", &[], false).is_err_and(|e| e.to_string().contains("admins"))
        );
        assert_eq!(check(Role::Operator, Permission::Discard), Ok(()));
        let denied =
            check(Role::Operator, Permission::Unmask).expect_err("operators cannot unmask");
        assert_eq!(
            denied.to_string(),
            "unmasking needs the privileged role; you are operator"
        );
        assert!(check(Role::Viewer, Permission::ViewPayload).is_err());
    }
}
