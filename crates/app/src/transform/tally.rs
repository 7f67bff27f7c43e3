//! What a transform's dry-run shows: a tally of the letters it changed, left alone or
//! failed on, with samples computed on the masked view — as JSON and as lines.

use super::*;

/// A changed letter as the dry-run shows it: what the program made of its masked view
/// (or, unmasked, of the letter itself).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sanitized.
    pub letter_id: String,
    pub location: String,
    pub changes: Vec<Change>,
    /// Why there are no changes to show: the program fails on the masked view (its
    /// cause there, masked).
    pub note: Option<String>,
}

/// What a program does to a selection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Letters offered.
    pub matched: u64,
    pub changed: u64,
    pub unchanged: u64,
    /// Their latest revision already came from this program (an earlier run).
    pub already: u64,
    /// By cause (masked, values left out): how many. Without the unmask right a cause
    /// is the program's failure **on the masked view**, or that it failed on the real
    /// letter only (no word of why).
    pub failed: BTreeMap<String, u64>,
    pub sample: Vec<Sample>,
    /// The sample and causes are the real run's (`--unmask`, audited).
    pub unmasked: bool,
}

impl Tally {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    /// `{"matched", "changed", "unchanged", "already", "failed": {CAUSE: N}, "sample": [..]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "matched": self.matched,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "already": self.already,
            "failed": self.failed,
            "sample_computed_on": if self.unmasked { "the letters (unmasked, audited)" } else { "the masked view" },
            "sample": self.sample.iter().map(|s| serde_json::json!({
                "letter_id": s.letter_id,
                "location": s.location,
                "note": s.note,
                "changes": s.changes.iter().map(|c| serde_json::json!({
                    "path": c.path, "kind": c.kind.as_str(), "old": c.old, "new": c.new,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// What the dry-run says, as both front ends show it: the counts, the failures by
    /// cause and the masked sample (sanitized lines, paths and values cut to `width`).
    pub fn lines(&self, width: usize) -> Vec<String> {
        let mut out = vec![self.line()];
        if !self.failed.is_empty() {
            out.push("failed, by cause (these letters are not revised):".into());
            for (why, n) in &self.failed {
                out.push(format!("  {n:>6}  {}", sanitize::line(why, width)));
            }
        }
        if !self.sample.is_empty() {
            out.push(if self.unmasked {
                "sample (unmasked, audited):".into()
            } else {
                "sample, computed by the program on the masked view (what you may see):".into()
            });
            for s in &self.sample {
                out.push(format!("  {} at {}", s.letter_id, s.location));
                if let Some(note) = &s.note {
                    out.push(format!("    {}", sanitize::line(note, width)));
                }
                for c in &s.changes {
                    out.push(format!(
                        "    {:<8} {}  {} → {}",
                        c.kind.as_str(),
                        sanitize::line(&c.path, width / 2),
                        sanitize::line(c.old.as_deref().unwrap_or("-"), width / 3),
                        sanitize::line(c.new.as_deref().unwrap_or("-"), width / 3)
                    ));
                }
            }
        }
        out
    }

    /// One line: `302 change · 0 unchanged · 0 already · 0 failed`.
    pub fn line(&self) -> String {
        format!(
            "{} change · {} unchanged · {} already revised by this program · {} failed",
            self.changed,
            self.unchanged,
            self.already,
            self.failed_total()
        )
    }
}
