//! One triage session, driven by every front end: the CLI commands and the TUI worker.
//!
//! It owns the open source, the batched scan with letter preparation (conventions and
//! masked previews on all cores, off any render thread), problem reports, what settling
//! needs (held RabbitMQ deliveries by the exact letter), the ledger's states on the
//! letters, reconciliation of decisions a crash left pending, and discard, audit and
//! history. A behaviour that both front ends show lives here, once.

use dlq_core::access::{self, Permission, Role};
use dlq_core::catalog::Problem;
use dlq_core::conventions::UserMapping;
use dlq_core::decisions::{self, Discarded, Held, Target};
use dlq_core::journal::{AuditEntry, Decision, ItemState, Journal, JournalError};
use dlq_core::ledger_location::Location;
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, DeadLetter, RawLetter, TriageState};
use dlq_core::payload_cache::Kept;
use dlq_core::ports::{DlqSource, ScanEvent, SourceError, SourceInfo};
use dlq_ledger::Ledger;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

mod prepare;
pub use dlq_core::handover::{InFlight, Receipt};
pub use dlq_core::prepared::{LetterState, Prepared};
mod approval;
mod discard;
pub use discard::{DiscardReport, DiscardTarget};
mod principal;
pub use principal::Principal;
mod draft;
mod replaying;
use dlq_core::pipeline::Broken;
pub use draft::{unsupported, Pace, ReplayDraft, Start};
use prepare::{preparing, Prep, Pump, TAIL_BATCH};
pub use replaying::{
    dry_runs, latest_replay_figures, Found, Picked, PlanLetter, ReplayReport, ReplayWatcher,
    Resume, Unfinished,
};

/// Letters per prepared batch, and the longest a partial batch waits (a slow source
/// still shows letters as they come). Not larger: 4,096 prepared letters (~1.6 KB
/// each) fell out of cache between the worker and the indexer (1,000,000-letter Kafka
/// `summary`: 2.84 s and 241 MB at 4,096, 2.70 s and 220 MB at 1,024; 512 was slower).
const BATCH: usize = 2048;
const BATCH_WAIT: Duration = Duration::from_millis(100);
/// Problems kept for reporting (all are counted).
const MAX_KEPT_PROBLEMS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Ledger(#[from] JournalError),
    #[error("no ledger location: set --ledger, or XDG_STATE_HOME/HOME")]
    NoLedger,
    /// A request that names something that is not there (a replay id of another source).
    #[error("{0}")]
    Invalid(String),
    /// The plan is over `approval_above`: recorded for a second operator, nothing sent.
    #[error("{0}")]
    AwaitingApproval(String),
    /// Another live process holds it (a replay being sent): nothing was done.
    #[error("{0}")]
    Held(String),
    /// The ledger fails verification: nothing was written or sent.
    #[error("refusing to write to the ledger {location}: it fails verification at entry {seq} ({problem}). Nothing was recorded or sent. `dlq-triage audit verify` shows the detail; keep the file for the investigation and record further decisions in a new ledger (--ledger PATH)")]
    Tampered {
        location: String,
        seq: i64,
        problem: String,
    },
    #[error("refused: {denied}{}", if *.read_only { " (--read-only caps everyone at viewer)" } else { "" })]
    Refused {
        denied: access::Denied,
        read_only: bool,
    },
    /// A write under `--read-only`: nothing was written, not even an audit entry.
    #[error("{0}")]
    ReadOnly(access::Refusal),
    /// The team ledger did not answer: nothing is recorded, so nothing is done.
    #[error("the team ledger cannot be reached ({0}): nothing was recorded or sent — decisions are written to the ledger before the broker is touched. Browsing works meanwhile")]
    Unreachable(String),
}

/// What a session needs besides the open source.
#[derive(Clone)]
pub struct Settings {
    /// The source's key in the ledger (its URI without credentials).
    pub source_key: String,
    pub principal: Principal,
    pub masker: Masker,
    pub mappings: Vec<UserMapping>,
    /// Decodes schema-encoded payloads (`--schema-registry`, `--schemas`), if any.
    pub codec: Option<dlq_core::schema::Codec>,
    /// `--since`: only letters dead-lettered at or after this (letters with no known
    /// time are kept). Applied here, to every source; Kafka also starts its read at
    /// the matching offsets, which only saves reading.
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Four eyes: a replay over this many letters needs a second operator's approval
    /// (`[replay] approval_above`; a team ledger).
    pub approval_above: Option<usize>,
    /// The same for discards (`[discard] approval_above`).
    pub discard_approval_above: Option<usize>,
    /// Where a replay may go instead of each letter's origin (`[replay] allowed_targets`).
    pub allowed_targets: Vec<String>,
}

