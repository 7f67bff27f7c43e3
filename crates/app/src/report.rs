//! The incident's record: `dlq-triage report` writes, as Markdown for a postmortem, what
//! failed since when, every decision in the window with who, when and how it ended, and
//! what is still open — from the ledger and a scan of the source.
//!
//! Nothing of a payload is in it, and every string that came from a letter or was typed
//! by an engineer (ids, reasons, programs, actors) goes through the detectors and the
//! sanitizer before it is written: a report is pasted into wikis and tickets.

use crate::browse::Browse;
use dlq_core::insight::since::{since_when_in, VersionFirsts};
use dlq_core::journal::{AuditEntry, Journal, JournalError, ReplayRow};
use dlq_core::masking::Masker;
use dlq_core::timefmt::format_age_ms;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

/// What a report is made from.
pub struct ReportInput<'a> {
    /// The source as shown (`demo · kafka://…`).
    pub label: &'a str,
    /// The source's key in the ledger.
    pub source_key: &'a str,
    /// The scan, grouped by reason, with the ledger's decisions followed.
    pub browse: &'a Browse,
    pub journal: &'a dyn Journal,
    /// Only entries at or after this (epoch ms); None: the whole ledger.
    pub since_ms: Option<i64>,
    pub now_ms: i64,
    /// Who generates it (the OS user).
    pub by: &'a str,
}

/// The report as Markdown.
pub fn incident_report(r: &ReportInput<'_>) -> Result<String, JournalError> {
    let masker = r.browse.catalog.masker();
    let t = |s: &str| text(masker, s);
    let entries = in_window(r, r.journal.audit_entries()?);
    let replays: Vec<ReplayRow> = r
        .journal
        .replays()?
        .into_iter()
        .filter(|x| x.source == r.source_key && at_or_after(&x.started_at, r.since_ms))
        .collect();
    let mut md = String::new();
    let window = match r.since_ms {
        Some(s) => format!("the last {}", format_age_ms(r.now_ms - s)),
        None => "everything in the ledger".to_string(),
    };
    let _ = writeln!(md, "# Incident report: {}\n", t(r.label));
    let _ = writeln!(
        md,
        "Window: {window}, up to {}. Written by {} from the ledger at {}. Payloads are not in this report; every identifier and reason is masked.\n",
        rfc(r.now_ms),
        t(r.by),
        t(&r.journal.location())
    );
    failing(&mut md, r, masker);
    decisions(&mut md, &entries, masker);
    replays_section(&mut md, &replays, masker, r.now_ms);
    others(&mut md, &entries, masker);
    ledger_state(&mut md, r.journal);
    Ok(md)
}

/// The audit entries of this source in the window.
fn in_window(r: &ReportInput<'_>, all: Vec<AuditEntry>) -> Vec<AuditEntry> {
    let store = &r.browse.catalog.store;
    let ids: HashSet<&str> = store.rows().iter().map(|row| store.id(row)).collect();
    all.into_iter()
        .filter(|e| at_or_after(&e.at, r.since_ms))
        .filter(|e| {
            let d: Value = serde_json::from_str(&e.detail).unwrap_or(Value::Null);
            d.get("source").and_then(Value::as_str) == Some(r.source_key)
                || e.target == r.source_key
                || ids.contains(e.target.as_str())
        })
        .collect()
}

fn at_or_after(at: &str, since_ms: Option<i64>) -> bool {
    let Some(since) = since_ms else { return true };
    chrono::DateTime::parse_from_rfc3339(at).is_ok_and(|t| t.timestamp_millis() >= since)
}

fn rfc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or("-".into(), |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    })
}

