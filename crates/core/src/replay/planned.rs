//! What a replay plan is made of: the candidates, the items to send, why letters are left
//! out, the warnings, and the plan itself. `plan` builds one, `stale` screens it.

use super::options::Options;
use crate::model::{Coords, DeadLetter, Origin, TriageState};
use crate::ports::{Outgoing, Target};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// Examples a warning lists.
pub(super) const EXAMPLES: usize = 3;

/// One letter as the session knows it, ready to plan.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Extracted fields masked (ids, reasons); `raw` as the broker gave it. Shared with
    /// the scan's preparation: a re-plan copies no letter.
    pub letter: std::sync::Arc<DeadLetter>,
    pub binding: String,
    /// Where it sits in the DLQ (`topic/p/o`, `queue#n`).
    pub location: String,
    /// What settles it after the replay is confirmed (a held RabbitMQ delivery).
    pub settle: Option<Coords>,
    pub state: TriageState,
    /// Confirmed replays of this letter id in the ledger.
    pub ledger_replays: u32,
    /// Its latest revision: (number, payload).
    pub revision: Option<(i64, Vec<u8>)>,
    /// Masked payload preview, for the dry-run's sample.
    pub preview: String,
    /// The same of its latest revision.
    pub revision_preview: Option<String>,
    /// Another running replay holds it: who, which, since when (see `Claim::describe`).
    pub held_by: Option<String>,
}

/// One letter the engine will send.
#[derive(Debug, Clone)]
pub struct Item {
    /// Position in the plan (the journal's key); kept across `--resume`.
    pub seq: u32,
    pub letter_id: String,
    pub binding: String,
    pub location: String,
    pub settle: Option<Coords>,
    /// Record key (Kafka): one key's letters are sent in order (see the engine).
    pub key: Option<Vec<u8>>,
    pub message_id: Option<String>,
    pub group: String,
    pub revision: Option<i64>,
    pub outgoing: Outgoing,
}

/// Why a letter is not in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Why {
    Discarded,
    AlreadyReplayed,
    ReplayCount,
    NoTarget,
    Stale,
    /// Another running replay holds it (one sender per letter).
    Held,
    /// Sent by an earlier run that stopped before the broker confirmed it, and its
    /// target cannot be read back to tell (RabbitMQ): `--resend-unconfirmed` sends it.
    MayHaveBeenSent,
    /// Found in its target, stamped with this replay's id: the broker has it.
    FoundInTarget,
    /// The DLQ record has no value to send: a Kafka share group's broker-written DLQ
    /// copies none by default (KIP-1191); the payload is the source record.
    NoPayload,
    /// A byte-identical copy of a letter already in the plan (the same id and binding):
    /// one letter, decided and sent once.
    Duplicate,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Discarded => "discarded",
            Why::AlreadyReplayed => "already-replayed",
            Why::ReplayCount => "replay-count",
            Why::NoTarget => "no-target",
            Why::Stale => "stale-key",
            Why::Held => "held-by-replay",
            Why::MayHaveBeenSent => "may-have-been-sent",
            Why::FoundInTarget => "found-in-target",
            Why::NoPayload => "no-payload",
            Why::Duplicate => "duplicate",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Why::Discarded => "discarded (a recorded decision)",
            Why::AlreadyReplayed => "already replayed (its copy was confirmed by the broker)",
            Why::ReplayCount => "replayed too often already (--force-replay-count to send)",
            Why::NoTarget => "no known target (no origin in its headers: use --to)",
            Why::Stale => "stale key: the origin partition has a newer record with the same key (--include-stale to send)",
            Why::Held => "held by another running replay (one sender per letter; see `replays`)",
            Why::MayHaveBeenSent => "may have been sent: in flight when the replay stopped, and the target cannot be read back (--resend-unconfirmed to send again)",
            Why::FoundInTarget => "already delivered: found in its target with this replay's id (recorded as confirmed, not sent again)",
            Why::NoPayload => "no payload: the DLQ record has no value to send (a share group's copy made without its record — errors.deadletterqueue.copy.record.enable=false — whose source record could not be read; a tombstone; an empty body), and an empty record is never sent; discard it, or give it a revision",
            Why::Duplicate => "a byte-identical copy of a letter already in the plan (same id and binding): one letter, sent once",
        }
    }
}

/// A warning with how many letters it concerns and a few examples (letter ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub kind: &'static str,
    pub message: String,
    pub count: usize,
    pub examples: Vec<String>,
}

/// How the stale-key check went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleCheck {
    /// Letters checked against their origin partition.
    pub checked: usize,
    pub stale: usize,
    /// Letters whose partition was read only in part (budget): not known to be fresh.
    pub partial: usize,
    /// Kafka letters with a key but no origin partition/offset in their headers.
    pub unchecked: usize,
    pub errors: Vec<String>,
}

