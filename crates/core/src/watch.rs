//! `watch`: alert rules evaluated over the letters a session holds — the dead-letter
//! **rate**, the **age** of the oldest unhandled letter, the **count**, a reason code
//! **never seen before**, and the **failed-again share** of the latest replay — per
//! group, each breach with its owner. Depth alone is a poor alarm (noisy when letters are
//! parked, blind when something deletes them as fast as they come); these are not.
//!
//! A rule is `[FILTER] CONDITION`: the filter language of `--filter`, then one of
//! `rate > N/min [for D]`, `oldest > AGE`, `count > N`, `new reason [for D]`,
//! `replay failed-again > X` (a share: `0.2` or `20%`). Only unhandled letters count
//! (open, or failed again after a replay): a discarded or replayed letter is handled.

use crate::filter::Filter;
use crate::grouping::Dim;
use crate::model::TriageState;
use crate::owners::Owners;
use crate::store::{LetterStore, RowId, NO_TIME};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// The window of `rate` and `new reason` when the rule names none.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// More than `per_min` letters a minute arrived over the last `window`.
    Rate { per_min: f64, window: Duration },
    /// The oldest unhandled letter is older than this.
    Oldest(Duration),
    /// The broker deletes the group's first letter within this (retention, TTL).
    Expires(Duration),
    /// More than this many unhandled letters.
    Count(u64),
    /// A group whose first letter arrived within the last `window` (or that a baseline
    /// does not list): a new failure mode.
    NewReason { window: Duration },
    /// The latest replay of this source: more than this share of its sent letters
    /// failed again.
    ReplayFailedAgain(f64),
    /// One user ran more than `max` transform dry-runs over this source within `window`:
    /// each dry-run tells one bit per letter of what its program saw (see
    /// docs/masking.md), so many in a row are worth a look.
    DryRuns { max: u64, window: Duration },
    /// More than this many dead letters held in a source queue on their way here
    /// (RabbitMQ at-least-once dead-lettering, see `awaiting`): one breach per queue.
    Held(u64),
}

/// The rule `watch` adds on a source where dead letters can be held upstream, unless
/// the operator wrote a `held` rule: a broken dead-letter route is an incident the
/// DLQ's own letters never show.
pub const HELD_RULE: &str = "held > 0";

/// The window of `dry-runs > N` when the rule names none.
pub const DRY_RUN_WINDOW: Duration = Duration::from_secs(3600);

/// One rule: what it watches, and what it is called.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub severity: String,
    pub text: String,
    pub filter: Filter,
    pub condition: Condition,
}

/// `12`, `0.2`, `20%` → a share.
fn share(s: &str) -> Option<f64> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.parse::<f64>().ok()? / 100.0,
        None => s.parse::<f64>().ok()?,
    };
    (v.is_finite() && (0.0..=1.0).contains(&v)).then_some(v)
}

