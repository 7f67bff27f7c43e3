//! Full letters (payload bytes included) kept within a memory budget. The store holds
//! metadata only; views ask here first and re-fetch from the source (by coordinates)
//! when a letter was evicted.

use crate::core::model::RawLetter;
use crate::core::store::RowId;
use std::collections::{HashMap, VecDeque};

pub struct PayloadCache {
    budget: usize,
    used: usize,
    map: HashMap<RowId, RawLetter>,
    /// Least recently used first.
    order: VecDeque<RowId>,
}

impl PayloadCache {
    /// A cache holding at most `budget` payload bytes.
    pub fn new(budget: usize) -> Self {
        PayloadCache {
            budget,
            used: 0,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn get(&mut self, id: RowId) -> Option<&RawLetter> {
        if self.map.contains_key(&id) {
            self.touch(id);
        }
        self.map.get(&id)
    }

    /// Forget everything (a new browse: row ids start again).
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.used = 0;
    }

    /// A letter if it is held, without counting as a use (bulk reads: a replay's pick).
    pub fn peek(&self, id: RowId) -> Option<&RawLetter> {
        self.map.get(&id)
    }

    /// Keep a payload, evicting the least recently used until it fits. A payload larger
    /// than the whole budget is not kept (it will be re-fetched when shown).
    pub(crate) fn put(&mut self, id: RowId, letter: RawLetter) {
        if let Some(old) = self.map.remove(&id) {
            self.used -= size_of_letter(&old);
            self.order.retain(|x| *x != id);
        }
        let size = size_of_letter(&letter);
        if size > self.budget {
            return;
        }
        while self.used + size > self.budget {
            let Some(victim) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.map.remove(&victim) {
                self.used -= size_of_letter(&v);
            }
        }
        self.used += size;
        self.order.push_back(id);
        self.map.insert(id, letter);
    }

    fn touch(&mut self, id: RowId) {
        if let Some(pos) = self.order.iter().position(|x| *x == id) {
            self.order.remove(pos);
            self.order.push_back(id);
        }
    }

    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> usize {
        self.used
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Approximate bytes a letter holds.
fn size_of_letter(l: &RawLetter) -> usize {
    l.payload.len()
        + l.key.as_ref().map_or(0, Vec::len)
        + l.headers.iter().map(|h| h.name.len() + 32).sum::<usize>()
        + 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(n: usize) -> RawLetter {
        RawLetter {
            payload: vec![0; n],
            ..RawLetter::default()
        }
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        // Each letter costs its payload + 64 bytes of overhead.
        let mut c = PayloadCache::new(300);
        c.put(1, letter(36));
        c.put(2, letter(36));
        assert!(c.get(1).is_some()); // 1 is now most recent
        c.put(3, letter(36)); // 300 budget, 100 each: fits three
        c.put(4, letter(36)); // evicts 2, the least recently used
        assert!(c.get(2).is_none());
        assert!(c.get(1).is_some() && c.get(3).is_some() && c.get(4).is_some());
        assert_eq!(c.used_bytes(), 300);
        c.put(5, letter(1000)); // larger than the budget: not kept, nothing evicted
        assert!(c.get(5).is_none());
        assert_eq!(c.len(), 3);
        c.put(1, letter(0)); // replacing updates the accounting
        assert_eq!(c.used_bytes(), 264);
    }
}
