//! A letter's identity for the ledger: its position where the broker keeps one, else a
//! digest of its content. A leaf: the store, the preparation and the decisions all name
//! letters this way.

use crate::model::{Coords, RawLetter};

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
pub fn content_label(fp: u64) -> String {
    format!("sha256:{fp:016x}")
}

/// The content digest (first 64 bits of sha256, never 0) of a letter that has no stable
/// position; `None` for Kafka records and stream messages.
pub fn content_fp(raw: &RawLetter) -> Option<u64> {
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
        crate::header_text::write(&hd.value, &mut text);
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
