//! The browse model over a group index: the group tree (which nodes are expanded,
//! visible and selected, and who owns each top-level group) and the selected group's
//! letters in time order, sorted lazily so a group of 500,000 letters costs a partial
//! selection, not a full sort. Front ends keep their cursor and scroll state around it
//! and render it; the rules live here once.

use crate::grouping::{GroupIndex, TreeNode};
use crate::owners::{owners_of, Owners};
use crate::store::{LetterStore, RowId, NO_TIME};
use std::collections::{HashMap, HashSet};

/// Letters read to name a top-level group's owner: a group bigger than this is named
/// from a sample (owners are rules over event, reason and origin, which a group shares).
const OWNER_SAMPLE: usize = 10_000;

/// Top-level groups whose owner is looked up (the tree shows far fewer).
const OWNED_GROUPS: usize = 500;

/// Sorted prefix kept ahead of the cursor; beyond it the rest is sorted on demand.
pub const SORT_AHEAD: usize = 4096;

/// The group tree and its selection.
#[derive(Debug, Default)]
pub struct GroupTree {
    /// Every node, recomputed when the index changes.
    nodes: Vec<TreeNode>,
    /// Paths of expanded nodes.
    expanded: HashSet<Vec<u32>>,
    /// Indices into `nodes` of the nodes currently visible.
    visible: Vec<usize>,
    /// Position in `visible` of the selected node.
    cursor: usize,
    /// Owner of each top-level group, with the count it was read at.
    owners: HashMap<Vec<u32>, (u64, String)>,
}

impl GroupTree {
    /// Every node, in tree order.
    pub fn nodes(&self) -> &[TreeNode] {
        &self.nodes
    }

    /// The visible nodes, in order.
    pub fn visible(&self) -> impl Iterator<Item = &TreeNode> {
        self.visible.iter().filter_map(|i| self.nodes.get(*i))
    }

    /// How many nodes are visible.
    pub fn visible_len(&self) -> usize {
        self.visible.len()
    }

    /// Position of the selected node among the visible ones.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Put the cursor on the `i`th visible node, if there is one; whether it moved.
    pub fn set_cursor(&mut self, i: usize) -> bool {
        let moved = i < self.visible.len() && i != self.cursor;
        if i < self.visible.len() {
            self.cursor = i;
        }
        moved
    }

    pub fn is_expanded(&self, path: &[u32]) -> bool {
        self.expanded.contains(path)
    }

    /// Open a node (its children become visible).
    pub fn expand(&mut self, path: Vec<u32>) {
        self.expanded.insert(path);
        self.refresh_visible();
    }

    /// Close a node; whether it was open.
    pub fn collapse(&mut self, path: &[u32]) -> bool {
        let was = self.expanded.remove(path);
        if was {
            self.refresh_visible();
        }
        was
    }

    /// Close every node (a new grouping: the old paths mean nothing).
    pub fn collapse_all(&mut self) {
        self.expanded.clear();
    }

    /// The owner of a top-level group (`[[owners]]`), as last read.
    pub fn owner(&self, path: &[u32]) -> Option<&str> {
        self.owners.get(path).map(|(_, o)| o.as_str())
    }

    /// The node under the cursor.
    pub fn selected(&self) -> Option<&TreeNode> {
        self.visible
            .get(self.cursor)
            .and_then(|i| self.nodes.get(*i))
    }

    /// Recompute the nodes from the index, keeping the selected node if it still
    /// exists. The first time, the biggest group opens down to its second level
    /// (`nested`: the grouping has more than one dimension).
    pub fn refresh(
        &mut self,
        index: &GroupIndex,
        store: &LetterStore,
        nested: bool,
        owners: &Owners,
    ) {
        let selected = self.selected().map(|n| n.path.clone());
        self.nodes = index.tree(store);
        let top_open = self
            .nodes
            .iter()
            .any(|n| n.depth == 0 && self.expanded.contains(&n.path));
        if !top_open && nested {
            if let Some(first) = self.nodes.first() {
                let top = first.path.clone();
                let child = self
                    .nodes
                    .iter()
                    .find(|n| n.path.len() == 2 && n.path.first() == top.first())
                    .map(|n| n.path.clone());
                self.expanded.insert(top);
                self.expanded.extend(child);
            }
        }
        self.refresh_owners(index, store, owners);
        self.refresh_visible();
        if let Some(p) = selected {
            self.select_path(&p);
        }
    }

    /// Which nodes are visible given the expanded set; the cursor stays in range.
    pub fn refresh_visible(&mut self) {
        let expanded = &self.expanded;
        self.visible = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| (1..n.path.len()).all(|d| expanded.contains(&n.path[..d])))
            .map(|(i, _)| i)
            .collect();
        self.cursor = self.cursor.min(self.visible.len().saturating_sub(1));
    }

    /// Put the cursor on the visible node with this path, if there is one.
    pub fn select_path(&mut self, path: &[u32]) -> bool {
        let nodes = &self.nodes;
        let found = self
            .visible
            .iter()
            .position(|i| nodes.get(*i).is_some_and(|n| n.path == path));
        if let Some(pos) = found {
            self.cursor = pos;
        }
        found.is_some()
    }

    /// Owners of the top-level groups whose count changed (none without `[[owners]]`).
    fn refresh_owners(&mut self, index: &GroupIndex, store: &LetterStore, owners: &Owners) {
        if owners.is_empty() {
            return;
        }
        let mut fresh = HashMap::new();
        for n in self
            .nodes
            .iter()
            .filter(|n| n.depth == 0)
            .take(OWNED_GROUPS)
        {
            let owner = match self.owners.get(&n.path) {
                Some((count, o)) if *count == n.count => o.clone(),
                _ => {
                    let rows = index.sample_under(&n.path, OWNER_SAMPLE);
                    owners_of(owners, store, rows.iter().filter_map(|r| store.row(*r))).0
                }
            };
            fresh.insert(n.path.clone(), (n.count, owner));
        }
        self.owners = fresh;
    }
}

