//! Test hook (`test-hooks` builds only): the process stops itself (SIGSTOP, as Ctrl-Z
//! or a paused VM would stop it) at a seeded point of its replay journal, so a test can
//! freeze a holder exactly inside or exactly outside a ledger transaction — never by
//! timing. `DLQ_TRIAGE_TEST_FREEZE_AT=` …
//!
//! - `inside:N`: inside the `confirmed` write that brings the letters this process
//!   journaled confirmed to N or more (its write lock taken; on a team ledger the
//!   server's advisory lock held);
//! - `outside:N`: right after that write committed. On Kafka, in both places every
//!   letter sent so far is committed on the broker and nothing else is in flight (a
//!   transaction per batch, committed before its confirms are journaled);
//! - `sending:N`: right after the `sending` write that brings the letters journaled
//!   `sending` to N or more committed — before they are handed to the broker;
//! - `revisions:N`: a `transform --yes` run, the first time the revisions it has
//!   committed reach N or more (`revisions:0`: after its scan, before its first batch).

#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where in the journal.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// Inside a `confirmed` write.
    Inside,
    /// After a `confirmed` write.
    Outside,
    /// After a `sending` write.
    Sending,
}

#[cfg(feature = "test-hooks")]
static CONFIRMED: AtomicUsize = AtomicUsize::new(0);
#[cfg(feature = "test-hooks")]
static SENDING: AtomicUsize = AtomicUsize::new(0);

/// Counts `letters` (a confirmed write's at `Inside`, a sending write's at `Sending`)
/// and stops the process where the hook asks.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn at(_point: Point, _letters: usize) {}

/// Counts `letters` (a confirmed write's at `Inside`, a sending write's at `Sending`)
/// and stops the process where the hook asks.
#[cfg(feature = "test-hooks")]
pub(crate) fn at(point: Point, letters: usize) {
    let Ok(spec) = std::env::var("DLQ_TRIAGE_TEST_FREEZE_AT") else {
        return;
    };
    let Some((want, n)) = spec.split_once(':') else {
        return;
    };
    let Ok(n) = n.parse::<usize>() else { return };
    let (here, after) = match point {
        Point::Inside => (
            "inside",
            CONFIRMED.fetch_add(letters, Ordering::SeqCst) + letters,
        ),
        Point::Outside => ("outside", CONFIRMED.load(Ordering::SeqCst)),
        Point::Sending => (
            "sending",
            SENDING.fetch_add(letters, Ordering::SeqCst) + letters,
        ),
    };
    if want == here && after >= n && after - letters < n {
        // Raised on this thread (tgkill), which stops before it returns to the next
        // line: the whole process stops exactly here. (`kill -STOP <pid>` from a child
        // may be taken by another thread, and this one can run on — into the next
        // transaction — before the stop reaches it.)
        let _ = signal_hook::low_level::raise(signal_hook::consts::SIGSTOP);
    }
}

#[cfg(feature = "test-hooks")]
static COUNTED_FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A count-based point outside the replay journal (`name:N`, e.g. `revisions:N`): the
/// process stops itself the first time `count` reaches N. Called before anything is
/// counted (count 0) and after each commit, so `name:0` stops before the first.
#[cfg(not(feature = "test-hooks"))]
pub fn count_reached(_name: &str, _count: usize) {}

/// A count-based point outside the replay journal (`name:N`, e.g. `revisions:N`): the
/// process stops itself the first time `count` reaches N. Called before anything is
/// counted (count 0) and after each commit, so `name:0` stops before the first.
#[cfg(feature = "test-hooks")]
pub fn count_reached(name: &str, count: usize) {
    let Ok(spec) = std::env::var("DLQ_TRIAGE_TEST_FREEZE_AT") else {
        return;
    };
    let Some((want, n)) = spec.split_once(':') else {
        return;
    };
    let Ok(n) = n.parse::<usize>() else { return };
    if want == name && count >= n && !COUNTED_FIRED.swap(true, Ordering::SeqCst) {
        // On this thread, as in `at`: the process stops before the next line.
        let _ = signal_hook::low_level::raise(signal_hook::consts::SIGSTOP);
    }
}
