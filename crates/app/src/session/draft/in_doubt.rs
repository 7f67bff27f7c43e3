//! Letters in doubt before a plan is started: another stopped replay's letters read back
//! on the target for that replay's id (sent only if not there), this replay's own on a
//! resume, and where each Kafka target ends now for a later read-back.

use super::*;

impl ReplayDraft {
    /// Letters another, stopped replay had in flight (killed, lost, abandoned): sent only
    /// once their target is read back for that replay's id and they are not there — one
    /// found there is left out (the broker has it; `--resume` of that replay records it).
    /// Where the target cannot be read back (RabbitMQ, a failed read) they are left out
    /// as `may have been sent` unless `--resend-unconfirmed`. Without this a new replay
    /// of the same filter would send again whatever the dead one had in flight. What it
    /// sends of them is `plan.read_back`, which the journal's start checks.
    pub(super) fn settle_others_in_doubt(&mut self, session: &Session, plan: &mut Plan) {
        plan.read_back.clear();
        let doubts = match session.in_doubt_elsewhere(&plan.id) {
            Ok(d) => d,
            Err(e) => {
                // Unknown is not "none": leave out every letter rather than guess.
                let why = format!(
                    "the ledger's letters in doubt could not be read ({e}): nothing is sent"
                );
                leave_out_all(plan, "in-doubt-unread", why);
                return;
            }
        };
        type Doubts<'a> = HashMap<(String, String), Vec<&'a dlq_core::journal::InDoubt>>;
        let mut by_letter: Doubts<'_> = HashMap::new();
        for d in &doubts {
            by_letter
                .entry((d.letter_id.clone(), d.binding.clone()))
                .or_default()
                .push(d);
        }
        fn of<'a>(m: &'a Doubts<'a>, i: &Item) -> Option<&'a Vec<&'a dlq_core::journal::InDoubt>> {
            m.get(&(i.letter_id.clone(), i.binding.clone()))
        }
        let ours = |i: &Item| of(&by_letter, i);
        // The stopped replays this plan meets, each with its journaled detail.
        let replays: BTreeMap<&str, &serde_json::Value> = plan
            .items
            .iter()
            .filter_map(ours)
            .flatten()
            .map(|d| (d.replay_id.as_str(), &d.detail))
            .collect();
        if replays.is_empty() {
            return;
        }
        let in_doubt =
            |i: &Item, r: &str| ours(i).is_some_and(|ds| ds.iter().any(|d| d.replay_id == r));
        let (landed, unread) = self.landed(plan, &replays, &in_doubt);
        let (mut found, mut may, mut resent) = (Vec::new(), Vec::new(), Vec::new());
        let mut read_back = Vec::new();
        plan.items.retain(|i| {
            let Some(ds) = ours(i) else {
                return true;
            };
            if landed.contains_key(&i.location) {
                found.push(i.letter_id.clone());
                return false;
            }
            if unread.is_some() && !self.resend_unconfirmed {
                may.push(i.letter_id.clone());
                return false;
            }
            if unread.is_some() {
                resent.push(i.letter_id.clone());
            }
            read_back.extend(ds.iter().map(|d| (d.replay_id.clone(), d.seq)));
            true
        });
        plan.read_back = read_back;
        let named: Vec<&str> = replays.keys().copied().collect();
        say_in_doubt(
            plan,
            &format!("in stopped replay {}", named.join(", ")),
            found,
            "not sent again (its --resume records them)",
            may,
            unread,
            self.resend_unconfirmed.then_some(resent),
        );
    }

    /// Where the letters in doubt of each stopped replay landed, reading its target back
    /// for its id (Kafka, each replay fenced first), and why not all could be read.
    pub(super) fn landed(
        &mut self,
        plan: &Plan,
        replays: &BTreeMap<&str, &serde_json::Value>,
        in_doubt: &dyn Fn(&Item, &str) -> bool,
    ) -> (HashMap<String, String>, Option<String>) {
        let kafka = self.ports.kafka;
        let Some(log) = kafka_log(&mut self.ports.origin_log, kafka) else {
            return (
                HashMap::new(),
                Some("the target cannot be read back".to_string()),
            );
        };
        let (mut landed, mut unread) = (HashMap::new(), None);
        for (r, detail) in replays {
            if let Err(e) = self.ports.publisher.fence(r) {
                unread = Some(unfenced(r, &e));
                continue;
            }
            let (found, why) = read_back(log, plan, detail, r, &|i: &Item| in_doubt(i, r));
            landed.extend(found);
            unread = why.or(unread);
        }
        (landed, unread)
    }

    /// Where each Kafka target's partitions end now, journaled with the plan: a resume
    /// reads a stopped run's copies back from there. A target whose ends cannot be read
    /// is read back from its beginning (slower, never wrong).
    pub(super) fn mark_origin_ends(&mut self, plan: &mut Plan) {
        let kafka = self.ports.kafka;
        let Some(log) = kafka_log(&mut self.ports.origin_log, kafka) else {
            return;
        };
        let topics: BTreeSet<String> = plan
            .items
            .iter()
            .filter_map(|i| match &i.outgoing.target {
                Target::Kafka { topic } => Some(topic.clone()),
                Target::Amqp { .. } => None,
            })
            .collect();
        for t in topics {
            match log.ends(&t) {
                Ok(ends) => {
                    plan.origin_from.insert(t, ends);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "origin ends not read; a resume reads it whole")
                }
            }
        }
    }

    /// Letters the stopped run was `sending` (never confirmed) are checked, not guessed:
    /// on Kafka each is looked up in its target topic, read from the replay's start for
    /// this replay's id; a found one is left out of the plan (recorded as confirmed when
    /// the resume runs), one not found is sent. Where the target cannot be read back (a
    /// RabbitMQ exchange, or a read that failed) they are left out as `may have been
    /// sent` unless `--resend-unconfirmed`.
    pub(super) fn settle_in_doubt(&mut self, plan: &mut Plan) {
        let Some(resume) = self.resume.as_mut() else {
            return;
        };
        resume.found.clear();
        let doubt: HashSet<(&str, &str)> = resume
            .items
            .iter()
            .filter(|i| i.state == ItemState::Sending)
            .map(|i| (i.letter_id.as_str(), i.binding.as_str()))
            .collect();
        let in_doubt = |i: &Item| doubt.contains(&(i.letter_id.as_str(), i.binding.as_str()));
        if !plan.items.iter().any(in_doubt) {
            return;
        }
        let (landed, unread) = match self.ports.origin_log.as_deref_mut() {
            // Fenced first: what the stopped holder still had open is aborted, and it
            // cannot commit after the read.
            Some(log) if self.ports.kafka => match self.ports.publisher.fence(&plan.id) {
                Ok(()) => read_back(log, plan, &resume.row.detail, &plan.id, &in_doubt),
                Err(e) => (HashMap::new(), Some(unfenced(&plan.id, &e))),
            },
            _ => (
                HashMap::new(),
                Some("the target cannot be read back".to_string()),
            ),
        };
        let (mut found, mut may) = (Vec::new(), Vec::new());
        plan.items.retain(|i| {
            if !in_doubt(i) {
                return true;
            }
            if let Some(at) = landed.get(&i.location) {
                found.push(Found {
                    seq: i.seq,
                    letter_id: i.letter_id.clone(),
                    binding: i.binding.clone(),
                    location: i.location.clone(),
                    landed: at.clone(),
                });
                return false;
            }
            // Read to the end and not there: never sent. Unreadable: sent only if asked.
            if unread.is_none() || self.resend_unconfirmed {
                return true;
            }
            may.push(i.letter_id.clone());
            false
        });
        let resent: Vec<String> = plan
            .items
            .iter()
            .filter(|i| in_doubt(i))
            .map(|i| i.letter_id.clone())
            .collect();
        say_in_doubt(
            plan,
            "when the replay stopped",
            found.iter().map(|f| f.letter_id.clone()).collect(),
            "recorded as confirmed, not sent again",
            may,
            unread,
            self.resend_unconfirmed.then_some(resent),
        );
        resume.found = found;
    }
}

