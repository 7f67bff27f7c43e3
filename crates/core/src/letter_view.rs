//! The facts shown about one letter, once, for every front end: `show` prints them, the
//! TUI's failure tab draws them. Each fact is a label, a display value (masked where it
//! can carry data; every extracted field already passed the detectors) and where it came
//! from. Front ends only lay them out and sanitize for their terminal.

use crate::masking::Masker;
use crate::model::{DeadLetter, Sourced};
use crate::prepared::LetterState;
use crate::timefmt::format_age_ms;
use chrono::{DateTime, SecondsFormat, Utc};

/// One fact: `label  value  ← provenance`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub label: &'static str,
    pub value: String,
    /// Which convention and header or JSON path gave it, when it was extracted.
    pub from: Option<String>,
}

/// A letter's facts in three sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterFacts {
    /// Id, where it sits, key, when it was dead-lettered, its ledger state.
    pub identity: Vec<Fact>,
    pub failure: Vec<Fact>,
    /// Empty when the letter carries no event metadata.
    pub event: Vec<Fact>,
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `2026-11-29T17:59:20Z (40s ago)`.
fn when(t: DateTime<Utc>, now_ms: i64) -> String {
    let age = format_age_ms(now_ms - t.timestamp_millis());
    match age.as_str() {
        "now" | "future" => format!("{} ({age})", rfc(t)),
        _ => format!("{} ({age} ago)", rfc(t)),
    }
}

fn fact(label: &'static str, value: String, from: Option<String>) -> Fact {
    Fact { label, value, from }
}

fn text(out: &mut Vec<Fact>, label: &'static str, v: &Option<Sourced<String>>, m: Option<&Masker>) {
    if let Some(s) = v {
        let value = m.map_or_else(|| s.value.clone(), |m| m.mask_text(&s.value));
        out.push(fact(label, value, Some(s.from.to_string())));
    }
}

/// RabbitMQ's delivery counters, both where present: since 4.3 `x-delivery-count` counts
/// the returns a consumer failed (`basic.reject`; `basic.nack` does not) and
/// `x-acquired-count` every return. Numbers only: the headers are untrusted.
fn deliveries(raw: &crate::model::RawLetter) -> Option<Fact> {
    let n = |name: &str| raw.header(name).and_then(|v| v.as_i64_lenient());
    let (failed, acquired) = (n("x-delivery-count"), n("x-acquired-count"));
    let value = match (failed, acquired) {
        (Some(f), Some(a)) => format!("{f} failed returns · acquired {a} times"),
        (Some(f), None) => format!("{f} (x-delivery-count)"),
        (None, Some(a)) => format!("acquired {a} times"),
        (None, None) => return None,
    };
    Some(fact(
        "deliveries",
        value,
        Some("headers x-delivery-count / x-acquired-count (RabbitMQ)".into()),
    ))
}

fn time(out: &mut Vec<Fact>, label: &'static str, v: &Option<Sourced<DateTime<Utc>>>) {
    if let Some(t) = v {
        out.push(fact(label, rfc(t.value), Some(t.from.to_string())));
    }
}

