//! `dlq-triage edit SOURCE ID --reason TEXT`: a payload revision, edited on the masked
//! payload in `$EDITOR` (privileged users may edit unmasked with `--unmasked`).

use super::context::{usage, Context};
use super::show::find_letters;
use super::EditArgs;
use crate::core::access::Permission;
use crate::core::masking::Layout;
use crate::core::model::BodyKind;
use crate::core::revision::{changed_paths, edited_masked_values, merge_masked_edit};
use crate::core::sanitize;
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
    let original: serde_json::Value = serde_json::from_slice(&dl.raw.payload)?;
    let shown = if a.unmasked {
        serde_json::to_string_pretty(&original)?
    } else {
        loaded
            .catalog
            .masker()
            .mask_json(&dl.raw.payload, Layout::Pretty, usize::MAX)
            .map(|(t, _)| t)
            .map_err(anyhow::Error::msg)?
    };
    let shown_value: serde_json::Value = serde_json::from_str(&shown)?;
    let dir = tempfile_dir()?;
    let file = dir.join(format!("dlq-triage-edit-{}.json", std::process::id()));
    std::fs::write(&file, format!("{shown}\n"))?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    // Through the shell so EDITOR may carry arguments ("code -w", "vim -u NONE").
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&file)
        .status();
    let edited_text = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => anyhow::bail!("the editor exited with {s}; nothing saved"),
        Err(e) => anyhow::bail!(
            "cannot run the editor `{}`: {e}; nothing saved",
            sanitize::clean(&editor)
        ),
    }
    let edited: serde_json::Value = serde_json::from_str(&edited_text?).map_err(|e| {
        anyhow::anyhow!("the edited payload is not valid JSON ({e}); nothing saved")
    })?;
    let merged = if a.unmasked {
        edited
    } else {
        merge_masked_edit(&original, &shown_value, &edited)
    };
    let changed = changed_paths(&original, &merged);
    if changed.is_empty() {
        println!("no changes; nothing saved");
        return Ok(());
    }
    let half = if a.unmasked {
        Vec::new()
    } else {
        edited_masked_values(&shown_value, &merged, &changed)
    };
    if !half.is_empty() {
        anyhow::bail!(
            "masked values were edited in place at {}: keep a masked value as it is, or replace it entirely; nothing saved",
            half.join(", ")
        );
    }
    let after = serde_json::to_vec(&merged)?;
    let n = ctx.ledger()?.record_revision(
        &loaded.source_key,
        &dl.id.value.0,
        reason,
        &changed,
        &dl.raw.payload,
        &after,
    )?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "revision {n} of {}: changed {}",
        sanitize::clean(&dl.id.value.0),
        sanitize::clean(&changed.join(", "))
    )?;
    writeln!(
        out,
        "the original is unchanged; compare with: dlq-triage diff SOURCE {} --revision {n}",
        sanitize::clean(&dl.id.value.0)
    )?;
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    Ok(std::env::temp_dir())
}
