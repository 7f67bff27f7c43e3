//! `dlq-triage edit SOURCE ID --reason TEXT`: a payload revision, edited on the masked
//! payload in `$EDITOR` (privileged users may edit unmasked with `--unmasked`).

use super::context::{usage, Launch};
use super::show::find_letters;
use super::EditArgs;
use dlq_app::revise::Revised;
use dlq_core::access::Permission;
use dlq_core::model::BodyKind;
use dlq_core::sanitize;
use std::io::Write;

pub fn run(ctx: &Launch, a: &EditArgs) -> anyhow::Result<()> {
    let reason = a.reason.trim();
    if reason.is_empty() {
        return usage("--reason must say why (it is recorded with the revision)");
    }
    // Before the scan (the session asks the same rule again before the editor opens).
    ctx.require_write(dlq_core::access::WriteOp::Edit, &a.id)?;
    if a.unmasked {
        ctx.require(Permission::Unmask, &a.id)?;
    }
    let (found, loaded) = find_letters(ctx, &a.source, &[a.id.as_str()])?;
    let dl = &found[0][0];
    if dl.body != BodyKind::Json {
        return usage(format!(
            "{} has a {} payload: editing works on JSON payloads and on payloads a schema decodes",
            sanitize::clean(&a.id),
            dl.body.as_str()
        ));
    }
    let revised = ctx.principal().edit_and_record(
        loaded.catalog.masker(),
        ctx.codec.as_deref(),
        &loaded.source_key,
        &dl.id.value.0,
        dl,
        reason,
        a.unmasked,
    )?;
    match revised {
        Revised::Unchanged => {
            writeln!(std::io::stdout(), "no changes; nothing saved")?;
            Ok(())
        }
        Revised::Saved { number: n, paths } => {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "revision {n} of {}: changed {}",
                sanitize::clean(&dl.id.value.0),
                sanitize::clean(&paths.join(", "))
            )?;
            writeln!(
                out,
                "the original is unchanged; compare with: dlq-triage diff SOURCE {} --revision {n}",
                sanitize::clean(&dl.id.value.0)
            )?;
            Ok(())
        }
    }
}
