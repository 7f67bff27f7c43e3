//! A process under test frozen and let go as an operator's shell (Ctrl-Z, `fg`), a
//! paused VM or `kill -STOP` would: signals sent to its own pid, and its stopped state
//! read from `/proc` — a state to wait for, never a time.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Send `sig` (`STOP`, `CONT`, `TSTP`, …) to process `pid`.
pub fn signal(sig: &str, pid: u32) {
    assert!(Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("kill runs")
        .success());
}

/// Whether process `pid` is stopped (`T` in `/proc/<pid>/stat`).
pub fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.trim_start().chars().next())
        })
        .is_some_and(|c| c == 'T')
}

/// Wait until `child` has stopped (itself, at a seeded point, or by a signal). The bound
/// only keeps a broken build from hanging the suite; nothing is asserted on time.
pub fn wait_stopped(child: &mut Child) {
    let started = Instant::now();
    while !stopped(child.id()) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the process ended ({status}) before it stopped");
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the process never stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
