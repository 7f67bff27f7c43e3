//! One jq program over a selection of letters, each changed letter recorded as a
//! revision (`transform` in the CLI, `T` in the TUI): the fix for a whole group at
//! once, where an edit fixes one letter.
//!
//! Each letter's base is its latest revision, else its payload (the decoded form where
//! a schema decodes it). The program runs in a worker process (`dlq-transform`), bounded
//! per letter. What it produces is shown through the mask it came from
//! (`dlq_core::masking::derived`): the program runs a second time on the letter as the
//! role sees it, and only what that run also produced is shown; the rest is a shape. The
//! causes of failures likewise, word by word. Every dry-run is audited (program text and
//! digest, selection, counts) before its figures are shown; `--unmask` (the Unmask
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
use serde_json::Value;
use sha2::{Digest, Sha256};
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
    /// The real sample is shown (the Unmask right, audited); causes and paths stay guarded.
    unmasked: bool,
    /// sha256 over the ids of the letters offered, for the dry-run's audit entry.
    offered: Sha256,
    /// The dry-run's figures were audited (shown at most after that).
    audited: bool,
}

/// What one run of the program gave.
enum Run {
    Output(Value),
    Failed(String),
}

enum Outcome {
    Already,
    Unchanged,
    Failed(String),
    Changed {
        before: Value,
        after: Value,
        /// The input as the role sees it, and the output guarded against it.
        shown_before: Value,
        shown_after: Value,
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
        })
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

    /// Run the program on one letter and count what it did. Fails only when no worker
    /// can be started or the held revisions pass [`MAX_HELD`]; one letter's failure is
    /// counted under its cause.
    pub fn offer(&mut self, letter: &DeadLetter) -> Result<(), SessionError> {
        self.tally.matched += 1;
        self.offered.update(letter.id.value.0.as_bytes());
        self.offered.update([0]);
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
                shown_before,
                shown_after,
                bytes,
                sha256_before,
            } => {
                self.tally.changed += 1;
                if self.tally.sample.len() < SAMPLE {
                    let changes = if self.unmasked {
                        diff::unmasked_changes(&before, &after)
                    } else {
                        masked_changes(&masker, &shown_before, &shown_after)
                    };
                    self.tally.sample.push(sample(letter, changes));
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
                        // Read by everyone in `audit list`: the guarded paths.
                        changed_paths: changed_paths(&shown_before, &shown_after),
                        sha256_before,
                        after: bytes,
                        program: Some(self.program.clone()),
                    });
                }
            }
        }
        Ok(())
    }

    /// What the program makes of one letter, guarded (failures still go through the
    /// masker in `offer`, for what the detectors find in the words shown).
    fn judge(&mut self, letter: &DeadLetter) -> Result<Outcome, SessionError> {
        let masker = self.settings.masker.with_fields(letter.pii_fields());
        let revised;
        let latest = self.latest.get(&letter.id.value.0);
        let (base, base_raw): (&DeadLetter, &[u8]) = match latest {
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
        let Ok(before) = serde_json::from_slice::<Value>(input) else {
            return Ok(Outcome::Failed("the payload is not JSON".into()));
        };
        // What the role sees of the input: masked, and where an earlier program revised
        // it, what that program changed only as shapes (its own guard is not kept).
        let shown_before = match latest {
            Some(r) if r.program_sha256.is_some() => {
                let original = serde_json::from_slice::<Value>(letter.readable_payload()).ok();
                let shown_original = masked_view(&masker, letter.readable_payload());
                derived::guard(
                    &before,
                    original.as_ref(),
                    shown_original.as_ref(),
                    None,
                    "",
                )
            }
            _ => masked_view(&masker, input).unwrap_or_else(|| derived::shape(&before)),
        };
        let real = run(&mut self.sandbox, input)?;
        // The same program on what the role sees; where that is the input itself, its run.
        let on_shown = if shown_before == before {
            None
        } else {
            Some(run(&mut self.sandbox, shown_before.to_string().as_bytes())?)
        };
        let after = match real {
            Run::Failed(why) => {
                let seen = match &on_shown {
                    None => Some(why.as_str()),
                    Some(Run::Failed(w)) => Some(w.as_str()),
                    Some(Run::Output(_)) => None,
                };
                return Ok(Outcome::Failed(derived::guard_text(&why, seen)));
            }
            Run::Output(after) => after,
        };
        if before == after {
            return Ok(Outcome::Unchanged);
        }
        let masked_run = match on_shown {
            None => Some(after.clone()),
            Some(Run::Output(v)) => Some(v),
            Some(Run::Failed(_)) => None,
        };
        let shown_after = derived::guard(
            &after,
            Some(&before),
            Some(&shown_before),
            masked_run.as_ref(),
            &self.program,
        );
        let bytes = match (base.decoded(), self.settings.codec.as_deref()) {
            (None, _) => serde_json::to_vec(&after).unwrap_or_default(),
            (Some(d), Some(codec)) => match codec.encode(&d.schema, &after.to_string()) {
                Ok(b) => b,
                Err(e) => {
                    // The encoder may quote the value it refused: guarded like a cause.
                    let seen = masked_run
                        .as_ref()
                        .and_then(|m| codec.encode(&d.schema, &m.to_string()).err())
                        .map(|e| fingerprint::normalize(&e.0));
                    let why = fingerprint::normalize(&e.0);
                    return Ok(Outcome::Failed(format!(
                        "the output does not fit {}: {}",
                        d.schema.name,
                        derived::guard_text(&why, seen.as_deref())
                    )));
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
            shown_before,
            shown_after,
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

/// One run of the program: its JSON output, or why not (a cause without the
/// letter's quoted values).
fn run(sandbox: &mut Sandbox, input: &[u8]) -> Result<Run, SessionError> {
    let output = match sandbox.apply(input) {
        Ok(Applied::Output(o)) => o,
        Ok(Applied::Raised(why)) => return Ok(Run::Failed(cause(&why))),
        Ok(Applied::Stopped(why)) => return Ok(Run::Failed(why)),
        Err(e) => return Err(broken(e.to_string())),
    };
    Ok(match serde_json::from_slice::<Value>(&output) {
        Ok(v) => Run::Output(v),
        Err(_) => {
            Run::Failed("the output is not JSON (nan, an infinite number or a byte string)".into())
        }
    })
}

/// What revision `number` of `letter` changed, as the role may see it, when a transform
/// made it (`None` for an edit, which a person wrote from the masked view): the program,
/// read from the revision's ledger entry, runs again on the masked original and only what
/// that run also produced is shown (see [`derived`]). A revision made from an earlier
/// revision shows what it changed as shapes. For `diff --revision`.
pub fn revision_changes(
    settings: &Settings,
    letter: &DeadLetter,
    number: i64,
    revised: &DeadLetter,
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
    let parse = |d: &DeadLetter| serde_json::from_slice::<Value>(d.readable_payload()).ok();
    let (Some(before), Some(after)) = (parse(letter), parse(revised)) else {
        return Ok(Some(Vec::new()));
    };
    let shown_before =
        masked_view(&masker, letter.readable_payload()).unwrap_or_else(|| derived::shape(&before));
    let from_original = entry
        .as_ref()
        .and_then(|d| d["sha256_before"].as_str())
        .is_some_and(|s| s == sha256_hex(&letter.raw.payload));
    let masked_run = if !from_original {
        None
    } else if shown_before == before {
        Some(after.clone())
    } else {
        let mut sandbox =
            Sandbox::start(worker()?, program, Limits::default()).map_err(start_failed)?;
        match run(&mut sandbox, shown_before.to_string().as_bytes())? {
            Run::Output(v) => Some(v),
            Run::Failed(_) => None,
        }
    };
    let shown_after = derived::guard(
        &after,
        Some(&before),
        Some(&shown_before),
        masked_run.as_ref(),
        program,
    );
    Ok(Some(masked_changes(&masker, &shown_before, &shown_after)))
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

fn sample(letter: &DeadLetter, changes: Vec<Change>) -> Sample {
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
