//! An ordered worker pipeline: batches go to persistent worker threads and come back in
//! the order they went in, with back-pressure on whoever sends. The session prepares
//! letters with it; the dump reader parses lines with it.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::Scope;

/// A worker stopped (it panicked): the scan must stop rather than go on without its
/// batch. The panic itself surfaces when the thread scope ends.
#[derive(Debug)]
pub struct Broken;

/// Batches in, worked batches out in the order they went in. Batch `k` goes to worker
/// `k mod W` and comes back on that worker's channel, so order needs no sorting; at most
/// `2 W` batches are in flight, then `send` waits for the oldest (back-pressure: the
/// source is not read faster than the workers keep up).
pub struct Pipeline<I, O> {
    to: Vec<SyncSender<I>>,
    from: Vec<Receiver<O>>,
    sent: usize,
    received: usize,
}

impl<I: Send, O: Send> Pipeline<I, O> {
    /// Start one worker per core (at most four; at least one, so the work overlaps the
    /// reading even on one core), each running `work` on the batches it is given.
    pub fn start<'scope, F>(scope: &'scope Scope<'scope, '_>, work: F) -> Self
    where
        I: 'scope,
        O: 'scope,
        F: Fn(I) -> O + Send + Copy + 'scope,
    {
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let mut to = Vec::with_capacity(workers);
        let mut from = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (in_tx, in_rx) = mpsc::sync_channel::<I>(2);
            let (out_tx, out_rx): (Sender<O>, _) = mpsc::channel();
            scope.spawn(move || {
                for batch in in_rx {
                    if out_tx.send(work(batch)).is_err() {
                        return;
                    }
                }
            });
            to.push(in_tx);
            from.push(out_rx);
        }
        Pipeline {
            to,
            from,
            sent: 0,
            received: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.sent - self.received
    }

    /// Hand a batch to the next worker; first, when `2 W` are in flight, wait for the
    /// oldest and give it to `out`.
    pub fn send(&mut self, batch: I, out: &mut dyn FnMut(O) -> bool) -> Result<bool, Broken> {
        let mut go = true;
        while go && self.in_flight() >= 2 * self.to.len() {
            go = out(self.next(true)?.ok_or(Broken)?);
        }
        let k = self.sent % self.to.len();
        self.to[k].send(batch).map_err(|_| Broken)?;
        self.sent += 1;
        Ok(go)
    }

    /// Give `out` every worked batch that is ready, in order, without waiting
    /// (`wait`: every batch in flight). Stops early when `out` says stop.
    pub fn collect(&mut self, wait: bool, out: &mut dyn FnMut(O) -> bool) -> Result<bool, Broken> {
        while self.in_flight() > 0 {
            match self.next(wait)? {
                Some(done) => {
                    if !out(done) {
                        return Ok(false);
                    }
                }
                None => break,
            }
        }
        Ok(true)
    }

    fn next(&mut self, wait: bool) -> Result<Option<O>, Broken> {
        let rx = &self.from[self.received % self.from.len()];
        let got = if wait {
            rx.recv().map_err(|_| Broken)?
        } else {
            match rx.try_recv() {
                Ok(done) => done,
                Err(mpsc::TryRecvError::Empty) => return Ok(None),
                Err(mpsc::TryRecvError::Disconnected) => return Err(Broken),
            }
        };
        self.received += 1;
        Ok(Some(got))
    }
}
