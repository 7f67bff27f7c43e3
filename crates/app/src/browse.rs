//! One browse of a source as both front ends hold it: the letters (the catalog), the
//! filter and grouping over them, the group index of what the filter lets through, the
//! broker's retention, and the ledger's decisions applied to the letters' states.
//!
//! The TUI feeds it the session's events as they arrive; `watch` feeds it its tail and
//! the ledger's decisions at each tick; `summary` builds it once from a scan. The rules
//! (a letter enters the index only if the filter matches it; a decision recorded
//! elsewhere takes an open letter out of the open groups; a new browse forgets rows and
//! decisions but keeps the filter) are written here, once.

use dlq_core::catalog::Catalog;
use dlq_core::filter::Filter;
use dlq_core::grouping::{Dim, GroupIndex};
use dlq_core::journal::Decision;
use dlq_core::prepared::Prepared;
use dlq_core::retention::{BySymbol, Retention};
use dlq_core::store::RowId;
use std::collections::{BTreeSet, HashMap};

pub struct Browse {
    pub catalog: Catalog,
    filter: Filter,
    dims: Vec<Dim>,
    index: GroupIndex,
    retention_rules: Vec<(String, Retention)>,
    retention: BySymbol,
    /// The ledger's decisions by binding (see `core::decisions::binding`), as last
    /// followed.
    decisions: HashMap<String, Decision>,
    /// Whether the group index is kept: `watch` evaluates its rules on the letters
    /// themselves, so it keeps none (no work per tailed letter, no rebuild per decision).
    indexed: bool,
}

/// Decisions recorded since the last look that changed letters here.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Followed {
    /// Letters whose state changed.
    pub letters: usize,
    /// Who recorded them (raw actor names: the caller sanitizes to show them).
    pub by: BTreeSet<String>,
}

impl Browse {
    pub fn new(catalog: Catalog, dims: &[Dim], now_ms: i64) -> Self {
        Browse {
            catalog,
            filter: Filter::all(),
            dims: dims.to_vec(),
            index: GroupIndex::new(dims, now_ms),
            retention_rules: Vec::new(),
            retention: Default::default(),
            decisions: HashMap::new(),
            indexed: true,
        }
    }

    /// The letters and the decisions followed, without a group index (`watch`).
    pub fn letters_only(catalog: Catalog, now_ms: i64) -> Self {
        Browse {
            indexed: false,
            ..Browse::new(catalog, &[], now_ms)
        }
    }

    /// A whole scan at once (`summary`): the filter, the broker's retention, the index.
    pub fn scanned(
        catalog: Catalog,
        dims: &[Dim],
        now_ms: i64,
        filter: Filter,
        rules: Vec<(String, Retention)>,
    ) -> Self {
        let mut b = Browse::new(catalog, dims, now_ms);
        b.filter = filter;
        b.set_retention(rules);
        b
    }

    pub fn index(&self) -> &GroupIndex {
        &self.index
    }

    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// The broker's retention per container, as read (empty where it has none).
    pub fn retention_rules(&self) -> &[(String, Retention)] {
        &self.retention_rules
    }

    /// Whether any container's letters expire (groups then show when).
    pub fn expires(&self) -> bool {
        !self.retention.is_empty()
    }

    /// The ledger's decision on a letter of this browse, by its binding.
    pub fn decision(&self, binding: &str) -> Option<&Decision> {
        self.decisions.get(binding)
    }

    /// How many of the ledger's decisions on this source were last followed.
    pub fn followed(&self) -> usize {
        self.decisions.len()
    }

    /// A letter read: into the catalog, and into the index when the filter lets it in.
    pub fn add(&mut self, p: &Prepared) -> RowId {
        let row = self.catalog.push_prepared(p);
        if !self.indexed {
            return row;
        }
        if let Some(r) = self.catalog.store.row(row).copied() {
            if self
                .filter
                .matches(&self.catalog.store, &r, self.index.now_ms())
            {
                self.index.add(row, &r);
            }
        }
        row
    }

