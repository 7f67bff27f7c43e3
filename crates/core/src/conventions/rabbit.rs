//! RabbitMQ dead lettering: `x-death` (array of tables, most recent first),
//! `x-first-death-*`, `x-last-death-*` (4.x only) and quorum `x-delivery-count`.

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
    pub time: Option<DateTime<Utc>>,
    pub exchange: Option<String>,
    pub routing_keys: Vec<String>,
}

/// Parse `x-death` leniently: strings may be long strings or bytes, ints any width.
pub fn death_entries(raw: &RawLetter) -> Vec<DeathEntry> {
    let Some(HeaderValue::Array(items)) = raw.header("x-death") else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|v| matches!(v, HeaderValue::Table(_)))
        .map(|t| DeathEntry {
            queue: t.field("queue").and_then(HeaderValue::as_nonempty_text),
            reason: t.field("reason").and_then(HeaderValue::as_nonempty_text),
            count: t.field("count").and_then(HeaderValue::as_i64_lenient),
            time: t.field("time").and_then(|v| match v {
                HeaderValue::Timestamp(s) => {
                    i64::try_from(*s).ok().and_then(timefmt::from_epoch_guess)
                }
                other => other
                    .as_i64_lenient()
                    .and_then(timefmt::from_epoch_guess)
                    .or_else(|| other.as_text().and_then(|t| timefmt::parse_timestamp(&t))),
            }),
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
                death_location(i, &ORIGIN_AT, " exchange + routing-keys"),
            );
        }
    }
    if let Some(d) = deaths.first() {
        if let Some(reason) = &d.reason {
            c.offer_text(Field::DeathReason, reason, &conv, || {
                "x-death[0].reason".into()
            });
        }
        if let Some(t) = d.time {
            c.offer_time(Field::DeadLetteredAt, t, &conv, "x-death[0].time");
        }
        if let Some(n) = d.count.and_then(|n| u32::try_from(n).ok()) {
            c.offer_attempt(n, &conv, "x-death[0].count");
        }
    }
    offer_first_and_last(&deaths, c, &conv);
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
fn offer_first_and_last(deaths: &[DeathEntry], c: &mut Candidates, conv: &Convention) {
    let timed = || {
        deaths
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.time.map(|t| (i, t)))
    };
    if let Some((i, t)) = timed().min_by_key(|(_, t)| *t) {
        let at = death_location(i, &TIME_AT, ".time");
        c.offer_time(Field::FirstFailedAt, t, conv, at);
    }
    if let Some((i, t)) = timed().max_by_key(|(_, t)| *t) {
        let at = death_location(i, &TIME_AT, ".time");
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
const ORIGIN_AT: [&str; 4] = [
    "x-death[0] exchange + routing-keys",
    "x-death[1] exchange + routing-keys",
    "x-death[2] exchange + routing-keys",
    "x-death[3] exchange + routing-keys",
];

/// `x-death[i]<suffix>`: static for the first entries, formatted beyond them.
fn death_location(i: usize, first: &[&'static str; 4], suffix: &str) -> Location {
    match first.get(i) {
        Some(s) => Location::Borrowed(s),
        None => format!("x-death[{i}]{suffix}").into(),
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
