//! `dlq-triage why SOURCE -f EXPR [--json]`: why the letters the filter selects fail —
//! since when and with which release, what sets their payloads apart from the other
//! letters of their kind, and a program where a difference has a mechanical fix (the
//! TUI's `w`, from the same `dlq_app::insight`).

use super::context::{usage, Launch, Scan};
use super::WhyArgs;
use dlq_app::insight::{group_insight_with, BASELINE_SAMPLE, GROUP_SAMPLE};
use dlq_core::model::DeadLetter;
use dlq_core::store::RowId;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// Letters kept per side while scanning, beyond what is read: the sample is spread over
/// what was kept (a reservoir, seeded by row, so the same scan keeps the same letters).
const KEEP_FACTOR: usize = 2;

pub fn run(ctx: &Launch, a: &WhyArgs) -> anyhow::Result<()> {
    let mut filter = ctx.parse_filter(Some(&a.filter))?;
    let now = ctx.now_ms();
    let mut group: Vec<RowId> = Vec::new();
    let mut kept = Reservoirs::default();
    let loaded = ctx.scan_with(&a.source, false, |catalog, row, letter| {
        let Some(r) = catalog.store.row(row) else {
            return Ok(());
        };
        let selected = filter.matches(&catalog.store, r, now);
        if selected {
            group.push(row);
        }
        kept.offer(selected, row, letter);
        Ok(())
    })?;
    if group.is_empty() {
        return usage(format!(
            "no letter matches `{}`: nothing to explain",
            dlq_core::sanitize::clean(&a.filter)
        ));
    }
    // Kafka: the origin topic's records around the failed offsets are the baseline
    // where the letters name them.
    let mut origin = loaded.session.origin_log();
    let insight = group_insight_with(
        &loaded.catalog,
        &group,
        &|r| kept.get(r),
        ctx.principal().role,
        now,
        24,
        origin
            .as_deref_mut()
            .map(|l| l as &mut dyn dlq_core::ports::OriginLog),
    );
    if a.json {
        return super::output::print_json(&serde_json::to_value(&insight)?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "why {} letters of {} match `{}`",
        group.len(),
        dlq_core::sanitize::clean(&loaded.info.label),
        dlq_core::sanitize::clean(&a.filter)
    )?;
    for line in insight.lines(now) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The letters kept for reading: a bounded reservoir for the selection and one for the
/// rest, so a 1,000,000-letter source is not held in memory.
#[derive(Default)]
struct Reservoirs {
    seen: [usize; 2],
    slots: [Vec<RowId>; 2],
    letters: HashMap<RowId, Arc<DeadLetter>>,
}

impl Reservoirs {
    fn offer(&mut self, selected: bool, row: RowId, letter: Arc<DeadLetter>) {
        let side = usize::from(selected);
        let cap = KEEP_FACTOR
            * if selected {
                GROUP_SAMPLE
            } else {
                BASELINE_SAMPLE
            };
        self.seen[side] += 1;
        let seen = self.seen[side];
        if self.slots[side].len() < cap {
            self.slots[side].push(row);
            self.letters.insert(row, letter);
            return;
        }
        // Algorithm R with a hash of the row for the random draw: deterministic.
        let draw = (u64::from(row).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as usize % seen;
        if draw < cap {
            let out = std::mem::replace(&mut self.slots[side][draw], row);
            self.letters.remove(&out);
            self.letters.insert(row, letter);
        }
    }

    fn get(&self, row: RowId) -> Option<Arc<DeadLetter>> {
        self.letters.get(&row).cloned()
    }
}
