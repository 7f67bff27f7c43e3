//! Who is acting, from the OS — never from the environment.

use dlq_core::access::Os;
use std::path::Path;

/// The OS as it is: `/proc/self/status`, `/etc/passwd`, `/etc/group`, file metadata.
pub struct System;

impl Os for System {
    fn real_uid(&self) -> Option<u32> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|u| u.parse().ok())
    }

    /// From /etc/group (and the primary group from /etc/passwd).
    fn groups_of(&self, user: &str) -> Vec<String> {
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

    fn owner_and_mode(&self, path: &Path) -> Option<(u32, u32)> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some((m.uid(), m.mode()))
        }
        #[cfg(not(unix))]
        {
            let _ = m;
            Some((0, 0o644))
        }
    }

    fn read(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// Who is acting: the account of the process's real uid, from the OS — never from the
/// environment (`USER=alice` must not make anyone alice in the audit log). Test builds
/// (feature `test-hooks`) may set `DLQ_TRIAGE_ACTOR` to play several people.
pub fn current_actor() -> String {
    if cfg!(any(test, feature = "test-hooks")) {
        if let Some(a) = std::env::var("DLQ_TRIAGE_ACTOR")
            .ok()
            .filter(|a| !a.is_empty())
        {
            return a;
        }
    }
    let uid = System.real_uid();
    uid.and_then(account_name)
        .or_else(|| uid.map(|u| format!("uid:{u}")))
        .unwrap_or_else(|| "unknown".into())
}

/// A replay's state as an operator needs it: `running` with nobody holding its lock is
/// `interrupted` (see `ReplayRow::shown_state`: the ledger's lock, never `/proc`).
pub fn replay_state(row: &dlq_core::journal::ReplayRow) -> dlq_core::journal::ReplayState {
    row.shown_state()
}

/// The account name of a uid from /etc/passwd (no environment needed: cron, tmux, sudo).
fn account_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2].parse() == Ok(uid)).then(|| f[0].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_says_who_runs_the_tool() {
        let uid = System.real_uid().expect("a real uid from /proc");
        assert!(account_name(uid).is_some() || current_actor() == format!("uid:{uid}"));
        assert!(System.groups_of("root").iter().any(|g| g == "root"));
        assert_eq!(
            System.owner_and_mode(Path::new("/nonexistent/roles.toml")),
            None
        );
    }
}
