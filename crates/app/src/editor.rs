//! Editing a payload in `$VISUAL`/`$EDITOR` for a revision — shared by `dlq-triage edit`
//! and the TUI's `e`. The editor sees the masked payload unless `unmasked`.

use dlq_core::masking::{Layout, Masker};
use dlq_core::revision::{changed_paths, edited_masked_values, merge_masked_edit};

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
    let edited_text = round_trip(&shown)?;
    let edited: serde_json::Value = serde_json::from_str(&edited_text)
        .map_err(|e| format!("the edited payload is not valid JSON ({e}); nothing saved"))?;
    let merged = if unmasked {
        edited
    } else {
        let shown = |k: &str| masker.mask_text(k);
        merge_masked_edit(&original, &shown_value, &edited, &shown).map_err(|at| {
            format!(
                "a key you see masked was edited, renamed or removed at {}: an edit changes only what you can see (with --unmasked, a privileged role may); nothing saved",
                at.iter()
                    .map(|p| dlq_core::sanitize::line(p, 120))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?
    };
    let paths = changed_paths(&original, &merged);
    if paths.is_empty() {
        return Ok(Edited::Unchanged);
    }
    let half = if unmasked {
        Vec::new()
    } else {
        edited_masked_values(&merged, &paths)
    };
    if !half.is_empty() {
        return Err(format!(
            "masked values were edited, moved or copied at {}: keep a masked value where it is, as it is, or replace it entirely (a value to rename needs --unmasked); nothing saved",
            half.join(", ")
        ));
    }
    let after = serde_json::to_vec(&merged).map_err(|e| e.to_string())?;
    Ok(Edited::Changed { after, paths })
}

/// `shown` through the editor and back: the text as saved, or why nothing was.
fn round_trip(shown: &str) -> Result<String, String> {
    // A private directory (0700, unpredictable name) holding a 0600 file, removed when
    // `dir` drops — on every path out of this function, an error or a panic included.
    // Only SIGKILL or a power cut can leave it behind, and then only readable by us.
    let mut builder = tempfile::Builder::new();
    builder.prefix("dlq-triage-edit-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder
        .tempdir()
        .map_err(|e| format!("creating a private directory for the editor: {e}"))?;
    let file = dir.path().join("payload.json");
    write_private(&file, format!("{shown}\n").as_bytes())
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    // Through the shell so EDITOR may carry arguments ("code -w", "vim -u NONE").
    let mut sh = std::process::Command::new("sh");
    let status = crate::credentials::scrub_env(&mut sh)
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&file)
        .status();
    let edited_text = std::fs::read_to_string(&file).map_err(|e| e.to_string());
    drop(dir);
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return Err(format!("the editor exited with {s}; nothing saved")),
        Err(e) => {
            return Err(format!(
                "cannot run the editor `{}`: {e}; nothing saved",
                dlq_core::sanitize::clean(&editor)
            ))
        }
    }
    edited_text
}

fn write_private(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The editor sees a 0600 file in a 0700 directory that is gone afterwards, whatever
    /// the editor does.
    #[test]
    fn the_edit_file_is_private_and_removed() {
        let dir = tempfile::tempdir().expect("tmp");
        let seen = dir.path().join("seen");
        let script = dir.path().join("editor.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nstat -c '%a %n' \"$1\" \"$(dirname \"$1\")\" > {}\nexit 3\n",
                seen.display()
            ),
        )
        .expect("script");
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&script)
            .status()
            .expect("chmod");
        std::env::set_var("VISUAL", &script);
        let m = Masker::with_key(vec![1]);
        let r = edit_payload(&m, br#"{"email":"jane@example.com"}"#, true);
        assert!(r.is_err(), "the editor failed");
        let stat = std::fs::read_to_string(&seen).expect("editor ran");
        let mut lines = stat.lines();
        let (file_mode, file) = lines.next().and_then(|l| l.split_once(' ')).expect("file");
        let (dir_mode, _) = lines.next().and_then(|l| l.split_once(' ')).expect("dir");
        assert_eq!(file_mode, "600");
        assert_eq!(dir_mode, "700");
        assert!(!std::path::Path::new(file).exists(), "left behind");
    }
}
