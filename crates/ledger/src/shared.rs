//! A file ledger shared by a group of OS users: its folder is setgid, sticky and
//! group-writable (docs/ledger.md, "A file ledger shared by a team"), and everything the
//! tool creates
//! in it — the database, its key, the lock folder and each replay's lock file — is made
//! group-readable and -writable whatever the creator's umask, so a teammate with umask
//! 022 neither locks the others out nor is taken for "no holder". At open, the modes are
//! checked and a wrong one is named with the command that fixes it.

use std::path::Path;

/// What this process may do, as the kernel will judge it: its uid and every gid.
struct Me {
    uid: u32,
    gids: Vec<u32>,
}

impl Me {
    /// From `/proc/self/status` (`Uid:` real, `Gid:` and `Groups:`). `None` off Linux.
    fn now() -> Option<Me> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let field = |name: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|rest| {
                    rest.split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        // The effective ids decide access (the second column).
        let uid = *field("Uid:").get(1)?;
        let mut gids = field("Groups:");
        gids.extend(field("Gid:").get(1));
        Some(Me { uid, gids })
    }

    /// Whether the mode bits of a file owned by `uid`:`gid` grant `want` (4 read, 2
    /// write) to this process. Root may do anything.
    fn may(&self, uid: u32, gid: u32, mode: u32, want: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let bits = if uid == self.uid {
            mode >> 6
        } else if self.gids.contains(&gid) {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }
}

/// Whether `dir` is set up to be shared by a group: setgid (new files take its group).
pub(crate) fn is_shared_folder(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.mode() & 0o2000 != 0)
}

/// Make `path` (just created by this process in a shared folder) readable and writable
/// by the group — `extra` adds bits (the setgid bit of a folder). Nothing outside one.
pub(crate) fn share(path: &Path, extra: u32) {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = path.parent() else { return };
    if !is_shared_folder(dir) {
        return;
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o7777;
        let _ =
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o060 | extra));
    }
}

/// The modes of a file ledger's parts checked for this process: the database and its
/// WAL files (read and write), its key (read), the lock folder (write). The first part it
/// may not use, named with its mode and owner and the command that fixes it.
pub(crate) fn check(ledger: &Path, key: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let Some(me) = Me::now() else { return Ok(()) };
    let mut locks = ledger.as_os_str().to_owned();
    locks.push(".locks");
    let mut wal = ledger.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = ledger.as_os_str().to_owned();
    shm.push("-shm");
    let parts: [(&Path, u32, &str, &str); 5] = [
        (ledger, 6, "the ledger", "g+rw"),
        (Path::new(&wal), 6, "the ledger's write-ahead log", "g+rw"),
        (
            Path::new(&shm),
            6,
            "the ledger's shared-memory index",
            "g+rw",
        ),
        (key, 4, "the ledger's audit key", "g+r"),
        (Path::new(&locks), 3, "the ledger's lock folder", "g+rwxs"),
    ];
    // A shared folder must be sticky too: otherwise any member may remove (or rename)
    // another's replay lock file, and a live replay would be taken for free.
    for dir in [ledger.parent(), Some(Path::new(&locks))]
        .into_iter()
        .flatten()
    {
        let Ok(m) = std::fs::metadata(dir) else {
            continue;
        };
        if m.is_dir() && m.mode() & 0o2000 != 0 && m.mode() & 0o1000 == 0 {
            return Err(format!(
                "the shared folder {} is not sticky (mode {:04o}): any member of its group could remove another's replay lock and take a live replay over. `chmod +t {}`; see docs/ledger.md, \"A file ledger shared by a team\"",
                dir.display(),
                m.mode() & 0o7777,
                dir.display()
            ));
        }
    }
    for (path, want, what, fix) in parts {
        let Ok(m) = std::fs::metadata(path) else {
            continue; // not created yet: created shared (see `share`)
        };
        if me.may(m.uid(), m.gid(), m.mode(), want) {
            continue;
        }
        let verb = match want {
            4 => "read",
            3 => "create lock files in",
            _ => "write",
        };
        return Err(format!(
            "{what} {} is mode {:04o}, owned by uid {} and gid {}: this user (uid {}) cannot {verb} it. \
             A file ledger shared by a group needs every part group-{}: `chgrp -R GROUP {dir} && chmod {fix} {}` \
             and the folder setgid (`chmod g+s {dir}`); see docs/ledger.md, \"A file ledger shared by a team\"",
            path.display(),
            m.mode() & 0o7777,
            m.uid(),
            m.gid(),
            me.uid,
            if want == 4 { "readable" } else { "writable" },
            path.display(),
            dir = path.parent().map(|d| d.display().to_string()).unwrap_or_else(|| ".".into()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_bits_decide_for_a_member_and_other_bits_for_a_stranger() {
        let me = Me {
            uid: 1001,
            gids: vec![100, 4000],
        };
        // Another user's 0644 file: readable, not writable.
        assert!(me.may(1002, 4000, 0o644, 4));
        assert!(!me.may(1002, 4000, 0o644, 2));
        // Group-writable: writable by a member, not by a stranger.
        assert!(me.may(1002, 4000, 0o664, 6));
        assert!(!me.may(1002, 5000, 0o664, 2));
        // One's own 0600 file.
        assert!(me.may(1001, 5000, 0o600, 6));
    }

    #[test]
    fn a_teammates_private_key_is_named_with_the_fix() {
        let dir = tempfile::tempdir().expect("tmp");
        let ledger = dir.path().join("ledger.db");
        let key = dir.path().join("ledger.db.key");
        std::fs::write(&ledger, b"").expect("ledger");
        std::fs::write(&key, b"k").expect("key");
        // As root every mode is fine: nothing to say.
        if Me::now().is_some_and(|m| m.uid == 0) {
            assert!(check(&ledger, &key).is_ok());
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let e = check(&ledger, &key).expect_err("unreadable key");
        assert!(e.contains("audit key") && e.contains("chmod g+r"), "{e}");
    }
}
