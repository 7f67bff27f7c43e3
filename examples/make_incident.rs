//! Writes the sample dump `examples/incident.ndjson`:
//! `cargo run --example make_incident -- 2026-11-29T18:00:00Z 0.3 > examples/incident.ndjson`
//! (arguments: the incident's "now" and a scale; 1.0 is about 1,300 letters).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{DateTime, Utc};
use dlq_core::dump::to_line;
use dlq_kafka::demo::scenario::{convention_samples, incident, Scale};
use std::io::Write;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let now: DateTime<Utc> = match args.next() {
        Some(t) => DateTime::parse_from_rfc3339(&t)?.with_timezone(&Utc),
        None => Utc::now(),
    };
    let scale: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(0.3);
    let mut out = std::io::stdout().lock();
    for l in incident(42, now, Scale(scale))
        .iter()
        .chain(&convention_samples(42, now, 6))
    {
        writeln!(out, "{}", to_line(l, false))?;
    }
    Ok(())
}
