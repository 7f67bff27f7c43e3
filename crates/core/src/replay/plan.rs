//! The replay plan — what a dry-run shows and the engine sends: each letter's target,
//! headers and payload, the order, what is left out and why, and the warnings an
//! operator must see before anything is published.

pub use super::options::{target_json, Options};
use super::planned::{refs, warn, Draft, EXAMPLES};
pub use super::planned::{Candidate, Item, Plan, StaleCheck, Warning, Why};
use super::stale::{origin_offset, without_stale};
use crate::conventions::{extract, UserMapping};
use crate::model::{Coords, DeadLetter, Header, HeaderValue, Origin, TriageState};
use crate::ports::{OriginLog, Outgoing, Target};
use std::collections::{BTreeMap, HashMap};

/// Headers the broker wrote when it dead-lettered the message: a replayed copy must not
/// carry them (the next dead-lettering would be misread as older, and quorum queues
/// count `x-delivery-count` themselves). Earlier replay stamps are replaced.
fn stripped(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "x-death"
        || n == "x-opt-deaths"
        || n.starts_with("x-first-death-")
        || n.starts_with("x-last-death-")
        || n == "x-delivery-count"
        || n.starts_with("x-dlq-replay")
}

/// AMQP delivery facts of the DLQ copy, not properties of the message.
const DELIVERY_FACTS: [&str; 2] = ["exchange", "routing_key"];

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

/// The letter's origin, read again from its raw bytes (the candidate's extracted fields
/// are masked for display; a target must be exact).
fn origin_of(c: &Candidate, mappings: &[UserMapping]) -> Option<Origin> {
    extract(c.letter.raw.clone(), mappings)
        .failure
        .origin
        .map(|o| o.value)
}

fn target_of(origin: &Origin, kafka: bool, failed_queue: bool) -> Option<Target> {
    match (origin, kafka) {
        (Origin::Amqp { queue: Some(q), .. }, false) if failed_queue => Some(Target::Amqp {
            exchange: String::new(),
            routing_key: q.clone(),
        }),
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
        .filter(|h| !stripped(&h.name) && !h.name.starts_with("x-dlq-triage-"))
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
        reaches: Vec::new(),
        missing_targets: Vec::new(),
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
    let mut shared: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    for c in cands {
        if !seen.insert((c.letter.id.value.0.clone(), c.binding.clone())) {
            excluded.push((c.letter.id.value.0.clone(), Why::Duplicate));
            continue;
        }
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
            _ if without_payload(&c, opts) => Some(Why::NoPayload),
            _ => None,
        };
        if let Some(w) = why {
            excluded.push((c.letter.id.value.0.clone(), w));
            continue;
        }
        if shared_source(&c) && opts.to.is_none() {
            shared.push(c.letter.id.value.0.clone());
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
        let target = opts.to.clone().or_else(|| {
            origin
                .as_ref()
                .and_then(|o| target_of(o, kafka_source, opts.to_failed_queue))
        });
        drafts.push(Draft { c, origin, target });
    }
    screen_warnings(
        opts,
        &held,
        &shared,
        &replayed_before,
        &over_limit,
        warnings,
    );
    drafts
}

/// What screening left out or noticed, as warnings with their letters.
fn screen_warnings(
    opts: &Options,
    held: &[(String, String)],
    shared: &[String],
    replayed_before: &[String],
    over_limit: &[String],
    warnings: &mut Vec<Warning>,
) {
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
        "share-group-source",
        "back to a share group's source topic: every group that reads it (share and classic consumer groups alike) gets these letters again, not only the group that rejected them".into(),
        &refs(shared),
    );
    warn(
        warnings,
        "replayed-before",
        "replayed before (x-dlq-replay-count or the ledger)".into(),
        &refs(replayed_before),
    );
    warn(
        warnings,
        "replay-count",
        format!(
            "refused: replayed {} or more times already (--force-replay-count to send)",
            opts.max_replay_count
        ),
        &refs(over_limit),
    );
}

/// A Kafka share group's DLQ record without a value (the broker copies none by default):
/// sending it would publish an empty record. A revision (`--use-revisions`) gives it one.
/// An empty record is never sent: a letter with no value — a share group's copy whose
/// source record could not be read, a tombstone, an empty body, whatever its headers
/// say — stays out unless a revision gives it a payload.
fn without_payload(c: &Candidate, opts: &Options) -> bool {
    let revised = opts.use_revisions && c.revision.is_some();
    c.letter.raw.payload.is_empty() && !revised
}

/// Dead-lettered by a Kafka share group (KIP-1191).
fn shared_source(c: &Candidate) -> bool {
    c.letter
        .failure
        .consumer
        .as_ref()
        .is_some_and(|s| s.from.convention == crate::model::Convention::KafkaShareGroup)
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
    // Sending revisions where some letters have none (they arrived after the transform,
    // or it failed on them): those go as they failed.
    if opts.use_revisions && !with_rev.is_empty() {
        let without: Vec<&str> = keep
            .iter()
            .filter(|d| d.c.revision.is_none())
            .map(|d| d.c.letter.id.value.0.as_str())
            .collect();
        warn(
            warnings,
            "no-revision",
            "have no revision: their original payload is sent and may fail again (transform them too, or leave them out)".to_string(),
            &without,
        );
    }
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
