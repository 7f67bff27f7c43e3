//! A token bucket: the replay's pace in letters per second.

use std::time::{Duration, Instant};

/// Sums of small time steps are not exact: a token this close to whole counts.
const EPSILON: f64 = 1e-9;

/// Tokens accrue at `rate` per second up to half a second's worth (at least one), so a
/// late tick catches up without a burst that would hit a recovering consumer at once.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// Starts with one token: the first letter goes at once.
    pub fn new(rate: f64, now: Instant) -> Self {
        TokenBucket {
            rate: rate.max(0.001),
            tokens: 1.0,
            last: now,
        }
    }

    fn capacity(&self) -> f64 {
        (self.rate * 0.5).max(1.0)
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.capacity());
        self.last = now;
    }

    /// Take one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 - EPSILON {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }

    /// How long until the next token.
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 - EPSILON {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_at_the_rate_after_the_first() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, t0);
        assert!(b.take(t0));
        assert!(!b.take(t0));
        // Over 2 s of 10 ms ticks: 20 more.
        let mut sent = 0;
        for i in 1..=200 {
            if b.take(t0 + Duration::from_millis(i * 10)) {
                sent += 1;
            }
        }
        assert_eq!(sent, 20);
    }

    #[test]
    fn a_late_tick_catches_up_only_half_a_second() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, t0);
        assert!(b.take(t0));
        let later = t0 + Duration::from_secs(10);
        let mut burst = 0;
        while b.take(later) {
            burst += 1;
        }
        assert_eq!(burst, 50);
        assert!(b.wait(later) > Duration::ZERO);
    }
}
