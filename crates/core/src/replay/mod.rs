//! Canary replay (README "Replay"): a plan shown as a dry-run, then the letters published
//! to their origin — a canary at a low rate, a watch window on the DLQ, a ramp at the
//! chosen rate — with auto-stop when letters fail again, a kill switch, confirm before
//! settle, and every step journaled in the ledger so a crash can be resumed without
//! sending a confirmed letter twice. The session drives it; front ends render it.

pub mod describe;
pub mod engine;
pub mod options;
pub mod plan;
mod planned;
pub mod rate;
pub mod report;
mod stale;

pub use engine::{Control, End, Engine, LetterOutcome, Phase, Progress};
pub use plan::{Candidate, Options, Plan, Why};

/// Above this many letters, the operator types the count to confirm a replay (CLI:
/// `--expect N` with `--yes`).
pub const CONFIRM_COUNT_ABOVE: usize = 100;

/// A new replay id: `r-YYYYMMDD-HHMMSS-xxxx` (sortable, short enough to type).
pub fn new_id(now: chrono::DateTime<chrono::Utc>) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(now.timestamp_nanos_opt().unwrap_or_default() as u128);
    h.write_u32(std::process::id());
    format!(
        "r-{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        h.finish() & 0xffff
    )
}
