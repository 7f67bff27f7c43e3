//! The detail pane as a component: the selected letter as shown, its tab and scroll,
//! what is loading for it (bytes from the source, a big payload on the render thread,
//! its ledger history), and which letters this session unmasked. Its state is its own:
//! the rest of the TUI asks it (`shown`, `tab`, `is_unmasked`, `history`) and tells it
//! what happened (`rendered`, `fetched`, `unmasked`, `ledger_changed`, `reset`).

use crate::tab::Tab;
use dlq_core::diff::Diff;
use dlq_core::payload_view::PayloadView;
use dlq_core::store::RowId;
use std::collections::HashSet;

/// The selected letter, ready to render: the full letter, its masked payload view, and
/// the diff against the marked letter if asked for.
#[derive(Debug, Clone)]
pub struct Detail {
    pub row: RowId,
    /// The scan's preparation, shared with the payload cache.
    pub letter: dlq_core::payload_cache::Kept,
    pub payload: PayloadView,
    pub diff: Option<(RowId, Diff)>,
}

#[derive(Debug)]
pub struct DetailPane {
    current: Option<Detail>,
    tab: Tab,
    scroll: u16,
    /// A letter whose bytes were requested from the source.
    pending_fetch: Option<RowId>,
    /// A letter read while its schema was pending, read again once when opened (the
    /// registry may have answered since).
    schema_retry: Option<RowId>,
    /// A letter whose bytes left memory and that its source cannot fetch again (a held
    /// RabbitMQ delivery past the payload budget): the pane shows what the index holds.
    not_kept: Option<RowId>,
    /// The last payload rendered off the UI thread: row, unmasked, view.
    rendered: Option<(RowId, bool, PayloadView)>,
    /// Letters unmasked in this session (privileged, audited); forgotten on exit and on
    /// a new browse (row ids start again).
    unmasked: HashSet<RowId>,
    /// The ledger's entries for a letter (History tab), as `at · actor · action · detail`.
    history: Option<(RowId, Vec<String>)>,
}

impl Default for DetailPane {
    fn default() -> Self {
        DetailPane {
            current: None,
            tab: Tab::Failure,
            scroll: 0,
            pending_fetch: None,
            schema_retry: None,
            not_kept: None,
            rendered: None,
            unmasked: HashSet::new(),
            history: None,
        }
    }
}

impl DetailPane {
    /// The letter the pane shows, if its bytes are at hand.
    pub fn shown(&self) -> Option<&Detail> {
        self.current.as_ref()
    }

    pub fn tab(&self) -> Tab {
        self.tab
    }

    pub fn scroll(&self) -> u16 {
        self.scroll
    }

    /// Another tab, from its top.
    pub fn show_tab(&mut self, tab: Tab) {
        self.tab = tab;
        self.scroll = 0;
    }

    /// `Tab`: the next tab, wrapping.
    pub fn next_tab(&mut self) {
        let i = Tab::ALL.iter().position(|t| *t == self.tab).unwrap_or(0);
        self.show_tab(Tab::ALL[(i + 1) % Tab::ALL.len()]);
    }

    /// Lines up (negative) or down, never above the top.
    pub fn scroll_by(&mut self, delta: i64) {
        self.scroll = (i64::from(self.scroll) + delta).clamp(0, i64::from(u16::MAX)) as u16;
    }

    /// The letter was unmasked for this session (audited by the session).
    pub fn is_unmasked(&self, row: RowId) -> bool {
        self.unmasked.contains(&row)
    }

    /// The session recorded an unmask: the payload tab shows it in clear from now on.
    pub fn unmasked(&mut self, row: RowId) {
        self.unmasked.insert(row);
        self.history = None;
        self.current = None;
        self.show_tab(Tab::Payload);
    }

    /// The ledger's lines for `row`, when they have been read.
    pub fn history(&self, row: RowId) -> Option<&[String]> {
        self.history
            .as_ref()
            .filter(|(r, _)| *r == row)
            .map(|(_, lines)| lines.as_slice())
    }

    pub fn set_history(&mut self, row: RowId, lines: Vec<String>) {
        self.history = Some((row, lines));
    }

    /// The History tab shows `row` and its lines were not asked for yet: say they are
    /// being read and return true (the caller asks the ledger, once).
    pub fn wants_history(&mut self, row: RowId) -> bool {
        if self.tab != Tab::History || self.history.as_ref().map(|h| h.0) == Some(row) {
            return false;
        }
        self.history = Some((row, vec!["reading the ledger…".into()]));
        true
    }

    /// Something was recorded: the history shown is read again when next shown.
    pub fn ledger_changed(&mut self) {
        self.history = None;
    }

    /// The pane already shows `row` as asked (with the diff against `mark` on the Diff
    /// tab).
    pub fn shows(&self, row: RowId, mark: Option<RowId>) -> bool {
        self.current.as_ref().is_some_and(|d| {
            d.row == row && (self.tab != Tab::Diff || d.diff.as_ref().map(|x| x.0) == mark)
        })
    }

