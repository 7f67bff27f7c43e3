//! Applying decisions: ledger first, then the broker — one implementation for every
//! front end.
//!
//! A decision binds to the exact letter it was made on, not to its id alone: the same
//! message dead-lettered again carries the same id, and acking that new copy because an
//! older one was discarded would drop a letter nobody reviewed.

use crate::core::ledger::{Decision, Ledger, LedgerError};
use crate::core::model::{Coords, RawLetter};
use crate::core::ports::{DlqSource, Settled};

/// What became of one discard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discarded {
    /// Recorded, and the broker removed the letter.
    Removed,
    /// Recorded; the broker cannot delete one record (Kafka, streams, files).
    LedgerOnly,
    /// Recorded, but the broker did not confirm: applied on the next browse.
    Pending(String),
}

/// Where a letter is, for settling and for the record.
pub struct Target<'a> {
    pub letter_id: &'a str,
    /// The exact letter (see [`binding`]).
    pub binding: &'a str,
    /// What the broker needs to settle (RabbitMQ); `None` where nothing can be settled.
    pub coords: Option<&'a Coords>,
    /// Where it sits, for the record, when there are no `coords` (Kafka `topic/p/o`).
    pub location: Option<&'a str>,
}

/// Headers that change while a letter merely sits in the DLQ and is browsed (quorum
/// queues count redeliveries in `x-delivery-count`); they must not change its identity.
const VOLATILE_HEADERS: [&str; 1] = ["x-delivery-count"];

/// The identity of one dead letter, stable across browses and different for the same
/// message dead-lettered again. Addressable records (Kafka, streams) are their position;
/// a RabbitMQ queue message (or a dump line without coordinates) is a digest of its
/// payload, key, headers (with `x-death` counts and times, which change on every new
/// dead-lettering) and properties. `LetterStore::binding` renders the same string.
pub fn binding(raw: &RawLetter) -> String {
    match content_fp(raw) {
        Some(fp) => content_label(fp),
        None => match &raw.coords {
            Some(c) => format!("at:{c}"),
            None => String::new(),
        },
    }
}

/// How a content digest is written in a binding.
pub(crate) fn content_label(fp: u64) -> String {
    format!("sha256:{fp:016x}")
}

/// The content digest (first 64 bits of sha256, never 0) of a letter that has no stable
/// position; `None` for Kafka records and stream messages.
pub(crate) fn content_fp(raw: &RawLetter) -> Option<u64> {
    use sha2::{Digest, Sha256};
    match &raw.coords {
        Some(Coords::Kafka { .. })
        | Some(Coords::Amqp {
            stream_offset: Some(_),
            ..
        }) => return None,
        _ => {}
    }
    let mut h = Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(&raw.payload);
    field(raw.key.as_deref().unwrap_or_default());
    let mut text = Vec::with_capacity(256);
    for hd in &raw.headers {
        if VOLATILE_HEADERS
            .iter()
            .any(|v| hd.name.eq_ignore_ascii_case(v))
        {
            continue;
        }
        field(hd.name.as_bytes());
        text.clear();
        crate::core::header_text::write(&hd.value, &mut text);
        field(&text);
    }
    for (k, v) in &raw.properties {
        field(k.as_bytes());
        field(v.as_bytes());
    }
    field(
        &raw.timestamp
            .map_or(0, |t| t.timestamp_millis())
            .to_le_bytes(),
    );
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    Some(u64::from_be_bytes(first).max(1))
}

/// Record the decision durably, then settle on the broker, then mark it applied.
/// `after_record` runs between the two (tests use it to crash exactly there).
pub fn discard(
    ledger: &mut Ledger,
    src: &mut dyn DlqSource,
    source_key: &str,
    target: Target<'_>,
    reason: &str,
    after_record: &mut dyn FnMut(),
) -> Result<Discarded, LedgerError> {
    let Target {
        letter_id,
        binding,
        coords,
        location,
    } = target;
    let recorded = coords
        .map(ToString::to_string)
        .or_else(|| location.map(str::to_string));
    let decision =
        ledger.record_discard(source_key, letter_id, binding, recorded.as_deref(), reason)?;
    after_record();
    let settled = match coords {
        Some(c) => src.settle(c),
        None => Ok(Settled::LedgerOnly),
    };
    match settled {
        Ok(s) => {
            let (how, out) = match s {
                Settled::Removed => ("acked", Discarded::Removed),
                Settled::LedgerOnly => ("ledger-only", Discarded::LedgerOnly),
            };
            ledger.mark_applied(&decision, how)?;
            Ok(out)
        }
        Err(e) => Ok(Discarded::Pending(e.to_string())),
    }
}

/// A letter this browse holds that a pending decision may apply to.
#[derive(Debug, Clone)]
pub struct Held {
    pub coords: Coords,
    pub binding: String,
}

/// Apply decisions recorded but never confirmed (a crash, a dropped connection) to the
/// exact letters they were made on, if this browse holds them — each once, each audited.
/// A held letter with the same id but another binding is left alone and reported.
pub fn reconcile(
    ledger: &mut Ledger,
    src: &mut dyn DlqSource,
    source_key: &str,
    held_of: &dyn Fn(&str) -> Vec<Held>,
) -> Result<Vec<String>, LedgerError> {
    let mut notes = Vec::new();
    for d in ledger.pending(source_key)? {
        let held = held_of(&d.letter_id);
        let (same, other): (Vec<&Held>, Vec<&Held>) = held
            .iter()
            .partition(|h| Some(h.binding.as_str()) == d.binding.as_deref());
        if same.is_empty() && !other.is_empty() {
            notes.push(format!(
                "note: a recorded {} of {} was not applied: the DLQ holds {} letter(s) with that id that are not the one decided on (dead-lettered again?); they stay in the DLQ",
                d.kind,
                d.letter_id,
                other.len()
            ));
        }
        if let Some(note) = apply_pending(ledger, src, &d, &same)? {
            notes.push(note);
        }
    }
    Ok(notes)
}

fn apply_pending(
    ledger: &mut Ledger,
    src: &mut dyn DlqSource,
    d: &Decision,
    held: &[&Held],
) -> Result<Option<String>, LedgerError> {
    let mut last_err = None;
    for h in held {
        match src.settle(&h.coords) {
            Ok(_) => {
                ledger.mark_applied(d, "reconciled")?;
                return Ok(Some(format!(
                    "reconciled: the {} of {} recorded by {} at {} was applied to the broker now ({})",
                    d.kind,
                    d.letter_id, d.actor, d.at, h.coords
                )));
            }
            Err(e) => last_err = Some(format!("{}: {e}", h.coords)),
        }
    }
    Ok(last_err.map(|e| {
        format!(
            "warning: a recorded {} of {} could not be applied yet ({e})",
            d.kind, d.letter_id
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{Header, HeaderValue};
    use crate::core::ports::{ScanEvent, SourceError, SourceInfo};
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
        fn scan(
            &mut self,
            _: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
        ) -> Result<(), SourceError> {
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
        let notes =
            reconcile(&mut ledger, &mut src, "amqp://q", &|_| held.clone()).expect("reconcile");
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
}
