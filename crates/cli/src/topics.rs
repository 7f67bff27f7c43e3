//! `dlq-triage topics kafka://host:9092`: the cluster's DLQ topics (names matching the
//! DLQ patterns) with their estimated counts — what the picker offers.

use super::context::{Launch, UsageError};
use super::table::Table;
use super::TopicsArgs;
use dlq_app::brokers::discovery::{discover, DEFAULT_PATTERNS};
use dlq_core::sanitize;
use serde_json::json;
use std::io::Write;

pub fn run(ctx: &Launch, a: &TopicsArgs) -> anyhow::Result<()> {
    let Some(base) = ctx.broker_only(&a.source)?.filter(|s| s.kind() == "kafka") else {
        return Err(UsageError(
            "topics lists a Kafka cluster's topics: give kafka://host:9092".into(),
        )
        .into());
    };
    let (base, opts) = ctx.plan_for(base, &a.source)?;
    let patterns = ctx.dlq_patterns();
    let found = discover(&base, &opts, &patterns, a.all)?;
    if a.json {
        return super::output::print_json(&json!({
            "patterns": patterns,
            "topics": found.iter().map(|c| json!({
                "name": sanitize::clean(&c.name),
                "messages": c.count,
                "looks_like_dlq": c.looks_like_dlq,
                "share_group": c.share_group.as_deref().map(sanitize::clean),
            })).collect::<Vec<_>>(),
        }));
    }
    let mut t = Table::new(&[
        ("TOPIC", false, 60),
        ("MESSAGES", true, 12),
        ("DLQ?", false, 40),
    ]);
    for c in &found {
        t.row(vec![
            c.name.clone(),
            c.count.map_or("-".into(), |n| n.to_string()),
            match (&c.share_group, c.looks_like_dlq) {
                (Some(g), _) => format!("yes, share group {}", sanitize::clean(g)),
                (None, true) => "yes".into(),
                (None, false) => String::new(),
            },
        ]);
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", t.render())?;
    writeln!(
        out,
        "{} topic(s){}; DLQ patterns: {}",
        found.len(),
        if a.all {
            ""
        } else {
            " that look like DLQs (--all for every topic)"
        },
        if patterns.is_empty() {
            DEFAULT_PATTERNS.join(" ")
        } else {
            patterns.join(" ")
        }
    )?;
    Ok(())
}
