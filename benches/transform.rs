//! A jq program over 100,000 letters of ~1 KiB, as `transform` runs it: the program in
//! its worker process (one round trip per letter), each output parsed, compared, given
//! its changed paths and a revision to record (held, as a confirmed run holds them).
//!
//! `cargo bench --bench transform` prints letters/s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench may stop on a broken fixture

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dlq_app::session::{Principal, Settings};
use dlq_app::transform::{Limits, Transform, WorkerCommand};
use dlq_core::access::Role;
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, DeadLetter, RawLetter};

const LETTERS: usize = 100_000;
const FIX: &str = r#".payload.amount |= (gsub(",";"") | tonumber)"#;

fn letter(i: usize) -> RawLetter {
    let lines: Vec<serde_json::Value> = (0..10)
        .map(|l| serde_json::json!({"sku": format!("SKU-{:05}", i * 7 + l), "title": "Stainless steel widget", "qty": l + 1}))
        .collect();
    let body = serde_json::json!({
        "message_id": format!("msg_{i:010}"),
        "event_type": "invoice.issue.requested",
        "payload": {
            "invoice_id": format!("INV-2026-{i:06}"),
            "customer": {"name": "Jane Roe", "email": "jane.roe@example.com", "address": {"street": "12 Rue de Rivoli", "city": "Paris"}},
            "amount": format!("{},{:03}.{:02}", 1 + i % 9, i % 1000, i % 100),
            "currency": "EUR",
            "lines": lines,
        },
        "failure": {"reason_code": "amount_not_a_number", "consumer_version": "release-2026-09-21"},
    });
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: "invoices.dlq".into(),
            partition: 0,
            offset: i as i64,
        }),
        payload: body.to_string().into_bytes(),
        ..RawLetter::default()
    }
}

fn bench(c: &mut Criterion) {
    dlq_app::transform::use_worker(WorkerCommand {
        program: env!("CARGO_BIN_EXE_dlq-triage").into(),
        args: vec![dlq_transform::WORKER_ARG.into()],
    });
    let settings = Settings {
        source_key: "kafka://bench/invoices.dlq".into(),
        principal: Principal {
            actor: "bench".into(),
            role: Role::Operator,
            read_only: false,
            ledger_unreachable: None,
            // Each run's dry-run is audited, as a user's is.
            ledger: Some(dlq_core::ledger_location::Location::File(
                std::env::temp_dir().join(format!("dlq-bench-transform-{}.db", std::process::id())),
            )),
        },
        masker: Masker::with_key(b"bench".to_vec()),
        mappings: Vec::new(),
        codec: None,
        since: None,
        approval_above: None,
        discard_approval_above: None,
        allowed_targets: Vec::new(),
    };
    let letters: Vec<std::sync::Arc<DeadLetter>> = (0..LETTERS)
        .map(|i| std::sync::Arc::new(settings.extract(letter(i))))
        .collect();
    let size = letters.iter().map(|l| l.raw.payload.len()).sum::<usize>() / LETTERS;
    eprintln!("{LETTERS} letters of {size} B on average");
    let mut g = c.benchmark_group("transform");
    g.sample_size(10);
    g.throughput(Throughput::Elements(LETTERS as u64));
    g.bench_function("amount_fix_100k_letters", |b| {
        b.iter(|| {
            let mut t =
                Transform::start(&settings, FIX, "bench", true, Limits::default()).expect("starts");
            for l in &letters {
                t.offer(l.clone()).expect("offer");
            }
            let tally = t.dry_run_shown("bench").expect("audited");
            assert_eq!(tally.changed, LETTERS as u64);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