/// The selected group's letters, newest (or oldest) first, unknown times last.
#[derive(Debug)]
pub struct LetterOrder {
    pub rows: Vec<RowId>,
    /// How many leading entries of `rows` are in order.
    pub sorted: usize,
    pub newest_first: bool,
}

impl Default for LetterOrder {
    fn default() -> Self {
        LetterOrder {
            rows: Vec::new(),
            sorted: 0,
            newest_first: true,
        }
    }
}

impl LetterOrder {
    /// Take a group's members with their times (in order in memory, so the first
    /// pages sort without touching the store) and order the first `SORT_AHEAD`.
    pub fn fill(&mut self, mut members: Vec<(i64, RowId)>) {
        let newest = self.newest_first;
        self.sorted = order_prefix(&mut members, SORT_AHEAD, |m| (sort_rank(m.0, newest), m.1));
        self.rows = members.into_iter().map(|m| m.1).collect();
    }

    /// Put at least the first `want` letters in order (the same order as `fill`).
    pub fn sort_to(&mut self, store: &LetterStore, want: usize) {
        if self.sorted >= self.rows.len().min(want) {
            return;
        }
        let at = |r: &RowId| store.row(*r).map_or(NO_TIME, |x| x.at_ms);
        let newest = self.newest_first;
        self.sorted = order_prefix(&mut self.rows, want, |r| (sort_rank(at(r), newest), *r));
    }
}

/// A letter's place by time: newest or oldest first, unknown times last in either order.
fn sort_rank(at_ms: i64, newest_first: bool) -> i64 {
    if at_ms == NO_TIME {
        i64::MAX
    } else if newest_first {
        -at_ms
    } else {
        at_ms
    }
}

/// Put at least the first `want` items in `key` order and say how many are: all of
/// them when `want` is a quarter of the items or more, else a selection of `want` then
/// a sort of just those. A partial selection is O(n); a full sort of half a million
/// letters is not.
fn order_prefix<T, K: Ord>(items: &mut [T], want: usize, key: impl Fn(&T) -> K) -> usize {
    let len = items.len();
    if len / 4 <= want {
        items.sort_unstable_by_key(key);
        len
    } else {
        items.select_nth_unstable_by_key(want, &key);
        if let Some(head) = items.get_mut(..want) {
            head.sort_unstable_by_key(key);
        }
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_group_orders_its_first_pages_and_more_on_demand() {
        let members: Vec<(i64, RowId)> = (0..100_000u32)
            .map(|i| (i64::from((i * 7919) % 100_000), i))
            .chain([(NO_TIME, 100_000)])
            .collect();
        let mut order = LetterOrder::default();
        order.fill(members.clone());
        assert_eq!(order.sorted, SORT_AHEAD);
        let times: HashMap<RowId, i64> = members.iter().map(|(t, r)| (*r, *t)).collect();
        let head: Vec<i64> = order.rows[..SORT_AHEAD].iter().map(|r| times[r]).collect();
        assert!(head.windows(2).all(|w| w[0] >= w[1]), "newest first");
        assert_eq!(head[0], 99_999);
        // Oldest first: the unknown time still comes last.
        let mut oldest = LetterOrder {
            newest_first: false,
            ..LetterOrder::default()
        };
        oldest.fill(
            members[..1000]
                .iter()
                .copied()
                .chain([(NO_TIME, 100_000)])
                .collect(),
        );
        assert_eq!(oldest.sorted, 1001);
        assert_eq!(oldest.rows.last(), Some(&100_000));
    }

    #[test]
    fn the_selection_follows_its_path_and_collapsing_hides_children() {
        let mut t = GroupTree {
            nodes: vec![
                node(0, &[0], 5),
                node(1, &[0, 0], 3),
                node(1, &[0, 1], 2),
                node(0, &[1], 1),
            ],
            ..GroupTree::default()
        };
        t.refresh_visible();
        assert_eq!(t.visible, [0, 3], "children of a closed node are hidden");
        t.expanded.insert(vec![0]);
        t.refresh_visible();
        assert_eq!(t.visible, [0, 1, 2, 3]);
        assert!(t.select_path(&[0, 1]));
        assert_eq!(t.selected().map(|n| n.path.clone()), Some(vec![0, 1]));
        t.expanded.clear();
        t.refresh_visible();
        assert!(!t.select_path(&[0, 1]), "a hidden node cannot be selected");
        assert!(t.cursor < t.visible.len());
    }

    fn node(depth: usize, path: &[u32], count: u64) -> TreeNode {
        TreeNode {
            depth,
            path: path.to_vec(),
            label: format!("{path:?}"),
            count,
            oldest_ms: 0,
            newest_ms: 0,
            expires_ms: crate::store::NO_TIME,
            last_hour: 0,
            spark: Default::default(),
        }
    }
}
