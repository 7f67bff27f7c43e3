//! RabbitMQ dead lettering: `x-death` (array of tables, most recent first),
//! `x-first-death-*`, `x-last-death-*` (4.x only) and quorum `x-delivery-count`; and
//! RabbitMQ 4's `x-opt-deaths` (what AMQP 1.0 consumers see: the same entries with
//! `first-time` and `last-time`), read the same way where there is no `x-death`.

use super::{Candidates, Field};
use crate::model::{Convention, HeaderValue, Location, Origin, RawLetter};
use crate::timefmt;
use chrono::{DateTime, Utc};

/// One parsed `x-death` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct DeathEntry {
    pub queue: Option<String>,
    pub reason: Option<String>,
    pub count: Option<i64>,
    /// The latest death through this queue (`time`; `last-time` in `x-opt-deaths`).
    pub time: Option<DateTime<Utc>>,
    /// The first one (`first-time`, `x-opt-deaths` only).
    pub first_time: Option<DateTime<Utc>>,
    pub exchange: Option<String>,
    pub routing_keys: Vec<String>,
}

/// The header the deaths were read from: `x-death`, else `x-opt-deaths`.
fn deaths_header(raw: &RawLetter) -> Option<(&'static str, &[HeaderValue])> {
    ["x-death", "x-opt-deaths"]
        .into_iter()
        .find_map(|name| match raw.header(name) {
            Some(HeaderValue::Array(items)) => Some((name, items.as_slice())),
            _ => None,
        })
}

/// A death's time: an AMQP timestamp, epoch seconds or ms, or text.
fn death_time(v: &HeaderValue) -> Option<DateTime<Utc>> {
    match v {
        HeaderValue::Timestamp(s) => i64::try_from(*s).ok().and_then(timefmt::from_epoch_guess),
        other => other
            .as_i64_lenient()
            .and_then(timefmt::from_epoch_guess)
            .or_else(|| other.as_text().and_then(|t| timefmt::parse_timestamp(&t))),
    }
}

/// Parse `x-death` (or `x-opt-deaths`) leniently: strings may be long strings or bytes,
/// ints any width.
pub fn death_entries(raw: &RawLetter) -> Vec<DeathEntry> {
    let Some((_, items)) = deaths_header(raw) else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|v| matches!(v, HeaderValue::Table(_)))
        .map(|t| DeathEntry {
            queue: t.field("queue").and_then(HeaderValue::as_nonempty_text),
            reason: t.field("reason").and_then(HeaderValue::as_nonempty_text),
            count: t.field("count").and_then(HeaderValue::as_i64_lenient),
            time: t
                .field("time")
                .or_else(|| t.field("last-time"))
                .and_then(death_time),
            first_time: t.field("first-time").and_then(death_time),
            // An empty exchange name is the default exchange: meaningful, so keep "".
            exchange: t
                .field("exchange")
                .and_then(|v| v.as_text().map(|s| s.trim().to_string())),
            routing_keys: match t.field("routing-keys") {
                Some(HeaderValue::Array(keys)) => keys
                    .iter()
                    .filter_map(HeaderValue::as_nonempty_text)
                    .collect(),
                Some(other) => other.as_nonempty_text().into_iter().collect(),
                None => Vec::new(),
            },
        })
        .collect()
}

pub(super) fn apply(raw: &RawLetter, c: &mut Candidates) {
    let conv = Convention::RabbitMqDeath;
    let deaths = death_entries(raw);
    let from = deaths_header(raw).map_or("x-death", |(name, _)| name);
    let text = |name: &str| raw.header(name).and_then(HeaderValue::as_nonempty_text);
    let first_queue = text("x-first-death-queue");

    // The original publish: the entry for x-first-death-queue, else the oldest entry.
    let origin_idx = first_queue
        .as_ref()
        .and_then(|q| deaths.iter().position(|d| d.queue.as_ref() == Some(q)))
        .or_else(|| deaths.len().checked_sub(1));
    if let Some(i) = origin_idx {
        let d = &deaths[i];
        if let Some(exchange) = d.exchange.clone() {
            c.offer_origin(
                Origin::Amqp {
                    exchange,
                    routing_keys: d.routing_keys.clone(),
                    queue: d.queue.clone(),
                },
                &conv,
                death_location(from, i, &ORIGIN_AT, " exchange + routing-keys"),
            );
        }
    }
    if let Some(d) = deaths.first() {
        if let Some(reason) = &d.reason {
            c.offer_text(Field::DeathReason, reason, &conv, || {
                death_location(from, 0, &REASON_AT, ".reason")
            });
        }
        if let Some(t) = d.time {
            let at = death_location(from, 0, &TIME_AT, ".time");
            c.offer_time(Field::DeadLetteredAt, t, &conv, at);
        }
        if let Some(n) = d.count.and_then(|n| u32::try_from(n).ok()) {
            c.offer_attempt(n, &conv, death_location(from, 0, &COUNT_AT, ".count"));
        }
    }
    offer_first_and_last(&deaths, from, c, &conv);
    // Summary headers when x-death itself is missing or was stripped.
    for (header, field, location) in [
        (
            "x-last-death-reason",
            Field::DeathReason,
            "header x-last-death-reason",
        ),
        (
            "x-first-death-reason",
            Field::DeathReason,
            "header x-first-death-reason",
        ),
    ] {
        if let Some(v) = text(header) {
            c.offer_text(field, &v, &conv, || location.into());
        }
    }
    if let Some(q) = first_queue {
        let exchange = text("x-first-death-exchange").unwrap_or_default();
        c.offer_origin(
            Origin::Amqp {
                exchange,
                routing_keys: Vec::new(),
                queue: Some(q),
            },
            &conv,
            "headers x-first-death-queue / x-first-death-exchange",
        );
    }
}