/// What a scan or tail hands the front end, in order.
#[derive(Debug)]
pub enum SessionEvent {
    Letters(Vec<Prepared>),
    /// Not everything was browsed: `browsed` of `total` in `location`.
    Partial(Coverage),
    /// Something to know about the browse that is no unreadable record.
    Notice(Problem),
    Progress {
        done: u64,
        total: Option<u64>,
    },
    Problem(Problem),
}

/// Where a browse held less than the broker has (`--max-letters`, messages other
/// consumers hold, a queue that went quiet): every output says "browsed N of M" and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub location: String,
    pub browsed: u64,
    pub total: u64,
    pub why: String,
}

pub struct Session {
    settings: Settings,
    src: Box<dyn DlqSource>,
    info: SourceInfo,
    /// Held deliveries by the exact letter (RabbitMQ queues: settled by ack). Empty for
    /// sources that settle in the ledger only, so 1M Kafka letters do not pay for it.
    held: dlq_core::held::HeldDeliveries,
    /// Ledger decisions for this source: ids (for a cheap first test) and bindings.
    decided_ids: HashSet<String>,
    decided: HashMap<String, Decision>,
    /// How each replayed letter's replay ended, by binding (see `LetterState::after_replay`).
    outcomes: HashMap<String, TriageState>,
    problems: Vec<Problem>,
    problem_count: u64,
    partial: Vec<Coverage>,
    notices: Vec<Problem>,
    /// The broker's retention per container, read once (see [`Session::retention`]).
    retention: Option<Vec<(String, dlq_core::retention::Retention)>>,
    /// The ledger could not be read when the session started (why): browsing goes on,
    /// every letter's decision unknown.
    decisions_unknown: Option<String>,
}

impl Session {
    /// Start a session on an open source; reads (never creates) the ledger's decisions.
    pub fn new(src: Box<dyn DlqSource>, settings: Settings) -> Result<Session, SessionError> {
        let info = src.info();
        let mut s = Session {
            settings,
            src,
            info,
            held: Default::default(),
            decided_ids: HashSet::new(),
            decided: HashMap::new(),
            outcomes: HashMap::new(),
            problems: Vec::new(),
            problem_count: 0,
            partial: Vec::new(),
            notices: Vec::new(),
            retention: None,
            decisions_unknown: None,
        };
        // Browsing never needs the ledger: without it, decisions are unknown, said.
        if let Err(e) = s.load_decisions() {
            let why = dlq_core::uri::redact(&e.to_string());
            s.notices.push(Problem {
                location: "ledger".into(),
                message: format!(
                    "decisions unknown (ledger unreachable: {why}): letters are listed as open whatever was decided; nothing can be discarded or replayed until it answers"
                ),
            });
            s.decisions_unknown = Some(why);
        }
        Ok(s)
    }

    /// Why the ledger's decisions are unknown to this session (it could not be read at
    /// start), if they are: front ends say so wherever they show a letter's state.
    pub fn decisions_unknown(&self) -> Option<&str> {
        self.decisions_unknown.as_deref()
    }

    fn load_decisions(&mut self) -> Result<(), SessionError> {
        let Some(ledger) = self.settings.principal.existing_ledger()? else {
            return Ok(());
        };
        let mut replays = HashSet::new();
        for d in ledger.decisions(&self.settings.source_key)? {
            self.decided_ids.insert(d.letter_id.clone());
            if d.kind == dlq_core::journal::DecisionKind::Replay {
                if let Some(id) = d.reason.strip_prefix("replay ") {
                    replays.insert(id.to_string());
                }
            }
            let key = d.binding.clone().unwrap_or_default();
            self.decided.insert(key, d);
        }
        // A completed run resolved the letters it settled; one that came back failed again.
        for id in replays {
            let Some((row, items)) = ledger.replay(&id)? else {
                continue;
            };
            let completed = row.state == dlq_core::journal::ReplayState::Completed;
            for item in items {
                let outcome = match item.state {
                    ItemState::FailedAgain => TriageState::FailedAgain,
                    ItemState::Settled | ItemState::Confirmed if completed => TriageState::Resolved,
                    _ => continue,
                };
                self.outcomes.insert(item.binding, outcome);
            }
        }
        Ok(())
    }

    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn principal(&self) -> &Principal {
        &self.settings.principal
    }

    pub fn source_key(&self) -> &str {
        &self.settings.source_key
    }

    /// Containers browsed in part, with how much.
    pub fn partial(&self) -> &[Coverage] {
        &self.partial
    }

    /// What the source said about the browse besides letters and unreadable records.
    pub fn notices(&self) -> &[Problem] {
        &self.notices
    }

