//! Moving the index's clock without regrouping. Between two readings only the letters
//! whose age crossed a point that matters — an age bucket's edge, a filter's `age` term,
//! a sparkline slot, the hour of inflow — can change group, filter verdict or inflow;
//! they are found by time in the store and moved one by one. A second's tick on a
//! million letters touches the few that crossed, not the million.

use super::*;

/// What a clock move changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Advanced {
    /// Letters changed group, or entered or left the filter: groups' letter lists change.
    pub regrouped: bool,
    /// Inflow or sparklines changed (and nothing else).
    pub inflow: bool,
}

impl Advanced {
    pub fn any(self) -> bool {
        self.regrouped || self.inflow
    }
}

/// Letters leaving and entering one group.
#[derive(Default)]
struct Moves {
    out: Vec<RowId>,
    into: Vec<RowId>,
}

impl GroupIndex {
    /// The index as it would be built at `now_ms` with the same filter, reached by
    /// moving only the letters whose age crossed a relevant point since the last reading.
    /// A clock that went back (a stepped system clock) regroups from scratch.
    pub fn advance(
        &mut self,
        store: &mut LetterStore,
        mut filter: Option<&mut Filter>,
        now_ms: i64,
    ) -> Advanced {
        let then = self.now_ms;
        if now_ms == then {
            return Advanced::default();
        }
        if now_ms < then {
            let dims = self.dims.clone();
            *self = Self::build_with(store, &dims, now_ms, filter, self.retention.clone());
            return Advanced {
                regrouped: true,
                inflow: true,
            };
        }
        let windows = self.crossing_windows(filter.as_deref(), then, now_ms);
        store.index_times(&windows);
        let store: &LetterStore = store;
        let mut out = Advanced::default();
        let mut moves: foldhash::HashMap<GroupKey, Moves> = Default::default();
        let mut crossed = Vec::new();
        for (from, to) in windows {
            crossed.clear();
            store.dead_lettered_between(from, to, &mut crossed);
            for &id in &crossed {
                let Some(r) = store.row(id) else { continue };
                let (was, is) = match filter.as_deref_mut() {
                    Some(f) => (f.matches(store, r, then), f.matches(store, r, now_ms)),
                    None => (true, true),
                };
                let (old, new) = (self.key_at(r, then), self.key_at(r, now_ms));
                if was && is && old == new {
                    let (a, b) = (spark_slot(then, r.at_ms), spark_slot(now_ms, r.at_ms));
                    if let (Some(g), true) = (self.groups.get_mut(&new), a != b) {
                        g.unspark(a);
                        g.spark(b);
                        out.inflow = true;
                    }
                    continue;
                }
                if was {
                    moves.entry(old).or_default().out.push(id);
                }
                if is {
                    moves.entry(new).or_default().into.push(id);
                }
            }
        }
        self.now_ms = now_ms;
        out.regrouped = !moves.is_empty();
        for (key, m) in moves {
            self.apply(store, key, m, then);
        }
        out
    }

    /// The spans of dead_lettered_at (inclusive, merged, in order) whose letters' age
    /// crossed a relevant point between `then` and `now`: for a point `e`, the letters
    /// from `then - e` to `now - e` (the first one only for `<=` and `>` terms).
    fn crossing_windows(&self, filter: Option<&Filter>, then: i64, now: i64) -> Vec<(i64, i64)> {
        let mut edges: Vec<i64> = (0..=SPARK_BUCKETS as i64)
            .map(|k| k * SPARK_BUCKET_MS)
            .collect();
        if self.dims.contains(&Dim::Age) {
            edges.extend(AgeBucket::BOUNDS_MS);
        }
        if let Some(f) = filter {
            edges.extend(f.age_thresholds());
        }
        let mut spans: Vec<(i64, i64)> = edges
            .into_iter()
            .map(|e| (then.saturating_sub(e), now.saturating_sub(e)))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
        for (from, to) in spans {
            match merged.last_mut() {
                Some(last) if from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
                _ => merged.push((from, to)),
            }
        }
        merged
    }

