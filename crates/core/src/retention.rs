//! How long the broker keeps a DLQ's letters, and so when a group's oldest letter is
//! deleted by the broker rather than by a decision: Kafka's `retention.ms` under
//! `cleanup.policy=delete`, RabbitMQ's message TTL. Read from the broker, never guessed:
//! what cannot be read is `Unknown`, and said so.

use crate::store::{LetterStore, Sym};
use crate::timefmt;
use std::sync::Arc;

/// A container's (topic's, queue's) rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retention {
    /// Letters stay until someone decides (why: `retention.ms=-1`, `compact`, no TTL).
    Kept(String),
    /// Each letter is deleted `ms` after its time (record timestamp; time it was
    /// dead-lettered into the queue). `basis` names the setting read.
    After { ms: i64, basis: String },
    /// Not readable here: why (no permission, the broker does not answer).
    Unknown(String),
}

impl Retention {
    pub fn ms(&self) -> Option<i64> {
        match self {
            Retention::After { ms, .. } => Some(*ms),
            _ => None,
        }
    }

    /// One line for notes and `summary`: `retention.ms=604800000 (7d)`, `retention
    /// unknown: …`, `kept until decided: …`.
    pub fn describe(&self) -> String {
        match self {
            Retention::After { ms, basis } => {
                format!(
                    "deleted {} after arrival ({basis})",
                    timefmt::format_age_ms(*ms)
                )
            }
            Retention::Kept(why) => format!("kept until decided ({why})"),
            Retention::Unknown(why) => format!("retention unknown: {why}"),
        }
    }
}

/// Retention in ms by container symbol, as the group index reads it.
pub type BySymbol = Arc<foldhash::HashMap<Sym, i64>>;

/// The time limits by container symbol of `store` (interning names it has not seen
/// yet), for [`crate::grouping::GroupIndex::with_retention`].
pub fn by_symbol(store: &mut LetterStore, rules: &[(String, Retention)]) -> BySymbol {
    Arc::new(
        rules
            .iter()
            .filter_map(|(c, r)| r.ms().map(|ms| (store.syms.intern(c), ms)))
            .collect(),
    )
}

/// How a group's clock reads: `expires in 5h12m`, `due for deletion now`.
pub fn expires_label(expires_at_ms: i64, now_ms: i64) -> String {
    let left = expires_at_ms - now_ms;
    if left <= 0 {
        "due for deletion now".into()
    } else {
        format!("expires in {}", timefmt::format_age_ms(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_time_left_and_says_when_it_is_due() {
        let h = 3_600_000;
        assert_eq!(expires_label(5 * h + 12 * 60_000, 0), "expires in 5h12m");
        assert_eq!(expires_label(0, 10), "due for deletion now");
        let r = Retention::After {
            ms: 7 * 24 * h,
            basis: "retention.ms=604800000".into(),
        };
        assert!(r.describe().contains("7d"), "{}", r.describe());
    }
}
