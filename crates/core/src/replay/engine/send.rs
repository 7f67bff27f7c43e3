//! Sending: which letters are due (the bucket, the in-flight limit, the canary, each
//! key in order), journaled as `sending` before they go, and what a refusal does.

use super::*;
use crate::journal::Withdrawn;

impl Engine<'_> {
    /// The next letter that may go; letters of a key whose earlier letter was refused
    /// are held back (journaled), with all that follow them.
    pub(super) fn next_eligible(
        &mut self,
        ledger: &mut dyn Journal,
    ) -> Result<Option<usize>, JournalError> {
        let plan = self.plan;
        while let Some(i) = self.ready.pop_front() {
            let item = &plan.items[i];
            let Some(k) = item.key.as_deref().filter(|k| self.blocked.contains(*k)) else {
                self.remaining -= 1;
                return Ok(Some(i));
            };
            let mut held = vec![i];
            held.extend(
                self.behind
                    .get_mut(k)
                    .map(std::mem::take)
                    .unwrap_or_default(),
            );
            for h in held {
                let it = &plan.items[h];
                ledger.replay_item(
                    &plan.id,
                    it.seq,
                    &it.letter_id,
                    ItemState::HeldBack,
                    Some("an earlier letter of its key was not replayed"),
                )?;
                self.set(h, ItemState::HeldBack);
                self.counts.held_back += 1;
                self.remaining -= 1;
            }
        }
        Ok(None)
    }

    /// Start the publishes the bucket allows: journaled as `sending` first, then sent,
    /// each only if the kill switch is still off.
    pub(super) fn send_due(
        &mut self,
        publisher: &mut dyn Publisher,
        ledger: &mut dyn Journal,
    ) -> Result<(), JournalError> {
        if self.control.paused() {
            self.was_paused = true;
            return Ok(());
        }
        if std::mem::take(&mut self.was_paused) {
            // Tokens are not owed for the time paused: the set rate, from now.
            self.bucket = TokenBucket::new(self.bucket.rate(), Instant::now());
        }
        if self.first_send.is_none() && self.bucket_fresh {
            // Time spent getting here (the DLQ watch starting) is not owed as a burst.
            self.bucket = TokenBucket::new(self.bucket.rate(), Instant::now());
            self.bucket_fresh = false;
        }
        self.key_order_kept = publisher.keeps_key_order();
        let batch = self.due(ledger)?;
        if batch.is_empty() {
            return Ok(());
        }
        let seqs: Vec<u32> = batch.iter().map(|&i| self.plan.items[i].seq).collect();
        let withdrawn = ledger.replay_sending(&self.plan.id, &seqs)?;
        let batch = self.withdraw(batch, &withdrawn);
        let mut unsent = Vec::new();
        for (n, &i) in batch.iter().enumerate() {
            let now = Instant::now();
            if self.control.killed() || self.control.paused() {
                if self.control.killed() {
                    self.kill_seen.get_or_insert(now);
                }
                unsent.extend(batch[n..].iter().copied());
                break;
            }
            self.last_send_start = Some(now);
            match publisher.send(i as u64, &self.plan.items[i].outgoing) {
                Ok(()) => self.started(i, now),
                Err(e) => {
                    self.refused(i, &e.to_string(), ledger)?;
                    unsent.extend(batch[n + 1..].iter().copied());
                    self.stop(End::AutoStopped(format!("publishing failed: {e}")), now);
                    break;
                }
            }
        }
        // Journaled as sending but never started: back to planned (not in doubt).
        for &i in unsent.iter().rev() {
            let item = &self.plan.items[i];
            ledger.replay_item(
                &self.plan.id,
                item.seq,
                &item.letter_id,
                ItemState::Planned,
                Some("not sent: stopped first"),
            )?;
            self.ready.push_front(i);
            self.remaining += 1;
        }
        if self.control.killed() && self.end.is_none() {
            self.stop(End::Killed, Instant::now());
        }
        Ok(())
    }

    /// Letters the ledger withdrew as they were journaled (decided elsewhere since the
    /// plan): never published, counted, and their key's next letter let go (a letter
    /// that will never be sent is not one a later letter could overtake). The rest of
    /// `batch`, in order.
    fn withdraw(&mut self, batch: Vec<usize>, withdrawn: &[Withdrawn]) -> Vec<usize> {
        if withdrawn.is_empty() {
            return batch;
        }
        let seqs: HashSet<u32> = withdrawn.iter().map(|w| w.seq).collect();
        let (gone, kept): (Vec<usize>, Vec<usize>) = batch
            .into_iter()
            .partition(|&i| seqs.contains(&self.plan.items[i].seq));
        for i in gone {
            self.set(i, ItemState::Withdrawn);
            self.counts.withdrawn += 1;
            if !self.key_order_kept {
                self.release_key(i);
            }
        }
        kept
    }

    /// The items due now: as many as the bucket, the in-flight limit and the canary
    /// allow, each the next eligible one.
    pub(super) fn due(&mut self, ledger: &mut dyn Journal) -> Result<Vec<usize>, JournalError> {
        let canary = self.plan.options.canary.min(self.plan.items.len());
        let mut batch = Vec::new();
        while self.end.is_none() && self.in_flight.len() + batch.len() < MAX_IN_FLIGHT {
            if self.phase == Phase::Canary && self.canary_sent + batch.len() >= canary {
                break;
            }
            if self.bucket.wait(Instant::now()) > Duration::ZERO {
                break;
            }
            let Some(i) = self.next_eligible(ledger)? else {
                break;
            };
            self.bucket.take(Instant::now());
            batch.push(i);
            if self.key_order_kept {
                // Sent after it, in this batch or a later one, and written after it or
                // not at all: its key's next letter may be chosen now.
                self.release_key(i);
            }
        }
        Ok(batch)
    }

    /// Item `i`'s publish started at `now`: in flight, counted, in the rate window.
    pub(super) fn started(&mut self, i: usize, now: Instant) {
        self.set(i, ItemState::Sending);
        self.in_flight.insert(i);
        self.counts.sent += 1;
        if self.phase == Phase::Canary {
            self.canary_sent += 1;
        }
        self.recent.push_back(i);
        if self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
        self.sends.push_back(now);
        self.first_send.get_or_insert(now);
        while self
            .sends
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > RATE_WINDOW)
        {
            self.sends.pop_front();
        }
    }

    /// The publisher refused item `i` before it left: journaled, and its key blocked
    /// (a later letter of the key must not overtake it).
    pub(super) fn refused(
        &mut self,
        i: usize,
        why: &str,
        ledger: &mut dyn Journal,
    ) -> Result<(), JournalError> {
        let item = &self.plan.items[i];
        ledger.replay_item(
            &self.plan.id,
            item.seq,
            &item.letter_id,
            ItemState::Refused,
            Some(why),
        )?;
        let key = item.key.clone();
        self.set(i, ItemState::Refused);
        self.counts.refused += 1;
        if let Some(k) = key {
            self.blocked.insert(k);
        }
        Ok(())
    }

    /// A key's letter was confirmed (or, see `key_order_kept`, handed over): its next
    /// letter may go.
    pub(super) fn release_key(&mut self, i: usize) {
        let plan = self.plan;
        if let Some(next) = plan.items[i]
            .key
            .as_deref()
            .and_then(|k| self.behind.get_mut(k))
            .and_then(VecDeque::pop_front)
        {
            self.ready.push_back(next);
        }
    }
}