    /// Group by other dimensions.
    pub fn set_dims(&mut self, dims: &[Dim]) {
        self.dims = dims.to_vec();
        self.rebuild();
    }

    /// Show only what `filter` matches.
    pub fn set_filter(&mut self, filter: Filter) {
        self.filter = filter;
        self.rebuild();
    }

    /// The clock moved: letters whose age crossed an edge (an age bucket, an age
    /// filter, an inflow window) move; nothing else is touched.
    pub fn advance(&mut self, now_ms: i64) -> dlq_core::grouping::Advanced {
        self.index
            .advance(&mut self.catalog.store, Some(&mut self.filter), now_ms)
    }

    /// The broker's retention as read: groups learn when the broker empties them. The
    /// containers whose retention is not known are returned, with why, to be said.
    pub fn set_retention(&mut self, rules: Vec<(String, Retention)>) -> Vec<(String, String)> {
        self.retention = dlq_core::retention::by_symbol(&mut self.catalog.store, &rules);
        let unknown = rules
            .iter()
            .filter_map(|(c, r)| match r {
                Retention::Unknown(why) => Some((c.clone(), why.clone())),
                _ => None,
            })
            .collect();
        self.retention_rules = rules;
        self.rebuild();
        unknown
    }

    /// The ledger's decisions on this source, as recorded here or by another engineer
    /// on a team ledger: open letters whose binding was decided since the last look
    /// take the decided state and leave the open groups.
    pub fn follow(&mut self, decisions: Vec<Decision>) -> Followed {
        let fresh: HashMap<String, Decision> = decisions
            .into_iter()
            .filter_map(|d| d.binding.clone().map(|b| (b, d)))
            .collect();
        let news: HashMap<&str, &Decision> = fresh
            .iter()
            .filter(|(b, _)| !self.decisions.contains_key(*b))
            .map(|(b, d)| (b.as_str(), d))
            .collect();
        let actors = dlq_core::decisions::apply_to_store(&mut self.catalog.store, &news);
        self.decisions = fresh;
        let followed = Followed {
            letters: actors.len(),
            by: actors.into_iter().collect(),
        };
        if followed.letters > 0 {
            self.rebuild();
        }
        followed
    }

    /// A decision of this session changed a letter's state (the caller rebuilds when
    /// its batch is done, see [`Browse::rebuild`]).
    pub fn set_state(&mut self, row: RowId, to: dlq_core::model::TriageState) {
        self.catalog.store.set_state(row, to);
    }

    /// The scan read everything there was: spare capacity goes back.
    pub fn scan_complete(&mut self) {
        self.catalog.shrink_to_fit();
    }

    /// A new browse of the same source: its letters, rows and followed decisions are
    /// forgotten (row ids start again); the filter, grouping and retention stay.
    pub fn restart(&mut self) {
        let masker = self.catalog.masker().clone();
        let mappings = self.catalog.mappings().to_vec();
        self.catalog = Catalog::new(masker, mappings);
        self.decisions.clear();
        let rules = std::mem::take(&mut self.retention_rules);
        self.set_retention(rules);
    }

