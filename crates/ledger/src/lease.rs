//! One sender per replay, one live replay per letter: a running replay's lease and the
//! letters it claims while live. A lease is live while its holder lock is held (see
//! `holder`: the OS's or the server's, never a clock); each takeover bumps the lease's
//! epoch, and every journal write of the replay checks the epoch this process took, so
//! a holder that lost its lease stops at its next write. The pid, host and heartbeat
//! are for the messages (who holds it, since when).

use super::Ledger;
use crate::db::{Db, DbError, Row};
use crate::host::this_host;
use crate::p;
use chrono::{DateTime, Utc};
use dlq_core::journal::{Claim, InDoubt, JournalError};
use std::collections::{HashMap, HashSet};

/// A lease time as stored (RFC 3339, milliseconds, UTC).
fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The lease columns of a replay row.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub pid: Option<i64>,
    pub host: Option<String>,
    pub heartbeat_at: Option<String>,
}

impl Lease {
    /// The lease columns read at `at`, `at + 1`, `at + 2` (pid, host, heartbeat).
    pub fn from_row(r: &Row, at: usize) -> Result<Lease, DbError> {
        Ok(Lease {
            pid: r.get(at)?,
            host: r.get(at + 1)?,
            heartbeat_at: r.get(at + 2)?,
        })
    }

    pub(crate) fn held_by_us(&self) -> bool {
        self.pid == Some(i64::from(std::process::id()))
            && self.host.as_deref() == Some(this_host().as_str())
    }

    /// `pid N on HOST` of a live holder (its lock says so), and — only where this host
    /// can see that process, and only when it is stopped or stuck — what it is doing and
    /// what lets it go on. Never "not running" from `/proc`: a holder in another pid
    /// namespace, or another user's under `hidepid=2`, is invisible there, not gone.
    pub fn holder(&self) -> String {
        match self.pid {
            Some(pid) => {
                let host = self.host.as_deref().unwrap_or("?");
                match self.local_state() {
                    Some(state) => format!("pid {pid} on {host}, {state}"),
                    None => format!("pid {pid} on {host}"),
                }
            }
            None => "nobody (its lease was given up)".into(),
        }
    }

    /// What the holder is doing, only where this host can see it and only when it is
    /// stopped or stuck (see `host::state_words`).
    fn local_state(&self) -> Option<String> {
        let pid = self.pid?;
        (self.host.as_deref() == Some(this_host().as_str()))
            .then(|| crate::host::state_words(pid))
            .flatten()
    }

    /// `running on HOST (pid N) by USER, heartbeat 3 s ago`: who holds a live replay,
    /// from the ledger alone (the lease's columns and the ledger's clock `now`; without
    /// it, the heartbeat's time), true on every host that reads the ledger — never from
    /// this host's process table.
    pub fn running_words(&self, actor: &str, now: Option<DateTime<Utc>>) -> String {
        let host = self.host.as_deref().unwrap_or("?");
        let pid = self.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let at = self.heartbeat_at.as_deref();
        let beat = match (at.and_then(|h| DateTime::parse_from_rfc3339(h).ok()), now) {
            (Some(h), Some(now)) => {
                let ago = (now - h.with_timezone(&Utc)).num_seconds().max(0);
                format!(", heartbeat {ago} s ago")
            }
            _ => at.map(|h| format!(", heartbeat {h}")).unwrap_or_default(),
        };
        dlq_core::sanitize::clean(&format!("running on {host}{pid} by {actor}{beat}"))
    }

    /// Who sends it, for every message: `running on HOST (pid N) by USER, heartbeat 2 s
    /// ago` from the ledger, and — only where this host can see that process, and only
    /// when it is stopped or stuck — what it is doing and what lets it go on.
    pub fn sender_words(&self, actor: &str, now: Option<DateTime<Utc>>) -> String {
        if self.pid.is_none() {
            return "not being sent by anyone (its lease was given up)".into();
        }
        let said = self.running_words(actor, now);
        match self.local_state() {
            Some(state) => format!("{said}, {state}"),
            None => said,
        }
    }
}

