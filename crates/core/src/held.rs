//! Held RabbitMQ deliveries by the exact letter, compactly: a browse of a million
//! letters keeps about 40 bytes a letter here (content digest, id, place and position)
//! rather than a string binding and full coordinates each.

use crate::decisions::{content_label, Held};
use crate::model::Coords;
use std::collections::{HashMap, HashSet};

/// A letter's id and where it is held: (place, browse position) per copy.
type Copies = (Box<str>, Vec<(u32, u64)>);

#[derive(Debug, Default)]
pub struct HeldDeliveries {
    /// (vhost, queue) of every place letters are held, by index.
    places: Vec<(String, String)>,
    /// Content digest → (letter id, [(place, browse position)]).
    by_fp: HashMap<u64, Copies>,
}

/// The content digest a `sha256:…` binding names.
fn fp_of(binding: &str) -> Option<u64> {
    u64::from_str_radix(binding.strip_prefix("sha256:")?, 16).ok()
}

impl HeldDeliveries {
    /// Remember a held delivery (RabbitMQ queue coordinates only).
    pub fn add(&mut self, fp: u64, id: &str, c: &Coords) {
        let Coords::Amqp {
            vhost,
            queue,
            position,
            stream_offset: None,
        } = c
        else {
            return;
        };
        let place = match self
            .places
            .iter()
            .position(|(v, q)| v == vhost && q == queue)
        {
            Some(i) => i,
            None => {
                self.places.push((vhost.clone(), queue.clone()));
                self.places.len() - 1
            }
        };
        let place = u32::try_from(place).unwrap_or(u32::MAX);
        self.by_fp
            .entry(fp)
            .or_insert_with(|| (id.into(), Vec::new()))
            .1
            .push((place, *position));
    }

    fn coords(&self, place: u32, position: u64) -> Option<Coords> {
        let (vhost, queue) = self.places.get(place as usize)?;
        Some(Coords::Amqp {
            vhost: vhost.clone(),
            queue: queue.clone(),
            position,
            stream_offset: None,
        })
    }

    /// The first held delivery of this exact letter.
    pub fn first(&self, binding: &str, id: &str) -> Option<Coords> {
        let (held_id, at) = self.by_fp.get(&fp_of(binding)?)?;
        if &**held_id != id {
            return None;
        }
        at.first().and_then(|(p, pos)| self.coords(*p, *pos))
    }

    /// The `n`th held copy of this exact letter (identical copies each get their own).
    pub fn nth(&self, binding: &str, id: &str, n: usize) -> Option<Coords> {
        let (held_id, at) = self.by_fp.get(&fp_of(binding)?)?;
        if &**held_id != id {
            return None;
        }
        at.get(n).and_then(|(p, pos)| self.coords(*p, *pos))
    }

    /// Forget this held delivery (it was settled).
    pub fn forget(&mut self, binding: &str, c: &Coords) {
        let Coords::Amqp {
            position, queue, ..
        } = c
        else {
            return;
        };
        let place = self.places.iter().position(|(_, q)| q == queue);
        if let (Some((_, at)), Some(place)) =
            (fp_of(binding).and_then(|fp| self.by_fp.get_mut(&fp)), place)
        {
            at.retain(|(p, pos)| !(*p as usize == place && pos == position));
        }
    }

    /// Forget the first held delivery of this letter (it was settled).
    pub fn settled_first(&mut self, binding: &str) {
        if let Some((_, at)) = fp_of(binding).and_then(|fp| self.by_fp.get_mut(&fp)) {
            if !at.is_empty() {
                at.remove(0);
            }
        }
    }

    /// Held letters with these ids (few: the ids with a decision), by id.
    pub fn by_ids(&self, ids: &HashSet<String>) -> HashMap<String, Vec<Held>> {
        let mut out: HashMap<String, Vec<Held>> = HashMap::new();
        for (fp, (id, at)) in &self.by_fp {
            if !ids.contains(&**id) {
                continue;
            }
            for (p, pos) in at {
                if let Some(coords) = self.coords(*p, *pos) {
                    out.entry(id.to_string()).or_default().push(Held {
                        coords,
                        binding: content_label(*fp),
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_letters_are_found_by_exact_binding_and_settled_once() {
        let mut h = HeldDeliveries::default();
        let at = |p| Coords::Amqp {
            vhost: "/".into(),
            queue: "dlq".into(),
            position: p,
            stream_offset: None,
        };
        h.add(0xabc, "m-1", &at(1));
        h.add(0xabc, "m-1", &at(7));
        let b = content_label(0xabc);
        assert_eq!(h.first(&b, "m-1"), Some(at(1)));
        assert_eq!(h.first(&b, "m-2"), None, "another id is another letter");
        h.settled_first(&b);
        assert_eq!(h.first(&b, "m-1"), Some(at(7)));
        let ids: HashSet<String> = ["m-1".to_string()].into();
        assert_eq!(h.by_ids(&ids)["m-1"].len(), 1);
        assert_eq!(h.first("at:dlq@3", "m-1"), None);
    }
}
