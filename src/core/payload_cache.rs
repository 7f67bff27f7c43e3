//! Payload bytes kept within a memory budget. The store holds metadata only; views ask
//! here first and re-fetch from the source (by coordinates) when a payload was evicted.

use crate::core::store::RowId;
use std::collections::{HashMap, VecDeque};

pub struct PayloadCache {
    budget: usize,
    used: usize,
    map: HashMap<RowId, Vec<u8>>,
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

    pub fn get(&mut self, id: RowId) -> Option<&[u8]> {
        if self.map.contains_key(&id) {
            self.touch(id);
        }
        self.map.get(&id).map(Vec::as_slice)
    }

    /// Keep a payload, evicting the least recently used until it fits. A payload larger
    /// than the whole budget is not kept (it will be re-fetched when shown).
    pub fn put(&mut self, id: RowId, payload: Vec<u8>) {
        if let Some(old) = self.map.remove(&id) {
            self.used -= old.len();
            self.order.retain(|x| *x != id);
        }
        if payload.len() > self.budget {
            return;
        }
        while self.used + payload.len() > self.budget {
            let Some(victim) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.map.remove(&victim) {
                self.used -= v.len();
            }
        }
        self.used += payload.len();
        self.order.push_back(id);
        self.map.insert(id, payload);
    }

    fn touch(&mut self, id: RowId) {
        if let Some(pos) = self.order.iter().position(|x| *x == id) {
            self.order.remove(pos);
            self.order.push_back(id);
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let mut c = PayloadCache::new(10);
        c.put(1, vec![1; 4]);
        c.put(2, vec![2; 4]);
        assert!(c.get(1).is_some()); // 1 is now most recent
        c.put(3, vec![3; 4]); // evicts 2
        assert!(c.get(2).is_none());
        assert!(c.get(1).is_some() && c.get(3).is_some());
        assert_eq!(c.used_bytes(), 8);
        c.put(4, vec![4; 11]); // larger than the budget: not kept, nothing evicted
        assert!(c.get(4).is_none());
        assert_eq!(c.len(), 2);
        c.put(1, vec![9; 2]); // replacing updates the accounting
        assert_eq!(c.used_bytes(), 6);
    }
}
