//! Decisions against a real SQLite ledger: bindings, and reconciliation after a crash.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::decisions::*;
use dlq_core::model::{Coords, RawLetter};
use dlq_core::model::{Header, HeaderValue};
use dlq_core::ports::{DlqSource, Settled};
use dlq_core::ports::{ScanEvent, SourceError, SourceInfo};
use dlq_ledger::Ledger;
use std::ops::ControlFlow;

/// A source that records what it was asked to settle.
#[derive(Default)]
struct Recorder(Vec<Coords>);

impl DlqSource for Recorder {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: "rec".into(),
            browse_effect: String::new(),
        }
    }
    fn scan(&mut self, _: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>) -> Result<(), SourceError> {
        Ok(())
    }
    fn settle(&mut self, c: &Coords) -> Result<Settled, SourceError> {
        self.0.push(c.clone());
        Ok(Settled::Removed)
    }
}

fn amqp_letter(position: u64, death_count: i64) -> RawLetter {
    RawLetter {
        coords: Some(Coords::Amqp {
            vhost: "/".into(),
            queue: "dlq".into(),
            position,
            stream_offset: None,
        }),
        headers: vec![
            Header::new("x-death-count", HeaderValue::Int(death_count)),
            Header::new("x-delivery-count", HeaderValue::Int(position as i64)),
        ],
        payload: b"{\"message_id\":\"m-1\"}".to_vec(),
        ..RawLetter::default()
    }
}

#[test]
fn the_binding_survives_browsing_and_changes_when_dead_lettered_again() {
    // Browsed twice (another position, one more redelivery): the same letter.
    assert_eq!(binding(&amqp_letter(1, 1)), binding(&amqp_letter(7, 1)));
    // Dead-lettered again: another letter, though the id is the same.
    assert_ne!(binding(&amqp_letter(1, 1)), binding(&amqp_letter(1, 2)));
    let kafka = RawLetter {
        coords: Some(Coords::Kafka {
            topic: "t".into(),
            partition: 2,
            offset: 9,
        }),
        ..RawLetter::default()
    };
    assert_eq!(binding(&kafka), "at:t/2/9");
}

#[test]
fn reconciliation_never_acks_a_letter_nobody_reviewed() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut ledger = Ledger::open(&dir.path().join("l.db"), "alice").expect("ledger");
    let reviewed = binding(&amqp_letter(1, 1));
    // A crash left this decision pending.
    ledger
        .record_discard("amqp://q", "m-1", &reviewed, Some("dlq#1"), "dup")
        .expect("record");
    // The next browse holds only the same message dead-lettered again.
    let again = amqp_letter(1, 2);
    let held = vec![Held {
        coords: again.coords.clone().expect("coords"),
        binding: binding(&again),
    }];
    let mut src = Recorder::default();
    let notes = reconcile(&mut ledger, &mut src, "amqp://q", &|_| held.clone()).expect("reconcile");
    assert!(src.0.is_empty(), "acked a letter nobody reviewed");
    assert!(
        notes.iter().any(|n| n.contains("not the one decided on")),
        "{notes:?}"
    );
    assert_eq!(ledger.pending("amqp://q").expect("p").len(), 1);
    // The reviewed letter itself is applied, once, and audited.
    let original = amqp_letter(3, 1);
    let held = vec![Held {
        coords: original.coords.clone().expect("coords"),
        binding: binding(&original),
    }];
    reconcile(&mut ledger, &mut src, "amqp://q", &|_| held.clone()).expect("reconcile");
    assert_eq!(src.0.len(), 1);
    reconcile(&mut ledger, &mut src, "amqp://q", &|_| held.clone()).expect("again");
    assert_eq!(src.0.len(), 1, "applied twice");
    let audit: Vec<String> = ledger
        .audit_entries()
        .expect("entries")
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(audit, ["discard", "discard-applied"]);
    assert!(ledger.verify(None).expect("verify").ok);
}

/// #68, 5: a key left empty by a full disk or a kill while the ledger was new is made
/// again (nothing was chained with it); one cut short after entries were chained is
/// refused, saying to restore it — never silently replaced.
#[test]
fn a_half_created_key_is_made_again_and_a_short_key_after_entries_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("l.db");
    let key = dlq_ledger::key_path(&path);
    std::fs::write(&key, b"").expect("an empty key, as a full disk left it");
    let mut ledger = Ledger::open(&path, "alice").expect("made again");
    assert_eq!(std::fs::read(&key).expect("key").len(), 32);
    ledger.audit("unmask", "m-1", "{}").expect("an entry");
    drop(ledger);
    std::fs::write(&key, b"short").expect("cut");
    let err = Ledger::open(&path, "alice").err().expect("refused");
    assert!(err.to_string().contains("restore the key"), "{err}");
}