fn duration(s: &str) -> Option<Duration> {
    let ms = crate::timefmt::parse_duration_ms(s)?;
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// `5/min`, `2/s`, `100/h` → letters per minute.
fn per_min(s: &str) -> Option<f64> {
    let (n, unit) = s.split_once('/')?;
    let n: f64 = n.parse().ok()?;
    let f = match unit {
        "s" | "sec" => 60.0,
        "min" | "m" => 1.0,
        "h" | "hour" => 1.0 / 60.0,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then_some(n * f)
}

impl Rule {
    /// Parse `[FILTER] CONDITION`. `name` and `severity` default to the text and `warning`.
    pub fn parse(text: &str, name: Option<&str>, severity: Option<&str>) -> Result<Rule, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let at = (0..words.len())
            .find(|&i| {
                matches!(
                    (words[i], words.get(i + 1).copied()),
                    ("rate" | "oldest" | "count", Some(">")) | ("expires", Some("<"))
                        | ("new", Some("reason"))
                        | ("replay", Some("failed-again"))
                        | ("dry-runs", Some(">"))
                        | ("held", Some(">"))
                )
            })
            .ok_or_else(|| {
                format!(
                    "rule `{}`: no condition — end it with `rate > N/min [for D]`, `oldest > AGE`, `count > N`, `expires < D`, `new reason`, `replay failed-again > X`, `dry-runs > N [for D]` or `held > N`",
                    crate::sanitize::clean(text)
                )
            })?;
        let filter = Filter::parse(&words[..at].join(" "))
            .map_err(|e| format!("rule `{}`: {e}", crate::sanitize::clean(text)))?;
        if filter.needs_letters() {
            return Err(format!(
                "rule `{}`: {}",
                crate::sanitize::clean(text),
                crate::filter::PAYLOAD_TERMS_NEED_LETTERS
            ));
        }
        let condition = condition(text, &words[at..])?;
        Ok(Rule {
            name: name.unwrap_or(text).to_string(),
            severity: severity.unwrap_or("warning").to_string(),
            text: text.to_string(),
            filter,
            condition,
        })
    }
}

/// The condition of rule `text` (its words from the condition on): `rate > N/min [for
/// D]`, `oldest > AGE`, `expires < D`, `count > N`, `new reason [for D]`, `dry-runs > N
/// [for D]`, `replay failed-again > X`.
fn condition(text: &str, rest: &[&str]) -> Result<Condition, String> {
    let bad = |why: &str| Err(format!("rule `{}`: {why}", crate::sanitize::clean(text)));
    let window = |tail: &[&str]| -> Result<Duration, String> {
        match tail {
            [] => Ok(DEFAULT_WINDOW),
            ["for", d] => duration(d).filter(|d| !d.is_zero()).ok_or_else(|| {
                format!(
                    "rule `{}`: `for {d}`: use e.g. 5m, 1h",
                    crate::sanitize::clean(text)
                )
            }),
            _ => Err(format!(
                "rule `{}`: unexpected `{}` after the condition",
                crate::sanitize::clean(text),
                crate::sanitize::clean(&tail.join(" "))
            )),
        }
    };
    Ok(match rest {
        ["rate", ">", n, tail @ ..] => match per_min(n) {
            Some(per_min) => Condition::Rate {
                per_min,
                window: window(tail)?,
            },
            None => return bad("rate takes N/min (or N/s, N/h), e.g. `rate > 5/min for 5m`"),
        },
        ["oldest", ">", age] => match duration(age) {
            Some(d) => Condition::Oldest(d),
            None => return bad("oldest takes an age, e.g. `oldest > 30m`"),
        },
        ["expires", "<", d] => match duration(d) {
            Some(d) => Condition::Expires(d),
            None => return bad("expires takes a duration, e.g. `expires < 6h`"),
        },
        ["count", ">", n] => match n.parse() {
            Ok(n) => Condition::Count(n),
            Err(_) => return bad("count takes a number, e.g. `count > 100`"),
        },
        ["new", "reason", tail @ ..] => Condition::NewReason {
            window: window(tail)?,
        },
        ["dry-runs", ">", n, tail @ ..] => match n.parse() {
            Ok(max) => Condition::DryRuns {
                max,
                window: match tail {
                    [] => DRY_RUN_WINDOW,
                    t => window(t)?,
                },
            },
            Err(_) => return bad("dry-runs takes a number, e.g. `dry-runs > 20 for 1h`"),
        },
        ["held", ">", n] => match n.parse() {
            Ok(n) => Condition::Held(n),
            Err(_) => return bad("held takes a number, e.g. `held > 0`"),
        },
        ["replay", "failed-again", ">", x] => match share(x) {
            Some(x) => Condition::ReplayFailedAgain(x),
            None => return bad("failed-again takes a share: 0.2 or 20%"),
        },
        _ => return bad("cannot read the condition"),
    })
}

/// One group's figures under one rule.
#[derive(Debug, Clone, Default)]
pub struct GroupFigures {
    pub count: u64,
    /// Also when the group's first letter arrived (`new reason`).
    pub oldest_ms: i64,
    /// Letters that arrived within the rule's window.
    pub recent: u64,
    /// A row to name as an example (the newest).
    pub example: Option<RowId>,
    pub newest_ms: i64,
    /// When the broker deletes the group's first letter ([`NO_TIME`]: no limit known).
    pub expires_ms: i64,
    pub rows: Vec<RowId>,
}

/// A rule that holds for a group, with its figures in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    pub rule: String,
    pub severity: String,
    pub group: String,
    /// The measured value and the threshold, in words (`12.4/min over 5m`, `> 5/min`).
    pub value: String,
    pub threshold: String,
    pub count: u64,
    pub oldest_s: Option<i64>,
    pub owner: String,
    /// A letter of the group, its id masked.
    pub example: Option<String>,
}

