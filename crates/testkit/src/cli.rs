//! The built binary in a scratch home: its own config and state directories, nothing
//! of the caller's `DLQ_TRIAGE_*` environment, no standard input — and its exit code
//! and output checked with the output shown when they are not what the test expected.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The caller's settings that would change what the binary does under test.
const LEAKS: [&str; 8] = [
    "DLQ_TRIAGE_CONFIG",
    "DLQ_TRIAGE_LEDGER",
    "DLQ_TRIAGE_ROLES_FILE",
    "DLQ_TRIAGE_READ_ONLY",
    "DLQ_TRIAGE_GROUP_BY",
    "DLQ_TRIAGE_ACTOR",
    "DLQ_TRIAGE_NOW",
    "NO_COLOR",
];

/// The binary (`env!("CARGO_BIN_EXE_dlq-triage")` of the calling test) with a scratch
/// home, and settings every command of a test shares.
pub struct Cli {
    bin: PathBuf,
    pub dir: tempfile::TempDir,
    env: Vec<(String, std::ffi::OsString)>,
}

impl Cli {
    pub fn new(bin: &str) -> Self {
        Cli {
            bin: bin.into(),
            dir: tempfile::tempdir().expect("tempdir"),
            env: Vec::new(),
        }
    }

    /// One more setting for every command (`DLQ_TRIAGE_NOW`, the actor under
    /// `test-hooks`, a ledger path).
    pub fn with(mut self, key: &str, value: impl Into<std::ffi::OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write this home's `config.toml`.
    pub fn config(&self, toml: &str) {
        let dir = self.path().join("config/dlq-triage");
        std::fs::create_dir_all(&dir).expect("config dir");
        std::fs::write(dir.join("config.toml"), toml).expect("config");
    }

    /// The ledger the binary opens by default in this home.
    pub fn default_ledger(&self) -> PathBuf {
        self.path().join("state/dlq-triage/ledger.db")
    }

    /// The command, not yet run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        // In the scratch directory: a relative path the tool writes (a ledger named by a
        // mistaken argument) lands there, never in the checkout.
        c.args(args)
            .current_dir(self.path())
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("XDG_STATE_HOME", self.path().join("state"))
            .stdin(Stdio::null());
        for k in LEAKS {
            c.env_remove(k);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("the binary runs")
    }
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The run ended with `code` (its standard error shown if not); its standard output.
pub fn exited(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit {:?}, stderr:\n{}",
        o.status.code(),
        stderr(o)
    );
    stdout(o)
}

/// The run succeeded and printed one JSON document.
pub fn json(o: &Output) -> serde_json::Value {
    let out = exited(o, 0);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

/// The approval id a refused big action names (`… dlq-triage approve ID …`).
pub fn approval_id(said: &str) -> String {
    said.split('`')
        .find_map(|w| w.strip_prefix("dlq-triage approve "))
        .unwrap_or_else(|| panic!("no approval id in: {said}"))
        .to_string()
}
