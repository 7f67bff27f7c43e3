//! Editing a payload in `$VISUAL`/`$EDITOR` for a revision — shared by `dlq-triage edit`
//! and the TUI's `e`. The editor sees the masked payload unless `unmasked`.

use crate::core::masking::{Layout, Masker};
use crate::core::revision::{changed_paths, edited_masked_values, merge_masked_edit};

/// What an editing session produced.
#[derive(Debug)]
pub enum Edited {
    /// The new payload and the JSON paths that changed.
    Changed {
        after: Vec<u8>,
        paths: Vec<String>,
    },
    Unchanged,
}

/// Open the payload in the editor and merge the result. Nothing is recorded here.
pub fn edit_payload(masker: &Masker, payload: &[u8], unmasked: bool) -> Result<Edited, String> {
    let original: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| format!("editing works on JSON payloads ({e})"))?;
    let shown = if unmasked {
        serde_json::to_string_pretty(&original).map_err(|e| e.to_string())?
    } else {
        masker
            .mask_json(payload, Layout::Pretty, usize::MAX)
            .map(|(t, _)| t)?
    };
    let shown_value: serde_json::Value = serde_json::from_str(&shown).map_err(|e| e.to_string())?;
    let file = std::env::temp_dir().join(format!("dlq-triage-edit-{}.json", std::process::id()));
    std::fs::write(&file, format!("{shown}\n"))
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
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
        Ok(s) => return Err(format!("the editor exited with {s}; nothing saved")),
        Err(e) => {
            return Err(format!(
                "cannot run the editor `{}`: {e}; nothing saved",
                crate::core::sanitize::clean(&editor)
            ))
        }
    }
    let edited: serde_json::Value = serde_json::from_str(&edited_text.map_err(|e| e.to_string())?)
        .map_err(|e| format!("the edited payload is not valid JSON ({e}); nothing saved"))?;
    let merged = if unmasked {
        edited
    } else {
        merge_masked_edit(&original, &shown_value, &edited)
    };
    let paths = changed_paths(&original, &merged);
    if paths.is_empty() {
        return Ok(Edited::Unchanged);
    }
    let half = if unmasked {
        Vec::new()
    } else {
        edited_masked_values(&shown_value, &merged, &paths)
    };
    if !half.is_empty() {
        return Err(format!(
            "masked values were edited in place at {}: keep a masked value as it is, or replace it entirely; nothing saved",
            half.join(", ")
        ));
    }
    let after = serde_json::to_vec(&merged).map_err(|e| e.to_string())?;
    Ok(Edited::Changed { after, paths })
}
