//! Full letters (payload bytes included), as the scan prepared them, kept within a
//! memory budget. The store holds metadata only; views and replay plans ask here first
//! (sharing the scan's preparation: nothing is extracted or masked again) and re-fetch
//! from the source (by coordinates) when a letter was evicted.

use crate::model::{Coords, DeadLetter, Header, HeaderValue, RawLetter, Sourced};
use crate::store::RowId;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A prepared letter as the cache holds it: shared with the detail pane and replay plans.
pub type Kept = Arc<DeadLetter>;

pub struct PayloadCache {
    budget: usize,
    used: usize,
    /// Each letter with its last use and the memory it was counted as (measured once:
    /// during a scan every letter goes in and another comes out).
    map: HashMap<RowId, (Kept, u64, usize)>,
    /// Last use → row: the least recently used first. Uses are counted, so each is
    /// unique; a use moves an entry in O(log n) (a 300,000-letter cache used to be
    /// searched end to end on every look at a letter).
    order: BTreeMap<u64, RowId>,
    uses: u64,
}

impl PayloadCache {
    /// A cache holding letters that take at most `budget` bytes of memory.
    pub fn new(budget: usize) -> Self {
        PayloadCache {
            budget,
            used: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
            uses: 0,
        }
    }

    pub fn get(&mut self, id: RowId) -> Option<&Kept> {
        self.uses += 1;
        let now = self.uses;
        let (letter, used, _) = self.map.get_mut(&id)?;
        self.order.remove(used);
        *used = now;
        self.order.insert(now, id);
        Some(letter)
    }

    /// Forget everything (a new browse: row ids start again).
    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.used = 0;
    }

    /// A letter if it is held, without counting as a use (bulk reads: a replay's pick).
    pub fn peek(&self, id: RowId) -> Option<&Kept> {
        self.map.get(&id).map(|(l, _, _)| l)
    }

    /// The letters held, in no order (a look through what is in memory).
    pub fn held(&self) -> impl Iterator<Item = (RowId, &Kept)> {
        self.map.iter().map(|(id, (l, _, _))| (*id, l))
    }

    /// Keep a letter, evicting the least recently used until it fits. A letter larger
    /// than the whole budget is not kept (it will be re-fetched when shown).
    pub fn put(&mut self, id: RowId, letter: Kept) {
        if let Some((_, used, size)) = self.map.remove(&id) {
            self.used -= size;
            self.order.remove(&used);
        }
        let size = size_of_letter(&letter);
        if size > self.budget {
            return;
        }
        while self.used + size > self.budget {
            let Some((_, victim)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, _, size)) = self.map.remove(&victim) {
                self.used -= size;
            }
        }
        self.uses += 1;
        self.used += size;
        self.order.insert(self.uses, id);
        self.map.insert(id, (letter, self.uses, size));
    }

    #[cfg(test)]
    pub fn used_bytes(&self) -> usize {
        self.used
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What an allocator adds to each block, about (size classes and headers).
const PER_ALLOCATION: usize = 16;

fn heap(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        capacity + PER_ALLOCATION
    }
}

fn header_value_heap(v: &HeaderValue) -> usize {
    match v {
        HeaderValue::Bytes(b) => heap(b.capacity()),
        HeaderValue::Array(items) => {
            heap(items.capacity() * size_of::<HeaderValue>())
                + items.iter().map(header_value_heap).sum::<usize>()
        }
        HeaderValue::Table(fields) => {
            heap(fields.capacity() * size_of::<(String, HeaderValue)>())
                + fields
                    .iter()
                    .map(|(k, v)| heap(k.capacity()) + header_value_heap(v))
                    .sum::<usize>()
        }
        _ => 0,
    }
}

/// The memory a cached letter takes: the raw letter's (see [`size_of_raw`]) and what
/// preparation added (the letter itself and the fields the conventions extracted).
fn size_of_letter(l: &DeadLetter) -> usize {
    fn text(s: &Option<Sourced<String>>) -> usize {
        s.as_ref().map_or(0, |s| heap(s.value.capacity()))
    }
    let f = &l.failure;
    let e = &l.event;
    let extracted = [
        &f.reason_code,
        &f.reason_detail,
        &f.exception_type,
        &f.consumer,
        &f.consumer_version,
        &f.death_reason,
        &e.message_id,
        &e.event_type,
        &e.schema_version,
        &e.correlation_id,
        &e.payload_ref,
    ]
    .into_iter()
    .map(text)
    .sum::<usize>();
    // A decoded payload (and key) is held beside the bytes: often several times their
    // size (Avro bytes fields become escaped text).
    let decoded = [&l.schema, &l.key_schema]
        .into_iter()
        .flatten()
        .map(|s| match s {
            crate::schema::Decoding::Decoded(d) => heap(d.json.capacity()),
            crate::schema::Decoding::Pending(w) | crate::schema::Decoding::Undecodable(w) => {
                heap(w.capacity())
            }
        })
        .sum::<usize>();
    size_of_raw(&l.raw) - size_of::<RawLetter>()
        + heap(size_of::<DeadLetter>() + 16)
        + heap(l.id.value.0.capacity())
        + l.body_error.as_ref().map_or(0, |s| heap(s.capacity()))
        + extracted
        + decoded
}