    /// The index again from every letter, for the current grouping, filter and clock.
    pub fn rebuild(&mut self) {
        if !self.indexed {
            return;
        }
        self.index = GroupIndex::build_with(
            &self.catalog.store,
            &self.dims,
            self.index.now_ms(),
            Some(&mut self.filter),
            self.retention.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::journal::DecisionKind;
    use dlq_core::masking::Masker;
    use dlq_core::model::TriageState;

    const NOW: i64 = 1_764_000_000_000;

    fn letters(n: usize) -> Vec<Prepared> {
        dlq_core::fixtures::even_odd(n, NOW, &|i| format!(r#"{{"n":{i}}}"#).into_bytes())
    }

    fn browse() -> Browse {
        let catalog = Catalog::new(Masker::with_key(vec![1]), Vec::new());
        Browse::new(catalog, &[Dim::Reason], NOW)
    }

    fn discard_of(b: &Browse, row: RowId, by: &str) -> Decision {
        Decision {
            id: i64::from(row),
            source: "t".into(),
            letter_id: row.to_string(),
            coords: None,
            binding: b.catalog.store.binding(row),
            kind: DecisionKind::Discard,
            reason: "duplicate".into(),
            actor: by.into(),
            at: "2026-12-05T00:00:00Z".into(),
            applied_at: Some("2026-12-05T00:00:00Z".into()),
            audit_seq: 1,
        }
    }

    #[test]
    fn a_letter_enters_the_index_only_when_the_filter_lets_it_in() {
        let mut b = browse();
        b.set_filter(Filter::parse("reason=even").expect("filter"));
        for p in letters(10) {
            b.add(&p);
        }
        assert_eq!(b.catalog.store.len(), 10, "every letter is held");
        assert_eq!(b.index().total(), 5, "only the even ones are grouped");
        b.set_filter(Filter::all());
        assert_eq!(b.index().total(), 10);
        assert_eq!(b.index().len(), 2, "two reasons");
    }

    /// `watch`'s browse keeps the letters and follows decisions without a group index.
    #[test]
    fn a_letters_only_browse_holds_letters_and_states_but_groups_nothing() {
        let catalog = Catalog::new(Masker::with_key(vec![1]), Vec::new());
        let mut b = Browse::letters_only(catalog, NOW);
        for p in letters(4) {
            b.add(&p);
        }
        let followed = b.follow(vec![discard_of(&b, 1, "alice")]);
        assert_eq!((b.catalog.store.len(), followed.letters), (4, 1));
        assert_eq!(
            b.catalog.store.row(1).map(|r| r.state),
            Some(TriageState::Discarded)
        );
        assert_eq!(b.index().total(), 0, "nothing grouped");
    }

    #[test]
    fn decisions_recorded_elsewhere_are_applied_once_and_say_who() {
        let mut b = browse();
        for p in letters(4) {
            b.add(&p);
        }
        let ds = vec![discard_of(&b, 0, "alice"), discard_of(&b, 3, "bob")];
        let first = b.follow(ds.clone());
        assert_eq!(first.letters, 2);
        assert_eq!(
            first.by.into_iter().collect::<Vec<_>>(),
            ["alice", "bob"],
            "both engineers named"
        );
        let state = |b: &Browse, row| b.catalog.store.row(row).expect("row").state;
        assert_eq!(state(&b, 0), TriageState::Discarded);
        assert_eq!(state(&b, 1), TriageState::Open);
        assert_eq!(
            b.follow(ds),
            Followed::default(),
            "the same decisions again change nothing and name no one"
        );
    }

    #[test]
    fn a_new_browse_forgets_rows_and_decisions_but_keeps_the_filter_and_retention() {
        let mut b = browse();
        b.set_filter(Filter::parse("reason=odd").expect("filter"));
        let unknown = b.set_retention(vec![
            (
                "t".into(),
                Retention::After {
                    ms: 3_600_000,
                    basis: "retention.ms".into(),
                },
            ),
            ("u".into(), Retention::Unknown("no permission".into())),
        ]);
        assert_eq!(unknown, [("u".to_string(), "no permission".to_string())]);
        for p in letters(4) {
            b.add(&p);
        }
        let ds = vec![discard_of(&b, 1, "alice")];
        assert_eq!(b.follow(ds.clone()).letters, 1);
        b.restart();
        assert_eq!(b.catalog.store.len(), 0);
        assert_eq!(b.index().total(), 0);
        assert_eq!(b.filter().source(), "reason=odd");
        assert!(b.expires(), "retention is re-read against the new rows");
        for p in letters(4) {
            b.add(&p);
        }
        assert_eq!(b.index().total(), 2);
        assert_eq!(
            b.follow(ds).letters,
            1,
            "the decision applies to the letter as read again"
        );
    }
}
