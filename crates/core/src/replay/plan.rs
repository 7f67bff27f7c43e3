//! The replay plan — what a dry-run shows and the engine sends: each letter's target,
//! headers and payload, the order, what is left out and why, and the warnings an
//! operator must see before anything is published.

pub use super::options::{target_json, Options};
use super::stale::{origin_offset, without_stale};
use crate::conventions::{extract, UserMapping};
use crate::model::{Coords, DeadLetter, Header, HeaderValue, Origin, TriageState};
use crate::ports::{OriginLog, Outgoing, Target};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// Headers the broker wrote when it dead-lettered the message: a replayed copy must not
/// carry them (the next dead-lettering would be misread as older, and quorum queues
/// count `x-delivery-count` themselves). Earlier replay stamps are replaced.
fn stripped(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "x-death"
        || n.starts_with("x-first-death-")
        || n.starts_with("x-last-death-")
        || n == "x-delivery-count"
        || n.starts_with("x-dlq-replay")
}

/// AMQP delivery facts of the DLQ copy, not properties of the message.
const DELIVERY_FACTS: [&str; 2] = ["exchange", "routing_key"];

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

/// What planning needs beyond the candidates.
pub struct Context<'a, 'o> {
    pub id: String,
    pub source: String,
    pub actor: String,
    pub mappings: &'a [UserMapping],
    /// The source's broker: a target must be on it.
    pub kafka_source: bool,
    /// Origin partitions for the stale-key check (Kafka).
    pub origin_log: Option<&'o mut dyn OriginLog>,
    /// `--resume`: the seq each (letter id, binding) had in the plan it continues.
    pub seqs: Option<&'a HashMap<(String, String), u32>>,
}

const EXAMPLES: usize = 3;

/// The letter's origin, read again from its raw bytes (the candidate's extracted fields
/// are masked for display; a target must be exact).
fn origin_of(c: &Candidate, mappings: &[UserMapping]) -> Option<Origin> {
    extract(c.letter.raw.clone(), mappings)
        .failure
        .origin
        .map(|o| o.value)
}

fn target_of(origin: &Origin, kafka: bool) -> Option<Target> {
    match (origin, kafka) {
        (Origin::Kafka { topic, .. }, true) => Some(Target::Kafka {
            topic: topic.clone(),
        }),
        (
            Origin::Amqp {
                exchange,
                routing_keys,
                queue,
            },
            false,
        ) => match (routing_keys.first(), queue) {
            (Some(rk), _) => Some(Target::Amqp {
                exchange: exchange.clone(),
                routing_key: rk.clone(),
            }),
            (None, Some(q)) => Some(Target::Amqp {
                exchange: String::new(),
                routing_key: q.clone(),
            }),
            (None, None) => None,
        },
        (Origin::Endpoint(e), true) => Some(Target::Kafka { topic: e.clone() }),
        (Origin::Endpoint(e), false) => Some(Target::Amqp {
            exchange: String::new(),
            routing_key: e.clone(),
        }),
        _ => None,
    }
}

/// Headers of the replayed copy: death headers out, replay stamps in, the rest kept.
fn replay_headers(c: &Candidate, id: &str, actor: &str, count: u32, kafka: bool) -> Vec<Header> {
    let mut h: Vec<Header> = c
        .letter
        .raw
        .headers
        .iter()
        .filter(|h| !stripped(&h.name))
        .cloned()
        .collect();
    let count = if kafka {
        HeaderValue::text(&count.to_string())
    } else {
        HeaderValue::Int(i64::from(count))
    };
    h.push(Header::new("x-dlq-replay-id", HeaderValue::text(id)));
    h.push(Header::new("x-dlq-replay-count", count));
    h.push(Header::new("x-dlq-replayed-by", HeaderValue::text(actor)));
    h.push(Header::new(
        "x-dlq-replayed-from",
        HeaderValue::text(&c.location),
    ));
    h
}

/// When a letter first happened, for ordering (ms): event time, first failure, then
/// the dead-lettering.
fn when(l: &DeadLetter) -> i64 {
    l.event
        .occurred_at
        .as_ref()
        .or(l.failure.first_failed_at.as_ref())
        .or(l.dead_lettered_at.as_ref())
        .map(|t| t.value.timestamp_millis())
        .or(l.raw.timestamp.map(|t| t.timestamp_millis()))
        .unwrap_or(i64::MAX)
}