/// The memory a raw letter takes: its heap blocks (payload, key, every header name and
/// value, properties, coordinates) and its entries in the map and the recency index —
/// not only its payload bytes, which for a small letter with many headers are under
/// half of it.
fn size_of_raw(l: &RawLetter) -> usize {
    let coords = match &l.coords {
        Some(Coords::Kafka { topic, .. }) => heap(topic.capacity()),
        Some(Coords::Amqp { vhost, queue, .. }) => heap(vhost.capacity()) + heap(queue.capacity()),
        _ => 0,
    };
    let headers = heap(l.headers.capacity() * size_of::<Header>())
        + l.headers
            .iter()
            .map(|h| {
                let name = match &h.name {
                    std::borrow::Cow::Owned(n) => heap(n.capacity()),
                    std::borrow::Cow::Borrowed(_) => 0,
                };
                name + header_value_heap(&h.value)
            })
            .sum::<usize>();
    let properties = heap(l.properties.capacity() * size_of::<(String, String)>())
        + l.properties
            .iter()
            .map(|(k, v)| heap(k.capacity()) + heap(v.capacity()))
            .sum::<usize>();
    heap(l.payload.capacity())
        + l.key.as_ref().map_or(0, |k| heap(k.capacity()))
        + coords
        + headers
        + properties
        // The map's slot (with its control byte and load slack) and the order entry.
        + (size_of::<(RowId, (Kept, u64, usize))>() + 1) * 8 / 7
        + size_of::<RawLetter>()
        + 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(n: usize) -> Kept {
        let raw = RawLetter {
            payload: vec![0; n],
            ..RawLetter::default()
        };
        Arc::new(crate::conventions::extract(raw, &[]))
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let each = size_of_letter(&letter(36));
        let mut c = PayloadCache::new(3 * each);
        c.put(1, letter(36));
        c.put(2, letter(36));
        assert!(c.get(1).is_some()); // 1 is now most recent
        c.put(3, letter(36)); // fits three
        c.put(4, letter(36)); // evicts 2, the least recently used
        assert!(c.get(2).is_none());
        assert!(c.get(1).is_some() && c.get(3).is_some() && c.get(4).is_some());
        assert_eq!(c.used_bytes(), 3 * each);
        c.put(5, letter(100 * each)); // larger than the budget: not kept, nothing evicted
        assert!(c.get(5).is_none());
        assert_eq!(c.len(), 3);
        c.put(1, letter(0)); // replacing updates the accounting
        assert_eq!(c.used_bytes(), 2 * each + size_of_letter(&letter(0)));
        // 3 is now the least recently used (1 was replaced, 4 and 1 used after it).
        assert!(c.get(4).is_some());
        c.put(6, letter(36)); // makes room by evicting 3 only
        assert!(c.peek(3).is_none(), "3 was the least recently used");
        assert!(c.peek(4).is_some() && c.peek(1).is_some() && c.peek(6).is_some());
    }

    /// A letter's headers count as the memory they take, not only its payload: a
    /// 100-byte payload with twenty headers is several times its payload.
    #[test]
    fn the_budget_counts_what_a_letter_takes_in_memory() {
        let mut raw = RawLetter {
            payload: vec![0; 100],
            ..RawLetter::default()
        };
        raw.headers = (0..20)
            .map(|i| Header::new(format!("x-header-{i}"), HeaderValue::text("value")))
            .collect();
        let l = Arc::new(crate::conventions::extract(raw, &[]));
        assert!(size_of_letter(&l) > 5 * 100, "{}", size_of_letter(&l));
        let mut c = PayloadCache::new(10 * size_of_letter(&l));
        for i in 0..100 {
            c.put(i, l.clone());
        }
        assert_eq!(c.len(), 10);
    }
}
