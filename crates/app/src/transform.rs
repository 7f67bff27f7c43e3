//! One jq program over a selection of letters, each changed letter recorded as a
//! revision (`transform` in the CLI, `T` in the TUI): the fix for a whole group at
//! once, where an edit fixes one letter.
//!
//! Each letter's base is its latest revision, else its payload (the decoded form where
//! a schema decodes it). The program runs in a worker process (`dlq-transform`), bounded
//! per letter, twice: on the real letter (what a recording keeps and a replay sends) and
//! on the letter **as the role sees it** (the masked view). **What the role is shown is
//! computed from the masked run only** — its output, its diff against the masked
//! original, its failure causes, the changed paths a recording writes to the audit log —
//! never compared with, filtered from or guarded out of the real run's (a program can
//! recognise the masked run and encode the real letter into whatever a comparison lets
//! through). Of the real run the role learns, per letter, whether it produced a result
//! and whether that differs from the original: the counts (the residual oracle, see
//! docs/masking.md; every dry-run is audited with its program). `--unmask` (the Unmask
//! right, audited) shows the real sample. Recording
//! is batched and resumable: a letter whose latest revision came from the same program
//! counts as `already` and is not recorded again, so running the command again after a
//! kill records only what is missing.

use crate::session::{SessionError, Settings};
use dlq_core::access::Permission;
use dlq_core::diff::{self, Change, Diff};
use dlq_core::journal::{LatestRevision, NewRevision};
use dlq_core::masking::{derived, Layout, Masker};
use dlq_core::model::{BodyKind, DeadLetter};
use dlq_core::revision::{changed_paths, sha256_hex};
use dlq_core::schema::Decoding;
use dlq_core::{fingerprint, sanitize};
use dlq_transform::{Applied, Sandbox, SandboxError};
pub use dlq_transform::{Limits, WorkerCommand};

mod judge;
mod tally;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;
pub use tally::{Sample, Tally};

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
    /// The real sample is shown (the Unmask right, audited); causes and paths stay guarded.
    unmasked: bool,
    /// sha256 over the ids of the letters offered, for the dry-run's audit entry.
    offered: Sha256,
    /// The dry-run's figures were audited (shown at most after that).
    audited: bool,
    /// Earlier programs (by sha256) whose revisions are the base of some letters, each
    /// started to compute the masked view of what it made (`None`: its text is not in
    /// the ledger).
    earlier: HashMap<String, Option<Sandbox>>,
    /// Letters offered and not yet run: run together, [`OFFERED`] at a time.
    pending: Vec<std::sync::Arc<DeadLetter>>,
}

/// Letters whose runs go to the worker together (their inputs sent ahead, see
/// `Sandbox::apply_all`).
const OFFERED: usize = 64;

/// What one run of the program gave.
enum Run {
    Output(Value),
    Failed(String),
}

