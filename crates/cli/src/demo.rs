//! `dlq-triage demo`: the incident on an in-process Kafka cluster. Until the TUI lands it
//! prints the demo's summary; `--serve` keeps the cluster up for kcat or a second terminal.

use super::context::Launch;
use super::{DemoArgs, SummaryArgs};
use dlq_app::brokers::{Demo, Scale, Simulator};
use std::io::Write;

pub fn run(ctx: &Launch, a: &DemoArgs) -> anyhow::Result<()> {
    if !a.serve {
        eprintln!(
            "(stdout is not a terminal: printing the demo's summary instead of opening the TUI)"
        );
        let args = SummaryArgs {
            source: "demo".into(),
            group_by: None,
            filter: None,
            json: false,
        };
        return super::summary::run(ctx, &args);
    }
    let extra = dlq_app::brokers::demo_schemas::extra(a.seed, ctx.now)?;
    let registry = dlq_app::brokers::demo_schemas::registry()?.url.clone();
    let avro = a.bench_avro.then(|| extra.letters.clone());
    let demo = Demo::start_with(a.seed, ctx.now, Scale(1.0), extra)?;
    if let Some(n) = a.bench {
        demo.seed_bench("bench.dlq", n, 256, ctx.now, avro.as_deref())?;
        writeln!(
            std::io::stdout(),
            "bench:       bench.dlq seeded with {n} letters in 256 partitions"
        )?;
    }
    // A new dead letter every few seconds, and the simulated consumer that replays land on.
    let _sim = Simulator::start(
        demo.bootstrap(),
        a.seed,
        Some(std::time::Duration::from_secs(4)),
    )?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "demo broker: {}", demo.bootstrap())?;
    writeln!(
        out,
        "topics:      {} ({} letters seeded)",
        demo.topics.join(", "),
        demo.seeded
    )?;
    writeln!(
        out,
        "schema registry: {registry} (payouts.dlq is Avro, Confluent-framed)"
    )?;
    writeln!(
        out,
        "try:         dlq-triage summary {} --schema-registry {registry}",
        demo.uri()
    )?;
    writeln!(
        out,
        "             kcat -C -b {} -t {} -e -q",
        demo.bootstrap(),
        demo.topics[0]
    )?;
    writeln!(
        out,
        "             kcat -C -b {} -t payouts.dlq -s value=avro -r {registry} -e -q   (a kcat built with Avro)",
        demo.bootstrap()
    )?;
    writeln!(
        out,
        "live:        a new dead letter every 4 s; replays to invoices/payments/ledger-postings"
    )?;
    writeln!(
        out,
        "             are processed by a simulated consumer and fail again per the scenario"
    )?;
    writeln!(out, "Ctrl-C stops it.")?;
    out.flush()?;
    drop(out);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