    /// Show `detail`, from the top if it is another letter.
    pub fn show(&mut self, detail: Detail) {
        if self.current.as_ref().map(|d| d.row) != Some(detail.row) {
            self.scroll = 0;
        }
        self.current = Some(detail);
    }

    /// Nothing to show (no letter selected, or its bytes are not at hand).
    pub fn clear(&mut self) {
        self.current = None;
    }

    /// A letter scanned while its schema was pending is read again once: true the first
    /// time it is asked for `row`.
    pub fn retry_schema(&mut self, row: RowId) -> bool {
        if self.schema_retry == Some(row) {
            return false;
        }
        self.schema_retry = Some(row);
        true
    }

    /// `row`'s bytes are asked of the source: true unless they already are.
    pub fn start_fetch(&mut self, row: RowId) -> bool {
        if self.pending_fetch == Some(row) {
            return false;
        }
        self.pending_fetch = Some(row);
        true
    }

    /// Bytes are on their way from the source.
    pub fn fetching(&self) -> bool {
        self.pending_fetch.is_some()
    }

    /// The source answered for `row` (the caller put the letter in the cache): it is
    /// shown afresh.
    pub fn fetched(&mut self, row: RowId) {
        if self.pending_fetch == Some(row) {
            self.pending_fetch = None;
        }
        self.current = None;
    }

    /// `row`'s bytes left memory and the source cannot fetch them again.
    pub fn cannot_fetch(&mut self, row: RowId) {
        self.not_kept = Some(row);
    }

    pub fn is_not_kept(&self, row: RowId) -> bool {
        self.not_kept == Some(row)
    }

    /// The render thread's view of `row`, if it matches the masking asked for.
    pub fn rendered_view(&self, row: RowId, unmasked: bool) -> Option<&PayloadView> {
        self.rendered
            .as_ref()
            .filter(|r| r.0 == row && r.1 == unmasked)
            .map(|r| &r.2)
    }

    /// The render thread answered: the letter shown takes the view if it is the one
    /// asked for, and the view is kept for when the letter is shown again.
    pub fn rendered(&mut self, row: RowId, unmasked: bool, view: PayloadView) {
        if self.unmasked.contains(&row) == unmasked {
            if let Some(d) = self.current.as_mut().filter(|d| d.row == row) {
                d.payload = view.clone();
            }
        }
        self.rendered = Some((row, unmasked, view));
    }

    /// A new browse: the rows the pane knew belonged to the old one. The tab stays.
    pub fn reset(&mut self) {
        *self = DetailPane {
            tab: self.tab,
            ..DetailPane::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::payload_view::ViewKind;

    fn view(text: &str) -> PayloadView {
        PayloadView {
            kind: ViewKind::Text,
            text: text.into(),
            total_bytes: text.len(),
            truncated: false,
        }
    }

    /// A late answer of the render thread for masking no longer asked for (the letter
    /// was unmasked meanwhile) never replaces what the pane shows.
    #[test]
    fn a_render_for_other_masking_is_kept_but_not_shown() {
        let mut p = DetailPane::default();
        let masker = dlq_core::masking::Masker::with_key(vec![1]);
        let raw = dlq_core::model::RawLetter::default();
        let letter = std::sync::Arc::new(dlq_core::catalog::prepare_letter(&masker, &[], raw).0);
        p.show(Detail {
            row: 3,
            letter,
            payload: view("rendering…"),
            diff: None,
        });
        p.unmasked(3);
        assert!(p.shown().is_none() && p.tab() == Tab::Payload);
        p.rendered(3, false, view("masked"));
        assert!(p.rendered_view(3, true).is_none());
        assert_eq!(
            p.rendered_view(3, false).map(|v| v.text.as_str()),
            Some("masked")
        );
    }

    #[test]
    fn history_is_asked_once_per_letter_and_again_after_a_decision() {
        let mut p = DetailPane::default();
        assert!(!p.wants_history(1), "only on the History tab");
        p.show_tab(Tab::History);
        assert!(p.wants_history(1));
        assert!(!p.wants_history(1));
        assert_eq!(p.history(1), Some(&["reading the ledger…".to_string()][..]));
        assert!(p.wants_history(2));
        p.ledger_changed();
        assert!(p.wants_history(2));
    }

    #[test]
    fn a_new_browse_forgets_rows_and_keeps_the_tab() {
        let mut p = DetailPane::default();
        p.show_tab(Tab::Headers);
        p.scroll_by(5);
        assert!(p.start_fetch(4) && !p.start_fetch(4));
        p.unmasked(4);
        p.reset();
        assert_eq!(
            (p.tab(), p.scroll(), p.fetching()),
            (Tab::Payload, 0, false)
        );
        assert!(!p.is_unmasked(4));
        p.scroll_by(-9);
        assert_eq!(p.scroll(), 0);
    }
}
