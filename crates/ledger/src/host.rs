//! This host and its processes, as the kernel says: the host a lease names, and the state
//! of a process that holds a lock (stopped by Ctrl-Z, in a disk wait, gone).

/// This host's name, as leases record it.
pub(crate) fn this_host() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// A process as `/proc/<pid>/stat` says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcState {
    /// Stopped by a signal (Ctrl-Z, SIGSTOP) or a debugger.
    Stopped,
    /// In an uninterruptible wait (a disk, a hung network file system).
    DiskWait,
    Running,
    Gone,
}

/// The state of process `pid` on this host.
pub(crate) fn proc_state(pid: i64) -> ProcState {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ProcState::Gone;
    };
    // `pid (comm) S …`: comm may hold spaces and parentheses, the state follows the last `)`.
    match stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
    {
        Some('T' | 't') => ProcState::Stopped,
        Some('D') => ProcState::DiskWait,
        Some('Z' | 'X') | None => ProcState::Gone,
        Some(_) => ProcState::Running,
    }
}

/// How a live holder's state reads in a message, and what frees what it holds — only
/// what this host can tell for sure (stopped, in a disk wait); `None` otherwise (running,
/// or not visible from here: another pid namespace, `hidepid=2`).
pub(crate) fn state_words(pid: i64) -> Option<String> {
    match proc_state(pid) {
        ProcState::Stopped => Some(format!(
            "stopped (Ctrl-Z or SIGSTOP): `kill -CONT {pid}` lets it go on, `kill {pid}` ends it"
        )),
        ProcState::DiskWait => Some("waiting on a disk or a network file system".into()),
        ProcState::Running | ProcState::Gone => None,
    }
}
