//! Verification: the chain walked entry by entry, every bound row checked against its entry.

use super::*;
use crate::chain::{Chain, EntryMac};
use crate::checkpoint::{Checkpoint, Scope};
use crate::p;
use std::collections::{HashMap, HashSet};

impl Ledger {
    /// Walk the chain (sequence without gaps, each `prev_hash` the previous `hash`, each
    /// MAC recomputed under the key), then check every decision and revision row against
    /// the entry that recorded it, and the anchor if one is given — and the last verified
    /// checkpoint, an anchor the ledger keeps itself. Names the first problem. A clean
    /// result becomes the new checkpoint.
    pub fn verify(&self, expect_head: Option<&Head>) -> Result<Verification, JournalError> {
        // One read transaction: the chain and every table from one snapshot, so another
        // process's commit between two reads is not taken for an edit.
        self.db.begin_read().map_err(|e| self.err(e))?;
        let out = self.verify_snapshot(expect_head);
        let _ = self.db.commit();
        let (v, checkpoint) = out?;
        if let Some(c) = checkpoint {
            self.store_checkpoint(&c);
            self.clear_walk_failed();
        }
        if !v.ok {
            self.mark_walk_failed(v.first_bad_seq.unwrap_or_default());
        }
        Ok(v)
    }

    fn verify_snapshot(
        &self,
        expect_head: Option<&Head>,
    ) -> Result<(Verification, Option<Checkpoint>), JournalError> {
        let checkpoint = self.load_checkpoint()?;
        let anchors: Vec<(Head, &str)> = expect_head
            .map(|h| (h.clone(), "the anchor"))
            .into_iter()
            .chain(
                checkpoint
                    .as_ref()
                    .map(|c| (c.head(), "the last verified checkpoint")),
            )
            .collect();
        let anchor_seqs: Vec<i64> = anchors.iter().map(|(h, _)| h.seq).collect();
        let walked = match self.walk_paged(&anchor_seqs)? {
            Ok(w) => w,
            Err((seq, why)) => {
                let n = self
                    .db
                    .one("SELECT count(*) FROM audit", p![], |r| r.get(0))
                    .map_err(|e| self.err(e))?;
                return Ok((bad(n, seq, why), None));
            }
        };
        let n = walked.entries;
        for (h, what) in &anchors {
            match walked.at_anchors.get(&h.seq) {
                None => {
                    return Ok((bad(n, h.seq, format!(
                        "{what} names entry {} but the log ends at {n} (entries were removed from the end)",
                        h.seq
                    )), None))
                }
                Some(hash) if *hash != h.hash => {
                    return Ok((bad(n, h.seq, format!("the entry differs from {what} (the log was rewritten)")), None))
                }
                Some(_) => {}
            }
        }
        // Rows after the anchors: a truncation is named as one, not by the first row
        // whose entry it took.
        if let Some(problem) = self.check_rows(&walked.kept, Scope::ALL)? {
            return Ok((problem.into_verification(n), None));
        }
        let ok = Verification {
            ok: true,
            entries: n,
            first_bad_seq: None,
            problem: None,
        };
        Ok((
            ok,
            walked
                .head
                .map(|h| self.checkpoint_of(h, None))
                .transpose()?,
        ))
    }

