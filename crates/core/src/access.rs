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

/// A write the tool makes, to the ledger or a broker. Whether one may be made is decided
/// here, once, for both front ends (`may_write`); the application layer enforces it
/// with its audit (`Principal::require_write`), the front ends only say the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    Discard,
    Replay,
    /// Resuming or abandoning a stopped replay.
    Resume,
    /// Recording revisions with a program.
    Transform,
    /// Recording a revision edited by hand.
    Edit,
    /// Approving or rejecting a request over the team's thresholds.
    Approve,
    SetRoles,
    SetPolicy,
    MigrateLedger,
}

impl WriteOp {
    /// The permission a role needs for it; `None` where the ledger's owner or server
    /// decides (roles, policy, migration).
    pub fn permission(self) -> Option<Permission> {
        match self {
            WriteOp::Discard => Some(Permission::Discard),
            WriteOp::Replay | WriteOp::Resume | WriteOp::Approve => Some(Permission::Replay),
            WriteOp::Transform | WriteOp::Edit => Some(Permission::Edit),
            WriteOp::SetRoles | WriteOp::SetPolicy | WriteOp::MigrateLedger => None,
        }
    }

    /// What it writes, for the `--read-only` refusal.
    fn writes(self) -> &'static str {
        match self {
            WriteOp::Discard => "discard is a write",
            WriteOp::Replay => "replay publishes to the broker",
            WriteOp::Resume => "resuming a replay publishes to the broker",
            WriteOp::Transform => "a transform records revisions",
            WriteOp::Edit => "an edit records a revision",
            WriteOp::Approve => "approve writes the ledger",
            WriteOp::SetRoles => "roles set writes the ledger",
            WriteOp::SetPolicy => "policy set writes the ledger",
            WriteOp::MigrateLedger => "ledger migrate writes the team's ledger",
        }
    }
}

/// Why a write may not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `--read-only` (whatever the role): nothing is written, not even an audit entry.
    ReadOnly(WriteOp),
    /// The role does not allow it (the application layer audits it).
    Role(Denied),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ReadOnly(w) => {
                write!(f, "--read-only: {}; run without --read-only", w.writes())
            }
            Refusal::Role(d) => d.fmt(f),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether `role` may make `write`: `--read-only` first (the clearer reason), then the
