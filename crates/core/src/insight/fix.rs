//! A suggested repair: for a difference with a mechanical fix (a number sent as a
//! formatted string, a renamed field, a missing field given its type's default, a
//! time sent as epoch seconds), the jq program that makes the group's letters look like
//! the baseline's again. Only ever offered: the transform overlay opens on it for the
//! engineer to read, edit and dry-run; nothing is recorded without them.

use super::shape::{Change, Difference, Kind};
use serde::Serialize;

/// A program and what it repairs, a line per difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    pub program: String,
    pub repairs: Vec<String>,
}

/// One program for every difference that has a mechanical repair, in rank order; `None`
/// when none has.
pub fn suggest(diffs: &[Difference]) -> Option<Suggestion> {
    let mut steps = Vec::new();
    let mut repairs = Vec::new();
    for d in diffs {
        if let Some((step, why)) = repair(d) {
            if !steps.contains(&step) {
                steps.push(step);
                repairs.push(format!("{}: {why}", d.path));
            }
        }
    }
    (!steps.is_empty()).then(|| Suggestion {
        program: steps.join(" | "),
        repairs,
    })
}

fn repair(d: &Difference) -> Option<(String, &'static str)> {
    match &d.change {
        Change::Type { from, to } if from.is_number() && to.is_number_text() => Some((
            format!(
                "{} |= (if type == \"string\" then (split(\",\") | join(\"\") | tonumber) else . end)",
                jq_path(&d.path)?
            ),
            "the number sent as text, back to a number",
        )),
        Change::Type { from, to } if from.is_number_text() && to.is_number() => Some((
            format!(
                "{} |= (if type == \"number\" then tostring else . end)",
                jq_path(&d.path)?
            ),
            "the number back to text",
        )),
        Change::Type {
            from: Kind::DateTimeText,
            to,
        } if to.is_number() => Some((
            format!(
                "{} |= (if type == \"number\" then ((if . > 100000000000 then . / 1000 else . end) | floor | todate) else . end)",
                jq_path(&d.path)?
            ),
            "epoch seconds (or ms) back to an RFC 3339 time",
        )),
        Change::Renamed { from, .. } => {
            let (parent, new) = split(&d.path)?;
            let (from_parent, old) = split(from)?;
            (parent == from_parent).then_some(())?;
            Some((
                format!(
                    "{} |= (if type == \"object\" and has({new:?}) then .[{old:?}] = .[{new:?}] | del(.[{new:?}]) else . end)",
                    jq_path(parent)?
                ),
                "the field back under its old name",
            ))
        }
        Change::Missing { kind } => {
            let default = match kind {
                Kind::Integer | Kind::Number => "0",
                Kind::Bool => "false",
                Kind::Array => "[]",
                Kind::Object => "{}",
                Kind::Text | Kind::EmptyText => "\"\"",
                _ => return None,
            };
            let (parent, key) = split(&d.path)?;
            Some((
                format!(
                    "{} |= (if type == \"object\" and (has({key:?}) | not) then .[{key:?}] = {default} else . end)",
                    jq_path(parent)?
                ),
                "the missing field with its type's default (check the value)",
            ))
        }
        _ => None,
    }
}

/// `/payload/lines/[]` and its last key, unescaped.
fn split(path: &str) -> Option<(&str, String)> {
    let (parent, key) = path.rsplit_once('/')?;
    (key != "[]").then(|| (parent, unescape(key)))
}

fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

/// A shape path as a jq path: `/payload/amount` → `.payload.amount`, `/lines/[]/qty`
/// → `.lines[].qty`, other keys quoted (`.["odd key"]`); the root is `.`.
pub fn jq_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some(".".into());
    }
    let mut out = String::new();
    for seg in path.strip_prefix('/')?.split('/') {
        if seg == "[]" {
            out.push_str("[]");
            continue;
        }
        let key = unescape(seg);
        let plain = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if plain {
            out.push('.');
            out.push_str(&key);
        } else {
            // `.["odd key"]` first, `["odd key"]` after a segment: what jq and jaq read.
            let quoted = serde_json::to_string(&key).ok()?;
            out.push_str(&if out.is_empty() {
                format!(".[{quoted}]")
            } else {
                format!("[{quoted}]")
            });
        }
    }
    if out.starts_with('[') {
        out.insert(0, '.');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_paths_become_jq_paths() {
        assert_eq!(
            jq_path("/payload/amount").as_deref(),
            Some(".payload.amount")
        );
        assert_eq!(jq_path("/lines/[]/qty").as_deref(), Some(".lines[].qty"));
        assert_eq!(jq_path("/[]").as_deref(), Some(".[]"));
        assert_eq!(jq_path("").as_deref(), Some("."));
        assert_eq!(
            jq_path("/a b/x~1y\"").as_deref(),
            Some(".[\"a b\"][\"x/y\\\"\"]")
        );
    }
}