    /// The whole chain, read a page at a time in chain order (memory is a page, plus the
    /// entries whose rows are checked after it, whatever the ledger's size): the first
    /// problem in chain order, or what the row checks and anchors need of it. On a file
    /// ledger the MACs are checked on a second thread while the next page is read.
    fn walk_paged(&self, anchors: &[i64]) -> Result<Result<Walked, (i64, String)>, JournalError> {
        let Chain::Local(key) = &self.chain else {
            // The server checks a page's MACs (it holds the key): one call per page.
            let mut walker = Walker::new(anchors, None);
            let mut after = i64::MIN;
            while let Some((page, full)) = self.page_after(after)? {
                after = page.last().map_or(after, |e| e.seq);
                let bad_mac = self.first_bad_mac(&page).map_err(|e| self.err(e))?;
                if let Some(problem) = walker.take(page, bad_mac) {
                    return Ok(Err(problem));
                }
                if !full {
                    break;
                }
            }
            return Ok(Ok(walker.walked));
        };
        let mac = EntryMac::new(key)
            .ok_or_else(|| self.other("the audit key cannot key a MAC".into()))?;
        std::thread::scope(|s| {
            let (pages, next) = std::sync::mpsc::sync_channel::<Vec<AuditEntry>>(1);
            let checker = s.spawn(move || {
                let mut walker = Walker::new(anchors, Some(mac));
                for page in next {
                    if let Some(problem) = walker.take(page, None) {
                        return Err(problem);
                    }
                }
                Ok(walker.walked)
            });
            let read = (|| {
                let mut after = i64::MIN;
                while let Some((page, full)) = self.page_after(after)? {
                    after = page.last().map_or(after, |e| e.seq);
                    // A closed channel: the checker found a problem, which is the answer.
                    if pages.send(page).is_err() || !full {
                        break;
                    }
                }
                Ok::<(), JournalError>(())
            })();
            drop(pages);
            let checked = checker
                .join()
                .map_err(|_| self.other("the chain check stopped unexpectedly".into()))?;
            match (checked, read) {
                (Err(problem), _) => Ok(Err(problem)),
                (Ok(_), Err(e)) => Err(e),
                (Ok(w), Ok(())) => Ok(Ok(w)),
            }
        })
    }

    /// Up to a page of entries after seq `after`, in order, and whether it is full (more
    /// may follow); `None` past the end.
    fn page_after(&self, after: i64) -> Result<Option<(Vec<AuditEntry>, bool)>, JournalError> {
        let page = self
            .db
            .map(
                "SELECT seq, at, actor, action, target, detail, prev_hash, hash FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                p![after, WALK_PAGE],
                entry_row,
            )
            .map_err(|e| self.err(e))?;
        let full = page.len() as i64 == WALK_PAGE;
        Ok((!page.is_empty()).then_some((page, full)))
    }

    /// The chain from `first` on (its `prev_hash` being `prev`): the first entry out of
    /// sequence, out of chain or failing its MAC, and why.
    pub(crate) fn walk(
        &self,
        entries: &[AuditEntry],
        first: i64,
        prev: &str,
    ) -> Result<Option<(i64, String)>, JournalError> {
        let bad_mac = self.first_bad_mac(entries).map_err(|e| self.err(e))?;
        Ok(first_problem(entries, first, prev, bad_mac))
    }

    /// Every decision and revision row must match the entry that recorded it, and every
    /// entry that records one must still have its row — within `scope` (`entries` hold
    /// at least the entries the scope's rows point at).
    pub(crate) fn check_rows(
        &self,
        entries: &[AuditEntry],
        scope: Scope<'_>,
    ) -> Result<Option<RowProblem>, JournalError> {
        let log = Log::of(entries);
        if let Some(p) = self.check_decisions(&log, scope.since)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_revisions(&log, scope.since)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_item_numbers()? {
            return Ok(Some(p));
        }
        if scope.replays.is_none() {
            if let Some(p) = self.check_replay_rows(entries)? {
                return Ok(Some(p));
            }
        }
        if let Some(p) = self.check_replay_journal(entries, &log, scope.replays)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_approvals(entries)? {
            return Ok(Some(p));
        }
        if let Some(p) = self.check_team_roles()? {
            return Ok(Some(p));
        }
        self.check_replay_items(entries, &log.details, scope.replays)
    }