impl Ledger {
    /// Why replay `id` (started by `actor`, its lease `lease`) is not this process's to
    /// write: who sends it, as the ledger says, on the ledger's clock.
    pub(crate) fn lease_refusal(
        &self,
        tx: &Db,
        lease: Lease,
        id: &str,
        actor: String,
    ) -> JournalError {
        let now = self.lease_clock(tx).ok();
        JournalError::LeaseHeld {
            replay_id: id.to_string(),
            holder: lease.sender_words(&actor, now),
            actor,
            heartbeat_at: lease.heartbeat_at.unwrap_or_default(),
        }
    }

    /// The clock leases are written and judged by: on a team ledger the **server's**
    /// (`clock_timestamp()`), so a bastion whose clock runs 30 s ahead neither takes a
    /// live holder's lease nor keeps a dead one alive; on a file ledger this machine's,
    /// the one every process that opens the file shares.
    pub(crate) fn lease_clock(&self, tx: &Db) -> Result<DateTime<Utc>, JournalError> {
        match tx {
            Db::Sqlite(_) => Ok(super::client_now()),
            Db::Pg(_) => {
                let at: String = tx
                    .one(
                        "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
                        p![],
                        |r| r.get(0),
                    )
                    .map_err(|e| self.err(e))?;
                DateTime::parse_from_rfc3339(&at)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| self.other(format!("the server's clock read `{at}`: {e}")))
            }
        }
    }

    /// Replay `id`'s lease, the actor who started it, its state and its lease epoch.
    pub(crate) fn lease_of(
        tx: &Db,
        id: &str,
    ) -> Result<Option<(Lease, String, String, i64)>, DbError> {
        tx.opt(
            "SELECT lease_pid, lease_host, heartbeat_at, actor, state, lease_epoch FROM replays WHERE id = ?1",
            p![id],
            |r| Ok((Lease::from_row(&r, 0)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
    }

    /// Whether replay `id`'s lease is held by a live process: its holder lock is held.
    pub(crate) fn alive(&self, tx: &Db, id: &str, lease: &Lease) -> Result<bool, JournalError> {
        Ok(lease.pid.is_some() && self.held(tx, id)?)
    }

    /// `alive`, asked once per replay over many of its rows (it reads the lock).
    fn alive_once(
        &self,
        tx: &Db,
        seen: &mut HashMap<String, bool>,
        id: &str,
        lease: &Lease,
    ) -> Result<bool, JournalError> {
        if let Some(a) = seen.get(id) {
            return Ok(*a);
        }
        let a = self.alive(tx, id, lease)?;
        seen.insert(id.to_string(), a);
        Ok(a)
    }

    /// Live and not this process's.
    pub(crate) fn held_by_another(
        &self,
        tx: &Db,
        id: &str,
        lease: &Lease,
    ) -> Result<bool, JournalError> {
        // Ours is what this ledger handle holds (its lock), not whatever this pid wrote:
        // two handles in one process are two holders, as two processes are.
        let ours = self.held_epoch(id).is_some();
        Ok(!ours && self.alive(tx, id, lease)?)
    }

    /// Take the lease of replay `id` for this process (inside the start or resume
    /// transaction): its holder lock, then a compare-and-swap of the row that bumps the
    /// lease epoch. `LeaseHeld` when a live process holds it.
    pub(crate) fn take_lease(&self, tx: &Db, id: &str) -> Result<(), JournalError> {
        if tx.is_pg() {
            return self.pg_take_lease(tx, id);
        }
        let now = self.lease_clock(tx)?;
        let Some((lease, actor, _, epoch)) = Self::lease_of(tx, id).map_err(|e| self.err(e))?
        else {
            return Err(self.other(format!("replay {id} is not in the ledger")));
        };
        if self.held_by_another(tx, id, &lease)? || !self.hold(tx, id, epoch + 1)? {
            return Err(self.lease_refusal(tx, lease, id, actor));
        }
        let taken = tx
            .execute(
                "UPDATE replays SET lease_pid = ?2, lease_host = ?3, heartbeat_at = ?4, lease_epoch = ?6 \
                 WHERE id = ?1 AND lease_epoch = ?5",
                p![id, std::process::id(), this_host(), stamp(now), epoch, epoch + 1],
            )
            .map_err(|e| self.err(e))?;
        if taken != 1 {
            return Err(self.lease_refusal(tx, lease, id, actor));
        }
        Ok(())
    }

    /// Every journal write of a running replay (sending, confirmed, settled, an item's
    /// state) checks, in its own transaction, that this process still holds the lease:
    /// a holder that was frozen past its lease and taken over stops at its next write —
    /// before its next publish — instead of writing into the taker's journal.
    pub(crate) fn fence(&self, tx: &Db, id: &str) -> Result<(), JournalError> {
        let Some((lease, actor, state, epoch)) = Self::lease_of(tx, id).map_err(|e| self.err(e))?
        else {
            return Err(self.other(format!("replay {id} is not in the ledger")));
        };
        if self.lost_hold(id) {
            return Err(self.other(format!(
                "this process lost its connection to the ledger, and with it its hold of replay \
                 {id}: it sends nothing more (`dlq-triage replay … --resume {id}` goes on, \
                 reading back what was in flight)"
            )));
        }
        if state == "running" && lease.held_by_us() && self.held_epoch(id) == Some(epoch) {
            return Ok(());
        }
        Err(self.lease_refusal(tx, lease, id, actor))
    }

    /// Renew this process's lease; `LeaseHeld` when another process took it over.
    pub fn replay_heartbeat(&mut self, id: &str) -> Result<(), JournalError> {
        let renewed = if self.db.is_pg() {
            u64::from(self.pg_heartbeat(id)?)
        } else {
            self.sqlite_heartbeat(id)?
        };
        if renewed == 1 {
            return Ok(());
        }
        let (lease, actor, _, _) = Self::lease_of(&self.db, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| self.other(format!("replay {id} is not in the ledger")))?;
        Err(self.lease_refusal(&self.db, lease, id, actor))
    }

    fn sqlite_heartbeat(&self, id: &str) -> Result<u64, JournalError> {
        let now = self.lease_clock(&self.db)?;
        Ok(match self.held_epoch(id) {
            Some(epoch) => self
                .db
                .execute(
                    "UPDATE replays SET heartbeat_at = ?4 WHERE id = ?1 AND lease_pid = ?2 AND lease_host = ?3 AND lease_epoch = ?5 AND state = 'running'",
                    p![id, std::process::id(), this_host(), stamp(now), epoch],
                )
                .map_err(|e| self.err(e))?,
            None => 0,
        })
    }

    /// Letters of `source` (of any source: `None`) held by live replays other than
    /// `except`.
    pub(crate) fn claims_in(
        &self,
        tx: &Db,
        source: Option<&str>,
        except: Option<&str>,
    ) -> Result<Vec<Claim>, JournalError> {
        type Held = (String, String, String, String, String, Lease);
        let rows: Vec<Held> = tx
            .map(
                "SELECT i.letter_id, i.binding, r.id, r.actor, r.started_at, r.lease_pid, r.lease_host, r.heartbeat_at \
                 FROM replays r JOIN replay_items i ON i.replay_id = r.id \
                 WHERE (CAST(?1 AS TEXT) IS NULL OR r.source = CAST(?1 AS TEXT)) AND r.state = 'running' AND r.lease_pid IS NOT NULL \
                 AND i.state IN ('planned', 'sending')",
                p![source],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        Lease::from_row(&r, 5)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        let mut live: HashMap<String, bool> = HashMap::new();
        let mut held: Vec<Held> = Vec::new();
        for row in rows {
            let (id, lease) = (&row.2, &row.5);
            if Some(id.as_str()) == except {
                continue;
            }
            if self.alive_once(tx, &mut live, id, lease)? {
                held.push(row);
            }
        }
        let ids: HashSet<&str> = held.iter().map(|r| r.2.as_str()).collect();
        let mut figures: HashMap<String, (usize, usize)> = HashMap::new();
        for id in ids {
            let f: (i64, i64) = tx
                .one(
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE state IN ('confirmed', 'settled')) FROM replay_items WHERE replay_id = ?1",
                    p![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| self.err(e))?;
            let n = |x: i64| usize::try_from(x).unwrap_or(0);
            figures.insert(id.to_string(), (n(f.1), n(f.0)));
        }
        // Who holds each replay, said once per replay (it reads the holder's state).
        let mut holders: HashMap<String, String> = HashMap::new();
        Ok(held
            .into_iter()
            .map(|(letter_id, binding, replay_id, actor, since, lease)| {
                let (confirmed, planned) = figures.get(&replay_id).copied().unwrap_or_default();
                let holder = holders
                    .entry(replay_id.clone())
                    .or_insert_with(|| lease.holder())
                    .clone();
                Claim {
                    letter_id,
                    binding,
                    holder,
                    replay_id,
                    actor,
                    since,
                    confirmed,
                    planned,
                }
            })
            .collect())
    }

    /// Letters of `source` held by live replays.
    pub fn claims(&self, source: &str) -> Result<Vec<Claim>, JournalError> {
        self.claims_in(&self.db, Some(source), None)
    }

    /// Letters of `source` in doubt in replays that are not live (see [`InDoubt`]).
    pub fn in_doubt(&self, source: &str) -> Result<Vec<InDoubt>, JournalError> {
        self.in_doubt_in(&self.db, Some(source), None)
    }

    /// `in_doubt` inside a transaction (of any source: `None`), leaving out replay
    /// `except`.
    pub(crate) fn in_doubt_in(
        &self,
        tx: &Db,
        source: Option<&str>,
        except: Option<&str>,
    ) -> Result<Vec<InDoubt>, JournalError> {
        type Row5 = (InDoubt, String, Lease);
        let rows: Vec<Row5> = tx
            .map(
                "SELECT i.letter_id, i.binding, r.id, i.seq, r.actor, r.detail, r.state, r.lease_pid, r.lease_host, r.heartbeat_at \
                 FROM replays r JOIN replay_items i ON i.replay_id = r.id \
                 WHERE (CAST(?1 AS TEXT) IS NULL OR r.source = CAST(?1 AS TEXT)) AND i.state = 'sending' \
                 AND i.seq BETWEEN 0 AND 4294967295",
                p![source],
                |r| {
                    let detail: String = r.get(5)?;
                    Ok((
                        InDoubt {
                            letter_id: r.get(0)?,
                            binding: r.get(1)?,
                            replay_id: r.get(2)?,
                            seq: r.get(3)?,
                            actor: r.get(4)?,
                            detail: serde_json::from_str(&detail).unwrap_or_default(),
                        },
                        r.get(6)?,
                        Lease::from_row(&r, 7)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        let mut live: HashMap<String, bool> = HashMap::new();
        let mut out = Vec::new();
        for (d, state, lease) in rows {
            if Some(d.replay_id.as_str()) == except {
                continue;
            }
            // A live sender's letters are claims, not doubts.
            let alive =
                state == "running" && self.alive_once(tx, &mut live, &d.replay_id, &lease)?;
            if !alive {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// What a plan about to be journaled may not include of `letters` (id, binding):
    /// letters other live replays hold, and letters replayed since it was planned (its
    /// view of the ledger was read before another process confirmed them). `Claimed`,
    /// inside the journaling transaction, when there are any. Under any source string
    /// that named the letters (see `follows`).
    pub(crate) fn refuse_taken(
        &self,
        tx: &Db,
        except: &str,
        letters: impl Iterator<Item = (String, String)>,
        detail: &serde_json::Value,
    ) -> Result<(), JournalError> {
        let wanted: HashSet<(String, String)> = letters.collect();
        let mut claims: Vec<Claim> = self
            .claims_in(tx, None, Some(except))?
            .into_iter()
            .filter(|c| wanted.contains(&(c.letter_id.clone(), c.binding.clone())))
            .collect();
        // Letters in flight in a stopped replay: only those this plan read back (or was
        // told to resend) may be sent.
        let read_back: HashSet<(String, u32)> = detail["read_back"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| {
                Some((
                    x[0].as_str()?.to_string(),
                    u32::try_from(x[1].as_u64()?).ok()?,
                ))
            })
            .collect();
        claims.extend(
            self.in_doubt_in(tx, None, Some(except))?
                .into_iter()
                .filter(|d| wanted.contains(&(d.letter_id.clone(), d.binding.clone())))
                .filter(|d| !read_back.contains(&(d.replay_id.clone(), d.seq)))
                .map(|d| d.as_claim()),
        );
        // A replay's decisions have the reason `replay ID` (see `replay_confirmed`).
        let replayed: Vec<(String, String)> = tx
            .map(
                "SELECT DISTINCT letter_id, binding FROM decisions \
                 WHERE kind = 'replay' AND binding IS NOT NULL AND reason != ?1",
                p![format!("replay {except}")],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?
            .into_iter()
            .filter(|l| wanted.contains(l))
            .collect();
        if claims.is_empty() && replayed.is_empty() {
            return Ok(());
        }
        Err(JournalError::Claimed { claims, replayed })
    }
}