/// What a replay left, for `replay failed-again`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayFigures {
    pub id: String,
    pub sent: u64,
    pub failed_again: u64,
}

/// Letters are grouped by `dim` (reason by default) for every rule.
pub struct Watch {
    pub rules: Vec<Rule>,
    pub dim: Dim,
    pub owners: Owners,
    /// Group labels of a baseline (`--baseline FILE`): `new reason` is any other.
    pub baseline: Option<HashSet<String>>,
    /// Breaches in force after the last evaluation, by (rule, group).
    active: BTreeMap<(String, String), Breach>,
    /// Retention in ms by container symbol (`expires < D`).
    retention: std::sync::Arc<foldhash::HashMap<crate::store::Sym, i64>>,
    /// Transform dry-runs over this source: who, when (ms) — `dry-runs > N`.
    dry_runs: Vec<(String, i64)>,
    /// Dead letters held upstream, as the broker last said — `held > N`.
    held: Vec<crate::awaiting::Awaiting>,
}

/// What one evaluation found: every breach in force, and what changed since the last.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    pub breaches: Vec<Breach>,
    pub new: Vec<Breach>,
    pub recovered: Vec<Breach>,
}

fn unhandled(s: TriageState) -> bool {
    matches!(s, TriageState::Open | TriageState::FailedAgain)
}

impl Watch {
    pub fn new(
        rules: Vec<Rule>,
        dim: Dim,
        owners: Owners,
        baseline: Option<HashSet<String>>,
    ) -> Self {
        Watch {
            rules,
            dim,
            owners,
            baseline,
            active: BTreeMap::new(),
            retention: Default::default(),
            dry_runs: Vec::new(),
            held: Vec::new(),
        }
    }

    /// The transform dry-runs over this source as the ledger lists them (actor, time
    /// in ms), for `dry-runs > N`.
    pub fn set_dry_runs(&mut self, runs: Vec<(String, i64)>) {
        self.dry_runs = runs;
    }

    /// What the broker holds upstream now (see `awaiting`), for `held > N`.
    pub fn set_held(&mut self, held: Vec<crate::awaiting::Awaiting>) {
        self.held = held;
    }

