//! Who holds the ledger's write lock, when a write waited for it in vain.
//!
//! A write waits a bounded time for the one writer before it (`LOCK_WAIT` on a file,
//! the server's `lock_timeout` on a team ledger). When that runs out the operator is
//! told who holds the lock and what to do — never a bare "database is locked". On a
//! file ledger nobody can end a stopped process's transaction for it, so the holder is
//! found where the kernel keeps it (SQLite holds its WAL write lock as a POSIX lock on
//! byte 120 of `<ledger>-shm`, listed in `/proc/locks`) and its state read from
//! `/proc/<pid>/stat`: a process stopped by Ctrl-Z or SIGSTOP is named as such, with the
//! two commands that free the ledger. On a team ledger the server names the session
//! (`pg_locks`, `pg_stat_activity`: the tool's sessions carry `dlq-triage <pid>@<host>`
//! as their application name).

use super::Ledger;
use crate::db::{Db, DbError};
use crate::host::state_words;
use crate::p;
use dlq_core::journal::JournalError;
use dlq_core::sanitize::clean;

/// The byte of `<db>-shm` SQLite locks for writing (WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK).
const WAL_WRITE_LOCK_BYTE: u64 = 120;

/// The pid whose POSIX write lock covers `byte` of the file with (`dev`, `ino`), from
/// `/proc/locks` (lines `N: POSIX ADVISORY WRITE <pid> <maj>:<min>:<ino> <start> <end>`;
/// waiters are marked `->` and skipped).
fn posix_write_lock_holder(locks: &str, dev: (u64, u64), ino: u64, byte: u64) -> Option<i64> {
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) == Some(&"->") || f.get(1) != Some(&"POSIX") || f.get(3) != Some(&"WRITE") {
            return None;
        }
        let pid: i64 = f.get(4)?.parse().ok()?;
        let mut id = f.get(5)?.split(':');
        let maj = u64::from_str_radix(id.next()?, 16).ok()?;
        let min = u64::from_str_radix(id.next()?, 16).ok()?;
        let file_ino: u64 = id.next()?.parse().ok()?;
        let start: u64 = f.get(6)?.parse().ok()?;
        let end = match *f.get(7)? {
            "EOF" => u64::MAX,
            e => e.parse().ok()?,
        };
        ((maj, min) == dev && file_ino == ino && start <= byte && byte <= end).then_some(pid)
    })
}

/// glibc's major/minor of a `st_dev`.
fn dev_parts(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    (major, minor)
}

impl Ledger {
    /// `e` as an operator reads it: a write that waited in vain names who holds the lock.
    pub(crate) fn busy_or(&self, e: DbError) -> JournalError {
        if !e.is_busy() {
            return self.err(e);
        }
        let holder = match &self.db {
            Db::Sqlite(_) => self.file_writer(),
            Db::Pg(_) => self.server_writer(),
        };
        JournalError::Busy {
            path: self.location(),
            holder,
        }
    }

    /// The process holding a file ledger's write lock, its state and its replay.
    fn file_writer(&self) -> String {
        use std::os::unix::fs::MetadataExt;
        let mut shm = self.path.clone().into_os_string();
        shm.push("-shm");
        let pid = std::fs::metadata(&shm).ok().and_then(|m| {
            let locks = std::fs::read_to_string("/proc/locks").ok()?;
            posix_write_lock_holder(&locks, dev_parts(m.dev()), m.ino(), WAL_WRITE_LOCK_BYTE)
        });
        let wait = crate::LOCK_WAIT.as_secs();
        let Some(pid) = pid.filter(|p| *p != i64::from(std::process::id())) else {
            return format!(
                "another process has held its write lock for more than {wait} s \
                 (`fuser -v {}` names it); nothing was recorded",
                clean(&std::path::Path::new(&shm).display().to_string())
            );
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| clean(c.trim()))
            .unwrap_or_else(|_| "?".into());
        let replay = self
            .db
            .opt(
                "SELECT id, actor FROM replays WHERE state = 'running' AND lease_pid = ?1 AND lease_host = ?2",
                p![pid, crate::host::this_host()],
                |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
            )
            .ok()
            .flatten()
            .map(|(id, actor)| format!(", sending replay {} for {}", clean(&id), clean(&actor)))
            .unwrap_or_default();
        format!(
            "pid {pid} ({comm}{replay}) has held its write lock for more than {wait} s and is {}; \
             nothing was recorded — try again once it is free{}",
            state_words(pid).unwrap_or_else(|| "running".into()),
            if replay.is_empty() {
                ""
            } else {
                " (a replay whose process was ended can be taken over with `--resume`)"
            }
        )
    }