    /// Decision rows recorded after `since` against the entries that recorded them, no
    /// discard or replay recorded after it without its row, and every decision an entry
    /// after it applied marked applied.
    fn check_decisions(
        &self,
        log: &Log<'_>,
        since: i64,
    ) -> Result<Option<RowProblem>, JournalError> {
        type Row = (
            i64,
            String,
            String,
            Option<String>,
            String,
            String,
            String,
            String,
            Option<String>,
            i64,
        );
        let rows: Vec<Row> = self
            .db
            .map("SELECT id, source, letter_id, binding, kind, reason, actor, at, applied_at, audit_seq FROM decisions WHERE audit_seq > ?1 ORDER BY id", p![since], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut decided_seqs = HashSet::new();
        let applied: HashSet<i64> = log
            .entries
            .iter()
            .filter(|e| e.action.ends_with("-applied"))
            .filter_map(|e| log.field(e, "decision").as_i64())
            .collect();
        for (id, source, letter_id, binding, kind, reason, actor, at, applied_at, seq) in rows {
            let matches = log.by_seq.get(&seq).is_some_and(|e| {
                e.action == kind
                    && e.target == letter_id
                    && e.actor == actor
                    && e.at == at
                    && log.field(e, "source").as_str() == Some(source.as_str())
                    && log.field(e, "reason").as_str() == Some(reason.as_str())
                    && log.details.get(&e.seq).and_then(expected_binding) == binding
            });
            if !matches {
                return Ok(Some(RowProblem(seq, format!("decision row {id} does not match the audit entry that recorded it (the decisions table was edited)"))));
            }
            if applied_at.is_some() != applied.contains(&seq) {
                return Ok(Some(RowProblem(seq, format!("decision row {id}'s applied state differs from the audit log (the decisions table was edited)"))));
            }
            decided_seqs.insert(seq);
        }
        if let Some(p) = self.check_applied_since(log, since)? {
            return Ok(Some(p));
        }
        Ok([
            (
                "discard",
                "this discard has no decision row (the decisions table was edited)",
            ),
            (
                "replay",
                "this replayed letter has no decision row (the decisions table was edited)",
            ),
        ]
        .into_iter()
        .find_map(|(action, why)| log.orphan(action, since, &decided_seqs, why)))
    }

    /// Older decisions applied since `since`: their rows must say so.
    fn check_applied_since(
        &self,
        log: &Log<'_>,
        since: i64,
    ) -> Result<Option<RowProblem>, JournalError> {
        for (applied_seq, decision) in log
            .entries
            .iter()
            .filter(|e| e.seq > since && e.action.ends_with("-applied"))
            .filter_map(|e| Some((e.seq, log.field(e, "decision").as_i64()?)))
            .filter(|(_, d)| *d <= since)
        {
            let marked: Option<Option<String>> = self
                .db
                .opt(
                    "SELECT applied_at FROM decisions WHERE audit_seq = ?1",
                    p![decision],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            if !matches!(marked, Some(Some(_))) {
                return Ok(Some(RowProblem(applied_seq, format!("the decision this entry applied (entry {decision}) is not marked applied, or is gone (the decisions table was edited)"))));
            }
        }
        Ok(None)
    }

    /// Revision rows recorded after `since` (and their payloads' digests) against their
    /// entries.
    fn check_revisions(
        &self,
        log: &Log<'_>,
        since: i64,
    ) -> Result<Option<RowProblem>, JournalError> {
        type RevRow = (String, String, i64, String, Vec<u8>, Option<i64>);
        let revs: Vec<RevRow> = self
            .db
            .map(
                "SELECT source, letter_id, number, sha256_after, payload, audit_seq FROM revisions WHERE audit_seq IS NULL OR audit_seq > ?1",
                p![since],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .map_err(|e| self.err(e))?;
        let mut revised = HashSet::new();
        for (source, letter_id, number, sha_after, payload, seq) in revs {
            let seq = seq.unwrap_or(0);
            let ok = log.by_seq.get(&seq).is_some_and(|e| {
                e.action == "edit"
                    && e.target == letter_id
                    && log.field(e, "source").as_str() == Some(source.as_str())
                    && log.field(e, "revision").as_i64() == Some(number)
                    && log.field(e, "sha256_after").as_str() == Some(sha_after.as_str())
            }) && sha256_hex(&payload) == sha_after;
            if !ok {
                return Ok(Some(RowProblem(seq, format!("revision {number} of {letter_id} does not match the audit entry that recorded it (the revisions table was edited)"))));
            }
            revised.insert(seq);
        }
        Ok(log.orphan(
            "edit",
            since,
            &revised,
            "this revision has no row (the revisions table was edited)",
        ))
    }

    /// Each replay row must have its start entry.
    fn check_replay_rows(
        &self,
        entries: &[AuditEntry],
    ) -> Result<Option<RowProblem>, JournalError> {
        let replay_ids: Vec<String> = self
            .db
            .map("SELECT id FROM replays", p![], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(replay_ids
            .into_iter()
            .find(|id| {
                !entries
                    .iter()
                    .any(|e| e.action == "replay-start" && &e.target == id)
            })
            .map(|id| {
                RowProblem(
                    0,
                    format!("replay {id} has no audit entry (the replays table was edited)"),
                )
            }))
    }
}

/// Entries read per page by the full walk (a few MB). The unit tests' ledgers are small:
/// there a page is three entries, so every tampering test also crosses pages.
const WALK_PAGE: i64 = if cfg!(test) { 3 } else { 16_384 };

/// What the full walk keeps of a clean chain.
#[derive(Default)]
struct Walked {
    entries: i64,
    head: Option<Head>,
    /// The entries the row checks read: those that record a row or an approval.
    kept: Vec<AuditEntry>,
    /// The hash at each anchor's seq, where the log has one.
    at_anchors: HashMap<i64, String>,
}

/// The full walk's state between pages: where the chain stands and what it keeps.
struct Walker<'a> {
    walked: Walked,
    prev: String,
    anchors: &'a [i64],
    /// The key's MAC on a file ledger; `None` when the server checks MACs.
    mac: Option<EntryMac>,
}

impl<'a> Walker<'a> {
    fn new(anchors: &'a [i64], mac: Option<EntryMac>) -> Self {
        Walker {
            walked: Walked::default(),
            prev: GENESIS.to_string(),
            anchors,
            mac,
        }
    }

    /// The next page in chain order (`bad_mac`: the server's verdict on its MACs, where
    /// there is no key here): its first problem, or nothing and the page taken in.
    fn take(&mut self, page: Vec<AuditEntry>, bad_mac: Option<i64>) -> Option<(i64, String)> {
        let bad_mac = match &mut self.mac {
            Some(m) => m.first_bad(&page),
            None => bad_mac,
        };
        let w = &mut self.walked;
        if let Some(problem) = first_problem(&page, w.entries + 1, &self.prev, bad_mac) {
            return Some(problem);
        }
        let last = page.last()?;
        w.entries += page.len() as i64;
        self.prev.clone_from(&last.hash);
        w.head = Some(Head {
            seq: last.seq,
            hash: last.hash.clone(),
        });
        for e in page.iter().filter(|e| self.anchors.contains(&e.seq)) {
            w.at_anchors.insert(e.seq, e.hash.clone());
        }
        w.kept
            .extend(page.into_iter().filter(|e| checked_against_rows(&e.action)));
        None
    }
}

/// The first problem in chain order of `entries` (the first's seq should be `first`, its
/// `prev_hash` `prev`), given the first whose MAC fails.
fn first_problem(
    entries: &[AuditEntry],
    first: i64,
    prev: &str,
    bad_mac: Option<i64>,
) -> Option<(i64, String)> {
    let linked = first_bad_link(entries, first, prev);
    let mac_problem = bad_mac.map(|seq| {
        (
            seq,
            "its content does not match its MAC (the entry was edited, or the chain was rewritten without the key)".to_string(),
        )
    });
    match (linked, mac_problem) {
        (Some(l), Some(m)) => Some(if m.0 < l.0 { m } else { l }),
        (l, m) => l.or(m),
    }
}

/// Sequence and links only (no key needed).
fn first_bad_link(entries: &[AuditEntry], first: i64, prev: &str) -> Option<(i64, String)> {
    let mut prev = prev;
    for (expected_seq, e) in (first..).zip(entries.iter()) {
        if e.seq != expected_seq {
            return Some((
                e.seq,
                format!(
                    "expected entry {expected_seq}, found {} (an entry was deleted or reordered)",
                    e.seq
                ),
            ));
        }
        if e.prev_hash != prev {
            return Some((e.seq, "its prev_hash does not match the previous entry (an entry was removed, inserted or reordered)".into()));
        }
        prev = &e.hash;
    }
    None
}

fn bad(entries: i64, seq: i64, why: String) -> Verification {
    Verification {
        ok: false,
        entries,
        first_bad_seq: Some(seq),
        problem: Some(why),
    }
}

/// Entries a row check reads: those that record a row, and approvals (a team ledger's
/// requests must each have theirs).
fn checked_against_rows(action: &str) -> bool {
    binds_rows(action) || action.starts_with("approval-")
}

/// Actions whose entries record a row (a decision, a revision, the replay journal).
fn binds_rows(action: &str) -> bool {
    matches!(action, "discard" | "replay" | "edit")
        || action.ends_with("-applied")
        || action.starts_with("replay-")
}

/// The audit log as the row checks read it: entries by seq, each detail parsed once
/// (rows are checked against several of its fields).
pub(crate) struct Log<'a> {
    entries: &'a [AuditEntry],
    by_seq: HashMap<i64, &'a AuditEntry>,
    pub(crate) details: HashMap<i64, serde_json::Value>,
}

impl<'a> Log<'a> {
    fn of(entries: &'a [AuditEntry]) -> Log<'a> {
        Log {
            entries,
            by_seq: entries.iter().map(|e| (e.seq, e)).collect(),
            // Only the entries a row is checked against are parsed (unmasks, exports and
            // refusals bind no row): most of a big ledger's memory was parsed details.
            details: entries
                .iter()
                .filter(|e| binds_rows(&e.action))
                .map(|e| {
                    let v = serde_json::from_str(&e.detail).unwrap_or(serde_json::Value::Null);
                    (e.seq, v)
                })
                .collect(),
        }
    }

    pub(crate) fn field(&self, e: &AuditEntry, k: &str) -> &serde_json::Value {
        static NULL: serde_json::Value = serde_json::Value::Null;
        self.details
            .get(&e.seq)
            .and_then(|v| v.get(k))
            .unwrap_or(&NULL)
    }

    /// An entry after `since` recording a row whose row is gone.
    fn orphan(
        &self,
        action: &str,
        since: i64,
        rows: &HashSet<i64>,
        why: &str,
    ) -> Option<RowProblem> {
        self.entries
            .iter()
            .find(|e| e.seq > since && e.action == action && !rows.contains(&e.seq))
            .map(|e| RowProblem(e.seq, why.to_string()))
    }
}

/// The binding an audit entry recorded for its decision. Entries from schema 1 have none:
/// there it is derived as the upgrade did (Kafka coordinates), else absent.
pub(crate) fn expected_binding(detail: &serde_json::Value) -> Option<String> {
    if let Some(b) = detail.get("binding") {
        return b.as_str().map(str::to_string);
    }
    detail
        .get("coords")
        .and_then(serde_json::Value::as_str)
        .filter(|c| c.split('/').filter(|p| !p.is_empty()).count() == 3)
        .map(|c| format!("at:{c}"))
}

/// A table row that disagrees with the chain: the entry it points at, and why.
pub(crate) struct RowProblem(pub(crate) i64, pub(crate) String);

impl RowProblem {
    pub(crate) fn into_verification(self, entries: i64) -> Verification {
        Verification {
            ok: false,
            entries,
            first_bad_seq: Some(self.0),
            problem: Some(self.1),
        }
    }
}