/// A string that came from a letter or a person: masked, one line, Markdown-inert.
fn text(masker: &Masker, s: &str) -> String {
    let line = dlq_core::sanitize::line(&masker.mask_text(s), 300);
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '<' | '>' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A program, for a code span: masked, one line, no backtick (escapes do not work in
/// a code span, so nothing else is escaped).
fn code(masker: &Masker, s: &str) -> String {
    dlq_core::sanitize::line(&masker.mask_text(s), 300).replace('`', "'")
}

/// What is still failing: the open letters by reason, since when and with what.
fn failing(md: &mut String, r: &ReportInput<'_>, masker: &Masker) {
    let b = r.browse;
    let store = &b.catalog.store;
    let groups = b.index().sorted(store);
    let open: u64 = groups.iter().map(|(_, g)| g.count).sum();
    let _ = writeln!(md, "## What is failing\n");
    if groups.is_empty() {
        let _ = writeln!(md, "No letter is open in the scan.\n");
        return;
    }
    let _ = writeln!(
        md,
        "{open} letters open in {} groups at {}.\n",
        groups.len(),
        rfc(r.now_ms)
    );
    let _ = writeln!(md, "| reason | open | first | last | since when |");
    let _ = writeln!(md, "| --- | ---: | --- | --- | --- |");
    let firsts = VersionFirsts::of(store);
    for (k, g) in groups.iter().take(30) {
        let label = b.index().labels(store, k).join(" › ");
        let w = since_when_in(&firsts, store, &g.members, r.now_ms, 24);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            text(masker, &label),
            g.count,
            w.first_ms.map_or("-".into(), rfc),
            w.last_ms.map_or("-".into(), rfc),
            text(masker, &w.sentence)
        );
    }
    if groups.len() > 30 {
        let _ = writeln!(md, "\n(+{} smaller groups)", groups.len() - 30);
    }
    let _ = writeln!(md);
}

/// One kind of decision, summed: who, why, how many, when first and last.
#[derive(Default)]
struct Tally {
    count: usize,
    first: String,
    last: String,
}

impl Tally {
    fn add(&mut self, at: &str) {
        if self.count == 0 {
            self.first = at.to_string();
        }
        self.last = at.to_string();
        self.count += 1;
    }

    fn when(&self) -> String {
        if self.first == self.last {
            self.first.clone()
        } else {
            format!("{} – {}", self.first, self.last)
        }
    }
}

fn field(e: &AuditEntry, key: &str) -> String {
    serde_json::from_str::<Value>(&e.detail)
        .ok()
        .and_then(|d| d.get(key).and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// Discards and revisions, grouped by who, why and (for revisions) which program.
fn decisions(md: &mut String, entries: &[AuditEntry], masker: &Masker) {
    let t = |s: &str| text(masker, s);
    let mut discards: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut edits: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
    for e in entries {
        match e.action.as_str() {
            "discard" => discards
                .entry((e.actor.clone(), field(e, "reason")))
                .or_default()
                .add(&e.at),
            "edit" => edits
                .entry((e.actor.clone(), field(e, "program"), field(e, "reason")))
                .or_default()
                .add(&e.at),
            _ => {}
        }
    }
    let _ = writeln!(md, "## Decisions\n");
    if discards.is_empty() && edits.is_empty() {
        let _ = writeln!(md, "No discard or revision in the window.\n");
    }
    for ((actor, reason), n) in &discards {
        let _ = writeln!(
            md,
            "- **Discarded** {} letters — {} — by {}: “{}”",
            n.count,
            n.when(),
            t(actor),
            t(reason)
        );
    }
    for ((actor, program, reason), n) in &edits {
        let how = if program.is_empty() {
            "by hand (edit)".to_string()
        } else {
            format!("by the program `{}`", code(masker, program))
        };
        let _ = writeln!(
            md,
            "- **Revised** {} letters {how} — {} — by {}: “{}”",
            n.count,
            n.when(),
            t(actor),
            t(reason)
        );
    }
    let _ = writeln!(md);
}

/// Each replay of this source: who, when, how it ended.
fn replays_section(md: &mut String, replays: &[ReplayRow], masker: &Masker, now_ms: i64) {
    let t = |s: &str| text(masker, s);
    let _ = writeln!(md, "## Replays\n");
    if replays.is_empty() {
        let _ = writeln!(md, "No replay in the window.\n");
        return;
    }
    for r in replays {
        let o = r.detail.get("outcome");
        let n = |k: &str| {
            o.and_then(|o| o.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let planned = r.detail.get("planned").and_then(Value::as_u64).unwrap_or(0);
        let revisions = r
            .detail
            .pointer("/options/use_revisions")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let state = crate::identity::replay_state(r);
        let _ = writeln!(
            md,
            "- **{}** by {} at {} → {}: **{}** — {} of {planned} confirmed, {} failed again, {} refused{}{}",
            t(&r.id),
            t(&r.actor),
            t(&r.started_at),
            t(&r.target),
            state.as_str(),
            n("confirmed"),
            n("failed_again"),
            n("refused"),
            if revisions { "; sent the latest revisions" } else { "" },
            if state.as_str() == "running" {
                format!(" (still running at {})", rfc(now_ms))
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(md);
}

/// Unmasks, refusals and the rest, counted by who and what.
fn others(md: &mut String, entries: &[AuditEntry], masker: &Masker) {
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in entries {
        let shown_above = matches!(
            e.action.as_str(),
            "discard"
                | "edit"
                | "replay"
                | "replay-applied"
                | "discard-applied"
                | "replay-send"
                | "replay-start"
                | "replay-stop"
        );
        if !shown_above {
            *counts
                .entry((e.action.clone(), e.actor.clone()))
                .or_default() += 1;
        }
    }
    if counts.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Also in the ledger\n");
    for ((action, actor), n) in counts {
        let _ = writeln!(
            md,
            "- {n} × {} by {}",
            text(masker, &action),
            text(masker, &actor)
        );
    }
    let _ = writeln!(md);
}

fn ledger_state(md: &mut String, journal: &dyn Journal) {
    let _ = writeln!(md, "## The ledger\n");
    match journal.verify_recent() {
        Ok(v) if v.ok => {
            let _ = writeln!(
                md,
                "Verified: the hash chain holds ({} entries).",
                v.entries
            );
        }
        Ok(v) => {
            let _ = writeln!(
                md,
                "**Not verified** at entry {}: {} — read this report with that in mind.",
                v.first_bad_seq.map_or("?".into(), |s| s.to_string()),
                dlq_core::sanitize::line(v.problem.as_deref().unwrap_or("unknown"), 300)
            );
        }
        Err(e) => {
            let _ = writeln!(md, "**Not verified**: {e}");
        }
    }
}