    /// The session holding a team ledger's write lock (the audit table's), as the server
    /// reports it: its database role — who it is, whatever it calls itself — its server
    /// pid, and the name its client gave.
    fn server_writer(&self) -> String {
        // The failed write was rolled back: this connection can ask.
        let row = self.db.opt(
            "SELECT a.pid::int8, COALESCE(a.usename::text, ''), COALESCE(a.application_name, ''), \
             COALESCE(a.state, ''), \
             COALESCE(EXTRACT(EPOCH FROM (pg_catalog.clock_timestamp() - a.xact_start))::int8, -1) \
             FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'relation' AND l.relation = 'dlq.audit'::pg_catalog.regclass \
             AND l.granted AND l.mode = 'ShareRowExclusiveLock' LIMIT 1",
            p![],
            |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<String>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                    r.get::<i64>(4)?,
                ))
            },
        );
        let Ok(Some((server_pid, role, app, state, held_s))) = row else {
            return "another session held its write lock past `lock_timeout` and has let it go; \
                    nothing was recorded — try again"
                .into();
        };
        let app = if app.is_empty() {
            String::new()
        } else {
            format!(", client `{}`", clean(&app))
        };
        let how_long = if held_s >= 0 {
            format!(" for {held_s} s")
        } else {
            String::new()
        };
        let state = if state.is_empty() || state.starts_with('<') {
            String::new()
        } else {
            format!(", {}", clean(&state))
        };
        format!(
            "the team ledger is busy: database role {} (server pid {server_pid}{app}) has held its \
             write lock{how_long}{state}; nothing was recorded. A session idle in its transaction \
             for more than {} s is ended by the next writer (where the ledger's owner holds \
             pg_signal_backend and pg_read_all_stats), and this tool's own sessions by the server \
             after {} s — try again, or ask the server's admin (`SELECT pg_terminate_backend({server_pid})`)",
            clean(&role),
            crate::team_fences::STALLED_AFTER_S,
            crate::IDLE_IN_TRANSACTION.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{proc_state, ProcState};

    #[test]
    fn the_write_lock_holder_is_found_in_proc_locks_and_waiters_are_not() {
        let locks = "\
1: POSIX  ADVISORY  READ 77 08:01:999 128 128
2: POSIX  ADVISORY  WRITE 4211 08:01:999 120 120
2: -> POSIX  ADVISORY  WRITE 5000 08:01:999 120 120
3: FLOCK  ADVISORY  WRITE 12 08:01:999 0 EOF
";
        assert_eq!(posix_write_lock_holder(locks, (8, 1), 999, 120), Some(4211));
        assert_eq!(posix_write_lock_holder(locks, (8, 1), 998, 120), None);
        assert_eq!(posix_write_lock_holder(locks, (8, 2), 999, 120), None);
        assert_eq!(posix_write_lock_holder(locks, (8, 1), 999, 121), None);
    }

    #[test]
    fn this_process_runs_and_a_stopped_child_reads_stopped() {
        assert_eq!(
            proc_state(i64::from(std::process::id())),
            ProcState::Running
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = i64::from(child.id());
        std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .expect("kill");
        // The stop is delivered before `kill` returns only to a running target; poll
        // the state itself (no timing asserted).
        let mut state = proc_state(pid);
        for _ in 0..1000 {
            if state == ProcState::Stopped {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            state = proc_state(pid);
        }
        assert_eq!(state, ProcState::Stopped);
        assert!(state_words(pid)
            .unwrap_or_default()
            .contains(&format!("kill -CONT {pid}")));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(proc_state(i64::MAX), ProcState::Gone);
    }
}