/// The earliest and the latest death of the letter, whichever entries they are.
fn offer_first_and_last(
    deaths: &[DeathEntry],
    from: &'static str,
    c: &mut Candidates,
    conv: &Convention,
) {
    // `x-opt-deaths` says when each queue first dead-lettered the message too.
    let firsts = deaths.iter().enumerate().filter_map(|(i, d)| {
        d.first_time
            .map(|t| (i, t, ".first-time"))
            .or(d.time.map(|t| (i, t, ".time")))
    });
    if let Some((i, t, suffix)) = firsts.min_by_key(|(_, t, _)| *t) {
        let at = match suffix {
            ".time" => death_location(from, i, &TIME_AT, suffix),
            _ => format!("{from}[{i}]{suffix}").into(),
        };
        c.offer_time(Field::FirstFailedAt, t, conv, at);
    }
    let lasts = deaths
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.time.map(|t| (i, t)));
    if let Some((i, t)) = lasts.max_by_key(|(_, t)| *t) {
        let at = death_location(from, i, &TIME_AT, ".time");
        c.offer_time(Field::LastFailedAt, t, conv, at);
    }
}

/// Locations of the first `x-death` entries, which are nearly all there are.
const TIME_AT: [&str; 4] = [
    "x-death[0].time",
    "x-death[1].time",
    "x-death[2].time",
    "x-death[3].time",
];
const REASON_AT: [&str; 4] = [
    "x-death[0].reason",
    "x-death[1].reason",
    "x-death[2].reason",
    "x-death[3].reason",
];
const COUNT_AT: [&str; 4] = [
    "x-death[0].count",
    "x-death[1].count",
    "x-death[2].count",
    "x-death[3].count",
];
const ORIGIN_AT: [&str; 4] = [
    "x-death[0] exchange + routing-keys",
    "x-death[1] exchange + routing-keys",
    "x-death[2] exchange + routing-keys",
    "x-death[3] exchange + routing-keys",
];

/// `x-death[i]<suffix>`: static for the first entries, formatted beyond them and for
/// `x-opt-deaths` (`x-opt-deaths[0].last-time`: its `time` is the last death's).
fn death_location(from: &str, i: usize, first: &[&'static str; 4], suffix: &str) -> Location {
    match (from, first.get(i)) {
        ("x-death", Some(s)) => Location::Borrowed(s),
        ("x-death", None) => format!("x-death[{i}]{suffix}").into(),
        (other, _) if suffix == ".time" => format!("{other}[{i}].last-time").into(),
        (other, _) => format!("{other}[{i}]{suffix}").into(),
    }
}

/// Spring AMQP's `RepublishMessageRecoverer` and Spring Cloud Stream's RabbitMQ binder
/// publish straight to the DLQ (no `x-death`): where the letter was first published is in
/// `x-original-exchange` / `x-original-routingKey`.
pub(super) fn spring_amqp_origin(raw: &RawLetter, c: &mut Candidates) {
    let text = |name: &str| raw.header(name).and_then(HeaderValue::as_nonempty_text);
    let Some(exchange) = text("x-original-exchange") else {
        return;
    };
    c.offer_origin(
        Origin::Amqp {
            exchange,
            routing_keys: text("x-original-routingKey").into_iter().collect(),
            queue: None,
        },
        &Convention::SpringStream,
        "headers x-original-exchange / x-original-routingKey",
    );
}
