//! Indexing at incident scale: 1,000,000 synthetic letters.
//!
//! `cargo bench --bench index` prints, besides criterion's timings, the metadata bytes
//! held per letter (target ≤ 200 beyond payload bytes, which the store does not keep).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{TimeZone, Utc};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dlq_core::catalog::{preview, Catalog};
use dlq_core::conventions::extract;
use dlq_core::filter::Filter;
use dlq_core::grouping::{Dim, GroupIndex, DEFAULT_DIMS};
use dlq_core::masking::{Layout, Masker};
use dlq_core::model::DeadLetter;
use dlq_core::store::LetterStore;
use dlq_kafka::demo::scenario::{incident, Scale};

const N: usize = 1_000_000;

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
        .single()
        .expect("valid time")
}

/// ~1,300 realistic extracted letters, reused with distinct ids/offsets to reach 1M.
fn templates() -> Vec<DeadLetter> {
    incident(42, now(), Scale(1.0))
        .into_iter()
        .map(|r| extract(r, &[]))
        .collect()
}

/// Push `n` letters (cycling over the templates) into a fresh store and group index.
fn build_store(
    templates: &[DeadLetter],
    previews: &[String],
    n: usize,
) -> (LetterStore, GroupIndex) {
    let mut store = LetterStore::new();
    let mut idx = GroupIndex::new(&DEFAULT_DIMS, now().timestamp_millis());
    for i in 0..n {
        let t = i % templates.len();
        let id = store.push(&templates[t], &previews[t]);
        if let Some(row) = store.row(id) {
            let row = *row;
            idx.add(id, &row);
        }
    }
    store.shrink_to_fit();
    (store, idx)
}

fn bench(c: &mut Criterion) {
    let templates = templates();
    let masker = Masker::with_key(b"bench".to_vec());
    let previews: Vec<String> = templates
        .iter()
        .map(|t| preview(&masker, &t.raw.payload))
        .collect();

    // Memory figure, printed once.
    let (store, idx) = build_store(&templates, &previews, N);
    // One RowId and its time per letter in the group index.
    let members = (std::mem::size_of::<u32>() + std::mem::size_of::<i64>()) * N;
    let per_letter = (store.heap_bytes() + members) as f64 / N as f64;
    eprintln!(
        "\nmetadata per letter: {per_letter:.1} bytes ({} rows of {} bytes + arena + interner + group members), {} groups",
        store.len(),
        std::mem::size_of::<dlq_core::store::Row>(),
        idx.len()
    );

    let mut g = c.benchmark_group("index_1m");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("store_and_group_1m", |b| {
        b.iter(|| black_box(build_store(&templates, &previews, N).1.total()))
    });
    g.bench_function("regroup_1m_event_consumer_age", |b| {
        b.iter(|| {
            black_box(
                GroupIndex::build(
                    &store,
                    &[Dim::Event, Dim::Consumer, Dim::Age],
                    now().timestamp_millis(),
                    None,
                )
                .len(),
            )
        })
    });
    g.bench_function("filter_1m_reason_age", |b| {
        b.iter_batched(
            || Filter::parse("reason=customer_tax_profile_missing age<1h").expect("valid filter"),
            |mut f| {
                black_box(
                    store
                        .rows()
                        .iter()
                        .filter(|r| f.matches(&store, r, now().timestamp_millis()))
                        .count(),
                )
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("fuzzy_1m", |b| {
        b.iter_batched(
            || Filter::parse("cus-88").expect("valid filter"),
            |mut f| {
                black_box(
                    store
                        .rows()
                        .iter()
                        .filter(|r| f.matches(&store, r, now().timestamp_millis()))
                        .count(),
                )
            },
            BatchSize::SmallInput,
        )
    });
    // The TUI's clock: one second, then one minute, on (reason, version, age) with an
    // age filter — against `regroup_1m_…`, what a full regroup per tick would cost.
    let (mut timed, _) = build_store(&templates, &previews, N);
    timed.index_times(&[]);
    let age_filter = || Filter::parse("age<1h").expect("valid filter");
    let live = GroupIndex::build(
        &timed,
        &DEFAULT_DIMS,
        now().timestamp_millis(),
        Some(&mut age_filter()),
    );
    for (name, step) in [("tick_1s_1m", 1_000), ("tick_1min_1m", 60_000)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || (live.clone(), age_filter()),
                |(mut idx, mut f)| {
                    black_box(idx.advance(
                        &mut timed,
                        Some(&mut f),
                        now().timestamp_millis() + step,
                    ))
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();

    // Per-letter cost of the full ingest path: conventions + masked preview + index.
    let raws = incident(7, now(), Scale(1.0));
    let mut g = c.benchmark_group("ingest");
    g.throughput(Throughput::Elements(raws.len() as u64));
    g.bench_function("extract_preview_store", |b| {
        b.iter_batched(
            || raws.clone(),
            |raws| {
                let mut cat = Catalog::new(Masker::with_key(b"bench".to_vec()), Vec::new());
                for r in raws {
                    cat.ingest(r);
                }
                black_box(cat.store.len())
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    // Masking 1 KiB JSON payloads (the detail view and export path): a real envelope
    // padded with a free-text note carrying an email and a card number.
    let base = templates
        .iter()
        .map(|t| &t.raw.payload)
        .find(|p| p.len() >= 600 && p.starts_with(b"{"))
        .cloned()
        .unwrap_or_default();
    let mut doc: serde_json::Value = serde_json::from_slice(&base).unwrap_or_default();
    let note_prefix =
        "customer called about card 4242 4242 4242 4242, reach at jane.doe@example.com; ";
    doc["note"] = serde_json::Value::String(note_prefix.to_string());
    let pad = 1024usize.saturating_sub(serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0));
    doc["note"] = serde_json::Value::String(format!("{note_prefix}{}", "x".repeat(pad)));
    let payload = serde_json::to_vec(&doc).unwrap_or_default();
    let mut g = c.benchmark_group("masking");
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function(format!("mask_json_compact_{}B", payload.len()), |b| {
        b.iter(|| {
            black_box(
                masker
                    .mask_json(&payload, Layout::Compact, usize::MAX)
                    .map(|r| r.0.len()),
            )
        })
    });
    g.bench_function(format!("mask_json_pretty_{}B", payload.len()), |b| {
        b.iter(|| {
            black_box(
                masker
                    .mask_json(&payload, Layout::Pretty, usize::MAX)
                    .map(|r| r.0.len()),
            )
        })
    });
    g.bench_function("preview_60B", |b| {
        b.iter(|| black_box(preview(&masker, &payload)))
    });
    g.finish();
    // Hostile payloads that were quadratic with hand-written scanners (2 MB each).
    let mut g = c.benchmark_group("masking_adversarial");
    g.sample_size(10);
    for (name, unit) in [
        ("ones", "1 "),
        ("dots", "a."),
        ("jwt", "eyJ."),
        ("plus", "+1 "),
    ] {
        let text = unit.repeat(2_000_000 / unit.len());
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(format!("mask_text_2MB_{name}"), |b| {
            b.iter(|| black_box(masker.mask_text(&text).len()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