/// A replay plan: the dry-run.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub id: String,
    pub source: String,
    pub options: Options,
    pub items: Vec<Item>,
    pub excluded: Vec<(String, Why)>,
    pub warnings: Vec<Warning>,
    /// Letters by (reason group, target).
    pub breakdown: BTreeMap<(String, String), usize>,
    pub stale: StaleCheck,
    /// (letter id, group, target, masked preview) of the first few.
    pub sample: Vec<(String, String, String, String)>,
    /// Kafka targets: where each partition ended when the plan was made, journaled with
    /// the replay so a resume reads back from there what a stopped run had in flight.
    pub origin_from: BTreeMap<String, Vec<(i32, i64)>>,
    /// Letters in doubt in a stopped replay (its id, the letter's seq there) that this
    /// plan sends: their target was read back for that replay's id and they were not
    /// there, or `--resend-unconfirmed` was given. The journal refuses a start that
    /// would send any other in-doubt letter.
    pub read_back: Vec<(String, u32)>,
    /// Who the targets' messages reach (consumer groups and their lag), in lines; empty
    /// when not looked up.
    pub reaches: Vec<String>,
    /// Targets that do not exist (Kafka topics): the plan is refused unless
    /// `Options::create_targets`.
    pub missing_targets: Vec<String>,
}

impl Plan {
    /// What an approval covers: the source and each letter (id, binding) with its
    /// target, in plan order. The pace may change after approval; the letters may not.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut field = |s: &str| {
            h.update((s.len() as u64).to_be_bytes());
            h.update(s.as_bytes());
        };
        field(&self.source);
        for i in &self.items {
            field(&i.letter_id);
            field(&i.binding);
            field(&format!("{:?}", i.outgoing.target));
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Leave out letters another process took after this plan was made — held by a
    /// running replay (said, with by whom) or replayed meanwhile.
    pub fn exclude_taken(
        &mut self,
        claims: &[crate::journal::Claim],
        replayed: &[(String, String)],
    ) {
        let key = |id: &str, b: &str| (id.to_string(), b.to_string());
        let held: HashSet<(String, String)> = claims
            .iter()
            .map(|c| key(&c.letter_id, &c.binding))
            .collect();
        let done: HashSet<(String, String)> = replayed.iter().cloned().collect();
        let (mut held_ids, mut done_ids) = (Vec::new(), Vec::new());
        let breakdown = &mut self.breakdown;
        self.items.retain(|i| {
            let k = key(&i.letter_id, &i.binding);
            if done.contains(&k) {
                done_ids.push(i.letter_id.clone());
            } else if held.contains(&k) {
                held_ids.push(i.letter_id.clone());
            } else {
                return true;
            }
            let slot = (i.group.clone(), i.outgoing.target.to_string());
            if let Some(n) = breakdown.get_mut(&slot) {
                *n -= 1;
                if *n == 0 {
                    breakdown.remove(&slot);
                }
            }
            false
        });
        self.excluded
            .extend(done_ids.iter().map(|id| (id.clone(), Why::AlreadyReplayed)));
        self.excluded
            .extend(held_ids.iter().map(|id| (id.clone(), Why::Held)));
        if let Some(c) = claims.first().filter(|_| !held_ids.is_empty()) {
            warn(
                &mut self.warnings,
                "held",
                format!(
                    "left out: held by another running replay — {}",
                    c.describe()
                ),
                &refs(&held_ids),
            );
        }
        warn(
            &mut self.warnings,
            "replayed-meanwhile",
            "left out: replayed by another process since this plan was made".into(),
            &refs(&done_ids),
        );
    }

    /// Seconds to send everything at the chosen rates (canary, watch, ramp).
    pub fn estimate(&self) -> Duration {
        let n = self.items.len();
        let canary = self.options.canary.min(n);
        let rest = n - canary;
        let secs = canary as f64 / self.options.canary_rate.max(0.001)
            + if canary > 0 {
                self.options.watch.as_secs_f64()
            } else {
                0.0
            }
            + rest as f64 / self.options.rate.max(0.001)
            + self.options.watch.as_secs_f64();
        Duration::from_secs_f64(secs)
    }

    /// (seq, letter id, binding, location) of every letter, as the journal records them.
    pub fn journal_rows(&self) -> Vec<(u32, &str, &str, &str)> {
        self.items
            .iter()
            .map(|i| {
                (
                    i.seq,
                    i.letter_id.as_str(),
                    i.binding.as_str(),
                    i.location.as_str(),
                )
            })
            .collect()
    }

    /// Excluded letters counted by reason.
    pub fn excluded_counts(&self) -> BTreeMap<Why, usize> {
        let mut m = BTreeMap::new();
        for (_, w) in &self.excluded {
            *m.entry(*w).or_insert(0) += 1;
        }
        m
    }
}

pub(super) struct Draft {
    pub(super) c: Candidate,
    pub(super) origin: Option<Origin>,
    pub(super) target: Option<Target>,
}

pub(super) fn warn(warnings: &mut Vec<Warning>, kind: &'static str, message: String, ids: &[&str]) {
    if ids.is_empty() {
        return;
    }
    warnings.push(Warning {
        kind,
        message,
        count: ids.len(),
        examples: ids.iter().take(EXAMPLES).map(|s| s.to_string()).collect(),
    });
}

pub(super) fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
