//! The `:` palette and its overlays.

use super::*;

/// The `:` palette.
pub(crate) fn run_command(state: &mut AppState, cmds: &mut Vec<Command>, line: &str) {
    let (cmd, arg) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(c, a)| (c, a.trim()));
    let result: Result<String, String> = match cmd {
        "group" | "g" => Dim::parse_list(arg).map(|dims| {
            state.group_by(dims);
            state.needs(Refresh::Tree);
            let names: Vec<&str> = state.dims().iter().map(|d| d.name()).collect();
            format!("grouped by {}", names.join(" › "))
        }),
        // The same as `f`: one place says how many match, and why when none do.
        "filter" | "f" | "clear" => {
            super::typing::apply_filter(state, if cmd == "clear" { "" } else { arg });
            return;
        }
        "sort" => sort(state, arg),
        "tab" => tab(state, arg),
        "help" | "?" => {
            state.prompt.show_help();
            Ok(String::new())
        }
        "problems" => {
            state.prompt.open_overlay(problems_overlay(state));
            Ok(String::new())
        }
        "notes" => {
            let lines = if state.notes.is_empty() {
                vec!["nothing to report".to_string()]
            } else {
                state.notes.clone()
            };
            state.prompt.open_overlay(("Session notes".into(), lines));
            Ok(String::new())
        }
        "resume" | "abandon" => crate::replaying::command(state, cmds, cmd, arg),
        "approve" => crate::replaying::approve_command(state, cmds, arg),
        "replays" => {
            state.replay.reopen();
            state
                .prompt
                .open_overlay(crate::replaying::unfinished_overlay(state));
            Ok(String::new())
        }
        "quit" | "q" => {
            state.quit = true;
            Ok(String::new())
        }
        "" => Ok(String::new()),
        other => Err(format!(
            "unknown command `{other}`: {}",
            crate::keymap::palette_hint()
        )),
    };
    state.message = match result {
        Ok(m) if m.is_empty() => None,
        Ok(m) => Some((m, Level::Info)),
        Err(e) => Some((e, Level::Error)),
    };
}

/// `:sort newest|oldest`.
fn sort(state: &mut AppState, arg: &str) -> Result<String, String> {
    let newest = match arg {
        "newest" | "" => true,
        "oldest" => false,
        other => return Err(format!("sort takes newest or oldest, not `{other}`")),
    };
    state.letters.set_newest_first(newest);
    Ok(format!(
        "{} first",
        if newest { "newest" } else { "oldest" }
    ))
}

/// `:tab NAME`.
fn tab(state: &mut AppState, arg: &str) -> Result<String, String> {
    let t = Tab::ALL
        .iter()
        .find(|t| t.title().eq_ignore_ascii_case(arg))
        .ok_or_else(|| {
            format!("tab takes failure, headers, payload, diff or history, not `{arg}`")
        })?;
    state.detail.show_tab(*t);
    Ok(format!("{} tab", t.title()))
}

/// `:problems`: the unreadable records the scan reported.
pub(crate) fn problems_overlay(state: &AppState) -> (String, Vec<String>) {
    let (shown, all) = (&state.scan.problems, state.scan.problem_count);
    let mut lines: Vec<String> = shown
        .iter()
        .map(|p| format!("{}: {}", p.location, p.message))
        .collect();
    if all > shown.len() as u64 {
        lines.push(format!("… and {} more", all - shown.len() as u64));
    }
    if lines.is_empty() {
        lines.push("every record was read".into());
    }
    (format!("Unreadable records ({all})"), lines)
}
