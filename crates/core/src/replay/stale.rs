//! The stale-key check before a Kafka replay: a letter whose origin partition already
//! holds a newer record with the same key would put old data after new, so it is left
//! out unless `--include-stale`.

use super::planned::{refs, warn, Draft, StaleCheck, Warning, Why};
use super::Options;
use crate::model::Origin;
use crate::ports::{KeyScan, OriginLog};
use std::collections::{BTreeMap, HashSet};

/// The stale-key check (Kafka origins only): letters whose origin partition already
/// holds a newer record with the same key are left out unless `include_stale`.
pub(super) fn without_stale(
    mut keep: Vec<Draft>,
    origin_log: Option<&mut dyn OriginLog>,
    kafka_source: bool,
    opts: &Options,
    excluded: &mut Vec<(String, Why)>,
    warnings: &mut Vec<Warning>,
) -> (Vec<Draft>, StaleCheck) {
    let (stale_check, stale_idx) = match origin_log {
        Some(log) if kafka_source && opts.to.is_none() => check_stale(&keep, log, opts),
        _ => (StaleCheck::default(), HashSet::new()),
    };
    let stale_ids: Vec<String> = keep
        .iter()
        .enumerate()
        .filter(|(i, _)| stale_idx.contains(i))
        .map(|(_, d)| d.c.letter.id.value.0.clone())
        .collect();
    if opts.include_stale {
        warn(
            warnings,
            "stale-key",
            "stale keys INCLUDED (--include-stale): the origin partition already has a newer record with the same key; replaying the old event can undo a newer state".into(),
            &refs(&stale_ids),
        );
    } else {
        warn(
            warnings,
            "stale-key",
            "excluded, stale keys: the origin partition already has a newer record with the same key (--include-stale to send)".into(),
            &refs(&stale_ids),
        );
        let mut i = 0;
        keep.retain(|_| {
            i += 1;
            !stale_idx.contains(&(i - 1))
        });
        excluded.extend(stale_ids.iter().map(|i| (i.clone(), Why::Stale)));
    }
    warn_stale_check(&stale_check, opts, warnings);
    (keep, stale_check)
}

/// What the stale-key check could not do.
fn warn_stale_check(stale_check: &StaleCheck, opts: &Options, warnings: &mut Vec<Warning>) {
    if stale_check.partial > 0 {
        warnings.push(Warning {
            kind: "stale-check-partial",
            message: format!(
                "the stale-key check read at most {} records per origin partition: {} letters were not fully checked",
                opts.stale_budget, stale_check.partial
            ),
            count: stale_check.partial,
            examples: Vec::new(),
        });
    }
    if stale_check.unchecked > 0 {
        warnings.push(Warning {
            kind: "stale-check-unavailable",
            message: "keyed letters without an origin partition and offset in their headers: not checked for staleness".into(),
            count: stale_check.unchecked,
            examples: Vec::new(),
        });
    }
    for e in &stale_check.errors {
        warnings.push(Warning {
            kind: "stale-check-error",
            message: format!("the stale-key check failed: {e}"),
            count: 0,
            examples: Vec::new(),
        });
    }
}

pub(super) fn origin_offset(d: &Draft) -> Option<i64> {
    match &d.origin {
        Some(Origin::Kafka { offset, .. }) => *offset,
        _ => None,
    }
}

/// A letter to check: its index, origin offset and key.
type Keyed = (usize, i64, Vec<u8>);

/// Read each origin partition once from the oldest letter's offset: a letter is stale
/// when its key has a newer record there.
fn check_stale(
    ds: &[Draft],
    log: &mut dyn OriginLog,
    opts: &Options,
) -> (StaleCheck, HashSet<usize>) {
    let mut check = StaleCheck::default();
    let mut by_part: BTreeMap<(String, i32), Vec<Keyed>> = BTreeMap::new();
    for (i, d) in ds.iter().enumerate() {
        let Some(key) = d.c.letter.raw.key.clone() else {
            continue;
        };
        match &d.origin {
            Some(Origin::Kafka {
                topic,
                partition: Some(p),
                offset: Some(o),
            }) => by_part
                .entry((topic.clone(), *p))
                .or_default()
                .push((i, *o, key)),
            _ => check.unchecked += 1,
        }
    }
    let mut stale = HashSet::new();
    for ((topic, p), letters) in by_part {
        let from = letters.iter().map(|l| l.1).min().unwrap_or(0) + 1;
        let keys: HashSet<Vec<u8>> = letters.iter().map(|l| l.2.clone()).collect();
        // The letters' own originals are not "newer records": they failed too.
        let own: HashSet<i64> = letters.iter().map(|l| l.1).collect();
        let scan: KeyScan = match log.newest_by_key(&topic, p, from, &keys, &own, opts.stale_budget)
        {
            Ok(s) => s,
            Err(e) => {
                check.errors.push(format!("{topic}/{p}: {e}"));
                check.unchecked += letters.len();
                continue;
            }
        };
        for (i, offset, key) in letters {
            check.checked += 1;
            match scan.newest.get(&key) {
                Some(&newer) if newer > offset => {
                    check.stale += 1;
                    stale.insert(i);
                }
                _ if !scan.complete => check.partial += 1,
                _ => {}
            }
        }
    }
    (check, stale)
}
