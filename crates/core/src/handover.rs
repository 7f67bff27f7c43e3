//! Back-pressure for a consumer that may fall behind the scan (the TUI's UI thread,
//! whose frames can wait on a slow terminal over SSH): letters handed over count as in
//! flight until the consumer drops them, and the producer waits while too many are.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Letters handed over and not yet dropped by their consumer.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

/// Held by every letter of a handed-over batch; when the last of them is dropped
/// (indexed, or thrown away with the channel), the batch stops counting.
#[derive(Debug, Clone)]
pub struct Receipt(#[allow(dead_code)] Arc<BatchShare>);

#[derive(Debug)]
struct BatchShare {
    counter: Arc<AtomicUsize>,
    letters: usize,
}

impl Drop for BatchShare {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.letters, Ordering::Relaxed);
    }
}

impl InFlight {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Count `letters` in until the receipt and every clone of it (one per letter) has
    /// been dropped; `None` for none.
    pub fn issue(&self, letters: usize) -> Option<Receipt> {
        if letters == 0 {
            return None;
        }
        self.0.fetch_add(letters, Ordering::Relaxed);
        Some(Receipt(Arc::new(BatchShare {
            counter: self.0.clone(),
            letters,
        })))
    }

    /// Wait until fewer than `limit` letters are in flight. A consumer that has gone
    /// away dropped what it had not taken, so this cannot wait for a dead one.
    pub fn wait_below(&self, limit: usize) {
        while self.count() >= limit {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch counts until its last letter's receipt is dropped, whether taken apart
    /// letter by letter (as the TUI indexes) or dropped whole (a consumer that went away).
    #[test]
    fn a_batch_counts_until_its_last_letter_is_dropped() {
        let f = InFlight::default();
        let held = |n: usize| -> Vec<Receipt> {
            let r = f.issue(n).expect("a batch");
            vec![r; n]
        };
        let a = held(3);
        let b = held(2);
        assert!(f.issue(0).is_none());
        assert_eq!(f.count(), 5);
        let mut letters = a.into_iter();
        let first = letters.next();
        drop(first);
        assert_eq!(
            f.count(),
            5,
            "two letters of the first batch are still held"
        );
        drop(letters);
        assert_eq!(f.count(), 2);
        let waiter = {
            let f = f.clone();
            std::thread::spawn(move || f.wait_below(1))
        };
        drop(b);
        assert!(waiter.join().is_ok());
        assert_eq!(f.count(), 0);
    }
}
