//! The scan's progress on a terminal: a line on stderr once a scan has run for more than
//! a second (letters, rate, share and estimate from the broker's count or watermarks),
//! redrawn ten times a second and erased when the scan ends. Nothing on a pipe: scripts
//! and CI logs get only the result.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

impl dlq_app::launch::ScanProgress for ScanBar {
    fn add(&mut self, n: u64) {
        ScanBar::add(self, n);
    }
    fn total(&mut self, total: Option<u64>) {
        ScanBar::total(self, total);
    }
    fn finish(&mut self) {
        ScanBar::finish(self);
    }
}

/// A scan must run this long before the line appears (quick scans stay quiet).
const QUIET_FOR: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(100);

pub(crate) struct ScanBar {
    on: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
    done: u64,
    total: Option<u64>,
}

impl ScanBar {
    pub(crate) fn new() -> Self {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        ScanBar {
            on: std::io::stderr().is_terminal() && !dumb,
            started: Instant::now(),
            last: None,
            drawn: false,
            done: 0,
            total: None,
        }
    }

    /// `n` more letters read; `total` when the source knows (or estimates) it.
    pub(crate) fn add(&mut self, n: u64) {
        self.done += n;
        self.draw();
    }

    pub(crate) fn total(&mut self, total: Option<u64>) {
        if total.is_some() {
            self.total = total;
        }
        self.draw();
    }

    fn draw(&mut self) {
        if !self.on || self.started.elapsed() < QUIET_FOR {
            return;
        }
        if self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let line = bar_text(self.done, self.total, self.started.elapsed());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erase the line (the result follows on stdout).
    pub(crate) fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for ScanBar {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `scanning · 412,000 letters · 86,000/s · 41% · ~7s left`.
pub(crate) fn bar_text(done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(0.001);
    let mut s = format!(
        "scanning · {} letters · {}/s",
        group(done),
        group(rate as u64)
    );
    if let Some(t) = total.filter(|t| *t > 0) {
        let share = (done as f64 / t as f64).min(1.0);
        s.push_str(&format!(" · {:.0}%", share * 100.0));
        if rate > 0.0 && t > done {
            s.push_str(&format!(
                " · ~{}s left",
                ((t - done) as f64 / rate).ceil() as u64
            ));
        }
    }
    s
}

/// `1234567` → `1,234,567`.
fn group(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_letters_rate_share_and_time_left() {
        assert_eq!(
            bar_text(412_000, Some(1_000_000), Duration::from_secs(5)),
            "scanning · 412,000 letters · 82,400/s · 41% · ~8s left"
        );
        assert_eq!(
            bar_text(5, None, Duration::from_secs(2)),
            "scanning · 5 letters · 2/s"
        );
        assert_eq!(
            bar_text(10, Some(5), Duration::from_secs(1)),
            "scanning · 10 letters · 10/s · 100%"
        );
    }
}
