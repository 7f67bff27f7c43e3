//! One decision per letter: which decision may follow what the ledger already holds of a
//! letter. Both stores read this one table — the file ledger in Rust, inside the write
//! transaction that records the step; the team ledger through a server function the
//! migration writes from [`FOLLOWS`] (`dlq_private.may_follow`), inside the server
//! function that records it — so no letter is ever both discarded and sent, or sent by
//! two replays, whoever decides and wherever they sit.

use serde::Serialize;

/// What the ledger holds of one letter (one binding) when a decision comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// Nothing decided.
    Open,
    /// Discarded (recorded, whether or not the broker has settled it yet).
    Discarded,
    /// Confirmed by a replay (another replay than the one asking).
    Replayed,
    /// Planned or being sent by a live replay (another one than the one asking).
    Held,
    /// `sending` in a replay that stopped: it may have reached the broker.
    InDoubt,
}

/// A decision about to be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// A discard with a reason.
    Discard,
    /// A replay journals the letter as `sending`: its publish is about to start.
    Send,
    /// A new revision (an edit, a transform): a live replay would send what its plan
    /// chose, not this.
    Revise,
}

impl Standing {
    pub const ALL: [Standing; 5] = [
        Standing::Open,
        Standing::Discarded,
        Standing::Replayed,
        Standing::Held,
        Standing::InDoubt,
    ];

    /// The stored spelling (the server's table).
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Open => "open",
            Standing::Discarded => "discarded",
            Standing::Replayed => "replayed",
            Standing::Held => "held",
            Standing::InDoubt => "in-doubt",
        }
    }

    /// The stronger of two standings of one letter: what decides a step is the most
    /// binding thing the ledger holds of it.
    pub fn max(self, other: Standing) -> Standing {
        let rank = |s: Standing| Standing::ALL.iter().position(|x| *x == s).unwrap_or(0);
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

impl Step {
    pub const ALL: [Step; 3] = [Step::Discard, Step::Send, Step::Revise];

    /// The stored spelling (the server's table).
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Discard => "discard",
            Step::Send => "send",
            Step::Revise => "revise",
        }
    }
}

/// The table: `(after, step, allowed)` for every pair. A discarded letter is never sent;
/// a replayed one is neither discarded nor sent again; a letter a live replay holds, or
/// one a stopped replay may have sent, is neither discarded nor revised until that replay
/// ends or is resumed (which reads it back). Written out in full, not as a rule, so the
/// server's copy is the same rows.
pub const FOLLOWS: [(Standing, Step, bool); 15] = [
    (Standing::Open, Step::Discard, true),
    (Standing::Open, Step::Send, true),
    (Standing::Open, Step::Revise, true),
    (Standing::Discarded, Step::Discard, false),
    (Standing::Discarded, Step::Send, false),
    // A revision never touches the original: recorded for the record.
    (Standing::Discarded, Step::Revise, true),
    (Standing::Replayed, Step::Discard, false),
    (Standing::Replayed, Step::Send, false),
    (Standing::Replayed, Step::Revise, true),
    (Standing::Held, Step::Discard, false),
    (Standing::Held, Step::Send, false),
    (Standing::Held, Step::Revise, false),
    (Standing::InDoubt, Step::Discard, false),
    (Standing::InDoubt, Step::Send, false),
    (Standing::InDoubt, Step::Revise, false),
];

/// Whether `step` may follow `standing`.
pub fn may_follow(standing: Standing, step: Step) -> bool {
    FOLLOWS
        .iter()
        .any(|&(s, t, allowed)| s == standing && t == step && allowed)
}

/// The table as SQL rows, `('open','discard',true),…`: what the team ledger's migration
/// writes into `dlq_private.may_follow`, so the server decides by these same rows.
pub fn sql_rows() -> String {
    FOLLOWS
        .iter()
        .map(|(s, t, a)| format!("('{}','{}',{a})", s.as_str(), t.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

/// What refused a step: the standing, and who or what holds the letter, for the message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    pub letter_id: String,
    pub standing: Standing,
    /// Who decided or holds it: `replay r-… (running on HOST by USER, heartbeat 2 s ago)`,
    /// `discarded by alice at … (reason: …)`.
    pub by: String,
    /// What frees it: `stop it (K in its TUI, Ctrl-C in its CLI)`, `resume it: … --resume r-…`.
    pub then: String,
}

impl Conflict {
    pub fn describe(&self) -> String {
        crate::sanitize::clean(&format!(
            "{} is {}: {}; {}",
            self.letter_id,
            match self.standing {
                Standing::Held => "held by a live replay",
                Standing::InDoubt => "in doubt in a stopped replay (it may have been sent)",
                Standing::Discarded => "discarded",
                Standing::Replayed => "replayed",
                Standing::Open => "open",
            },
            self.by,
            self.then
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_is_in_the_table_once() {
        for s in Standing::ALL {
            for t in Step::ALL {
                let n = FOLLOWS.iter().filter(|r| r.0 == s && r.1 == t).count();
                assert_eq!(n, 1, "{s:?} {t:?}");
            }
        }
    }

    #[test]
    fn nothing_discarded_is_sent_and_nothing_held_is_discarded() {
        assert!(!may_follow(Standing::Discarded, Step::Send));
        assert!(!may_follow(Standing::Held, Step::Discard));
        assert!(!may_follow(Standing::InDoubt, Step::Discard));
        assert!(!may_follow(Standing::Replayed, Step::Send));
        assert!(!may_follow(Standing::Replayed, Step::Discard));
        assert!(may_follow(Standing::Open, Step::Discard));
        assert!(may_follow(Standing::Open, Step::Send));
    }

    #[test]
    fn the_strongest_standing_decides() {
        assert_eq!(Standing::Open.max(Standing::Held), Standing::Held);
        assert_eq!(
            Standing::InDoubt.max(Standing::Discarded),
            Standing::InDoubt
        );
    }

    #[test]
    fn the_servers_rows_are_the_table() {
        let rows = sql_rows();
        assert_eq!(rows.matches("),(").count() + 1, FOLLOWS.len());
        assert!(rows.contains("('discarded','send',false)"));
        assert!(rows.contains("('open','discard',true)"));
    }
}