/// role.
pub fn may_write(role: Role, read_only: bool, write: WriteOp) -> Result<(), Refusal> {
    if read_only {
        return Err(Refusal::ReadOnly(write));
    }
    match write.permission() {
        Some(p) => check(role, p).map_err(Refusal::Role),
        None => Ok(()),
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

/// What the OS says about the person running the tool, and the files that bind them to a
/// role. Core decides (who may choose a roles file, which role a listing gives); the
/// application layer reads the OS (`dlq_app::identity::System`): core reads no file.
pub trait Os {
    /// The process's real uid (not the effective one: a setuid wrapper must not change
    /// who acts).
    fn real_uid(&self) -> Option<u32>;
    /// The user's groups (supplementary and primary).
    fn groups_of(&self, user: &str) -> Vec<String>;
    /// A file's owner uid and permission bits; `None` when it does not exist.
    fn owner_and_mode(&self, path: &Path) -> Option<(u32, u32)>;
    /// A file's text.
    fn read(&self, path: &Path) -> std::io::Result<String>;
}

/// Which roles file decides. Roles bind people to what they may see and do, so a user
/// must not be able to pick a file they wrote: only root (or a test build) may name one
/// (flag, environment or config); everyone else gets the system file, which must be owned
/// by root and writable by nobody else.
pub fn roles_file_for(
    os: &dyn Os,
    explicit: Option<&Path>,
    overrides_allowed: bool,
) -> Result<Option<PathBuf>, RolesError> {
    if let Some(p) = explicit {
        if os.real_uid() == Some(0) || overrides_allowed {
            return Ok(Some(p.to_path_buf()));
        }
        return Err(RolesError::NotRoot);
    }
    let system = Path::new(DEFAULT_ROLES_FILE);
    match os.owner_and_mode(system) {
        None => Ok(None),
        Some((uid, mode)) if uid != 0 || mode & 0o022 != 0 => Err(RolesError::Unsafe {
            uid,
            mode: mode & 0o777,
        }),
        Some(_) => Ok(Some(system.to_path_buf())),
    }
}

/// Resolve the user's role. `explicit` (flag/env/config) must exist; the default path
/// may be absent (then: operator).
pub fn resolve(
    os: &dyn Os,
    explicit: Option<&Path>,
    user: &str,
    read_only: bool,
) -> Result<Role, RolesError> {
    let path = explicit.unwrap_or(Path::new(DEFAULT_ROLES_FILE));
    let role = match os.read(path) {
        Ok(text) => {
            let f: RolesFile = toml::from_str(&text).map_err(|e| RolesError::Invalid {
                path: path.to_path_buf(),
                message: crate::sanitize::toml_error(&text, &e),
            })?;
            let groups = os.groups_of(user);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An OS of the test's making: a uid, groups per user, files by path.
    #[derive(Default)]
    struct FakeOs {
        uid: Option<u32>,
        groups: HashMap<String, Vec<String>>,
        files: HashMap<PathBuf, (u32, u32, String)>,
    }

    impl Os for FakeOs {
        fn real_uid(&self) -> Option<u32> {
            self.uid
        }
        fn groups_of(&self, user: &str) -> Vec<String> {
            self.groups.get(user).cloned().unwrap_or_default()
        }
        fn owner_and_mode(&self, path: &Path) -> Option<(u32, u32)> {
            self.files.get(path).map(|(u, m, _)| (*u, *m))
        }
        fn read(&self, path: &Path) -> std::io::Result<String> {
            self.files
                .get(path)
                .map(|(_, _, t)| t.clone())
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn os_with(path: &str, text: &str) -> FakeOs {
        let mut os = FakeOs {
            uid: Some(1000),
            ..Default::default()
        };
        os.files
            .insert(PathBuf::from(path), (0, 0o644, text.to_string()));
        os.groups.insert("bob".into(), vec!["oncall".into()]);
        os.groups.insert("carol".into(), vec!["sales".into()]);
        os
    }

    #[test]
    fn roles_from_the_file_and_caps() {
        let p = Path::new("/r/roles.toml");
        let os = os_with(
            "/r/roles.toml",
            "privileged = [\"alice\"]\noperator = [\"group:oncall\"]\nviewer = [\"*\"]\n",
        );
        let r = |u: &str, ro| resolve(&os, Some(p), u, ro);
        assert_eq!(r("alice", false).ok(), Some(Role::Privileged));
        assert_eq!(r("bob", false).ok(), Some(Role::Operator));
        assert_eq!(r("carol", false).ok(), Some(Role::Viewer));
        assert_eq!(
            r("alice", true).ok(),
            Some(Role::Viewer),
            "--read-only caps at viewer"
        );
        let os2 = os_with("/r/roles.toml", "operator = [\"bob\"]\n");
        assert_eq!(
            resolve(&os2, Some(p), "mallory", false).ok(),
            Some(Role::Viewer),
            "unlisted users are viewers"
        );
    }

    #[test]
    fn only_root_chooses_the_roles_file() {
        let mine = Path::new("/home/alice/mine.toml");
        let user = FakeOs {
            uid: Some(1000),
            ..Default::default()
        };
        let err = roles_file_for(&user, Some(mine), false).expect_err("user override");
        assert!(matches!(err, RolesError::NotRoot));
        assert!(err.to_string().contains("only be chosen by root"), "{err}");
        let root = FakeOs {
            uid: Some(0),
            ..Default::default()
        };
        assert_eq!(
            roles_file_for(&root, Some(mine), false).ok(),
            Some(Some(mine.to_path_buf()))
        );
        assert_eq!(
            roles_file_for(&user, Some(mine), true).ok(),
            Some(Some(mine.to_path_buf())),
            "test builds may"
        );
        // The system file decides when it is root's and writable by root alone.
        assert_eq!(roles_file_for(&user, None, false).ok(), Some(None));
        let mut os = os_with(DEFAULT_ROLES_FILE, "");
        assert_eq!(
            roles_file_for(&os, None, false).ok(),
            Some(Some(PathBuf::from(DEFAULT_ROLES_FILE)))
        );
        os.files
            .insert(PathBuf::from(DEFAULT_ROLES_FILE), (0, 0o666, String::new()));
        assert!(matches!(
            roles_file_for(&os, None, false),
            Err(RolesError::Unsafe {
                uid: 0,
                mode: 0o666
            })
        ));
    }

    #[test]
    fn read_only_refuses_every_write_before_the_role_is_asked() {
        for w in [
            WriteOp::Discard,
            WriteOp::Replay,
            WriteOp::Transform,
            WriteOp::SetPolicy,
        ] {
            let r = may_write(Role::Privileged, true, w).expect_err("read-only");
            assert!(matches!(r, Refusal::ReadOnly(_)));
            assert!(r.to_string().starts_with("--read-only: "), "{r}");
        }
        assert!(matches!(
            may_write(Role::Viewer, false, WriteOp::Discard),
            Err(Refusal::Role(Denied {
                permission: Permission::Discard,
                ..
            }))
        ));
        assert_eq!(may_write(Role::Viewer, false, WriteOp::SetPolicy), Ok(()));
        assert_eq!(may_write(Role::Operator, false, WriteOp::Replay), Ok(()));
    }

    #[test]
    fn missing_files_and_checks() {
        let os = os_with("/r/bad.toml", "admins = [\"x\"]\n");
        assert!(resolve(&os, Some(Path::new("/nonexistent/roles.toml")), "a", false).is_err());
        assert_eq!(
            resolve(&os, None, "a", false).ok(),
            Some(Role::Operator),
            "no system file: operator"
        );
        assert!(resolve(&os, Some(Path::new("/r/bad.toml")), "a", false)
            .is_err_and(|e| e.to_string().contains("admins")));
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
