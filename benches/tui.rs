//! The TUI at incident scale: 1,000,000 letters loaded, then keystroke → frame times
//! (update + full render; p50/p99 printed) and bytes written to the terminal per
//! selection move. `cargo bench --bench tui`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{TimeZone, Utc};
use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{Event, KeyCode};
use dlq_core::catalog::{prepare_letter, Catalog};
use dlq_core::masking::Masker;
use dlq_core::ports::SourceInfo;
use dlq_kafka::demo::scenario::{incident, Scale};
use dlq_tui::action::Action;
use dlq_tui::action::BrowseEvent;
use dlq_tui::state::AppState;
use dlq_tui::theme::Theme;
use dlq_tui::update::update;
use dlq_tui::{action_for_event, views};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::time::Instant;

mod support;
use support::{key, loaded, percentiles, Sink, SIZE};

/// Keystroke → frame while moving onto a letter with a hostile 2 MB payload (`1 ` × 1M,
/// the old quadratic case): the UI thread hands the rendering off, so the move costs what
/// any move costs; the render thread's own time is printed too.
fn hostile_payload_latency(theme: &Theme) {
    let masker = Masker::with_key(b"bench".to_vec());
    let now = Utc
        .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
        .single()
        .expect("valid time");
    let mut letters: Vec<_> = incident(7, now, Scale(0.01)).into_iter().take(2).collect();
    letters[1].payload = "1 ".repeat(1_000_000).into_bytes();
    let info = SourceInfo {
        label: "hostile".into(),
        browse_effect: String::new(),
    };
    let mut s = AppState::new(
        info,
        Catalog::new(masker.clone(), Vec::new()),
        now.timestamp_millis(),
        64 << 20,
    );
    let batch = letters
        .iter()
        .cloned()
        .map(|r| prepare_letter(&masker, &[], r).into())
        .collect();
    update(&mut s, Action::from(BrowseEvent::Letters(batch)), SIZE);
    update(&mut s, Action::from(BrowseEvent::ScanDone), SIZE);
    let mut term = Terminal::with_options(
        CrosstermBackend::new(Sink::default()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, SIZE.0, SIZE.1)),
        },
    )
    .expect("terminal");
    for k in [KeyCode::Tab, KeyCode::Char('3')] {
        if let Some(a) = action_for_event(&s, &key(k)) {
            update(&mut s, a, SIZE);
        }
    }
    let mut times = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        if let Some(a) = action_for_event(
            &s,
            &key(if i % 2 == 0 {
                KeyCode::Down
            } else {
                KeyCode::Up
            }),
        ) {
            update(&mut s, a, SIZE);
        }
        term.draw(|f| views::render(f, &s, theme)).expect("draw");
        times.push(t.elapsed());
    }
    let (p50, p99, max) = percentiles(times);
    eprintln!("hostile 2 MB payload: keystroke → frame p50 {p50:.2?} p99 {p99:.2?} max {max:.2?}");
    let t = Instant::now();
    let hostile = dlq_core::catalog::extract_masked(&masker, &[], None, letters[1].clone());
    let view = dlq_tui::update::render_payload(&masker, &hostile, false);
    eprintln!(
        "hostile 2 MB payload: render thread {:.2?} for the first {} shown",
        t.elapsed(),
        view.text.len()
    );
}

fn bench(c: &mut Criterion) {
    let started = Instant::now();
    let mut s = loaded(false);
    eprintln!(
        "\nloaded {} letters into the TUI state in {:.2?}",
        s.browse.catalog.store.len(),
        started.elapsed()
    );
    let theme = Theme::load(Some("default")).expect("theme");
    let sink = Sink::default();
    let count = sink.0.clone();
    let mut term = Terminal::with_options(
        CrosstermBackend::new(sink),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, SIZE.0, SIZE.1)),
        },
    )
    .expect("terminal");
    let written = || count.lock().map(|n| *n).unwrap_or(0);
    let press = |s: &mut AppState, term: &mut Terminal<_>, e: Event| {
        if let Some(a) = action_for_event(s, &e) {
            update(s, a, SIZE);
        }
        term.draw(|f| views::render(f, s, &theme)).expect("draw");
    };
    press(&mut s, &mut term, key(KeyCode::Home));

    // Keystroke → frame, in each pane.
    for (pane, keys) in [
        ("letters", vec![KeyCode::Tab]),
        ("groups", vec![KeyCode::BackTab]),
        ("detail", vec![KeyCode::Tab, KeyCode::Tab]),
    ] {
        for k in keys {
            press(&mut s, &mut term, key(k));
        }
        let mut times = Vec::new();
        let mut bytes = Vec::new();
        for i in 0..200 {
            let before = written();
            let t = Instant::now();
            press(
                &mut s,
                &mut term,
                key(if i % 40 < 20 {
                    KeyCode::Down
                } else {
                    KeyCode::Up
                }),
            );
            times.push(t.elapsed());
            bytes.push(written() - before);
        }
        let (p50, p99, max) = percentiles(times);
        bytes.sort_unstable();
        eprintln!(
            "{pane:>7}: keystroke → frame p50 {p50:.2?} p99 {p99:.2?} max {max:.2?}; bytes per move p50 {} max {}",
            bytes[bytes.len() / 2],
            bytes[bytes.len() - 1]
        );
    }
    let t = Instant::now();
    press(&mut s, &mut term, key(KeyCode::Char('g')));
    eprintln!("regroup (g) at 1M: {:.2?}", t.elapsed());
    hostile_payload_latency(&theme);

    let mut g = c.benchmark_group("tui_1m");
    g.sample_size(20);
    g.bench_function("letters_down_frame", |b| {
        b.iter(|| {
            if let Some(a) = action_for_event(&s, &key(KeyCode::Down)) {
                update(&mut s, a, SIZE);
            }
            term.draw(|f| views::render(f, &s, &theme)).expect("draw");
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