    /// Take letters out of and into one group; its stats follow. `then` is the clock the
    /// leaving letters were counted at (their inflow is taken back as it was added).
    fn apply(&mut self, store: &LetterStore, key: GroupKey, mut m: Moves, then: i64) {
        let now = self.now_ms;
        let retention = self.retention.clone();
        let g = self.groups.entry(key).or_insert_with(GroupStats::new);
        m.out.sort_unstable();
        m.into.sort_unstable();
        let removed = g.remove_members(&m.out);
        let mut recount = false;
        for r in m.out.iter().filter_map(|id| store.row(*id)) {
            g.unspark(spark_slot(then, r.at_ms));
            let expiry = retention
                .get(&r.container)
                .map(|k| r.at_ms.saturating_add(*k));
            recount |= r.at_ms == g.oldest_ms
                || r.at_ms == g.newest_ms
                || expiry.is_some_and(|e| e == g.expires_ms);
        }
        g.count -= removed as u64;
        self.total -= removed as u64;
        if recount {
            g.recount_times(store, &retention);
        }
        g.merge_members(store, &m.into);
        for r in m.into.iter().filter_map(|id| store.row(*id)) {
            g.count += 1;
            g.take_times(r, now, &retention);
            if r.event != 0
                && g.event_types.len() < MAX_EVENT_TYPES
                && !g.event_types.contains(&r.event)
            {
                g.event_types.push(r.event);
            }
        }
        self.total += m.into.len() as u64;
        if g.members.is_empty() {
            self.groups.remove(&key);
        }
    }
}

impl GroupStats {
    fn spark(&mut self, slot: Option<usize>) {
        if let Some(s) = slot {
            self.spark[s] += 1;
            self.last_hour += 1;
        }
    }

    fn unspark(&mut self, slot: Option<usize>) {
        if let Some(s) = slot {
            self.spark[s] = self.spark[s].saturating_sub(1);
            self.last_hour = self.last_hour.saturating_sub(1);
        }
    }

    /// Drop `gone` (sorted row ids) from the members, keeping their times beside them;
    /// returns how many were members.
    fn remove_members(&mut self, gone: &[RowId]) -> usize {
        if gone.is_empty() {
            return 0;
        }
        let before = self.members.len();
        let mut next = 0;
        let mut kept = 0;
        for i in 0..before {
            let id = self.members[i];
            while next < gone.len() && gone[next] < id {
                next += 1;
            }
            if gone.get(next) == Some(&id) {
                continue;
            }
            self.members[kept] = id;
            self.member_times[kept] = self.member_times[i];
            kept += 1;
        }
        self.members.truncate(kept);
        self.member_times.truncate(kept);
        before - kept
    }

    /// Merge `new` (sorted row ids) into the members, keeping row id order.
    fn merge_members(&mut self, store: &LetterStore, new: &[RowId]) {
        if new.is_empty() {
            return;
        }
        let at = |id: RowId| store.row(id).map_or(NO_TIME, |r| r.at_ms);
        if self.members.last().is_none_or(|last| *last < new[0]) {
            self.members.extend_from_slice(new);
            self.member_times.extend(new.iter().map(|id| at(*id)));
            return;
        }
        let old = std::mem::take(&mut self.members);
        let old_times = std::mem::take(&mut self.member_times);
        self.members.reserve(old.len() + new.len());
        self.member_times.reserve(old.len() + new.len());
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            if j >= new.len() || (i < old.len() && old[i] < new[j]) {
                self.members.push(old[i]);
                self.member_times.push(old_times[i]);
                i += 1;
            } else {
                self.members.push(new[j]);
                self.member_times.push(at(new[j]));
                j += 1;
            }
        }
    }

    /// Oldest, newest and first deletion again from the members (after the letter that
    /// set one of them left). The times are beside the members; only a deletion clock
    /// reads the rows, for their containers.
    fn recount_times(&mut self, store: &LetterStore, retention: &foldhash::HashMap<Sym, i64>) {
        let timed = || self.member_times.iter().copied().filter(|t| *t != NO_TIME);
        self.oldest_ms = timed().min().unwrap_or(NO_TIME);
        self.newest_ms = timed().max().unwrap_or(NO_TIME);
        self.expires_ms = NO_TIME;
        if retention.is_empty() {
            return;
        }
        for r in self.members.iter().filter_map(|id| store.row(*id)) {
            if let (Some(keep), true) = (retention.get(&r.container), r.at_ms != NO_TIME) {
                self.expires_ms = min_time(self.expires_ms, r.at_ms.saturating_add(*keep));
            }
        }
    }
}

#[cfg(test)]
mod tests;
