//! `dlq-triage tui SOURCE` (also `dlq-triage SOURCE`, and `demo` on a terminal).

use super::context::{Context, UsageError};
use crate::core::catalog::Catalog;
use crate::core::source::SourceRef;
use crate::tui::theme::Theme;

pub fn run(ctx: &Context, source: &str, theme: Option<&str>) -> anyhow::Result<()> {
    let theme = Theme::load(theme.or(ctx.config.theme.as_deref()))
        .map_err(|e| UsageError(crate::core::sanitize::clean(&e)))?;
    let plan = ctx.source_plan(source)?;
    let label = match &plan.0 {
        SourceRef::Demo => "demo (in-process Kafka mock cluster)".to_string(),
        other => other.to_string(),
    };
    let catalog = Catalog::new(ctx.masker()?, ctx.config.conventions.clone());
    let settings = ctx.session_settings(&plan.0.to_string())?;
    crate::tui::run(crate::tui::Setup {
        plan,
        settings,
        catalog,
        label,
        now_ms: ctx.now_ms(),
        theme,
    })
}