impl LetterFacts {
    /// Build the facts of `dl` (prepared by the session: extracted fields masked) as of
    /// `now_ms`, with its ledger `state`.
    pub fn of(dl: &DeadLetter, masker: &Masker, state: &LetterState, now_ms: i64) -> Self {
        let mut identity = vec![fact(
            "id",
            dl.id.value.0.clone(),
            Some(dl.id.from.to_string()),
        )];
        if let Some(c) = &dl.raw.coords {
            identity.push(fact("coords", c.to_string(), None));
        }
        if let Some(k) = dl.readable_key() {
            identity.push(fact("key", masker.mask_text(&k), None));
        }
        if let Some(t) = &dl.dead_lettered_at {
            identity.push(fact(
                "dead-lettered",
                when(t.value, now_ms),
                Some(t.from.to_string()),
            ));
        }
        identity.push(fact("state", state.describe(), None));
        if dl.replay_count > 0 {
            identity.push(fact(
                "replayed",
                format!("{} time(s) by dlq-triage", dl.replay_count),
                None,
            ));
        }
        let f = &dl.failure;
        let mut failure = Vec::new();
        text(&mut failure, "reason", &f.reason_code, None);
        text(&mut failure, "detail", &f.reason_detail, Some(masker));
        text(&mut failure, "exception", &f.exception_type, None);
        text(&mut failure, "death reason", &f.death_reason, None);
        text(&mut failure, "consumer", &f.consumer, None);
        text(&mut failure, "version", &f.consumer_version, None);
        if let Some(a) = &f.attempt {
            failure.push(fact(
                "attempt",
                a.value.to_string(),
                Some(a.from.to_string()),
            ));
        }
        if let Some(d) = deliveries(&dl.raw) {
            failure.push(d);
        }
        time(&mut failure, "first failed", &f.first_failed_at);
        time(&mut failure, "last failed", &f.last_failed_at);
        if let Some(o) = &f.origin {
            failure.push(fact(
                "origin",
                o.value.to_string(),
                Some(o.from.to_string()),
            ));
        }
        let e = &dl.event;
        let mut event = Vec::new();
        text(&mut event, "event type", &e.event_type, None);
        text(&mut event, "schema", &e.schema_version, None);
        text(&mut event, "correlation", &e.correlation_id, Some(masker));
        time(&mut event, "occurred at", &e.occurred_at);
        text(&mut event, "payload ref", &e.payload_ref, Some(masker));
        LetterFacts {
            identity,
            failure,
            event,
        }
    }

    /// The facts the index still holds of a letter whose bytes are gone (a held RabbitMQ
    /// delivery past the payload budget): what grouped and listed it, without
    /// provenance, headers or payload.
    pub fn of_row(
        store: &crate::store::LetterStore,
        r: &crate::store::Row,
        masker: &Masker,
        state: &LetterState,
        now_ms: i64,
    ) -> Self {
        let mut identity = vec![fact("id", store.id(r).to_string(), None)];
        let coords = store.coords_label(r);
        if !coords.is_empty() {
            identity.push(fact("coords", coords, None));
        }
        if !store.key(r).is_empty() {
            identity.push(fact("key", masker.mask_text(store.key(r)), None));
        }
        let at = Some(r.at_ms).filter(|ms| *ms != crate::store::NO_TIME);
        if let Some(t) = at.and_then(DateTime::from_timestamp_millis) {
            identity.push(fact("dead-lettered", when(t, now_ms), None));
        }
        identity.push(fact("state", state.describe(), None));
        let mut failure = Vec::new();
        let sym = |out: &mut Vec<Fact>, label: &'static str, s: crate::store::Sym| {
            let v = store.sym(s);
            if !v.is_empty() {
                out.push(fact(label, v.to_string(), None));
            }
        };
        sym(&mut failure, "reason", r.reason);
        sym(&mut failure, "exception", r.exception);
        sym(&mut failure, "consumer", r.consumer);
        sym(&mut failure, "version", r.version);
        if r.attempt > 0 {
            failure.push(fact("attempt", r.attempt.to_string(), None));
        }
        sym(&mut failure, "origin", r.origin);
        let mut event = Vec::new();
        sym(&mut event, "event type", r.event);
        sym(&mut event, "schema", r.schema);
        LetterFacts {
            identity,
            failure,
            event,
        }
    }
}

/// One ledger entry of a letter's history, in words: `at · actor · what`. Replay steps
/// read as what happened to the letter; other entries keep their action and detail.
/// Sanitized: details quote letter data (reasons, locations).
/// A letter's headers and AMQP properties as shown: names masked (a name can carry data
/// too), values through the header rules' masking, both sanitized for a terminal line.
/// The widest name is what both front ends align the values to.
pub fn header_rows(dl: &DeadLetter, masker: &Masker) -> Vec<(String, String)> {
    let line = |s: &str| crate::sanitize::line(s, 300);
    let headers = dl.raw.headers.iter().map(|h| {
        (
            line(&masker.mask_text(&h.name)),
            line(&masker.mask_header(&h.name, &h.value)),
        )
    });
    let properties = dl
        .raw
        .properties
        .iter()
        .map(|(k, v)| (line(&format!("(amqp) {k}")), line(&masker.mask_text(v))));
    headers.chain(properties).collect()
}