    /// Whether a rule watches what is held upstream.
    pub fn watches_held(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.condition, Condition::Held(_)))
    }

    /// The containers' retention (see `retention::by_symbol`), for `expires < D`.
    pub fn set_retention(
        &mut self,
        by_container: std::sync::Arc<foldhash::HashMap<crate::store::Sym, i64>>,
    ) {
        self.retention = by_container;
    }

    /// Figures per group of the letters `rule` selects, with `window` for arrivals.
    fn figures(
        &self,
        rule: &mut Rule,
        store: &LetterStore,
        now_ms: i64,
        window: Duration,
    ) -> HashMap<u32, GroupFigures> {
        let since = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
        let mut out: HashMap<u32, GroupFigures> = HashMap::new();
        for (i, r) in store.rows().iter().enumerate() {
            if !unhandled(r.state) || !rule.filter.matches(store, r, now_ms) {
                continue;
            }
            let g = out
                .entry(self.dim.value(r, now_ms))
                .or_insert(GroupFigures {
                    oldest_ms: NO_TIME,
                    newest_ms: NO_TIME,
                    expires_ms: NO_TIME,
                    ..GroupFigures::default()
                });
            g.count += 1;
            g.rows.push(i as RowId);
            if r.at_ms != NO_TIME {
                if g.oldest_ms == NO_TIME || r.at_ms < g.oldest_ms {
                    g.oldest_ms = r.at_ms;
                }
                if let Some(keep) = self.retention.get(&r.container) {
                    let at = r.at_ms.saturating_add(*keep);
                    if g.expires_ms == NO_TIME || at < g.expires_ms {
                        g.expires_ms = at;
                    }
                }
                if r.at_ms > since {
                    g.recent += 1;
                }
                if g.newest_ms == NO_TIME || r.at_ms >= g.newest_ms {
                    g.newest_ms = r.at_ms;
                    g.example = Some(i as RowId);
                }
            } else if g.example.is_none() {
                g.example = Some(i as RowId);
            }
        }
        out
    }

    /// Evaluate every rule at `now_ms`. `mask` masks a letter id for the example.
    pub fn evaluate(
        &mut self,
        store: &LetterStore,
        now_ms: i64,
        replay: Option<&ReplayFigures>,
        mask: &dyn Fn(&str) -> String,
    ) -> Evaluation {
        let mut breaches = Vec::new();
        let mut rules = std::mem::take(&mut self.rules);
        for rule in rules.iter_mut() {
            if let Condition::ReplayFailedAgain(x) = rule.condition {
                breaches.extend(replay_breach(rule, x, replay));
                continue;
            }
            if let Condition::DryRuns { max, window } = rule.condition {
                breaches.extend(dry_run_breaches(rule, max, window, &self.dry_runs, now_ms));
                continue;
            }
            if let Condition::Held(max) = rule.condition {
                breaches.extend(held_breaches(rule, max, &self.held));
                continue;
            }
            let window = match rule.condition {
                Condition::Rate { window, .. } | Condition::NewReason { window } => window,
                _ => DEFAULT_WINDOW,
            };
            let figures = self.figures(rule, store, now_ms, window);
            let mut keys: Vec<&u32> = figures.keys().collect();
            keys.sort_by_key(|k| std::cmp::Reverse(figures[*k].count));
            for key in keys {
                let g = &figures[key];
                let label = match self.dim.label(store, *key) {
                    l if l.is_empty() => "(none)".to_string(),
                    l => crate::sanitize::clean(&l),
                };
                let age_s = (g.oldest_ms != NO_TIME).then(|| (now_ms - g.oldest_ms) / 1000);
                let Some((value, threshold)) = self.hit(&rule.condition, g, &label, age_s, now_ms)
                else {
                    continue;
                };
                let (owner, _) = crate::owners::owners_of(
                    &self.owners,
                    store,
                    g.rows.iter().filter_map(|r| store.row(*r)),
                );
                breaches.push(Breach {
                    rule: rule.name.clone(),
                    severity: rule.severity.clone(),
                    group: label,
                    value,
                    threshold,
                    count: g.count,
                    oldest_s: age_s,
                    owner,
                    example: g
                        .example
                        .and_then(|r| store.row(r))
                        .map(|r| crate::sanitize::clean(&mask(store.id(r)))),
                });
            }
        }
        self.rules = rules;
        self.transitions(breaches)
    }

    /// Whether a group breaches a condition: what it measured, and the threshold.
    fn hit(
        &self,
        condition: &Condition,
        g: &GroupFigures,
        label: &str,
        age_s: Option<i64>,
        now_ms: i64,
    ) -> Option<(String, String)> {
        let age = |a: i64| crate::timefmt::format_age_ms(a * 1000);
        match condition {
            Condition::Rate { per_min, window } => {
                let minutes = window.as_secs_f64() / 60.0;
                let rate = g.recent as f64 / minutes;
                (rate > *per_min).then(|| {
                    (
                        format!("{rate:.1}/min over {}", short(*window)),
                        format!("> {per_min}/min"),
                    )
                })
            }
            Condition::Oldest(d) => age_s
                .filter(|a| *a > i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .map(|a| (format!("oldest {}", age(a)), format!("> {}", short(*d)))),
            Condition::Count(n) => {
                (g.count > *n).then(|| (format!("{} letters", g.count), format!("> {n}")))
            }
            Condition::Expires(d) => (g.expires_ms != NO_TIME
                && g.expires_ms - now_ms < i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .then(|| {
                (
                    format!(
                        "the broker deletes its first letter: {}",
                        crate::retention::expires_label(g.expires_ms, now_ms)
                    ),
                    format!("< {}", short(*d)),
                )
            }),
            Condition::NewReason { window } => {
                let new = match &self.baseline {
                    Some(b) => !b.contains(label),
                    None => {
                        g.oldest_ms != NO_TIME
                            && now_ms - g.oldest_ms
                                <= i64::try_from(window.as_millis()).unwrap_or(i64::MAX)
                    }
                };
                new.then(|| {
                    (
                        format!(
                            "new {}: first letter {} ago",
                            self.dim.name(),
                            age_s.map_or("?".into(), age)
                        ),
                        match &self.baseline {
                            Some(_) => "not in the baseline".to_string(),
                            None => format!("first seen within {}", short(*window)),
                        },
                    )
                })
            }
            // Judged on the ledger's figures, not per group (see `evaluate`).
            Condition::ReplayFailedAgain(_) | Condition::DryRuns { .. } | Condition::Held(_) => {
                None
            }
        }
    }

    /// Which breaches began and which ended since the last evaluation.
    fn transitions(&mut self, breaches: Vec<Breach>) -> Evaluation {
        let now: BTreeMap<(String, String), Breach> = breaches
            .iter()
            .map(|b| ((b.rule.clone(), b.group.clone()), b.clone()))
            .collect();
        let new = now
            .iter()
            .filter(|(k, _)| !self.active.contains_key(*k))
            .map(|(_, b)| b.clone())
            .collect();
        let recovered = self
            .active
            .iter()
            .filter(|(k, _)| !now.contains_key(*k))
            .map(|(_, b)| b.clone())
            .collect();
        self.active = now;
        Evaluation {
            breaches,
            new,
            recovered,
        }
    }
}

/// The latest replay's failed-again share over `x`.
fn replay_breach(rule: &Rule, x: f64, replay: Option<&ReplayFigures>) -> Option<Breach> {
    let r = replay.filter(|r| r.sent > 0)?;
    let share = r.failed_again as f64 / r.sent as f64;
    (share > x).then(|| Breach {
        rule: rule.name.clone(),
        severity: rule.severity.clone(),
        group: format!("replay {}", crate::sanitize::clean(&r.id)),
        value: format!(
            "{:.0}% failed again ({} of {})",
            share * 100.0,
            r.failed_again,
            r.sent
        ),
        threshold: format!("> {:.0}%", x * 100.0),
        count: r.sent,
        oldest_s: None,
        owner: String::new(),
        example: None,
    })
}

/// Source queues holding more than `max` dead letters on their way here, one breach each.
fn held_breaches(rule: &Rule, max: u64, held: &[crate::awaiting::Awaiting]) -> Vec<Breach> {
    held.iter()
        .filter(|a| a.messages > max)
        .map(|a| Breach {
            rule: rule.name.clone(),
            severity: rule.severity.clone(),
            group: format!("held in {}", crate::sanitize::clean(&a.queue)),
            value: a.describe(),
            threshold: format!("> {max}"),
            count: a.messages,
            oldest_s: None,
            owner: String::new(),
            example: None,
        })
        .collect()
}

/// Users with more than `max` dry-runs within `window` before `now_ms`, one breach each.
fn dry_run_breaches(
    rule: &Rule,
    max: u64,
    window: Duration,
    runs: &[(String, i64)],
    now_ms: i64,
) -> Vec<Breach> {
    let since = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
    let mut by_user: BTreeMap<&str, (u64, i64)> = BTreeMap::new();
    for (actor, at) in runs.iter().filter(|(_, at)| *at > since) {
        let e = by_user.entry(actor.as_str()).or_insert((0, *at));
        e.0 += 1;
        e.1 = e.1.min(*at);
    }
    by_user
        .into_iter()
        .filter(|(_, (n, _))| *n > max)
        .map(|(actor, (n, first))| Breach {
            rule: rule.name.clone(),
            severity: rule.severity.clone(),
            group: format!("dry-runs by {}", crate::sanitize::clean(actor)),
            value: format!("{n} dry-runs in {}", short(window)),
            threshold: format!("> {max}"),
            count: n,
            oldest_s: Some((now_ms - first) / 1000),
            owner: String::new(),
            example: None,
        })
        .collect()
}

/// `5m`, `1h`, `90s`.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{prepare_letter, Catalog};
    use crate::masking::Masker;
    use crate::model::RawLetter;
    use crate::owners::OwnerRule;

    const NOW: i64 = 1_764_500_000_000;

    /// `n` letters of `reason`, `minutes_ago` old each (one list entry per letter).
    fn store(groups: &[(&str, &str, &[i64])]) -> LetterStore {
        let masker = Masker::with_key(vec![1]);
        let mut c = Catalog::new(masker.clone(), Vec::new());
        let mut k = 0;
        for (reason, event, ages) in groups {
            for m in *ages {
                k += 1;
                let body = format!(
                    r#"{{"message_id":"id-{k}","event_type":"{event}","failure":{{"reason_code":"{reason}"}}}}"#
                );
                let raw = RawLetter {
                    payload: body.into_bytes(),
                    timestamp: chrono::DateTime::from_timestamp_millis(NOW - m * 60_000),
                    ..RawLetter::default()
                };
                let (dl, preview) = prepare_letter(&masker, &[], raw);
                c.store.push(&dl, &preview);
            }
        }
        c.store
    }

    fn rule(t: &str) -> Rule {
        Rule::parse(t, None, None).expect(t)
    }

    #[test]
    fn rules_parse_and_bad_ones_say_why() {
        assert_eq!(
            rule("reason=amount_* rate > 5/min for 5m").condition,
            Condition::Rate {
                per_min: 5.0,
                window: Duration::from_secs(300)
            }
        );
        assert_eq!(
            rule("oldest > 30m").condition,
            Condition::Oldest(Duration::from_secs(1800))
        );
        assert_eq!(rule("count > 100").condition, Condition::Count(100));
        assert_eq!(
            rule("new reason").condition,
            Condition::NewReason {
                window: DEFAULT_WINDOW
            }
        );
        assert_eq!(
            rule("replay failed-again > 20%").condition,
            Condition::ReplayFailedAgain(0.2)
        );
        assert_eq!(
            rule("rate > 2/s").condition,
            Condition::Rate {
                per_min: 120.0,
                window: DEFAULT_WINDOW
            }
        );
        for (bad, why) in [
            ("reason=x", "no condition"),
            ("rate > fast", "N/min"),
            ("oldest > soon", "an age"),
            ("replay failed-again > 2", "share"),
            ("rate > 5/min for", "unexpected `for`"),
            ("count >", "cannot read"),
            ("rate > 5/min for 5m extra", "unexpected"),
            ("bogus=1 count > 3", "bogus"),
        ] {
            let e = Rule::parse(bad, None, None).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn breaches_per_group_with_owner_and_recoveries() {
        // amount: 12 letters in the last 5 min (2.4/min), oldest 4 min; lock: 2 letters,
        // oldest 2 h.
        let ages: Vec<i64> = (0..12).map(|i| i % 5).collect();
        let s = store(&[
            ("amount_not_a_number", "invoice.issue", &ages),
            ("lock_timeout", "ledger.post", &[120, 1]),
        ]);
        let owners = Owners(vec![OwnerRule {
            event: Some("invoice.*".into()),
            ..OwnerRule::new("team-billing")
        }]);
        let mut w = Watch::new(
            vec![
                rule("rate > 2/min for 5m"),
                rule("oldest > 30m"),
                rule("count > 10"),
                rule("new reason for 10m"),
            ],
            Dim::Reason,
            owners,
            None,
        );
        let mask = |id: &str| format!("<{id}>");
        let e = w.evaluate(&s, NOW, None, &mask);
        let got: Vec<(String, String, String)> = e
            .breaches
            .iter()
            .map(|b| (b.rule.clone(), b.group.clone(), b.owner.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "rate > 2/min for 5m".into(),
                    "amount_not_a_number".into(),
                    "team-billing".into()
                ),
                (
                    "oldest > 30m".into(),
                    "lock_timeout".into(),
                    "(unowned)".into()
                ),
                (
                    "count > 10".into(),
                    "amount_not_a_number".into(),
                    "team-billing".into()
                ),
                (
                    "new reason for 10m".into(),
                    "amount_not_a_number".into(),
                    "team-billing".into()
                ),
            ]
        );
        assert_eq!(e.breaches[0].value, "2.4/min over 5m");
        assert!(e.breaches[0]
            .example
            .as_deref()
            .is_some_and(|x| x.starts_with("<id-")));
        assert_eq!(e.new.len(), 4);
        // Nothing changed: nothing new, nothing recovered.
        let e = w.evaluate(&s, NOW, None, &mask);
        assert!(e.new.is_empty() && e.recovered.is_empty());
        // Ten minutes on, the rate and the newness have passed: those recover.
        let e = w.evaluate(&s, NOW + 10 * 60_000, None, &mask);
        let rec: Vec<&str> = e.recovered.iter().map(|b| b.rule.as_str()).collect();
        assert_eq!(rec, ["new reason for 10m", "rate > 2/min for 5m"]);
    }

    #[test]
    fn a_baseline_names_the_known_reasons_and_replays_are_judged_by_their_failures() {
        let s = store(&[("known", "e", &[500]), ("brand_new", "e", &[600])]);
        let mut w = Watch::new(
            vec![rule("new reason"), rule("replay failed-again > 20%")],
            Dim::Reason,
            Owners::default(),
            Some(HashSet::from(["known".to_string()])),
        );
        let r = ReplayFigures {
            id: "r-1".into(),
            sent: 10,
            failed_again: 3,
        };
        let e = w.evaluate(&s, NOW, Some(&r), &|i: &str| i.to_string());
        let groups: Vec<&str> = e.breaches.iter().map(|b| b.group.as_str()).collect();
        assert_eq!(groups, ["brand_new", "replay r-1"]);
        assert_eq!(e.breaches[1].value, "30% failed again (3 of 10)");
    }

    /// #56: many dry-runs by one user over a source (each tells a bit per letter).
    #[test]
    fn many_dry_runs_by_one_user_breach() {
        let r = rule("dry-runs > 2 for 10m");
        assert_eq!(
            r.condition,
            Condition::DryRuns {
                max: 2,
                window: Duration::from_secs(600)
            }
        );
        assert!(matches!(
            rule("dry-runs > 5").condition,
            Condition::DryRuns { window, .. } if window == DRY_RUN_WINDOW
        ));
        let mut w = Watch::new(vec![r], Dim::Reason, Owners::default(), None);
        let min = 60_000;
        w.set_dry_runs(vec![
            ("mallory".into(), NOW - min),
            ("mallory".into(), NOW - 2 * min),
            ("mallory".into(), NOW - 3 * min),
            ("mallory".into(), NOW - 30 * min),
            ("bob".into(), NOW - min),
            ("bob".into(), NOW - 2 * min),
        ]);
        let e = w.evaluate(&store(&[]), NOW, None, &|s: &str| s.to_string());
        assert_eq!(e.breaches.len(), 1, "{:?}", e.breaches);
        assert_eq!(e.breaches[0].group, "dry-runs by mallory");
        assert_eq!(e.breaches[0].count, 3);
    }

    /// #57: dead letters held in a quorum source queue (a broken dead-letter route)
    /// breach per queue, recover when the route drains them.
    #[test]
    fn letters_held_upstream_breach_per_queue_and_recover() {
        use crate::awaiting::{Awaiting, Route};
        let r = rule(HELD_RULE);
        assert_eq!(r.condition, Condition::Held(0));
        let mut w = Watch::new(vec![r], Dim::Reason, Owners::default(), None);
        assert!(w.watches_held());
        let held = |n: u64| Awaiting {
            queue: "orders".into(),
            messages: n,
            bytes: None,
            exchange: "dlx".into(),
            route: Route::Nowhere,
        };
        let s = store(&[]);
        let none = |i: &str| i.to_string();
        assert!(w.evaluate(&s, NOW, None, &none).breaches.is_empty());
        w.set_held(vec![held(3)]);
        let e = w.evaluate(&s, NOW, None, &none);
        assert_eq!(e.new.len(), 1);
        assert_eq!(e.new[0].group, "held in orders");
        assert_eq!(e.new[0].count, 3);
        assert!(
            e.new[0].value.contains("routes them to no queue"),
            "{}",
            e.new[0].value
        );
        w.set_held(vec![held(0)]);
        let e = w.evaluate(&s, NOW, None, &none);
        assert_eq!(e.recovered.len(), 1);
        let bad = Rule::parse("held > x", None, None).expect_err("not a number");
        assert!(bad.contains("held takes a number"), "{bad}");
    }
}