/// Why a stopped replay's target was not read back: its producer could not be fenced,
/// so what it had open might still be committed after the read.
pub(super) fn unfenced(replay_id: &str, e: &dlq_core::ports::SourceError) -> String {
    format!(
        "replay {}'s producer could not be fenced before the read ({e})",
        dlq_core::sanitize::clean(replay_id)
    )
}

/// What became of the letters a replay had in flight `whose` (`when the replay stopped`,
/// `in stopped replay …`), in the plan: found in the target (`found_note` says what of
/// them), left out as `may-have-been-sent`, or sent again as asked (`resent`, with
/// `--resend-unconfirmed`, where the target could not be read: `unread`).
pub(super) fn say_in_doubt(
    plan: &mut Plan,
    whose: &str,
    found: Vec<String>,
    found_note: &str,
    may: Vec<String>,
    unread: Option<String>,
    resent: Option<Vec<String>>,
) {
    let note = |kind, message: String, ids: Vec<String>| Warning {
        kind,
        message,
        count: ids.len(),
        examples: ids.into_iter().take(3).collect(),
    };
    plan.excluded
        .extend(found.iter().map(|id| (id.clone(), Why::FoundInTarget)));
    plan.excluded
        .extend(may.iter().map(|id| (id.clone(), Why::MayHaveBeenSent)));
    if !found.is_empty() {
        plan.warnings.push(note(
            "found-in-target",
            format!("in flight {whose} and found in the target: {found_note}"),
            found,
        ));
    }
    match (unread, resent) {
        (Some(why), _) if !may.is_empty() => plan.warnings.push(note(
            "may-have-been-sent",
            format!("in flight {whose} and may have been sent ({why}): left out; --resend-unconfirmed sends them again"),
            may,
        )),
        (Some(why), Some(ids)) if !ids.is_empty() => plan.warnings.push(note(
            "resend-unconfirmed",
            format!("in flight {whose}, sent again as asked (--resend-unconfirmed; {why}): a consumer may see them twice"),
            ids,
        )),
        _ => {}
    }
}