enum Outcome {
    Already,
    Unchanged,
    /// The real run failed: its cause (shown only unmasked) and the masked run's
    /// failure, if it failed there too.
    Failed {
        real: String,
        on_masked: Option<String>,
    },
    Changed {
        before: Value,
        after: Value,
        /// The input as the role sees it, and the program's run on it: its output, or
        /// why it failed there.
        shown_before: Value,
        on_masked: Result<Value, String>,
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
            unmasked: false,
            offered: Sha256::new(),
            audited: false,
            earlier: HashMap::new(),
            pending: Vec::new(),
        })
    }

    /// The sandbox of the earlier program `sha` (its text from `letter_id`'s history).
    fn earlier(
        &mut self,
        sha: &str,
        letter_id: &str,
    ) -> Result<Option<&mut Sandbox>, SessionError> {
        if !self.earlier.contains_key(sha) {
            let text = self
                .settings
                .principal
                .history(letter_id)?
                .into_iter()
                .filter(|e| e.action == "edit")
                .filter_map(|e| serde_json::from_str::<Value>(&e.detail).ok())
                .find(|d| d["program_sha256"].as_str() == Some(sha))
                .and_then(|d| d["program"].as_str().map(str::to_string));
            let sandbox = match text {
                Some(t) => {
                    Some(Sandbox::start(worker()?, &t, Limits::default()).map_err(start_failed)?)
                }
                None => None,
            };
            self.earlier.insert(sha.to_string(), sandbox);
        }
        Ok(self.earlier.get_mut(sha).and_then(Option::as_mut))
    }

    /// Show the real sample: needs the Unmask right and a reason, audited (a refusal
    /// too) before any letter is offered. Causes and recorded paths stay guarded.
    pub fn unmask(&mut self, reason: &str) -> Result<(), SessionError> {
        let target = format!("transform:{}", &self.program_sha[..12]);
        self.settings.principal.unmask(
            &self.settings.source_key,
            &target,
            reason,
            crate::revise::UnmaskFor::Transform,
        )?;
        self.unmasked = true;
        Ok(())
    }

    /// The figures once [`Transform::dry_run_shown`] audited them; `None` before.
    pub fn audited_tally(&self) -> Option<&Tally> {
        self.audited.then_some(&self.tally)
    }

    /// The dry-run's figures, audited first: who ran which program (text and sha256)
    /// over which letters (`selection`, their count and the digest of their ids), and
    /// what it found. A failed audit write shows nothing. Audited once per transform.
    pub fn dry_run_shown(&mut self, selection: &str) -> Result<&Tally, SessionError> {
        self.run_offered()?;
        if !self.audited {
            let letters: String = self
                .offered
                .clone()
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let detail = serde_json::json!({
                "source": self.settings.source_key,
                "selection": sanitize::clean(selection),
                "program": self.program,
                "program_sha256": self.program_sha,
                "letters": self.tally.matched,
                "letters_sha256": letters,
                "changed": self.tally.changed,
                "failed": self.tally.failed_total(),
                "unmasked": self.unmasked,
            });
            self.settings.principal.audit(
                "transform-dry-run",
                &self.settings.source_key,
                &detail.to_string(),
            )?;
            self.audited = true;
        }
        Ok(&self.tally)
    }

    /// Run the program on one letter and count what it did — with the next letters:
    /// the runs of [`OFFERED`] letters go to the worker together, and the figures are
    /// complete once [`Transform::dry_run_shown`] or [`Transform::record`] is asked.
    /// Fails only when no worker can be started or the held revisions pass
    /// [`MAX_HELD`]; one letter's failure is counted under its cause.
    pub fn offer(&mut self, letter: std::sync::Arc<DeadLetter>) -> Result<(), SessionError> {
        self.tally.matched += 1;
        self.offered.update(letter.id.value.0.as_bytes());
        self.offered.update([0]);
        self.pending.push(letter);
        if self.pending.len() >= OFFERED {
            self.run_offered()?;
        }
        Ok(())
    }

    /// Run the letters offered so far: every letter's inputs first, then one batch
    /// through the worker, then each letter judged and counted in offer order.
    fn run_offered(&mut self) -> Result<(), SessionError> {
        let letters = std::mem::take(&mut self.pending);
        let mut inputs = Vec::new();
        let mut judging = Vec::with_capacity(letters.len());
        for l in &letters {
            judging.push(self.prepare_judging(l, &mut inputs)?);
        }
        let mut runs = run_all(&mut self.sandbox, &inputs)?;
        for (letter, j) in letters.iter().zip(judging) {
            let outcome = match j {
                judge::Judging::Done(o) => o,
                judge::Judging::Runs(p) => self.judged(letter, *p, &mut runs),
            };
            self.count(letter, outcome)?;
        }
        Ok(())
    }

    /// Count one letter's outcome: the tally, the masked sample, the revision held.
    fn count(&mut self, letter: &DeadLetter, outcome: Outcome) -> Result<(), SessionError> {
        let masker = self.settings.masker.with_fields(letter.pii_fields());
        self.tally.unmasked = self.unmasked;
        match outcome {
            Outcome::Already => self.tally.already += 1,
            Outcome::Unchanged => self.tally.unchanged += 1,
            Outcome::Failed { real, on_masked } => {
                let why = match (self.unmasked, on_masked) {
                    (true, _) => real,
                    (false, Some(m)) => format!("on the masked view: {m}"),
                    (false, None) => "on the real letter only — the cause is not shown (it depends on what you may not see)".into(),
                };
                let key = sanitize::line(&masker.mask_text(&why), 160);
                *self.tally.failed.entry(key).or_insert(0) += 1;
            }
            Outcome::Changed {
                before,
                after,
                shown_before,
                on_masked,
                bytes,
                sha256_before,
            } => {
                self.tally.changed += 1;
                if self.tally.sample.len() < SAMPLE {
                    let (changes, note) = match (self.unmasked, &on_masked) {
                        (true, _) => (diff::unmasked_changes(&before, &after), None),
                        (false, Ok(v)) => (masked_changes(&masker, &shown_before, v), None),
                        (false, Err(why)) => (
                            Vec::new(),
                            Some(format!(
                                "the program fails on the masked view: {}",
                                masker.mask_text(why)
                            )),
                        ),
                    };
                    self.tally.sample.push(sample(letter, changes, note));
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
                        // Read by everyone in `audit list`: the paths the program
                        // changes on the masked view (none where it fails there).
                        changed_paths: on_masked
                            .as_ref()
                            .map(|v| changed_paths(&shown_before, v))
                            .unwrap_or_default(),
                        sha256_before,
                        after: bytes,
                        program: Some(self.program.clone()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Record the held revisions, [`BATCH`] to a transaction, verified ledger first.
    /// `progress(recorded, total)` after each batch.
    pub fn record(
        mut self,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Recorded, SessionError> {
        self.run_offered()?;
        let total = self.revisions.len();
        if total > 0 {
            let mut ledger = self.settings.principal.ledger_to_write()?;
            let mut done = 0;
            // Test hook (`revisions:N`): the process stops itself here, so a kill lands
            // exactly between two batches (tests/transform.rs); a no-op in other builds.
            dlq_ledger::freeze::count_reached("revisions", done);
            for batch in self.revisions.chunks(BATCH) {
                ledger.record_revisions(&self.settings.source_key, batch)?;
                done += batch.len();
                progress(done, total);
                dlq_ledger::freeze::count_reached("revisions", done);
            }
        }
        Ok(Recorded {
            revisions: total,
            tally: self.tally,
        })
    }
}

/// One run of the program: its JSON output, or why not (a cause without the
/// letter's quoted values).
fn run(sandbox: &mut Sandbox, input: &[u8]) -> Result<Run, SessionError> {
    match sandbox.apply(input) {
        Ok(applied) => Ok(read_run(applied)),
        Err(e) => Err(broken(e.to_string())),
    }
}

/// [`run`] over many inputs, answers in order (each `Some`, taken as it is judged).
fn run_all(sandbox: &mut Sandbox, inputs: &[Vec<u8>]) -> Result<Vec<Option<Run>>, SessionError> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let applied = sandbox
        .apply_all(&inputs)
        .map_err(|e| broken(e.to_string()))?;
    Ok(applied.into_iter().map(|a| Some(read_run(a))).collect())
}

fn read_run(applied: Applied) -> Run {
    let output = match applied {
        Applied::Output(o) => o,
        Applied::Raised(why) => return Run::Failed(cause(&why)),
        Applied::Stopped(why) => return Run::Failed(why),
    };
    match serde_json::from_slice::<Value>(&output) {
        Ok(v) => Run::Output(v),
        Err(_) => {
            Run::Failed("the output is not JSON (nan, an infinite number or a byte string)".into())
        }
    }
}

/// What revision `number` of `letter` changed, as the role may see it, when a transform
/// made it (`None` for an edit, which a person wrote from the masked view): the program,
/// read from the revision's ledger entry, runs on the masked original, and what it
/// computes there is what is shown — never the stored revision (`Some(empty)` where it
/// fails there). For `diff --revision`; a role with the unmask right is shown the
/// revision itself by its caller.
pub fn revision_changes(
    settings: &Settings,
    letter: &DeadLetter,
    number: i64,
) -> Result<Option<Vec<Change>>, SessionError> {
    let entry = settings
        .principal
        .history(&letter.id.value.0)?
        .into_iter()
        .filter(|e| e.action == "edit")
        .filter_map(|e| serde_json::from_str::<Value>(&e.detail).ok())
        .find(|d| {
            d["source"].as_str() == Some(settings.source_key.as_str())
                && d["revision"].as_i64() == Some(number)
        });
    let Some(program) = entry.as_ref().and_then(|d| d["program"].as_str()) else {
        return Ok(None);
    };
    let masker = settings.masker.with_fields(letter.pii_fields());
    let Some(shown_before) = masked_view(&masker, letter.readable_payload()) else {
        return Ok(Some(Vec::new()));
    };
    let mut sandbox =
        Sandbox::start(worker()?, program, Limits::default()).map_err(start_failed)?;
    Ok(Some(
        match run(&mut sandbox, shown_before.to_string().as_bytes())? {
            Run::Output(v) => masked_changes(&masker, &shown_before, &v),
            Run::Failed(_) => Vec::new(),
        },
    ))
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

/// A JSON payload's masked view (what `show` prints), if it is JSON.
fn masked_view(masker: &Masker, payload: &[u8]) -> Option<Value> {
    let (text, _) = masker
        .mask_json(payload, Layout::Compact, usize::MAX)
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// The field-level diff between the input as the role sees it and the guarded output,
/// masked once more on the way out (detectors over what a program wrote in the open).
fn masked_changes(masker: &Masker, shown_before: &Value, shown_after: &Value) -> Vec<Change> {
    match diff::diff_payloads(
        masker,
        shown_before.to_string().as_bytes(),
        shown_after.to_string().as_bytes(),
    ) {
        Diff::Json(c) => c,
        _ => Vec::new(),
    }
}

fn sample(letter: &DeadLetter, changes: Vec<Change>, note: Option<String>) -> Sample {
    Sample {
        note,
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
