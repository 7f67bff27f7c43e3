//! The log: `tracing` events to a file under the XDG state directory, appended, mode
//! 0600. Off unless asked for (`--log-level`, default `warn` writes only problems). What
//! is logged is chosen at each call site and never includes payload bytes; letter-derived
//! text is sanitized before it is logged.

use std::path::PathBuf;

/// The log file, with this invocation's secrets redacted from every line written
/// (`dlq_core::secrets`: a library's error quoted into an event is caught here too).
struct Scrubbed(std::fs::File);

impl std::io::Write for Scrubbed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0
            .write_all(dlq_core::secrets::scrub(&text).as_bytes())
            .map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Where the log goes: `$XDG_STATE_HOME/dlq-triage/dlq-triage.log`.
pub fn log_path() -> Option<PathBuf> {
    crate::config::state_dir().map(|d| d.join("dlq-triage.log"))
}

/// Start logging at `level` (`off`, `error`, `warn`, `info`, `debug`). A log that cannot
/// be opened is not an error: the tool runs without it, and says so once.
pub fn init(level: &str) -> Result<(), String> {
    let filter = match level {
        "off" => return Ok(()),
        "error" => tracing::Level::ERROR,
        "warn" => tracing::Level::WARN,
        "info" => tracing::Level::INFO,
        "debug" => tracing::Level::DEBUG,
        other => {
            return Err(format!(
                "--log-level takes off, error, warn, info or debug, not `{}`",
                dlq_core::sanitize::clean(other)
            ))
        }
    };
    let Some(path) = log_path() else {
        return Ok(());
    };
    let file = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| {
            let mut o = std::fs::OpenOptions::new();
            o.create(true).append(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            o.open(&path)
        });
    match file {
        Ok(f) => {
            let _ = tracing_subscriber::fmt()
                .with_writer(std::sync::Mutex::new(Scrubbed(f)))
                .with_ansi(false)
                .with_max_level(filter)
                .try_init();
        }
        Err(e) => eprintln!(
            "note: no log ({}: {e})",
            dlq_core::sanitize::clean(&path.display().to_string())
        ),
    }
    Ok(())
}
