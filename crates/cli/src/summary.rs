//! `dlq-triage summary`: what is failing, grouped.

use super::context::{problems_json, report_problems, usage, Launch, Loaded, Scan};
use super::table::Table;
use super::SummaryArgs;
use chrono::{DateTime, SecondsFormat};
use dlq_app::browse::Browse;
use dlq_core::filter::Filter;
use dlq_core::grouping::{sparkline, Dim, GroupIndex, GroupKey, GroupStats, DEFAULT_DIMS};
use dlq_core::owners::owners_of;
use dlq_core::store::NO_TIME;
use dlq_core::store::{LetterStore, RowId};
use dlq_core::timefmt::format_age_ms;
use serde_json::{json, Map, Value};
use std::io::Write;

pub fn run(ctx: &Launch, a: &SummaryArgs) -> anyhow::Result<()> {
    let dims = match a.group_by.as_deref().or(ctx.config.group_by.as_deref()) {
        Some(g) => match Dim::parse_list(g) {
            Ok(d) => d,
            Err(e) => return usage(format!("bad --group-by: {e}")),
        },
        None => DEFAULT_DIMS.to_vec(),
    };
    let mut filter = ctx.parse_filter(a.filter.as_deref())?;
    let Loaded {
        catalog,
        mut session,
        info,
        ..
    } = ctx.scan_filtered(&a.source, filter.needs_previews(), &mut filter)?;
    let now = ctx.now_ms();
    let browse = Browse::scanned(catalog, &dims, now, filter, session.retention().to_vec());
    let groups = browse.index().sorted(&browse.catalog.store);
    super::context::note_unmatched(browse.filter(), browse.index().total() as usize);
    // Asked after the scan, as the TUI does: what the broker holds upstream now.
    let awaiting = session
        .backlog()
        .map(|mut b| b.awaiting().map_err(|e| e.to_string()));
    let s = Summary {
        ctx,
        firsts: dlq_core::insight::since::VersionFirsts::of(&browse.catalog.store),
        awaiting,
        rules: browse.retention_rules(),
        info: &info,
        session: &session,
        catalog: &browse.catalog,
        store: &browse.catalog.store,
        dims: &dims,
        idx: browse.index(),
        filter: browse.filter(),
        now,
    };
    // Each group's owner in words and its unowned letters, once.
    let owners: Vec<(String, u64)> = groups.iter().map(|(_, g)| s.owner_of(&g.members)).collect();
    if a.json {
        return super::output::print_json(&s.json(&groups, &owners));
    }
    s.print(&groups, &owners)?;
    report_problems(&browse.catalog);
    Ok(())
}

/// A scanned source grouped: what both outputs are made from.
struct Summary<'a> {
    ctx: &'a Launch,
    /// Each version's first failure in the whole scan, read once for every group's
    /// "since when".
    firsts: dlq_core::insight::since::VersionFirsts,
    /// Dead letters held upstream on their way here (RabbitMQ at-least-once
    /// dead-lettering): None where the source has no such place to ask.
    awaiting: Option<Result<Vec<dlq_core::awaiting::Awaiting>, String>>,
    /// The broker's retention per container (empty for sources without one).
    rules: &'a [(String, dlq_core::retention::Retention)],
    info: &'a dlq_core::ports::SourceInfo,
    session: &'a dlq_app::session::Session,
    catalog: &'a dlq_core::catalog::Catalog,
    store: &'a LetterStore,
    dims: &'a [Dim],
    idx: &'a GroupIndex,
    filter: &'a Filter,
    now: i64,
}

/// Groups largest first, with their keys.
type Groups<'a> = [(GroupKey, &'a GroupStats)];

