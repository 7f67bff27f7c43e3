//! What the TUI benches share: a terminal sink that counts bytes, the 1M-letter state,
//! keys and percentiles.
#![allow(dead_code)] // each bench uses its share

use chrono::{TimeZone, Utc};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use dlq_app::session::{Principal, ReplayWatcher, Session, SessionEvent, Settings};
use dlq_core::access::Role;
use dlq_core::catalog::{prepare_letter, Catalog};
use dlq_core::masking::Masker;
use dlq_core::model::Coords;
use dlq_core::ports::SourceInfo;
use dlq_core::replay::{new_id, Control, Options};
use dlq_kafka::demo::scenario::{incident, Scale};
use dlq_kafka::demo::{produce_all, Demo};
use dlq_kafka::KafkaSource;
use dlq_tui::action::Action;
use dlq_tui::action::BrowseEvent;
use dlq_tui::state::AppState;
use dlq_tui::update::update;
use std::io::Write;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const N: usize = 1_000_000;
pub const SIZE: (u16, u16) = (200, 60);

#[derive(Clone, Default)]
pub struct Sink(pub Arc<Mutex<usize>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut n) = self.0.lock() {
            *n += b.len();
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The incident's letters, cycled to `N` (with `unique_ids`, each its own id `<id>~k`,
/// as a real DLQ has), loaded as the scan loads them.
pub fn loaded(unique_ids: bool) -> AppState {
    let now = Utc
        .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
        .single()
        .expect("valid time");
    let masker = Masker::with_key(b"bench".to_vec());
    let templates: Vec<_> = incident(42, now, Scale(1.0))
        .into_iter()
        .map(|r| prepare_letter(&masker, &[], r))
        .collect();
    let info = SourceInfo {
        label: "bench".into(),
        browse_effect: "bench".into(),
    };
    // A small payload cache: the bench measures the index and the views, not payloads.
    let mut s = AppState::new(
        info,
        Catalog::new(masker, Vec::new()),
        now.timestamp_millis(),
        8 << 20,
    );
    let mut i = 0;
    while i < N {
        let batch: Vec<_> = (i..(i + 20_000).min(N))
            .map(|k| {
                let mut t = templates[k % templates.len()].clone();
                if unique_ids {
                    t.0.id.value.0 = format!("{}~{k}", t.0.id.value.0);
                }
                t
            })
            .collect();
        i += batch.len();
        update(
            &mut s,
            Action::from(BrowseEvent::Letters(
                batch.into_iter().map(Into::into).collect(),
            )),
            SIZE,
        );
    }
    update(&mut s, Action::from(BrowseEvent::ScanDone), SIZE);
    s
}

pub fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

pub fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p) as usize];
    (at(0.5), at(0.99), v[v.len() - 1])
}

/// Replay every letter of `topic` at `rate` (no canary, no watch) on the real path — a
/// session on the mock cluster, the Kafka publisher, a ledger journaling every letter —
/// reporting to `watch`; `control` is its kill switch.
pub fn replay_topic(
    demo: &Demo,
    topic: &str,
    rate: f64,
    control: &Control,
    watch: &mut dyn ReplayWatcher,
) {
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dlq_core::ledger_location::Location::File(dir.path().join("ledger.db"));
    replay_topic_into(demo, topic, rate, control, watch, ledger);
}

/// `replay_topic`, journaling into the ledger at `ledger` (a file, or the team's server).
pub fn replay_topic_into(
    demo: &Demo,
    topic: &str,
    rate: f64,
    control: &Control,
    watch: &mut dyn ReplayWatcher,
    ledger: dlq_core::ledger_location::Location,
) {
    let settings = Settings {
        codec: None,
        source_key: format!("kafka://{}/{topic}", demo.bootstrap()),
        principal: Principal {
            actor: "bench".into(),
            role: Role::Operator,
            read_only: false,
            ledger_unreachable: None,
            ledger: Some(ledger),
        },
        masker: Masker::with_key(vec![7; 32]),
        mappings: Vec::new(),
        since: None,
        approval_above: None,
        discard_approval_above: None,
        allowed_targets: Vec::new(),
    };
    let src = KafkaSource::new(vec![demo.bootstrap()], vec![topic.into()], Vec::new());
    let mut session = Session::new(Box::new(src), settings).expect("session");
    let mut letters = Vec::new();
    session
        .scan(true, &mut |ev| {
            if let SessionEvent::Letters(b) = ev {
                letters.extend(b.into_iter().map(|p| (p.letter, p.preview)));
            }
            ControlFlow::Continue(())
        })
        .expect("scan");
    let cands = session
        .replay_candidates(letters, None)
        .expect("candidates");
    let mut ports = session.replay_ports().expect("ports");
    let opts = Options {
        canary: 0,
        rate,
        watch: Duration::ZERO,
        max_failed_ratio: 1.0,
        ..Options::default()
    };
    let plan = session.plan_replay(cands, &opts, new_id(Utc::now()), None, true, None);
    if plan.items.is_empty() {
        let whys: std::collections::BTreeSet<String> = plan
            .excluded
            .iter()
            .map(|(_, w)| format!("{w:?}"))
            .collect();
        panic!(
            "nothing to replay in {topic}: excluded {whys:?}, warnings {:?}",
            plan.warnings
        );
    }
    session
        .replay(&plan, ports.publisher.as_mut(), control, None, watch)
        .expect("replay");
}

/// `n` realistic letters (the incident's, cycled) in `topic`, 16 partitions; each with
/// its own key, or spread over `keys` keys (hot keys: one letter per key in flight).
pub fn seed(demo: &Demo, topic: &str, n: usize, keys: Option<usize>) {
    demo.seed_bench(topic, 0, 16, Utc::now(), None)
        .expect("topic");
    let templates = incident(7, Utc::now(), Scale(1.0));
    let letters: Vec<_> = (0..n)
        .map(|i| {
            let mut l = templates[i % templates.len()].clone();
            l.coords = Some(Coords::Kafka {
                topic: topic.into(),
                partition: (i % 16) as i32,
                offset: 0,
            });
            l.key = Some(format!("key-{}", keys.map_or(i, |k| i % k)).into_bytes());
            l
        })
        .collect();
    for chunk in letters.chunks(50_000) {
        produce_all(&demo.bootstrap(), chunk).expect("seed");
    }
}
