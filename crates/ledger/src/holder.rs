//! The lock that says a replay's sender is alive, held by the engine that outlives the
//! sender's good behaviour: on a file ledger an OS file lock (`flock`) on
//! `<ledger>.locks/<replay>.lock`, which the kernel drops when the process dies; on a
//! team ledger the backend that took the lease, holding a lock on a key the server drew
//! for it (`team_fences`), which the server drops when that connection ends — and which
//! no other session can hold first or pass for. Neither depends on anyone's clock: a
//! frozen but connected holder is never taken for dead, a dead one is at once.

use super::Ledger;
use crate::db::Db;
use crate::p;
use dlq_core::journal::JournalError;
use std::fs::File;
use std::path::PathBuf;

/// What this process holds of a replay it sends: the lease epoch it took (every
/// journal write checks it) and, on a file ledger, the locked file.
pub(crate) struct Holding {
    pub epoch: i64,
    _file: Option<File>,
    /// The connection the advisory lock was taken on (a new one holds nothing).
    generation: u64,
    /// Taken by a transaction that has not committed yet: given up if it rolls back.
    committed: bool,
}

impl Ledger {
    /// Where replay `id`'s lock file lives beside a file ledger.
    fn lock_path(&self, id: &str) -> PathBuf {
        let safe: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut dir = self.path.clone().into_os_string();
        dir.push(".locks");
        PathBuf::from(dir).join(format!("{safe}.lock"))
    }

    /// Take replay `id`'s holder lock for this process with lease `epoch`; `Ok(false)`
    /// when a live process holds it.
    pub(crate) fn hold(&self, tx: &Db, id: &str, epoch: i64) -> Result<bool, JournalError> {
        if let Some(h) = self.holding.borrow_mut().get_mut(id) {
            if h.generation == tx.generation() {
                h.epoch = epoch;
                return Ok(true);
            }
        }
        let file = match tx {
            // The server takes a team ledger's lease itself (`dlq.take_lease`).
            Db::Pg(_) => {
                return Err(self.other(format!(
                    "replay {id}: a team ledger's lease is taken by the server"
                )))
            }
            Db::Sqlite(_) => {
                let path = self.lock_path(id);
                let f = open_lock(&path).map_err(|e| {
                    self.other(format!(
                        "replay {id}'s lock file {}: {e}{}",
                        path.display(),
                        permission_hint(&e)
                    ))
                })?;
                match f.try_lock() {
                    Ok(()) => Some(f),
                    Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
                    Err(std::fs::TryLockError::Error(e)) => {
                        return Err(self.other(format!(
                            "locking replay {id}'s lock file {}: {e}",
                            path.display()
                        )))
                    }
                }
            }
        };
        self.holding.borrow_mut().insert(
            id.to_string(),
            Holding {
                epoch,
                _file: file,
                generation: tx.generation(),
                committed: false,
            },
        );
        Ok(true)
    }

    /// Keep what the server's `dlq.take_lease` took on this session: the lock of replay
    /// `id` under lease `epoch`.
    pub(crate) fn record_hold(&self, tx: &Db, id: &str, epoch: i64) {
        let mut holding = self.holding.borrow_mut();
        match holding.get_mut(id) {
            Some(h) if h.generation == tx.generation() => h.epoch = epoch,
            _ => {
                holding.insert(
                    id.to_string(),
                    Holding {
                        epoch,
                        _file: None,
                        generation: tx.generation(),
                        committed: false,
                    },
                );
            }
        }
    }

    /// Whether a live process (this one included) holds replay `id`'s lock.
    pub(crate) fn held(&self, tx: &Db, id: &str) -> Result<bool, JournalError> {
        if self.holding.borrow().contains_key(id) {
            return Ok(true);
        }
        match tx {
            // The server's answer: the backend that took the lease holds the lock on the
            // key drawn for it (`team_fences`).
            Db::Pg(_) => tx
                .one("SELECT dlq.replay_live(?1)", p![id], |r| r.get(0))
                .map_err(|e| self.err(e)),
            Db::Sqlite(_) => {
                // Read-only is enough for `flock`, so another user's lock file (0644 under
                // umask 022) is read as well as one's own. No file: no holder. Any other
                // error is taken for a holder: a replay is never planned over a lock this
                // process could not read.
                match File::open(self.lock_path(id)) {
                    Ok(f) => Ok(!matches!(f.try_lock(), Ok(()))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(_) => Ok(true),
                }
            }
        }
    }

    /// The lease epoch this process holds of replay `id`, if it sends it.
    pub(crate) fn held_epoch(&self, id: &str) -> Option<i64> {
        self.holding.borrow().get(id).map(|h| h.epoch)
    }

    /// Whether this process took replay `id`'s lock on a connection it has since lost
    /// (the server dropped the lock with it): it holds the replay no longer.
    pub(crate) fn lost_hold(&self, id: &str) -> bool {
        self.holding
            .borrow()
            .get(id)
            .is_some_and(|h| h.generation != self.db.generation())
    }

    /// After a write transaction: locks it took are kept when it committed and given up
    /// when it rolled back (a refused start or takeover holds nothing afterwards).
    pub(crate) fn settle_holdings(&self, committed: bool) {
        let dropped: Vec<String> = {
            let mut holding = self.holding.borrow_mut();
            holding
                .iter_mut()
                .filter(|(_, h)| !h.committed)
                .filter_map(|(id, h)| {
                    h.committed = committed;
                    (!committed).then(|| id.clone())
                })
                .collect()
        };
        for id in dropped {
            self.release(&self.db, &id);
        }
    }

    /// Give replay `id`'s lock up (it ended); its letters are no longer claimed.
    pub(crate) fn release(&self, tx: &Db, id: &str) {
        if self.holding.borrow_mut().remove(id).is_none() {
            return;
        }
        match tx {
            // Every holder lock this session keeps for no replay it sends (this one
            // ended, or its take rolled back).
            Db::Pg(_) => {
                let _ = tx.one("SELECT dlq.replay_release()::int8", p![], |r| {
                    r.get::<i64>(0)
                });
            }
            // Unlocked as the file closes. The file stays: removing it would let a
            // process that opened it just before lock an inode nobody else can see.
            Db::Sqlite(_) => {}
        }
    }
}

/// Replay lock file `path`, opened to be locked: an existing one read-only (`flock` needs
/// no write access, so a teammate's file is as good as one's own), a new one created —
/// group-writable in a shared folder (see `shared`), the lock folder too.
fn open_lock(path: &std::path::Path) -> std::io::Result<File> {
    match File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            // Setgid and sticky: a teammate can lock every replay's file but remove none.
            crate::shared::share(dir, 0o3000);
        }
    }
    match File::options().write(true).create_new(true).open(path) {
        Ok(f) => {
            crate::shared::share(path, 0);
            Ok(f)
        }
        // Created by another process meanwhile: theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => File::open(path),
        Err(e) => Err(e),
    }
}

/// What to do about a lock file this user may not open or create.
fn permission_hint(e: &std::io::Error) -> &'static str {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        " (a file ledger shared by several OS users needs its folder setgid and group-writable: \
         see docs/ledger.md, \"A file ledger shared by a team\")"
    } else {
        ""
    }
}
