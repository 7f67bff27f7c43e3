//! Confirms and refusals from the broker: journaled, in doubt where the broker could
//! not say, settled once journaled.

use super::*;

impl Engine<'_> {
    /// Confirms and refusals that arrived: journaled in one transaction per kind.
    pub(super) fn collect(
        &mut self,
        publisher: &mut dyn Publisher,
        ledger: &mut dyn Journal,
        now: Instant,
    ) -> Result<(), JournalError> {
        let mut outcomes = std::mem::take(&mut self.stash);
        outcomes.extend(publisher.confirmations(Duration::ZERO));
        if outcomes.is_empty() {
            return Ok(());
        }
        let mut ok: Vec<(usize, Option<String>)> = Vec::new();
        for (ticket, outcome) in outcomes {
            let Ok(i) = usize::try_from(ticket) else {
                continue;
            };
            if !self.in_flight.remove(&i) {
                continue;
            }
            let item = &self.plan.items[i];
            match outcome {
                Ok(c) => {
                    if !self.key_order_kept {
                        self.release_key(i);
                    }
                    ok.push((i, c.location));
                }
                // It may be in the target: journaled `sending`, it stays so — in doubt,
                // read back by a resume or a new plan, never offered as if refused.
                Err(SourceError::InDoubt(why)) => {
                    self.stop(
                        End::AutoStopped(format!(
                            "the broker did not confirm {} ({why}): it may have been written, so it stays in doubt — `--resume` reads its target back",
                            item.letter_id
                        )),
                        now,
                    );
                }
                Err(e) => {
                    let why = e.to_string();
                    let stopped = format!(
                        "the broker did not take {}: {why} (its DLQ copy stays)",
                        item.letter_id
                    );
                    self.refused(i, &why, ledger)?;
                    self.stop(End::AutoStopped(stopped), now);
                }
            }
        }
        self.confirmed(ok, ledger)
    }

    /// Letters the broker confirmed (with where each was written): journaled in one
    /// transaction, then settled (or, ledger-only, done).
    pub(super) fn confirmed(
        &mut self,
        ok: Vec<(usize, Option<String>)>,
        ledger: &mut dyn Journal,
    ) -> Result<(), JournalError> {
        let letters: Vec<ConfirmedLetter<'_>> = ok
            .iter()
            .map(|(i, published)| {
                let it: &Item = &self.plan.items[*i];
                ConfirmedLetter {
                    seq: it.seq,
                    letter_id: &it.letter_id,
                    binding: &it.binding,
                    location: &it.location,
                    published: published.as_deref(),
                    ledger_only: it.settle.is_none(),
                }
            })
            .collect();
        let decisions = ledger.replay_confirmed(&self.plan.id, &self.plan.source, &letters)?;
        for ((i, _), d) in ok.into_iter().zip(decisions) {
            if self.states[i] == ItemState::Sending {
                self.set(i, ItemState::Confirmed);
            }
            self.counts.confirmed += 1;
            match &self.plan.items[i].settle {
                Some(c) => self.settle.push(ToSettle {
                    index: i,
                    seq: self.plan.items[i].seq,
                    coords: c.clone(),
                    decision: d,
                }),
                None => self.settled(i),
            }
        }
        Ok(())
    }
}
