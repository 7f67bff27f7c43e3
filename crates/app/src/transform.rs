//! One jq program over a selection of letters, each changed letter recorded as a
//! revision (`transform` in the CLI, `T` in the TUI): the fix for a whole group at
//! once, where an edit fixes one letter.
//!
//! Each letter's base is its latest revision, else its payload (the decoded form where
//! a schema decodes it). The program runs in a worker process (`dlq-transform`), bounded
//! per letter; what it produces is never shown unmasked — the sample diff masks by
//! field name, by detector, and follows values copied out of masked fields. Recording
//! is batched and resumable: a letter whose latest revision came from the same program
//! counts as `already` and is not recorded again, so running the command again after a
//! kill records only what is missing.

use crate::session::{SessionError, Settings};
use dlq_core::access::Permission;
use dlq_core::diff::{self, Change, Diff};
use dlq_core::journal::{LatestRevision, NewRevision};
use dlq_core::masking::copies;
use dlq_core::model::{BodyKind, DeadLetter};
use dlq_core::revision::{changed_paths, sha256_hex};
use dlq_core::schema::Decoding;
use dlq_core::{fingerprint, sanitize};
use dlq_transform::{Applied, Sandbox, SandboxError};
pub use dlq_transform::{Limits, WorkerCommand};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

/// Changed letters shown as a masked diff in the dry-run.
pub const SAMPLE: usize = 3;
/// Revisions per ledger transaction: a kill loses at most one uncommitted batch, which
/// the next run records.
pub const BATCH: usize = 100;
/// Transformed payloads held for recording; a selection beyond it is run in parts.
pub const MAX_HELD: usize = 512 << 20;

static WORKER: OnceLock<WorkerCommand> = OnceLock::new();

/// Which binary runs programs (tests outside the binary name it); by default this one.
pub fn use_worker(cmd: WorkerCommand) {
    let _ = WORKER.set(cmd);
}

/// The worker could not be started or talked to: an operational failure (exit 1), where a
/// program that does not compile is the user's (exit 2).
fn broken(why: String) -> SessionError {
    SessionError::Source(dlq_core::ports::SourceError::failed(format!(
        "the transform worker: {}",
        sanitize::clean(&why)
    )))
}

/// A program that does not compile is the user's to fix; a worker that cannot run is not.
fn start_failed(e: SandboxError) -> SessionError {
    match e {
        SandboxError::Compile(c) => SessionError::Invalid(sanitize::clean(&c.to_string())),
        other => broken(other.to_string()),
    }
}

fn worker() -> Result<WorkerCommand, SessionError> {
    match WORKER.get() {
        Some(w) => Ok(w.clone()),
        None => WorkerCommand::this_binary()
            .map_err(|e| broken(format!("cannot find this binary to run the program: {e}"))),
    }
}

/// A changed letter as the dry-run shows it: masked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sanitized.
    pub letter_id: String,
    pub location: String,
    pub changes: Vec<Change>,
}

/// What a program does to a selection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Letters offered.
    pub matched: u64,
    pub changed: u64,
    pub unchanged: u64,
    /// Their latest revision already came from this program (an earlier run).
    pub already: u64,
    /// By cause (masked, values left out): how many.
    pub failed: BTreeMap<String, u64>,
    pub sample: Vec<Sample>,
}

