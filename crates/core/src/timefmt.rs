//! Timestamps, durations and age buckets, parsed leniently because every convention
//! writes time its own way.

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};

/// Parse a timestamp as conventions write it: RFC 3339, `YYYY-MM-DD HH:MM:SS[.f]`,
/// NServiceBus' `YYYY-MM-DD HH:MM:SS:ffffff Z`, or epoch seconds/milliseconds.
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let n: i64 = s.parse().ok()?;
        return from_epoch_guess(n);
    }
    // NServiceBus wire format: 2026-09-21 10:04:31:123456 Z
    let ns = s.strip_suffix(" Z").unwrap_or(s);
    if let Some((head, frac)) = ns.rsplit_once(':') {
        if head.len() == 19 && frac.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(t) =
                NaiveDateTime::parse_from_str(&format!("{head}.{frac}"), "%Y-%m-%d %H:%M:%S%.f")
            {
                return Some(Utc.from_utc_datetime(&t));
            }
        }
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(ns.trim_end_matches('Z'), fmt) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    None
}

/// Epoch seconds or milliseconds, told apart by magnitude.
pub fn from_epoch_guess(n: i64) -> Option<DateTime<Utc>> {
    if n > 100_000_000_000 {
        DateTime::from_timestamp_millis(n)
    } else {
        DateTime::from_timestamp(n, 0)
    }
}

/// Parse `90s`, `15m`, `1h`, `2d`, `1w`, `1h30m` into milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total: i64 = 0;
    let mut num = String::new();
    let mut any = false;
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: i64 = num.parse().ok()?;
        num.clear();
        let unit = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        any = true;
    }
    if !num.is_empty() {
        return None; // a trailing number without unit is ambiguous
    }
    any.then_some(total)
}

/// Compact age: `45s`, `12m`, `2h5m`, `2d3h`.
pub fn format_age_ms(ms: i64) -> String {
    // Views keep a clock that moves by the minute: a letter that arrived since is "now".
    if ms < -60_000 {
        return "future".into();
    }
    if ms < 0 {
        return "now".into();
    }
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => {
            let (h, m) = (s / 3600, (s % 3600) / 60);
            if m == 0 {
                format!("{h}h")
            } else {
                format!("{h}h{m}m")
            }
        }
        _ => {
            let (d, h) = (s / 86_400, (s % 86_400) / 3600);
            if h == 0 {
                format!("{d}d")
            } else {
                format!("{d}d{h}h")
            }
        }
    }
}

/// The five age buckets of the design, youngest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgeBucket {
    Under5m,
    M5ToH1,
    H1ToD1,
    D1ToD7,
    Over7d,
    Unknown,
}

impl AgeBucket {
    pub const ALL: [AgeBucket; 6] = [
        AgeBucket::Under5m,
        AgeBucket::M5ToH1,
        AgeBucket::H1ToD1,
        AgeBucket::D1ToD7,
        AgeBucket::Over7d,
        AgeBucket::Unknown,
    ];

    /// The ages (ms) at which a letter moves to the next bucket.
    pub const BOUNDS_MS: [i64; 4] = [5 * 60_000, 3_600_000, 86_400_000, 7 * 86_400_000];

    pub fn of_age_ms(age_ms: i64) -> Self {
        let [m5, h1, d1, d7] = Self::BOUNDS_MS;
        match age_ms {
            a if a < m5 => AgeBucket::Under5m,
            a if a < h1 => AgeBucket::M5ToH1,
            a if a < d1 => AgeBucket::H1ToD1,
            a if a < d7 => AgeBucket::D1ToD7,
            _ => AgeBucket::Over7d,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AgeBucket::Under5m => "<5m",
            AgeBucket::M5ToH1 => "5m-1h",
            AgeBucket::H1ToD1 => "1h-24h",
            AgeBucket::D1ToD7 => "1d-7d",
            AgeBucket::Over7d => ">7d",
            AgeBucket::Unknown => "unknown",
        }
    }

    pub fn from_index(i: u32) -> Self {
        Self::ALL
            .get(i as usize)
            .copied()
            .unwrap_or(AgeBucket::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_convention_timestamps() {
        let want = Utc
            .with_ymd_and_hms(2026, 9, 21, 10, 4, 31)
            .single()
            .expect("valid");
        assert_eq!(parse_timestamp("2026-09-21T10:04:31Z"), Some(want));
        assert_eq!(parse_timestamp("2026-09-21T12:04:31+02:00"), Some(want));
        assert_eq!(parse_timestamp("2026-09-21 10:04:31:000000 Z"), Some(want));
        assert_eq!(parse_timestamp("2026-09-21 10:04:31"), Some(want));
        assert_eq!(parse_timestamp(&want.timestamp().to_string()), Some(want));
        assert_eq!(
            parse_timestamp(&want.timestamp_millis().to_string()),
            Some(want)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("15m"), Some(900_000));
        assert_eq!(parse_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("2d"), Some(172_800_000));
        assert_eq!(parse_duration_ms("15"), None);
        assert_eq!(parse_duration_ms("1x"), None);
        assert_eq!(parse_duration_ms("99999999999999999999d"), None);
    }

    #[test]
    fn buckets_and_ages() {
        assert_eq!(AgeBucket::of_age_ms(299_999), AgeBucket::Under5m);
        assert_eq!(AgeBucket::of_age_ms(300_000), AgeBucket::M5ToH1);
        assert_eq!(AgeBucket::of_age_ms(3_600_000), AgeBucket::H1ToD1);
        assert_eq!(AgeBucket::of_age_ms(86_400_000), AgeBucket::D1ToD7);
        assert_eq!(AgeBucket::of_age_ms(8 * 86_400_000), AgeBucket::Over7d);
        assert_eq!(format_age_ms(183_000_000), "2d2h");
        assert_eq!(format_age_ms(7_500_000), "2h5m");
        assert_eq!(format_age_ms(720_000), "12m");
    }
}