    /// The first problems (up to 100) and how many there were.
    pub fn problems(&self) -> (&[Problem], u64) {
        (&self.problems, self.problem_count)
    }

    /// The decision recorded on this exact letter, if any.
    pub fn decision(&self, letter_id: &str, binding: &str) -> Option<&Decision> {
        self.decided
            .get(binding)
            .filter(|d| d.letter_id == letter_id)
    }

    /// The letter's triage state and the decision that set it, for every view of a
    /// letter (`show`, `show --json`, the TUI detail).
    pub fn letter_state(&self, letter: &DeadLetter) -> LetterState {
        if self.decisions_unknown.is_some() {
            return LetterState::unknown();
        }
        let binding = decisions::binding(&letter.raw);
        LetterState::of(self.decision(&letter.id.value.0, &binding))
            .after_replay(self.outcomes.get(&binding).copied())
    }

    /// How long the broker keeps each container's letters: read from it on first use
    /// (describe configs, queue arguments and policies), then remembered.
    pub fn retention(&mut self) -> &[(String, dlq_core::retention::Retention)] {
        let src = &mut self.src;
        self.retention.get_or_insert_with(|| src.retention())
    }

    /// Every decision on this source (few), for front ends that keep their own view.
    pub fn decisions(&self) -> Vec<Decision> {
        self.decided.values().cloned().collect()
    }

    /// Scan the whole source; `previews` off skips masked previews (a summary needs none).
    pub fn scan(
        &mut self,
        previews: bool,
        sink: &mut dyn FnMut(SessionEvent) -> ControlFlow<()>,
    ) -> Result<(), SessionError> {
        // A scan without previews groups from the headers: payloads kept elsewhere (a
        // share group's source records) are not fetched for it.
        self.src.want_payloads(previews);
        let scanned = self.pump(previews, false, sink);
        self.src.want_payloads(true);
        scanned
    }

    /// After `scan`, stream new arrivals until the sink breaks.
    pub fn tail(
        &mut self,
        sink: &mut dyn FnMut(SessionEvent) -> ControlFlow<()>,
    ) -> Result<(), SessionError> {
        self.pump(true, true, sink)
    }