/// Where a journaled replay's target `topic` ended, partition by partition, when it was
/// planned (its detail's `origin_from`).
pub(super) fn origin_from(detail: &serde_json::Value, topic: &str) -> HashMap<i32, i64> {
    detail["origin_from"][topic]
        .as_object()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|(p, o)| Some((p.parse().ok()?, o.as_i64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Leave every letter of the plan out, saying why (`kind`), with a few of their ids.
pub(super) fn leave_out_all(plan: &mut Plan, kind: &'static str, message: String) {
    plan.warnings.push(Warning {
        kind,
        message,
        count: plan.items.len(),
        examples: plan
            .items
            .iter()
            .take(3)
            .map(|i| i.letter_id.clone())
            .collect(),
    });
    plan.items.clear();
}

/// Replayed copies of the in-doubt items (of replay `replay_id`, journaled with
/// `detail`) in their Kafka targets, by DLQ location, read from where the targets ended
/// when that replay was planned; and why not, if a target could not be read.
pub(super) fn read_back(
    log: &mut dyn OriginLog,
    plan: &Plan,
    detail: &serde_json::Value,
    replay_id: &str,
    in_doubt: &dyn Fn(&Item) -> bool,
) -> (HashMap<String, String>, Option<String>) {
    let topics: BTreeSet<&str> = plan
        .items
        .iter()
        .filter(|i| in_doubt(i))
        .filter_map(|i| match &i.outgoing.target {
            Target::Kafka { topic } => Some(topic.as_str()),
            Target::Amqp { .. } => None,
        })
        .collect();
    let mut landed = HashMap::new();
    let mut unread = None;
    for t in topics {
        match log.replayed(t, &origin_from(detail, t), replay_id) {
            Ok(found) => landed.extend(found),
            Err(e) => {
                unread = Some(format!(
                    "reading `{}` back failed: {e}",
                    dlq_core::sanitize::clean(t)
                ))
            }
        }
    }
    (landed, unread)
}

/// The target's log, where it can be read back (Kafka only).
pub(super) fn kafka_log(
    log: &mut Option<Box<dyn OriginLog + Send>>,
    kafka: bool,
) -> Option<&mut (dyn OriginLog + Send + 'static)> {
    log.as_deref_mut().filter(|_| kafka)
}