/// The column width for [`header_rows`]' names: the widest, up to `most`.
pub fn name_width(rows: &[(String, String)], most: usize) -> usize {
    rows.iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .min(most)
}

pub fn history_line(e: &crate::journal::AuditEntry) -> String {
    let d: serde_json::Value = serde_json::from_str(&e.detail).unwrap_or_default();
    let s = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
    let what = match e.action.as_str() {
        "replay" => format!(
            "replayed by {} → {} (confirmed)",
            s("replay"),
            s("published")
        ),
        "replay-applied" => format!("its DLQ copy settled ({})", s("how")),
        "replay-failed-again" => format!("failed again: {}", s("note")),
        "replay-refused" => format!("the broker refused the replay: {}", s("note")),
        "replay-held-back" => format!("held back: {}", s("note")),
        _ => format!("{} · {}", e.action, e.detail),
    };
    crate::sanitize::clean(&format!("{} · {} · {what}", e.at, e.actor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::extract_masked;
    use crate::model::{Header, HeaderValue, RawLetter};

    /// #57: both of RabbitMQ's counters are shown where the broker wrote them, as numbers
    /// only (an escape sequence in the header is never shown).
    #[test]
    fn both_delivery_counters_are_shown_where_present() {
        let m = Masker::with_key(vec![1]);
        let facts = |headers: Vec<Header>| {
            let raw = RawLetter {
                headers,
                payload: b"{}".to_vec(),
                ..RawLetter::default()
            };
            let dl = extract_masked(&m, &[], None, raw);
            LetterFacts::of(&dl, &m, &LetterState::of(None), 0)
                .failure
                .into_iter()
                .find(|f| f.label == "deliveries")
                .map(|f| f.value)
        };
        let h = |n: &str, v: &str| Header::new(n.to_string(), HeaderValue::text(v));
        assert_eq!(
            facts(vec![h("x-delivery-count", "2"), h("x-acquired-count", "5")]).as_deref(),
            Some("2 failed returns · acquired 5 times")
        );
        assert_eq!(
            facts(vec![h("x-delivery-count", "3")]).as_deref(),
            Some("3 (x-delivery-count)")
        );
        assert_eq!(facts(vec![h("x-delivery-count", "\u{1b}[31m9")]), None);
        assert_eq!(facts(vec![]), None);
    }

    #[test]
    fn facts_are_masked_sourced_and_carry_the_state() {
        let m = Masker::with_key(vec![1]);
        let raw = RawLetter {
            key: Some(b"jane@example.com".to_vec()),
            headers: vec![
                Header::new("x-reason-code", HeaderValue::text("card 4111111111111111")),
                Header::new("x-correlation-id", HeaderValue::text("jane@example.com")),
            ],
            payload: b"{}".to_vec(),
            ..RawLetter::default()
        };
        let dl = extract_masked(&m, &[], None, raw);
        let open = LetterState::of(None);
        let facts = LetterFacts::of(&dl, &m, &open, 0);
        let all: Vec<&Fact> = facts
            .identity
            .iter()
            .chain(&facts.failure)
            .chain(&facts.event)
            .collect();
        for f in &all {
            assert!(
                !f.value.contains("jane@") && !f.value.contains("4111111111111111"),
                "{f:?}"
            );
        }
        let reason = all.iter().find(|f| f.label == "reason").expect("reason");
        assert!(reason
            .from
            .as_deref()
            .is_some_and(|p| p.contains("x-reason-code")));
        assert!(all.iter().any(|f| f.label == "state" && f.value == "open"));
    }
}