    fn pump(
        &mut self,
        previews: bool,
        tail: bool,
        sink: &mut dyn FnMut(SessionEvent) -> ControlFlow<()>,
    ) -> Result<(), SessionError> {
        let Session {
            settings,
            src,
            held,
            decided_ids,
            decided,
            outcomes,
            problems,
            problem_count,
            partial,
            notices,
            ..
        } = self;
        let ctx = Prep {
            masker: &settings.masker,
            mappings: &settings.mappings,
            codec: settings.codec.as_deref(),
            previews,
            since: settings.since,
            decided_ids,
            decided,
            outcomes,
        };
        // Prepared letters go to the front end, their held deliveries remembered first.
        let mut emit = |ev: SessionEvent| -> bool {
            if let SessionEvent::Letters(prepared) = &ev {
                remember_held(held, prepared);
            }
            sink(ev).is_continue()
        };
        let mut reports = Reports {
            partial,
            notices,
            problems,
            problem_count,
        };
        std::thread::scope(|scope| {
            let mut pump = Pump {
                tail,
                batch: Vec::with_capacity(if tail { TAIL_BATCH } else { BATCH }),
                last: Instant::now(),
                pipeline: preparing(scope, &ctx),
                emit: &mut emit,
            };
            let mut stopped = false;
            let mut broken = false;
            let mut on_event = |ev: ScanEvent| -> ControlFlow<()> {
                let step = scan_event(&mut pump, &mut reports, ev);
                let (go, stop, broke) = match step {
                    Ok(true) => (true, false, false),
                    Ok(false) => (false, true, false),
                    Err(Broken) => (false, true, true),
                };
                (stopped, broken) = (stopped || stop, broken || broke);
                if go {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            };
            let result = match tail {
                true => src.tail(&mut on_event),
                false => src.scan(&mut on_event),
            };
            if !stopped && pump.flush(true).is_err() {
                broken = true;
            }
            if broken {
                return Err(preparing_failed());
            }
            result.map_err(SessionError::from)
        })
    }

    /// Apply decisions a crash or a lost connection left pending to the exact letters
    /// this browse holds — once, audited. Returns lines for the user; failures are lines
    /// too (the browse goes on). Read-only sessions apply nothing.
    pub fn reconcile(&mut self) -> Vec<String> {
        if self.settings.principal.read_only || self.decided.is_empty() {
            return Vec::new();
        }
        match self.settings.principal.existing_ledger() {
            Ok(Some(_)) => {}
            Ok(None) => return Vec::new(),
            Err(e) => return vec![format!("warning: cannot read the ledger: {e}")],
        }
        // Applying a pending decision acks a message: not on a ledger that fails
        // verification.
        let mut ledger = match self.settings.principal.ledger_to_write() {
            Ok(l) => l,
            Err(e) => return vec![format!("warning: pending decisions not applied: {e}")],
        };
        let by_id = self.held_by_id();
        let held_of = |id: &str| by_id.get(id).cloned().unwrap_or_default();
        match decisions::reconcile(
            &mut *ledger,
            self.src.as_mut(),
            &self.settings.source_key,
            &held_of,
        ) {
            Ok(notes) => notes,
            Err(e) => vec![format!("warning: reconciling with the ledger failed: {e}")],
        }
    }

    /// One letter's full bytes (payloads are not kept after a scan).
    pub fn fetch(&mut self, coords: &Coords) -> Result<RawLetter, SessionError> {
        Ok(self.src.fetch(coords)?)
    }

    /// One letter read again by its coordinates and prepared as the scan prepares
    /// (conventions, masked fields): for a front end whose copy was evicted.
    pub fn fetch_prepared(&mut self, coords: &Coords) -> Result<Kept, SessionError> {
        fetch_prepared(self.src.as_mut(), &self.settings, coords)
    }
}

/// [`Session::fetch_prepared`] on borrowed parts (a replay's turn holds the session).
fn fetch_prepared(
    src: &mut dyn DlqSource,
    settings: &Settings,
    coords: &Coords,
) -> Result<Kept, SessionError> {
    let raw = src.fetch(coords)?;
    Ok(std::sync::Arc::new(settings.extract(raw)))
}

impl Settings {
    /// One raw letter prepared as a scan prepares it (conventions, the schema decoder,
    /// masked fields), without a preview.
    pub fn extract(&self, raw: RawLetter) -> dlq_core::model::DeadLetter {
        dlq_core::catalog::extract_masked(&self.masker, &self.mappings, self.codec.as_deref(), raw)
    }
}
fn preparing_failed() -> SessionError {
    SessionError::Invalid(
        "preparing letters stopped: a preparing thread failed (a bug; nothing was settled)".into(),
    )
}

/// Held RabbitMQ deliveries by the exact letter, for settling them later.
fn remember_held(held: &mut dlq_core::held::HeldDeliveries, prepared: &[Prepared]) {
    for p in prepared {
        if let Some(
            c @ Coords::Amqp {
                stream_offset: None,
                ..
            },
        ) = &p.letter.raw.coords
        {
            if let Some(fp) = p.fp {
                held.add(fp, &p.letter.id.value.0, c);
            }
        }
    }
}

/// One event of a scan: letters into the pipeline, the rest reported to the front end.
/// Whether to go on; `Broken` when the preparing threads are gone.
fn scan_event(
    pump: &mut Pump<'_>,
    reports: &mut Reports<'_>,
    ev: ScanEvent,
) -> Result<bool, Broken> {
    match ev {
        ScanEvent::Letters(raws) => pump.letters(raws),
        ScanEvent::Progress { done, total } => {
            pump.heartbeat(SessionEvent::Progress { done, total })
        }
        ScanEvent::Partial {
            location,
            browsed,
            total,
            why,
        } => Ok((pump.emit)(reports.partial(Coverage {
            location,
            browsed,
            total,
            why,
        }))),
        ScanEvent::Notice { location, message } => {
            Ok((pump.emit)(reports.notice(Problem { location, message })))
        }
        ScanEvent::Problem { location, message } => {
            Ok((pump.emit)(reports.problem(Problem { location, message })))
        }
    }
}

/// What a scan reports besides letters, kept (the first ones) for the front ends.
struct Reports<'a> {
    partial: &'a mut Vec<Coverage>,
    notices: &'a mut Vec<Problem>,
    problems: &'a mut Vec<Problem>,
    problem_count: &'a mut u64,
}

impl Reports<'_> {
    fn partial(&mut self, c: Coverage) -> SessionEvent {
        self.partial.push(c.clone());
        SessionEvent::Partial(c)
    }

    fn notice(&mut self, n: Problem) -> SessionEvent {
        if self.notices.len() < MAX_KEPT_PROBLEMS {
            self.notices.push(n.clone());
        }
        SessionEvent::Notice(n)
    }

    fn problem(&mut self, p: Problem) -> SessionEvent {
        *self.problem_count += 1;
        if self.problems.len() < MAX_KEPT_PROBLEMS {
            self.problems.push(p.clone());
        }
        SessionEvent::Problem(p)
    }
}
