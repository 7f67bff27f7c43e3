//! `Ledger` as the `Journal` port: the trait's methods are the ledger's own, so code
//! above core sees only `dyn Journal` and a server ledger can stand in its place.

use crate::Ledger;
use dlq_core::journal::{
    Approval, AuditEntry, Claim, ConfirmedLetter, Decision, Head, ItemState, Journal, JournalError,
    LatestRevision, NewRevision, PlannedItem, ReplayItemRow, ReplayRow, ReplayState, Verification,
    Withdrawn,
};
use std::collections::HashMap;

type R<T> = Result<T, JournalError>;

impl Journal for Ledger {
    fn location(&self) -> String {
        self.path().display().to_string()
    }
    fn actor(&self) -> &str {
        Ledger::actor(self)
    }
    fn audit(&mut self, action: &str, target: &str, detail: &str) -> R<AuditEntry> {
        Ledger::audit(self, action, target, detail)
    }
    fn record_discard(
        &mut self,
        source: &str,
        letter_id: &str,
        binding: &str,
        coords: Option<&str>,
        reason: &str,
    ) -> R<Decision> {
        Ledger::record_discard(self, source, letter_id, binding, coords, reason)
    }
    fn record_revisions(&mut self, source: &str, batch: &[NewRevision]) -> R<Vec<i64>> {
        Ledger::record_revisions(self, source, batch)
    }
    fn revision(&self, source: &str, letter_id: &str, number: i64) -> R<Option<Vec<u8>>> {
        Ledger::revision(self, source, letter_id, number)
    }
    fn mark_applied(&mut self, decision: &Decision, how: &str) -> R<()> {
        Ledger::mark_applied(self, decision, how)
    }
    fn decisions(&self, source: &str) -> R<Vec<Decision>> {
        Ledger::decisions(self, source)
    }
    fn pending(&self, source: &str) -> R<Vec<Decision>> {
        Ledger::pending(self, source)
    }
    fn audit_entries(&self) -> R<Vec<AuditEntry>> {
        Ledger::audit_entries(self)
    }
    fn history(&self, letter_id: &str) -> R<Vec<AuditEntry>> {
        Ledger::history(self, letter_id)
    }
    fn head(&self) -> R<Option<Head>> {
        Ledger::head(self)
    }
    fn verify(&self, expect_head: Option<&Head>) -> R<Verification> {
        Ledger::verify(self, expect_head)
    }
    fn verify_recent(&self) -> R<Verification> {
        Ledger::verify_recent(self)
    }
    fn watch(&self) -> R<Option<Box<dyn dlq_core::journal::LedgerWatch>>> {
        Ledger::watch(self)
    }
    fn request_approval(&mut self, a: &Approval) -> R<Approval> {
        Ledger::request_approval(self, a)
    }
    fn approval_for(&self, digest: &str) -> R<Option<Approval>> {
        Ledger::approval_for(self, digest)
    }
    fn approval(&self, id: &str) -> R<Option<Approval>> {
        Ledger::approval(self, id)
    }
    fn decide_approval(&mut self, id: &str, approve: bool, note: &str) -> R<Approval> {
        Ledger::decide_approval(self, id, approve, note)
    }
    fn use_approval(&mut self, id: &str) -> R<()> {
        Ledger::use_approval(self, id)
    }
    fn team_roles(&self) -> R<Option<Vec<(String, String)>>> {
        Ledger::team_roles(self)
    }
    fn team_policy(&self) -> R<Option<Vec<(String, String)>>> {
        Ledger::team_policy(self)
    }
    fn set_team_policy(&mut self, key: &str, value: Option<&str>) -> R<()> {
        Ledger::set_team_policy(self, key, value)
    }
    fn set_team_role(&mut self, actor: &str, role: &str) -> R<()> {
        Ledger::set_team_role(self, actor, role)
    }
    fn replay_start(
        &mut self,
        id: &str,
        source: &str,
        target: &str,
        detail: &serde_json::Value,
        items: &[PlannedItem<'_>],
    ) -> R<AuditEntry> {
        Ledger::replay_start(self, id, source, target, detail, items)
    }
    fn replay_resume(
        &mut self,
        id: &str,
        detail: &serde_json::Value,
        added: &[PlannedItem<'_>],
    ) -> R<()> {
        Ledger::replay_resume(self, id, detail, added)
    }
    fn replay_take_over(&mut self, id: &str) -> R<String> {
        Ledger::replay_take_over(self, id)
    }
    fn replay_sending(&mut self, id: &str, seqs: &[u32]) -> R<Vec<Withdrawn>> {
        Ledger::replay_sending(self, id, seqs)
    }
    fn replay_confirmed(
        &mut self,
        id: &str,
        source: &str,
        letters: &[ConfirmedLetter<'_>],
    ) -> R<Vec<Decision>> {
        Ledger::replay_confirmed(self, id, source, letters)
    }
    fn replay_settled(&mut self, id: &str, seq: u32, decision: &Decision, how: &str) -> R<()> {
        Ledger::replay_settled(self, id, seq, decision, how)
    }
    fn replay_item(
        &mut self,
        id: &str,
        seq: u32,
        letter_id: &str,
        state: ItemState,
        note: Option<&str>,
    ) -> R<()> {
        Ledger::replay_item(self, id, seq, letter_id, state, note)
    }
    fn replay_finish(
        &mut self,
        id: &str,
        state: ReplayState,
        outcome: &serde_json::Value,
    ) -> R<()> {
        Ledger::replay_finish(self, id, state, outcome)
    }
    fn replay_heartbeat(&mut self, id: &str) -> R<()> {
        Ledger::replay_heartbeat(self, id)
    }
    fn in_doubt(&self, source: &str) -> R<Vec<dlq_core::journal::InDoubt>> {
        Ledger::in_doubt(self, source)
    }
    fn claims(&self, source: &str) -> R<Vec<Claim>> {
        Ledger::claims(self, source)
    }
    fn replays(&self) -> R<Vec<ReplayRow>> {
        Ledger::replays(self)
    }
    fn replay(&self, id: &str) -> R<Option<(ReplayRow, Vec<ReplayItemRow>)>> {
        Ledger::replay(self, id)
    }
    fn replay_counts(&self, source: &str) -> R<HashMap<String, u32>> {
        Ledger::replay_counts(self, source)
    }
    fn latest_revisions(&self, source: &str) -> R<HashMap<String, LatestRevision>> {
        Ledger::latest_revisions(self, source)
    }
}
