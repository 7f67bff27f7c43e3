//! `dlq-triage edit SOURCE ID --reason TEXT`: a payload revision, edited on the masked
//! payload in `$EDITOR` (privileged users may edit unmasked with `--unmasked`).

use super::context::{usage, Context};
use super::show::find_letters;
use super::EditArgs;
use crate::core::access::Permission;
use crate::core::model::BodyKind;
use crate::core::sanitize;
use crate::editor::{edit_payload, Edited};
use std::io::Write;

pub fn run(ctx: &Context, a: &EditArgs) -> anyhow::Result<()> {
    let reason = a.reason.trim();
    if reason.is_empty() {
        return usage("--reason must say why (it is recorded with the revision)");
    }
    ctx.require(Permission::Edit, &a.id)?;
    if a.unmasked {
        ctx.require(Permission::Unmask, &a.id)?;
    }
    let (found, loaded) = find_letters(ctx, &a.source, &[a.id.as_str()])?;
    let dl = &found[0][0];
    if dl.body != BodyKind::Json {
        return usage(format!(
            "{} has a {} payload: editing works on JSON payloads",
            sanitize::clean(&a.id),
            dl.body.as_str()
        ));
    }
    if a.unmasked {
        // Audited before the raw payload reaches the editor; nothing opens if the write
        // fails, and quitting without changes is still on the record.
        let detail = serde_json::json!({"reason": reason, "source": loaded.source_key, "for": "edit --unmasked"}).to_string();
        ctx.ledger()?.audit("unmask", &dl.id.value.0, &detail)?;
    }
    match edit_payload(loaded.catalog.masker(), &dl.raw.payload, a.unmasked)
        .map_err(anyhow::Error::msg)?
    {
        Edited::Unchanged => {
            println!("no changes; nothing saved");
            Ok(())
        }
        Edited::Changed { after, paths } => {
            let n = ctx.ledger()?.record_revision(
                &loaded.source_key,
                &dl.id.value.0,
                reason,
                &paths,
                &dl.raw.payload,
                &after,
            )?;
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
