//! `dlq-triage summary`: what is failing, grouped.

use super::context::{problems_json, report_problems, usage, Context};
use super::table::Table;
use super::SummaryArgs;
use chrono::{DateTime, SecondsFormat};
use dlq_core::grouping::{sparkline, Dim, GroupIndex, DEFAULT_DIMS};
use dlq_core::store::NO_TIME;
use dlq_core::timefmt::format_age_ms;
use serde_json::{json, Map, Value};
use std::io::Write;

pub fn run(ctx: &Context, a: &SummaryArgs) -> anyhow::Result<()> {
    let dims = match a.group_by.as_deref().or(ctx.config.group_by.as_deref()) {
        Some(g) => match Dim::parse_list(g) {
            Ok(d) => d,
            Err(e) => return usage(format!("bad --group-by: {e}")),
        },
        None => DEFAULT_DIMS.to_vec(),
    };
    let mut filter = ctx.parse_filter(a.filter.as_deref())?;
    let loaded = ctx.load(&a.source, filter.needs_previews())?;
    let store = &loaded.catalog.store;
    let now = ctx.now_ms();
    let idx = GroupIndex::build(store, &dims, now, Some(&mut filter));
    let groups = idx.sorted(store);
    let ts = |ms: i64| {
        (ms != NO_TIME)
            .then(|| DateTime::from_timestamp_millis(ms))
            .flatten()
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
    };
    let owners = &ctx.config.owners;
    let owner_of = |members: &[dlq_core::store::RowId]| {
        dlq_core::owners::owners_of(owners, store, members.iter().filter_map(|r| store.row(*r)))
    };
    // Each group's owner in words and its unowned letters, once.
    let group_owners: Vec<(String, u64)> =
        groups.iter().map(|(_, g)| owner_of(&g.members)).collect();
    let unowned: u64 = group_owners.iter().map(|(_, n)| n).sum();
    let mut out = std::io::stdout().lock();
    if a.json {
        let groups_json: Vec<Value> = groups
            .iter()
            .zip(&group_owners)
            .map(|((k, g), (owner, _))| {
                let mut o = Map::new();
                for (d, label) in dims.iter().zip(idx.labels(store, k)) {
                    o.insert(d.json_key().into(), Value::String(label));
                }
                o.insert("count".into(), json!(g.count));
                o.insert(
                    "share".into(),
                    json!(round(g.count as f64 / idx.total().max(1) as f64, 4)),
                );
                o.insert("oldest".into(), json!(ts(g.oldest_ms)));
                o.insert("newest".into(), json!(ts(g.newest_ms)));
                o.insert("inflow_per_min".into(), json!(round(g.inflow_per_min(), 2)));
                o.insert("owner".into(), json!(owner));
                o.insert(
                    "event_types".into(),
                    json!(g
                        .event_types
                        .iter()
                        .map(|s| store.sym(*s))
                        .collect::<Vec<_>>()),
                );
                Value::Object(o)
            })
            .collect();
        let mut doc = json!({
            "source": loaded.info.label,
            "total": store.len(),
            "matched": idx.total(),
            "scanned_at": ctx.now.to_rfc3339_opts(SecondsFormat::Secs, true),
            "group_by": dims.iter().map(|d| d.name()).collect::<Vec<_>>(),
            "groups": groups_json,
            "unowned": unowned,
            "problems": problems_json(&loaded.catalog),
            "coverage": super::context::coverage_json(&loaded.session),
        });
        if !filter.is_empty() {
            doc["filter"] = json!(filter.source());
        }
        if let Some(since) = ctx.since {
            doc["since"] = json!(since.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        return super::output::print_json(&doc);
    }

    // Summed as counts: a float sum of no groups is -0.0, printed "+-0.0/min".
    let total_inflow = groups.iter().map(|(_, g)| g.last_hour).sum::<u64>() as f64 / 60.0;
    let oldest = groups
        .iter()
        .map(|(_, g)| g.oldest_ms)
        .filter(|&t| t != NO_TIME)
        .min();
    writeln!(
        out,
        "{} · {}{} · +{:.1}/min · oldest {}",
        dlq_core::sanitize::clean(&loaded.info.label),
        dlq_core::words::letters_since(store.len(), ctx.since.map(|s| s.timestamp_millis()), now),
        if filter.is_empty() {
            String::new()
        } else {
            format!(
                " · {} match `{}`",
                idx.total(),
                dlq_core::sanitize::clean(filter.source())
            )
        },
        total_inflow,
        oldest.map_or("-".into(), |o| format_age_ms(now - o)),
    )?;
    writeln!(out, "{}", loaded.info.browse_effect)?;
    writeln!(out)?;
    let labels: Vec<&str> = dims.iter().map(|d| d.name()).collect();
    // The owner column shows when owners are configured (`[[owners]]`).
    let mut cols = vec![
        ("COUNT", true, 10),
        ("SHARE", true, 6),
        ("OLDEST", true, 8),
        ("NEWEST", true, 8),
        ("/MIN", true, 7),
        ("INFLOW 1h", false, 12),
    ];
    if !owners.is_empty() {
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
        if !owners.is_empty() {
            row.push(owner_of(&idx.members_under(&n.path)).0);
        }
        row.push(format!("{}{label}", "  ".repeat(n.depth)));
        t.row(row);
    }
    writeln!(out, "grouped by {}", labels.join(" › "))?;
    write!(out, "{}", t.render())?;
    if !owners.is_empty() && unowned > 0 {
        writeln!(
            out,
            "{unowned} letters have no owner (add an [[owners]] rule for them)"
        )?;
    }
    if groups.is_empty() {
        writeln!(
            out,
            "(no letters{})",
            if filter.is_empty() {
                ""
            } else {
                " match the filter"
            }
        )?;
    }
    out.flush()?;
    report_problems(&loaded.catalog);
    Ok(())
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}
