//! The plan and the outcome of a replay in words, for every front end (the CLI prints
//! these lines, the TUI's dry-run screen shows them). Every line is sanitized: group
//! names, letter ids, targets and previews come from letters.

use super::{End, Plan};
use crate::sanitize::clean;

/// The dry-run: what would be sent, at what pace, what stops it, by group and target,
/// every warning with its count, and a masked sample. `kill` names the kill switch.
pub fn plan_lines(plan: &Plan, label: &str, resuming: bool, kill: &str) -> Vec<String> {
    let mut out = Vec::new();
    let o = &plan.options;
    let verb = if resuming { "Resuming" } else { "Replay plan" };
    out.push(format!("{verb} {} · {}", clean(&plan.id), clean(label)));
    let excluded: Vec<String> = plan
        .excluded_counts()
        .iter()
        .map(|(w, n)| format!("{n} {}", w.as_str()))
        .collect();
    out.push(format!(
        "  letters:  {} to send{}",
        plan.items.len(),
        if excluded.is_empty() {
            String::new()
        } else {
            format!(
                ", {} excluded ({})",
                plan.excluded.len(),
                excluded.join(", ")
            )
        }
    ));
    out.push("  frozen:   only these; letters arriving after this plan are not added".into());
    out.push(format!(
        "  pace:     canary {} at {}/s, watch {}s, then {}/s — about {}s in all",
        o.canary.min(plan.items.len()),
        o.canary_rate,
        o.watch.as_secs(),
        o.rate,
        plan.estimate().as_secs()
    ));
    out.push(format!(
        "  stops:    when more than {:.0}% of the latest replayed letters fail again, when the broker refuses one, or on {kill}",
        o.max_failed_ratio * 100.0
    ));
    out.push(format!(
        "  payloads: {}",
        if o.use_revisions {
            "the latest revision where a letter has one, else the original"
        } else {
            "the originals (revisions not used)"
        }
    ));
    out.push("  order:    each key's letters in their original order, none after a refusal".into());
    if o.to_failed_queue {
        out.push("  route:    each letter to the queue it failed in (the default exchange), not to its exchange: no other queue gets it".into());
    }
    for t in &plan.missing_targets {
        out.push(format!(
            "  MISSING:  target {} does not exist: {}",
            clean(t),
            if o.create_targets {
                "the replay creates it (--create-topics), with the broker's defaults for partitions and retention"
            } else {
                "refused — create it first, replay --to an existing one, or --create-topics to let the replay create it with the broker's defaults"
            }
        ));
    }
    for (i, line) in plan.reaches.iter().enumerate() {
        let head = if i == 0 { "  reaches:" } else { "          " };
        out.push(format!("{head}  {}", clean(line)));
    }
    if !plan.breakdown.is_empty() {
        out.push("  by group and target:".into());
        for ((g, t), n) in &plan.breakdown {
            out.push(format!("    {:>6}  {} → {}", n, clean(g), clean(t)));
        }
    }
    warning_lines(plan, &mut out);
    if !plan.sample.is_empty() {
        out.push("  sample (masked):".into());
        for (i, g, t, p) in &plan.sample {
            let p: String = clean(p).chars().take(60).collect();
            out.push(format!(
                "    {}  {} → {}  {p}",
                clean(i),
                clean(g),
                clean(t)
            ));
        }
    }
    out
}

/// Every warning of the plan with its count and a few of its letters.
fn warning_lines(plan: &Plan, out: &mut Vec<String>) {
    if !plan.warnings.is_empty() {
        out.push("  warnings:".into());
        for w in &plan.warnings {
            let eg = if w.examples.is_empty() {
                String::new()
            } else {
                format!(
                    " (e.g. {})",
                    w.examples
                        .iter()
                        .map(|e| clean(e))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            out.push(format!(
                "    ! {}: {}{eg}",
                crate::words::letters(w.count),
                clean(&w.message)
            ));
        }
    }
}

/// How a replay ended, in one line, from its journaled outcome.
pub fn summary_line(id: &str, end: &End, o: &serde_json::Value) -> String {
    let n = |k: &str| o.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let mut s = format!(
        "replay {} {}: {} of {} confirmed, {} failed again, {} refused, {} held back, {} not sent",
        clean(id),
        end.state(),
        n("confirmed"),
        n("planned"),
        n("failed_again"),
        n("refused"),
        n("held_back"),
        n("not_sent")
    );
    if n("withdrawn") > 0 {
        s.push_str(&format!(
            ", {} withdrawn (decided elsewhere since the plan)",
            n("withdrawn")
        ));
    }
    if n("in_doubt") > 0 {
        s.push_str(&format!(
            ", {} in doubt (resume re-sends them)",
            n("in_doubt")
        ));
    }
    if let Some(r) = end.reason() {
        s.push_str(&format!(" — {}", clean(r)));
    }
    s
}