impl Summary<'_> {
    /// Who owns these letters (`[[owners]]`), and how many have no owner.
    fn owner_of(&self, members: &[RowId]) -> (String, u64) {
        let store = self.store;
        owners_of(
            &self.ctx.config.owners,
            store,
            members.iter().filter_map(|r| store.row(*r)),
        )
    }

    fn json(&self, groups: &Groups<'_>, owners: &[(String, u64)]) -> Value {
        let (ctx, store, idx) = (self.ctx, self.store, self.idx);
        let groups_json: Vec<Value> = groups
            .iter()
            .zip(owners)
            .map(|((k, g), (owner, _))| self.group_json(k, g, owner))
            .collect();
        let mut doc = json!({
            "source": self.info.label,
            "total": store.len(),
            "matched": idx.total(),
            "scanned_at": ctx.now.to_rfc3339_opts(SecondsFormat::Secs, true),
            "group_by": self.dims.iter().map(|d| d.name()).collect::<Vec<_>>(),
            "groups": groups_json,
            "unowned": owners.iter().map(|(_, n)| n).sum::<u64>(),
            "problems": problems_json(self.catalog),
            "coverage": super::context::coverage_json(self.session),
            "retention": self.rules.iter().map(|(c, r)| json!({
                "container": c,
                "retention_ms": r.ms(),
                "rule": r.describe(),
            })).collect::<Vec<_>>(),
            // null: not a source with such a place, or it could not be read (the error).
            "awaiting_dead_lettering": match &self.awaiting {
                Some(Ok(list)) => json!(list),
                _ => Value::Null,
            },
        });
        if let Some(Err(e)) = &self.awaiting {
            doc["awaiting_dead_lettering_error"] = json!(dlq_core::sanitize::clean(e));
        }
        if !self.filter.is_empty() {
            doc["filter"] = json!(self.filter.source());
        }
        if let Some(since) = ctx.since() {
            doc["since"] = json!(since.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        doc
    }

    fn group_json(&self, k: &GroupKey, g: &GroupStats, owner: &str) -> Value {
        let (store, idx) = (self.store, self.idx);
        let mut o = Map::new();
        for (d, label) in self.dims.iter().zip(idx.labels(store, k)) {
            o.insert(d.json_key().into(), Value::String(label));
        }
        // Pasted into --filter, this selects exactly the group's letters.
        let terms: Option<Vec<String>> = self
            .dims
            .iter()
            .zip(k.values())
            .map(|(d, v)| d.filter_term(store, *v))
            .collect();
        o.insert("filter".into(), json!(terms.map(|t| t.join(" "))));
        o.insert("count".into(), json!(g.count));
        o.insert(
            "share".into(),
            json!(round(g.count as f64 / idx.total().max(1) as f64, 4)),
        );
        o.insert("oldest".into(), json!(timestamp(g.oldest_ms)));
        o.insert("newest".into(), json!(timestamp(g.newest_ms)));
        o.insert("inflow_per_min".into(), json!(round(g.inflow_per_min(), 2)));
        // Seconds until the broker deletes the group's first letter (negative: due);
        // null where no retention is known — never a guess.
        o.insert(
            "expires_in_s".into(),
            json!((g.expires_ms != NO_TIME).then(|| (g.expires_ms - self.now).div_euclid(1000))),
        );
        o.insert("owner".into(), json!(owner));
        o.insert("since_when".into(), self.since_json(&g.members));
        o.insert(
            "event_types".into(),
            json!(g
                .event_types
                .iter()
                .map(|s| store.sym(*s))
                .collect::<Vec<_>>()),
        );
        Value::Object(o)
    }

    /// Since when and with which release (`core::insight::since`): the sentence, and
    /// the group's failures over time per consumer version (24 steps up to now).
    fn since_json(&self, members: &[RowId]) -> Value {
        let w = dlq_core::insight::since::since_when_in(
            &self.firsts,
            self.store,
            members,
            self.now,
            24,
        );
        json!({
            "sentence": w.sentence,
            "first": w.first_ms.and_then(timestamp),
            "last": w.last_ms.and_then(timestamp),
            "step_s": w.step_ms / 1000,
            "untimed": w.untimed,
            "versions": w.versions.iter().map(|v| json!({
                "version": v.version,
                "count": v.count,
                "first": timestamp(v.first_ms),
                "last": timestamp(v.last_ms),
                "timeline": v.timeline,
            })).collect::<Vec<_>>(),
        })
    }

    /// The title line, what browsing did, the group table and what is left unsaid.
    fn print(&self, groups: &Groups<'_>, owners: &[(String, u64)]) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", self.title(groups))?;
        writeln!(out, "{}", self.info.browse_effect)?;
        for (c, r) in self.rules {
            writeln!(
                out,
                "retention of {}: {}",
                dlq_core::sanitize::clean(c),
                dlq_core::sanitize::line(&r.describe(), 200)
            )?;
        }
        match &self.awaiting {
            Some(Ok(list)) => {
                for a in list {
                    writeln!(out, "{}", a.describe())?;
                }
            }
            Some(Err(e)) => writeln!(out, "{}", dlq_core::awaiting::unknown(e))?,
            None => {}
        }
        writeln!(out)?;
        let labels: Vec<&str> = self.dims.iter().map(|d| d.name()).collect();
        writeln!(out, "grouped by {}", labels.join(" › "))?;
        write!(out, "{}", self.table().render())?;
        let unowned: u64 = owners.iter().map(|(_, n)| n).sum();
        if !self.ctx.config.owners.is_empty() && unowned > 0 {
            writeln!(
                out,
                "{unowned} letters have no owner (add an [[owners]] rule for them)"
            )?;
        }
        if groups.is_empty() {
            let why = if self.filter.is_empty() {
                ""
            } else {
                " match the filter"
            };
            writeln!(out, "(no letters{why})")?;
        }
        out.flush()?;
        Ok(())
    }

    /// `source · N letters · M match `f` · +x/min · oldest 2d3h`.
    fn title(&self, groups: &Groups<'_>) -> String {
        let (ctx, now) = (self.ctx, self.now);
        // Summed as counts: a float sum of no groups is -0.0, printed "+-0.0/min".
        let total_inflow = groups.iter().map(|(_, g)| g.last_hour).sum::<u64>() as f64 / 60.0;
        let oldest = groups
            .iter()
            .map(|(_, g)| g.oldest_ms)
            .filter(|&t| t != NO_TIME)
            .min();
        let matched = if self.filter.is_empty() {
            String::new()
        } else {
            format!(
                " · {} match `{}`",
                self.idx.total(),
                dlq_core::sanitize::clean(self.filter.source())
            )
        };
        format!(
            "{} · {}{matched} · +{total_inflow:.1}/min · oldest {}",
            dlq_core::sanitize::clean(&self.info.label),
            dlq_core::words::letters_since(
                self.store.len(),
                ctx.since().map(|s| s.timestamp_millis()),
                now
            ),
            oldest.map_or("-".into(), |o| format_age_ms(now - o)),
        )
    }

    /// One row per tree node; the owner column when owners are configured.
    fn table(&self) -> Table {
        let (store, idx, now) = (self.store, self.idx, self.now);
        let owned = !self.ctx.config.owners.is_empty();
        let clock = self.rules.iter().any(|(_, r)| r.ms().is_some());
        let mut cols = vec![
            ("COUNT", true, 10),
            ("SHARE", true, 6),
            ("OLDEST", true, 8),
            ("NEWEST", true, 8),
            ("/MIN", true, 7),
            ("INFLOW 1h", false, 12),
        ];
        if clock {
            cols.push(("EXPIRES IN", true, 10));
        }
        if owned {
            cols.push(("OWNER", false, 24));
        }
        cols.push(("GROUP", false, 72));
        let mut t = Table::new(&cols);
        let age = |ms: i64| {
            if ms == NO_TIME {
                "-".into()
            } else {
                format_age_ms(now - ms)
            }
        };
        for n in idx.tree(store) {
            let label = if n.label.is_empty() {
                "(none)".to_string()
            } else {
                n.label.clone()
            };
            let mut row = vec![
                n.count.to_string(),
                format!("{:.1}%", 100.0 * n.count as f64 / idx.total().max(1) as f64),
                age(n.oldest_ms),
                age(n.newest_ms),
                format!("{:.1}", n.inflow_per_min()),
                sparkline(&n.spark),
            ];
            if clock {
                row.push(match n.expires_ms {
                    NO_TIME => "-".into(),
                    at if at <= now => "due now".into(),
                    at => format_age_ms(at - now),
                });
            }
            if owned {
                row.push(self.owner_of(&idx.members_under(&n.path)).0);
            }
            row.push(format!("{}{label}", "  ".repeat(n.depth)));
            t.row(row);
        }
        t
    }
}

/// RFC 3339 to the second, or none for an unknown time.
fn timestamp(ms: i64) -> Option<String> {
    (ms != NO_TIME)
        .then(|| DateTime::from_timestamp_millis(ms))
        .flatten()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}
