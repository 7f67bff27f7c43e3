//! `dlq-triage tui SOURCE` (also `dlq-triage SOURCE`, and `demo` on a terminal). A
//! source that names a broker but no queue or topic (`amqp://host/vhost`,
//! `kafka://host:9092`) opens the picker first, as does `dlq-triage` alone when the
//! config names sources.

use crate::picker::{self, Choice, Picker};
use crate::theme::Theme;
use dlq_app::brokers::discovery::discover;
use dlq_app::launch::{Launch, UsageError};
use dlq_core::catalog::Catalog;
use dlq_core::source::SourceRef;

pub fn run(ctx: &Launch, source: &str, theme: Option<&str>) -> anyhow::Result<()> {
    let theme = load_theme(ctx, theme)?;
    // A mistake in `[keys]` is said before the terminal is taken.
    let keymap = crate::keymap::Keymap::with(&ctx.config.keys)
        .map_err(|e| UsageError(dlq_core::sanitize::clean(&e)))?;
    let plan = match ctx.broker_only(source)? {
        Some(base) => {
            let (base, opts) = ctx.plan_for(base, source)?;
            let found = discover(&base, &opts, &ctx.dlq_patterns(), false)?;
            let choices = found
                .iter()
                .map(|c| Choice {
                    name: c.name.clone(),
                    detail: c.kind.clone(),
                    count: c.count,
                })
                .collect();
            let p = Picker {
                title: format!(
                    "DLQs on {} — pick one",
                    base.to_string()
                        .trim_end_matches("?queue=_")
                        .trim_end_matches("/_")
                ),
                choices,
                cursor: 0,
            };
            match picker::run(p, &theme)? {
                Some(i) => ctx.plan_for(found[i].source.clone(), source)?,
                None => return Ok(()),
            }
        }
        None => ctx.source_plan(source)?,
    };
    let label = match &plan.0 {
        SourceRef::Demo => "demo (in-process Kafka mock cluster)".to_string(),
        other => other.to_string(),
    };
    let catalog = Catalog::new(ctx.masker()?, ctx.config.conventions.clone());
    let settings = ctx.session_settings(&plan.0.to_string())?;
    let cache_budget = match (ctx.config.payload_cache_mib, &plan.0) {
        (Some(mib), _) => mib.saturating_mul(1024 * 1024),
        (None, SourceRef::Amqp { .. }) => crate::CACHE_BUDGET_HELD,
        (None, _) => crate::CACHE_BUDGET_REFETCHABLE,
    };
    crate::run(crate::Setup {
        plan,
        settings,
        catalog,
        label,
        now_ms: ctx.now_ms(),
        theme,
        confirm_above: ctx.config.replay.confirm_above,
        expiry_warn_ms: dlq_core::timefmt::parse_duration_ms(&ctx.config.retention.warn_below)
            .unwrap_or(6 * 3_600_000),
        owners: ctx.config.owners.clone(),
        links: ctx.config.links.clone(),
        cache_budget,
        keymap,
    })
}

/// `dlq-triage` with no source: pick one of the config's named sources.
pub fn pick_named(ctx: &Launch, theme: Option<&str>) -> anyhow::Result<()> {
    let names: Vec<String> = ctx.config.sources.keys().cloned().collect();
    let choices = names
        .iter()
        .map(|n| Choice {
            name: n.clone(),
            detail: ctx
                .resolve_source(n)
                .map(|s| s.to_string())
                .unwrap_or_else(|e| e.to_string()),
            count: None,
        })
        .collect();
    let p = Picker {
        title: "sources in config.toml — pick one".into(),
        choices,
        cursor: 0,
    };
    match picker::run(p, &load_theme(ctx, theme)?)? {
        Some(i) => run(ctx, &names[i], theme),
        None => Ok(()),
    }
}

fn load_theme(ctx: &Launch, theme: Option<&str>) -> anyhow::Result<Theme> {
    Theme::load(theme.or(ctx.config.theme.as_deref()))
        .map_err(|e| UsageError(dlq_core::sanitize::clean(&e)).into())
}