fn dlq_position(l: &DeadLetter) -> (String, i64, i64) {
    match &l.raw.coords {
        Some(Coords::Kafka {
            topic,
            partition,
            offset,
        }) => (topic.clone(), i64::from(*partition), *offset),
        Some(Coords::Amqp {
            queue,
            position,
            stream_offset,
            ..
        }) => (
            queue.clone(),
            0,
            stream_offset.unwrap_or(i64::try_from(*position).unwrap_or(i64::MAX)),
        ),
        None => (String::new(), 0, 0),
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

/// Build the plan. Letters stay in their original order per key (origin offset when
/// known, else when they happened); exclusions and warnings say why.
pub fn build(cands: Vec<Candidate>, opts: &Options, ctx: Context<'_, '_>) -> Plan {
    let Context {
        id,
        source,
        actor,
        mappings,
        kafka_source,
        origin_log,
        seqs,
    } = ctx;
    let mut excluded = Vec::new();
    let mut warnings = Vec::new();
    let drafts = screen(
        cands,
        opts,
        mappings,
        kafka_source,
        &mut excluded,
        &mut warnings,
    );
    let keep = with_target(drafts, &mut excluded, &mut warnings);
    let (mut keep, stale) = without_stale(
        keep,
        origin_log,
        kafka_source,
        opts,
        &mut excluded,
        &mut warnings,
    );
    order(&mut keep);
    warn_ordering_and_revisions(&keep, opts, &mut warnings);
    let out = Outgoings {
        id: &id,
        actor: &actor,
        kafka_source,
        opts,
    };
    let (items, breakdown, sample) = out.items(keep, seqs);
    Plan {
        id,
        source,
        options: opts.clone(),
        items,
        excluded,
        warnings,
        breakdown,
        stale,
        sample,
        origin_from: BTreeMap::new(),
        read_back: Vec::new(),
    }
}

/// Leave out what must not be sent (discarded, already replayed, replayed too often)
/// and find each letter's target.
fn screen(
    cands: Vec<Candidate>,
    opts: &Options,
    mappings: &[UserMapping],
    kafka_source: bool,
    excluded: &mut Vec<(String, Why)>,
    warnings: &mut Vec<Warning>,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    let (mut replayed_before, mut over_limit) = (Vec::new(), Vec::new());
    let mut held: Vec<(String, String)> = Vec::new();
    for c in cands {
        if let Some(by) = &c.held_by {
            held.push((c.letter.id.value.0.clone(), by.clone()));
            excluded.push((c.letter.id.value.0.clone(), Why::Held));
            continue;
        }
        let why = match c.state {
            TriageState::Discarded => Some(Why::Discarded),
            TriageState::Replayed | TriageState::Replaying | TriageState::Resolved => {
                Some(Why::AlreadyReplayed)
            }
            _ => None,
        };
        if let Some(w) = why {
            excluded.push((c.letter.id.value.0.clone(), w));
            continue;
        }
        let count = c.letter.replay_count.max(c.ledger_replays);
        if count > 0 {
            replayed_before.push(c.letter.id.value.0.clone());
        }
        if count >= opts.max_replay_count && !opts.force_replay_count {
            over_limit.push(c.letter.id.value.0.clone());
            excluded.push((c.letter.id.value.0.clone(), Why::ReplayCount));
            continue;
        }
        let origin = origin_of(&c, mappings);
        let target = opts
            .to
            .clone()
            .or_else(|| origin.as_ref().and_then(|o| target_of(o, kafka_source)));
        drafts.push(Draft { c, origin, target });
    }
    if let Some((_, by)) = held.first() {
        let ids: Vec<String> = held.iter().map(|(id, _)| id.clone()).collect();
        warn(
            warnings,
            "held",
            format!("left out: held by another running replay — {by}"),
            &refs(&ids),
        );
    }
    warn(
        warnings,
        "replayed-before",
        "replayed before (x-dlq-replay-count or the ledger)".into(),
        &refs(&replayed_before),
    );
    warn(
        warnings,
        "replay-count",
        format!(
            "refused: replayed {} or more times already (--force-replay-count to send)",
            opts.max_replay_count
        ),
        &refs(&over_limit),
    );
    drafts
}

/// Leave out letters with no known target.
fn with_target(
    drafts: Vec<Draft>,
    excluded: &mut Vec<(String, Why)>,
    warnings: &mut Vec<Warning>,
) -> Vec<Draft> {
    let (keep, lost): (Vec<Draft>, Vec<Draft>) =
        drafts.into_iter().partition(|d| d.target.is_some());
    let lost_ids: Vec<String> = lost.iter().map(|d| d.c.letter.id.value.0.clone()).collect();
    warn(
        warnings,
        "no-target",
        "no known target: their headers name no origin (use --to)".into(),
        &refs(&lost_ids),
    );
    excluded.extend(lost_ids.into_iter().map(|i| (i, Why::NoTarget)));
    keep
}

/// Keys with several letters (sent in order), and revisions used or not.
fn warn_ordering_and_revisions(keep: &[Draft], opts: &Options, warnings: &mut Vec<Warning>) {
    let mut per_key: HashMap<&[u8], Vec<&str>> = HashMap::new();
    for d in keep {
        if let Some(k) = d.c.letter.raw.key.as_deref() {
            per_key
                .entry(k)
                .or_default()
                .push(d.c.letter.id.value.0.as_str());
        }
    }
    let multi: Vec<&str> = per_key
        .values()
        .filter(|v| v.len() > 1)
        .flat_map(|v| v.iter().copied())
        .collect();
    if !multi.is_empty() {
        let keys = per_key.values().filter(|v| v.len() > 1).count();
        warnings.push(Warning {
            kind: "same-key",
            message: format!(
                "{keys} keys have several letters: each key's letters go in their original order"
            ),
            count: multi.len(),
            examples: multi.iter().take(EXAMPLES).map(|s| s.to_string()).collect(),
        });
    }
    let with_rev: Vec<&str> = keep
        .iter()
        .filter(|d| d.c.revision.is_some())
        .map(|d| d.c.letter.id.value.0.as_str())
        .collect();
    let rev_msg = if opts.use_revisions {
        "their latest revision is sent instead of the original payload".to_string()
    } else {
        "have revisions that will NOT be used (--use-revisions sends the latest)".to_string()
    };
    warn(warnings, "revisions", rev_msg, &with_rev);
}

/// What every planned letter is sent as, under which replay.
struct Outgoings<'a> {
    id: &'a str,
    actor: &'a str,
    kafka_source: bool,
    opts: &'a Options,
}

/// A dry-run sample line: letter id, group, target, masked preview.
type SampleLine = (String, String, String, String);

/// Letters by (group, target).
type Breakdown = BTreeMap<(String, String), usize>;

impl Outgoings<'_> {
    /// The items in order, the breakdown by (group, target), and the sample. A resume
    /// keeps each letter's seq; letters new to it get seqs after the journal's.
    fn items(
        &self,
        keep: Vec<Draft>,
        seqs: Option<&HashMap<(String, String), u32>>,
    ) -> (Vec<Item>, Breakdown, Vec<SampleLine>) {
        let mut items = Vec::with_capacity(keep.len());
        let mut breakdown = BTreeMap::new();
        let mut sample = Vec::new();
        let mut next_seq = seqs.map_or(0, |s| s.values().max().map_or(0, |m| m + 1));
        for (n, d) in keep.into_iter().enumerate() {
            let Draft { c, target, .. } = d;
            let Some(target) = target else { continue };
            let seq =
                match seqs.and_then(|s| s.get(&(c.letter.id.value.0.clone(), c.binding.clone()))) {
                    Some(s) => *s,
                    None if seqs.is_some() => {
                        next_seq += 1;
                        next_seq - 1
                    }
                    None => u32::try_from(n).unwrap_or(u32::MAX),
                };
            let (item, preview) = self.item(c, target, seq);
            let target = item.outgoing.target.to_string();
            *breakdown
                .entry((item.group.clone(), target.clone()))
                .or_insert(0) += 1;
            if sample.len() < EXAMPLES {
                sample.push((item.letter_id.clone(), item.group.clone(), target, preview));
            }
            items.push(item);
        }
        (items, breakdown, sample)
    }

    /// One letter as it is sent: its key, stamped headers, properties (delivery facts
    /// dropped) and payload (the latest revision when asked for); and its sample preview.
    fn item(&self, c: Candidate, target: Target, seq: u32) -> (Item, String) {
        let count = c.letter.replay_count.max(c.ledger_replays) + 1;
        let (payload, revision) = match (&c.revision, self.opts.use_revisions) {
            (Some((n, p)), true) => (p.clone(), Some(*n)),
            _ => (c.letter.raw.payload.clone(), None),
        };
        let outgoing = Outgoing {
            target,
            key: c.letter.raw.key.clone(),
            headers: replay_headers(&c, self.id, self.actor, count, self.kafka_source),
            properties: c
                .letter
                .raw
                .properties
                .iter()
                .filter(|(k, _)| !DELIVERY_FACTS.contains(&k.as_str()))
                .cloned()
                .collect(),
            payload,
        };
        let preview = match (&c.revision_preview, revision) {
            (Some(p), Some(n)) => format!("(revision {n}) {p}"),
            _ => c.preview.clone(),
        };
        let group = c.letter.reason_code().to_string();
        let item = Item {
            seq,
            letter_id: c.letter.id.value.0.clone(),
            binding: c.binding,
            location: c.location,
            settle: c.settle,
            key: c.letter.raw.key.clone(),
            message_id: c.letter.event.message_id.as_ref().map(|m| m.value.clone()),
            group,
            revision,
            outgoing,
        };
        (item, preview)
    }
}

/// Original order: by when each letter happened, then per key by origin offset (the
/// key's true order on its partition) where every letter of the key has one.
fn order(ds: &mut [Draft]) {
    ds.sort_by_key(|d| (when(&d.c.letter), dlq_position(&d.c.letter)));
    let mut slots: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    for (i, d) in ds.iter().enumerate() {
        if let Some(k) = &d.c.letter.raw.key {
            slots.entry(k.clone()).or_default().push(i);
        }
    }
    for idx in slots.values().filter(|v| v.len() > 1) {
        let offsets: Option<Vec<i64>> = idx.iter().map(|&i| origin_offset(&ds[i])).collect();
        let Some(offsets) = offsets else { continue };
        let mut by: Vec<(i64, usize)> = offsets.into_iter().zip(idx.iter().copied()).collect();
        by.sort();
        // Permute the key's drafts into the slots it already holds.
        let moved: Vec<Draft> = by
            .iter()
            .map(|&(_, i)| Draft {
                c: ds[i].c.clone(),
                origin: ds[i].origin.clone(),
                target: ds[i].target.clone(),
            })
            .collect();
        for (slot, d) in idx.iter().zip(moved) {
            ds[*slot] = d;
        }
    }
}
