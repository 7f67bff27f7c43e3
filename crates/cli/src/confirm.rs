//! One guard for every destructive command (replay, discard): up to `confirm_above`
//! letters `yes` confirms; above it the count itself — typed at the terminal, or
//! `--expect N` beside `--yes` in a script — so a filter that matches more than meant
//! stops before anything is sent or removed. `--expect N` also refuses a set that grew
//! past N.

use super::context::usage;
use std::io::{BufRead, IsTerminal};

pub struct Guard<'a> {
    /// `replay`, `discard`.
    pub verb: &'a str,
    pub n: usize,
    pub above: usize,
    pub yes: bool,
    pub expect: Option<usize>,
    /// What nothing happening means here (`nothing was sent`).
    pub nothing: &'a str,
}

impl Guard<'_> {
    /// `question` is asked on the terminal, followed by what to type.
    pub fn confirmed(&self, question: &str) -> anyhow::Result<bool> {
        let (n, above, verb, nothing) = (self.n, self.above, self.verb, self.nothing);
        if let Some(e) = self.expect.filter(|e| n > *e) {
            return usage(format!(
                "--expect {e} but {n} letters match: {nothing} (check the filter; if new letters keep arriving, pin the set with e.g. `age>5m`)"
            ));
        }
        if self.yes {
            if n > above && self.expect.is_none() {
                return usage(format!(
                    "{n} letters is more than {above}: confirm with --expect {n} ({nothing}; at most that many are affected: it guards against a filter that matches more than you meant)"
                ));
            }
            return Ok(true);
        }
        if !std::io::stdin().is_terminal() {
            return usage(format!(
                "about to {verb} {}: confirm in a terminal, or pass --yes{} ({nothing})",
                dlq_core::words::letters(n),
                if n > above {
                    format!(" --expect {n}")
                } else {
                    String::new()
                }
            ));
        }
        let want = if n > above {
            n.to_string()
        } else {
            "yes".to_string()
        };
        eprint!("{question}\nType {want} to continue: ");
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        Ok(answer.trim() == want)
    }
}