impl Tally {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    /// `{"matched", "changed", "unchanged", "already", "failed": {CAUSE: N}, "sample": [..]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "matched": self.matched,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "already": self.already,
            "failed": self.failed,
            "sample": self.sample.iter().map(|s| serde_json::json!({
                "letter_id": s.letter_id,
                "location": s.location,
                "changes": s.changes.iter().map(|c| serde_json::json!({
                    "path": c.path, "kind": c.kind.as_str(), "old": c.old, "new": c.new,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// What the dry-run says, as both front ends show it: the counts, the failures by
    /// cause and the masked sample (sanitized lines, paths and values cut to `width`).
    pub fn lines(&self, width: usize) -> Vec<String> {
        let mut out = vec![self.line()];
        if !self.failed.is_empty() {
            out.push("failed, by cause (these letters are not revised):".into());
            for (why, n) in &self.failed {
                out.push(format!("  {n:>6}  {}", sanitize::line(why, width)));
            }
        }
        if !self.sample.is_empty() {
            out.push("sample (masked):".into());
            for s in &self.sample {
                out.push(format!("  {} at {}", s.letter_id, s.location));
                for c in &s.changes {
                    out.push(format!(
                        "    {:<8} {}  {} → {}",
                        c.kind.as_str(),
                        sanitize::line(&c.path, width / 2),
                        sanitize::line(c.old.as_deref().unwrap_or("-"), width / 3),
                        sanitize::line(c.new.as_deref().unwrap_or("-"), width / 3)
                    ));
                }
            }
        }
        out
    }

    /// One line: `302 change · 0 unchanged · 0 already · 0 failed`.
    pub fn line(&self) -> String {
        format!(
            "{} change · {} unchanged · {} already revised by this program · {} failed",
            self.changed,
            self.unchanged,
            self.already,
            self.failed_total()
        )
    }
}

/// A program being run over letters.
pub struct Transform {
    settings: Settings,
    program: String,
    program_sha: String,
    reason: String,
    sandbox: Sandbox,
    latest: HashMap<String, LatestRevision>,
    /// Keep the revisions to record (off for a dry-run: nothing is held).
    keep: bool,
    tally: Tally,
    revisions: Vec<NewRevision>,
    held: usize,
}

enum Outcome {
    Already,
    Unchanged,
    Failed(String),
    Changed {
        before: Value,
        after: Value,
        /// The revision's payload (re-encoded in its schema where one decoded it).
        bytes: Vec<u8>,
        sha256_before: String,
    },
}

/// What recording did.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub revisions: usize,
    pub tally: Tally,
}

impl Transform {
    /// Check who may (Edit: operators; a viewer and `--read-only` are refused, audited),
    /// compile the program and start its worker. `keep`: hold the revisions to record.
    pub fn start(
        settings: &Settings,
        program: &str,
        reason: &str,
        keep: bool,
        limits: Limits,
    ) -> Result<Transform, SessionError> {
        let (program, reason) = (program.trim(), reason.trim());
        if program.is_empty() {
            return Err(SessionError::Invalid(
                "a transform needs a jq program, e.g. `.payload.amount |= tonumber`".into(),
            ));
        }
        if reason.is_empty() {
            return Err(SessionError::Invalid(
                "a transform needs a reason (it is recorded with every revision)".into(),
            ));
        }
        settings
            .principal
            .require(Permission::Edit, &settings.source_key)?;
        let sandbox = Sandbox::start(worker()?, program, limits).map_err(start_failed)?;
        let latest = match settings.principal.existing_ledger()? {
            Some(l) => l.latest_revisions(&settings.source_key)?,
            None => HashMap::new(),
        };
        Ok(Transform {
            settings: settings.clone(),
            program: program.to_string(),
            program_sha: sha256_hex(program.as_bytes()),
            reason: reason.to_string(),
            sandbox,
            latest,
            keep,
            tally: Tally::default(),
            revisions: Vec::new(),
            held: 0,
        })
    }

    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Run the program on one letter and count what it did. Fails only when no worker
    /// can be started or the held revisions pass [`MAX_HELD`]; one letter's failure is
    /// counted under its cause.
    pub fn offer(&mut self, letter: &DeadLetter) -> Result<(), SessionError> {
        self.tally.matched += 1;
        let outcome = self.judge(letter)?;
        let masker = self.settings.masker.with_fields(letter.pii_fields());
        match outcome {
            Outcome::Already => self.tally.already += 1,
            Outcome::Unchanged => self.tally.unchanged += 1,
            Outcome::Failed(why) => {
                let key = sanitize::line(&masker.mask_text(&why), 160);
                *self.tally.failed.entry(key).or_insert(0) += 1;
            }
            Outcome::Changed {
                before,
                after,
                bytes,
                sha256_before,
            } => {
                self.tally.changed += 1;
                if self.tally.sample.len() < SAMPLE {
                    let s = sample(&masker, letter, &before, &after);
                    self.tally.sample.push(s);
                }
                if self.keep {
                    self.held += bytes.len();
                    if self.held > MAX_HELD {
                        return Err(SessionError::Invalid(format!(
                            "the transformed payloads pass {} MiB held for recording; narrow the filter and run it in parts (each part resumes where the last stopped)",
                            MAX_HELD >> 20
                        )));
                    }
                    self.revisions.push(NewRevision {
                        letter_id: letter.id.value.0.clone(),
                        reason: self.reason.clone(),
                        changed_paths: changed_paths(&before, &after),
                        sha256_before,
                        after: bytes,
                        program: Some(self.program.clone()),
                    });
                }
            }
        }
        Ok(())
    }

    /// What the program makes of one letter (failures unmasked: `offer` masks them).
    fn judge(&mut self, letter: &DeadLetter) -> Result<Outcome, SessionError> {
        let revised;
        let (base, base_raw): (&DeadLetter, &[u8]) = match self.latest.get(&letter.id.value.0) {
            Some(r) if r.program_sha256.as_deref() == Some(self.program_sha.as_str()) => {
                return Ok(Outcome::Already)
            }
            Some(r) => {
                let mut raw = letter.raw.clone();
                raw.payload.clone_from(&r.payload);
                revised = self.settings.extract(raw);
                (&revised, &r.payload)
            }
            None => (letter, &letter.raw.payload),
        };
        if let Some(why) = not_transformable(base) {
            return Ok(Outcome::Failed(why));
        }
        let input = base.readable_payload();
        let output = match self.sandbox.apply(input) {
            Ok(Applied::Output(o)) => o,
            Ok(Applied::Raised(why)) => return Ok(Outcome::Failed(cause(&why))),
            Ok(Applied::Stopped(why)) => return Ok(Outcome::Failed(why)),
            Err(e) => return Err(broken(e.to_string())),
        };
        let (Ok(before), Ok(after)) = (
            serde_json::from_slice::<Value>(input),
            serde_json::from_slice::<Value>(&output),
        ) else {
            return Ok(Outcome::Failed(
                "the output is not JSON (nan, an infinite number or a byte string)".into(),
            ));
        };
        if before == after {
            return Ok(Outcome::Unchanged);
        }
        let bytes = match (base.decoded(), self.settings.codec.as_deref()) {
            (None, _) => serde_json::to_vec(&after).unwrap_or_default(),
            (Some(d), Some(codec)) => match codec.encode(&d.schema, &after.to_string()) {
                Ok(b) => b,
                Err(e) => {
                    return Ok(Outcome::Failed(format!(
                        "the output does not fit {}: {}",
                        d.schema.name,
                        fingerprint::normalize(&e.0)
                    )))
                }
            },
            (Some(d), None) => {
                return Ok(Outcome::Failed(format!(
                    "{} cannot be written back in this run",
                    d.schema.name
                )))
            }
        };
        Ok(Outcome::Changed {
            before,
            after,
            bytes,
            sha256_before: sha256_hex(base_raw),
        })
    }

    /// Record the held revisions, [`BATCH`] to a transaction, verified ledger first.
    /// `progress(recorded, total)` after each batch.
    pub fn record(self, progress: &mut dyn FnMut(usize, usize)) -> Result<Recorded, SessionError> {
        let total = self.revisions.len();
        if total > 0 {
            let mut ledger = self.settings.principal.ledger_to_write()?;
            let mut done = 0;
            // Test hook: a pause after each batch, so a kill can land between two
            // (tests/transform.rs kills the process at seeded points).
            let pause = std::env::var("DLQ_TRIAGE_TEST_BATCH_PAUSE_MS")
                .ok()
                .filter(|_| cfg!(feature = "test-hooks"))
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_millis);
            for batch in self.revisions.chunks(BATCH) {
                ledger.record_revisions(&self.settings.source_key, batch)?;
                done += batch.len();
                progress(done, total);
                if let Some(p) = pause {
                    std::thread::sleep(p);
                }
            }
        }
        Ok(Recorded {
            revisions: total,
            tally: self.tally,
        })
    }
}

/// Why a letter's payload is no input for a program, if it is not.
fn not_transformable(letter: &DeadLetter) -> Option<String> {
    match &letter.schema {
        Some(Decoding::Decoded(_)) => return None,
        Some(s @ (Decoding::Pending(_) | Decoding::Undecodable(_))) => {
            let d = s.describe();
            return Some(format!(
                "the payload is not decoded ({})",
                d.split(" — ").next().unwrap_or_default()
            ));
        }
        None => {}
    }
    (letter.body != BodyKind::Json)
        .then(|| format!("the payload is not JSON ({})", letter.body.as_str()))
}

/// A failure's cause without the letter's values, so letters failing alike group: jaq
/// quotes the value it choked on (`cannot use "1,500.00" as number`), and an `error(…)`
/// a program raises arrives as a JSON string.
fn cause(why: &str) -> String {
    let text = serde_json::from_str::<String>(why).unwrap_or_else(|_| why.to_string());
    fingerprint::normalize(&text)
}

/// The masked field-level diff of one changed letter.
fn sample(
    masker: &dlq_core::masking::Masker,
    letter: &DeadLetter,
    before: &Value,
    after: &Value,
) -> Sample {
    let hidden = copies::hidden_by_name(masker, before);
    let b = copies::mask_copies(masker, before, &hidden);
    let a = copies::mask_copies(masker, after, &hidden);
    let changes =
        match diff::diff_payloads(masker, b.to_string().as_bytes(), a.to_string().as_bytes()) {
            Diff::Json(c) => c,
            _ => Vec::new(),
        };
    Sample {
        letter_id: sanitize::clean(&letter.id.value.0),
        location: letter
            .raw
            .coords
            .as_ref()
            .map(|c| sanitize::clean(&c.to_string()))
            .unwrap_or_default(),
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that cannot be started is an operational failure (exit 1), a program
    /// that does not compile a usage error (exit 2).
    #[test]
    fn a_worker_that_cannot_start_is_not_a_usage_error() {
        let missing = WorkerCommand {
            program: "/nonexistent/dlq-triage".into(),
            args: Vec::new(),
        };
        let e = Sandbox::start(missing.clone(), ".", Limits::default())
            .err()
            .expect("cannot start");
        assert!(
            matches!(start_failed(e), SessionError::Source(_)),
            "a spawn failure"
        );
        let e = Sandbox::start(missing, ".[", Limits::default())
            .err()
            .expect("does not compile");
        assert!(matches!(start_failed(e), SessionError::Invalid(_)));
    }

    #[test]
    fn causes_leave_the_letters_values_out() {
        assert_eq!(
            cause(r#"cannot parse "1,500.00" as JSON"#),
            cause(r#"cannot parse "2,100.50" as JSON"#)
        );
        assert_eq!(
            cause(r#""bad amount for jane@example.com""#),
            "bad amount for <email>"
        );
    }
}
