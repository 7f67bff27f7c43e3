//! A deterministic incident, for the demo, the example dump, tests and benchmarks.
//!
//! The story an on-call engineer recognises: `invoice-worker`
//! `release-2026-09-21` cannot find tax profiles; a producer deploy sends amounts as
//! strings; the payment gateway timed out until the retry budget ran out; a handful of
//! poison pills (one carrying terminal escape sequences); a Spring Kafka consumer whose
//! lock-timeout messages only group through fingerprinting. Ages are relative to `now`,
//! output is a pure function of `(seed, now, scale)`.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use serde_json::json;

/// splitmix64: tiny, fast and good enough for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Crockford base32, like ULIDs.
    pub fn ulidish(&mut self, len: usize) -> String {
        const A: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        (0..len)
            .map(|_| A[self.below(32) as usize] as char)
            .collect()
    }
}

/// The demo's customers are these names (tests look for them in what must be masked).
pub const FIRST: &[&str] = &[
    "Jane", "Marco", "Aiko", "Lena", "Tomás", "Priya", "Oliver", "Fatima", "Sven", "Chloé", "Noah",
    "Amara",
];
pub const LAST: &[&str] = &[
    "Doe", "Rossi", "Tanaka", "Müller", "García", "Patel", "Smith", "Haddad", "Berg", "Martin",
    "Okafor", "Kowalski",
];
const CITIES: &[(&str, &str, &str)] = &[
    ("Paris", "75001", "FR"),
    ("Berlin", "10115", "DE"),
    ("Madrid", "28013", "ES"),
    ("Lyon", "69002", "FR"),
    ("Hamburg", "20095", "DE"),
];
const STREETS: &[&str] = &[
    "Rue de Rivoli",
    "Unter den Linden",
    "Calle Mayor",
    "Quai Saint-Antoine",
    "Jungfernstieg",
];
/// Test card numbers (Luhn-valid, publicly documented as test numbers).
const CARDS: &[&str] = &[
    "4242424242424242",
    "4000056655665556",
    "5555555555554444",
    "378282246310005",
];
const IBANS: &[&str] = &[
    "DE89370400440532013000",
    "GB82WEST12345698765432",
    "FR1420041010050500013M02606",
];

pub const INVOICES_DLQ: &str = "invoices.dlq";
pub const PAYMENTS_DLQ: &str = "payments.dlq";
pub const DLQ_PARTITIONS: i32 = 3;

/// How big an incident to generate: 1.0 is about 1,300 letters.
#[derive(Debug, Clone, Copy)]
pub struct Scale(pub f64);

fn n(scale: Scale, base: u32) -> u32 {
    ((f64::from(base) * scale.0).round() as u32).max(1)
}

struct Person {
    name: String,
    email: String,
    customer_id: String,
    street: String,
    city: &'static str,
    postcode: &'static str,
    country: &'static str,
}

fn person(rng: &mut Rng) -> Person {
    let first = *rng.pick(FIRST);
    let last = *rng.pick(LAST);
    let (city, postcode, country) = *rng.pick(CITIES);
    let ascii = |s: &str| s.to_lowercase().replace(['á', 'é'], "e").replace('ü', "u");
    Person {
        name: format!("{first} {last}"),
        email: format!(
            "{}.{}@{}",
            ascii(first),
            ascii(last),
            rng.pick(&["example.com", "mail.example.org", "corp.example.net"])
        ),
        customer_id: format!("cus-{}", 1000 + rng.below(9000)),
        street: format!("{} {}", 1 + rng.below(120), rng.pick(STREETS)),
        city,
        postcode,
        country,
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A letter before coordinates are assigned.
struct Draft {
    topic: &'static str,
    at: DateTime<Utc>,
    key: Option<String>,
    headers: Vec<Header>,
    payload: Vec<u8>,
}

fn h(name: &str, v: &str) -> Header {
    dlq_core::conventions::header(name, HeaderValue::text(v))
}

/// Age in ms, skewed towards recent (incidents ramp up).
fn recent_age(rng: &mut Rng, min_ms: i64, max_ms: i64) -> i64 {
    let span = (max_ms - min_ms).max(1) as u64;
    let a = rng.below(span);
    let b = rng.below(span);
    min_ms + a.min(b) as i64
}

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;

/// The full incident, sorted by time, with Kafka coordinates on the two DLQ topics.
pub fn incident(seed: u64, now: DateTime<Utc>, scale: Scale) -> Vec<RawLetter> {
    let mut rng = Rng::new(seed);
    let mut drafts = Vec::new();
    let mut origin_offset = 88_000i64;

    // 1. Tax profiles missing since release-2026-09-21 (fixable), plus an older tail.
    for (version, count, min_age, max_age) in [
        ("release-2026-09-21", n(scale, 540), 2 * MIN, 6 * HOUR),
        ("release-2026-09-14", n(scale, 72), 20 * HOUR, 3 * DAY),
    ] {
        for _ in 0..count {
            let age = recent_age(&mut rng, min_age, max_age);
            origin_offset += 1 + rng.below(40) as i64;
            drafts.push(invoice_letter(
                &mut rng,
                now,
                age,
                version,
                "customer_tax_profile_missing",
                false,
                origin_offset,
            ));
        }
    }
    // 2. A producer deploy 2h ago started sending amounts as strings (permanent).
    for _ in 0..n(scale, 301) {
        let age = recent_age(&mut rng, MIN, 2 * HOUR);
        origin_offset += 1 + rng.below(40) as i64;
        drafts.push(invoice_letter(
            &mut rng,
            now,
            age,
            "release-2026-09-21",
            "amount_not_a_number",
            true,
            origin_offset,
        ));
    }
    // 3. Payment gateway timeouts exhausted the retry budget (transient), mostly hours ago.
    let mut pay_offset = 51_000i64;
    for _ in 0..n(scale, 280) {
        let age = recent_age(&mut rng, 40 * MIN, 30 * HOUR);
        pay_offset += 1 + rng.below(25) as i64;
        drafts.push(payment_letter(&mut rng, now, age, pay_offset));
    }
    // 4. Poison pills: unparseable bodies over the last week.
    for i in 0..n(scale, 91) {
        let age = recent_age(&mut rng, 10 * MIN, 7 * DAY);
        origin_offset += 1;
        drafts.push(poison_letter(&mut rng, now, age, i, origin_offset));
    }
    // 5. Spring Kafka consumer with lock timeouts: only fingerprinting groups these.
    for _ in 0..n(scale, 48) {
        let age = recent_age(&mut rng, 5 * MIN, 20 * HOUR);
        pay_offset += 1;
        drafts.push(spring_letter(&mut rng, now, age, pay_offset));
    }
    assign_coords(drafts)
}

/// Sort by time and give each letter its DLQ partition (by key) and offset.
fn assign_coords(mut drafts: Vec<Draft>) -> Vec<RawLetter> {
    drafts.sort_by_key(|d| d.at);
    let mut next: std::collections::HashMap<(&str, i32), i64> = std::collections::HashMap::new();
    drafts
        .into_iter()
        .map(|d| {
            let partition = match &d.key {
                Some(k) => {
                    (k.bytes()
                        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)))
                        % DLQ_PARTITIONS as u32) as i32
                }
                None => 0,
            };
            let off = next.entry((d.topic, partition)).or_insert(0);
            let offset = *off;
            *off += 1;
            RawLetter {
                coords: Some(Coords::Kafka {
                    topic: d.topic.to_string(),
                    partition,
                    offset,
                }),
                key: d.key.map(String::into_bytes),
                headers: d.headers,
                properties: Vec::new(),
                payload: d.payload,
                timestamp: Some(d.at),
            }
        })
        .collect()
}

fn invoice_letter(
    rng: &mut Rng,
    now: DateTime<Utc>,
    age_ms: i64,
    version: &str,
    reason: &str,
    string_amount: bool,
    origin_offset: i64,
) -> Draft {
    let at = now - Duration::milliseconds(age_ms);
    let first_failed = at - Duration::seconds(30 + rng.below(240) as i64);
    let p = person(rng);
    let cents = 5_000 + rng.below(400_000);
    let amount = if string_amount {
        let whole = cents / 100;
        if whole >= 1000 {
            json!(format!(
                "{},{:03}.{:02}",
                whole / 1000,
                whole % 1000,
                cents % 100
            ))
        } else {
            json!(format!("{whole}.{:02}", cents % 100))
        }
    } else {
        json!(cents as f64 / 100.0)
    };
    let msg_id = format!("msg_01K5{}", rng.ulidish(22));
    let body = json!({
        "message_id": msg_id,
        "event_type": "invoice.issue.requested",
        "schema_version": 3,
        "occurred_at": ts(first_failed - Duration::seconds(5)),
        "correlation_id": format!("corr-{}", rng.ulidish(12).to_lowercase()),
        "payload_ref": null,
        "payload": {
            "invoice_id": format!("INV-2026-{:06}", rng.below(1_000_000)),
            "customer": {
                "id": p.customer_id,
                "name": p.name,
                "email": p.email,
                "address": {"street": p.street, "city": p.city, "postcode": p.postcode, "country": p.country},
                "tax_id": format!("{}{}", p.country, 10_000_000_000u64 + rng.below(89_999_999_999)),
            },
            "amount": amount,
            "currency": "EUR",
            "lines": [{"sku": format!("SKU-{}", rng.below(900) + 100), "qty": 1 + rng.below(5)}],
        },
        "failure": {
            "reason_code": reason,
            "consumer": "invoice-worker",
            "consumer_version": version,
            "attempt": 4,
            "first_failed_at": ts(first_failed),
            "last_failed_at": ts(at),
        }
    });
    Draft {
        topic: INVOICES_DLQ,
        at,
        key: Some(p.customer_id),
        headers: vec![
            h("x-original-topic", "invoices"),
            h("x-original-partition", &(rng.below(6)).to_string()),
            h("x-original-offset", &origin_offset.to_string()),
            h(
                "traceparent",
                &format!(
                    "00-{:032x}-{:016x}-01",
                    rng.next_u64() as u128 * 7919,
                    rng.next_u64()
                ),
            ),
        ],
        payload: body.to_string().into_bytes(),
    }
}

fn payment_letter(rng: &mut Rng, now: DateTime<Utc>, age_ms: i64, origin_offset: i64) -> Draft {
    let at = now - Duration::milliseconds(age_ms);
    let p = person(rng);
    let card = *rng.pick(CARDS);
    let account = format!("acc-{}", 10 + rng.below(90));
    let body = json!({
        "payment_id": format!("pay_{}", rng.ulidish(16)),
        "account": account,
        "amount": {"value": (1_000 + rng.below(90_000)) as f64 / 100.0, "currency": "EUR"},
        "card": {"number": card, "holder_name": p.name, "expiry": "12/29"},
        "billing_email": p.email,
        "iban": *rng.pick(IBANS),
    });
    let version = *rng.pick(&["v3.4.1", "v3.4.1", "v3.4.0"]);
    let region = rng.pick(&["psp-eu-1", "psp-eu-2"]);
    Draft {
        topic: PAYMENTS_DLQ,
        at,
        key: Some(account),
        headers: vec![
            h("x-reason-code", "attempt_budget_exhausted"),
            h(
                "x-error",
                &format!(
                    "GatewayTimeoutException: upstream {region} timed out after {} ms",
                    30_000 + rng.below(3) * 5_000
                ),
            ),
            h("x-attempt", "5"),
            h("x-consumer", "payment-worker"),
            h("x-consumer-version", version),
            h("x-event-type", "payment.capture.requested"),
            h("x-schema-version", "2"),
            h("x-message-id", &format!("pm_{}", rng.ulidish(20))),
            h(
                "x-correlation-id",
                &format!("corr-{}", rng.ulidish(12).to_lowercase()),
            ),
            h("x-original-topic", "payments"),
            h("x-original-partition", &rng.below(4).to_string()),
            h("x-original-offset", &origin_offset.to_string()),
            h(
                "authorization",
                &format!(
                    "Bearer eyJhbGciOiJIUzI1NiJ9.{}.{}",
                    rng.ulidish(24),
                    rng.ulidish(16)
                ),
            ),
        ],
        payload: body.to_string().into_bytes(),
    }
}

fn poison_letter(
    rng: &mut Rng,
    now: DateTime<Utc>,
    age_ms: i64,
    i: u32,
    origin_offset: i64,
) -> Draft {
    let at = now - Duration::milliseconds(age_ms);
    let p = person(rng);
    let (payload, error): (Vec<u8>, String) = match i % 4 {
        0 => {
            let s = format!("{{\"invoice_id\":\"INV-2026-{:06}\",\"customer\":{{\"email\":\"{}\",\"name\":\"{}\"", rng.below(1_000_000), p.email, p.name);
            let pos = s.len();
            (s.into_bytes(), format!("SyntaxError: Unexpected end of JSON input at position {pos}"))
        }
        1 => (
            format!("{{'invoice_id': 'INV-2026-{:06}', 'amount': 12.5}}", rng.below(1_000_000)).into_bytes(),
            "SyntaxError: Unexpected token ' in JSON at position 1".to_string(),
        ),
        2 => {
            let mut b = vec![0x1f, 0x8b, 0x08, 0x00];
            b.extend((0..48).map(|_| rng.below(256) as u8));
            (b, "SyntaxError: Unexpected token \u{1f} in JSON at position 0".to_string())
        }
        _ => (
            // A hostile payload: clipboard write (OSC 52), screen clear, window title.
            format!("{{\"note\":\"\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b]0;pwned\x07\",\"customer\":\"{}\"", p.email).into_bytes(),
            "SyntaxError: Unterminated string in JSON at position 80".to_string(),
        ),
    };
    Draft {
        topic: INVOICES_DLQ,
        at,
        key: Some(p.customer_id),
        headers: vec![
            h("x-error", &error),
            h("x-attempt", "1"),
            h("x-consumer", "invoice-worker"),
            h(
                "x-consumer-version",
                if age_ms > 6 * HOUR {
                    "release-2026-09-14"
                } else {
                    "release-2026-09-21"
                },
            ),
            h("x-original-topic", "invoices"),
            h("x-original-partition", &rng.below(6).to_string()),
            h("x-original-offset", &origin_offset.to_string()),
        ],
        payload,
    }
}

fn spring_letter(rng: &mut Rng, now: DateTime<Utc>, age_ms: i64, origin_offset: i64) -> Draft {
    let at = now - Duration::milliseconds(age_ms);
    let account = format!("acc-{}", 10 + rng.below(90));
    let holder = format!("{:08x}", rng.next_u64() as u32);
    let partition = rng.below(4) as i32;
    let body = json!({"account": account, "entries": [{"debit": 120.5}, {"credit": 120.5}], "posted_by": person(rng).email});
    Draft {
        topic: PAYMENTS_DLQ,
        at,
        key: Some(account.clone()),
        headers: vec![
            h(
                "kafka_dlt-exception-fqcn",
                "org.springframework.kafka.listener.ListenerExecutionFailedException",
            ),
            h(
                "kafka_dlt-exception-cause-fqcn",
                "com.acme.ledger.LedgerLockTimeoutException",
            ),
            h(
                "kafka_dlt-exception-message",
                &format!(
                    "Lock on account {account} held by tx {holder} not released after {} ms",
                    5_000 + rng.below(5) * 1000
                ),
            ),
            h("kafka_dlt-original-topic", "ledger-postings"),
            Header::new(
                "kafka_dlt-original-partition",
                HeaderValue::Bytes(partition.to_be_bytes().to_vec()),
            ),
            Header::new(
                "kafka_dlt-original-offset",
                HeaderValue::Bytes(origin_offset.to_be_bytes().to_vec()),
            ),
            Header::new(
                "kafka_dlt-original-timestamp",
                HeaderValue::Bytes(
                    (at - Duration::seconds(20))
                        .timestamp_millis()
                        .to_be_bytes()
                        .to_vec(),
                ),
            ),
            h("kafka_dlt-original-consumer-group", "ledger-sync"),
        ],
        payload: body.to_string().into_bytes(),
    }
}

/// One new dead letter arriving now (the demo's live trickle): mostly the tax-profile
/// incident, some string amounts, as the scenario's two live problems.
pub fn fresh_letter(rng: &mut Rng, now: DateTime<Utc>) -> RawLetter {
    let reason = if rng.below(10) < 7 {
        "customer_tax_profile_missing"
    } else {
        "amount_not_a_number"
    };
    let origin_offset = 99_000 + rng.below(1000) as i64;
    let d = invoice_letter(
        rng,
        now,
        0,
        "release-2026-09-21",
        reason,
        reason == "amount_not_a_number",
        origin_offset,
    );
    let mut v = assign_coords(vec![d]);
    v.pop().unwrap_or_default()
}

/// What the simulated consumer does with a (replayed) message on an origin topic:
/// `Ok` when processing succeeds, `Err(reason)` when it dead-letters again. The rules
/// follow the story: tax profiles were mostly fixed (85% succeed), string amounts fail
/// until a revision turns them into numbers, gateway timeouts were transient, poison
/// pills stay poison.
pub fn consumer_verdict(raw: &RawLetter) -> Result<(), &'static str> {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(&raw.payload) else {
        return Err("poison: unparseable JSON");
    };
    let reason = body
        .pointer("/failure/reason_code")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .or_else(|| {
            raw.header("x-reason-code")
                .and_then(|v| v.as_nonempty_text())
        });
    let amount_is_string = body
        .pointer("/payload/amount")
        .is_some_and(|a| a.is_string());
    if amount_is_string {
        return Err("amount_not_a_number");
    }
    if reason.as_deref() == Some("customer_tax_profile_missing") {
        let id = body
            .pointer("/message_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let h = id
            .bytes()
            .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
        if h % 100 >= 85 {
            return Err("customer_tax_profile_missing");
        }
    }
    Ok(())
}

/// The DLQ topic an origin topic dead-letters into.
pub fn dlq_for(origin: &str) -> &'static str {
    match origin {
        "invoices" => INVOICES_DLQ,
        _ => PAYMENTS_DLQ,
    }
}

/// The dead letter the simulated consumer writes when a message fails again: same key,
/// headers and message id; the envelope's attempt and last failure time move on.
pub fn dead_letter_again(raw: &RawLetter, reason: &str, now: DateTime<Utc>) -> RawLetter {
    let origin = raw
        .coords
        .as_ref()
        .map(|c| c.container().to_string())
        .unwrap_or_default();
    let mut payload = raw.payload.clone();
    if let Ok(mut body) = serde_json::from_slice::<serde_json::Value>(&raw.payload) {
        if let Some(f) = body.get_mut("failure").and_then(|f| f.as_object_mut()) {
            let attempt = f.get("attempt").and_then(|a| a.as_u64()).unwrap_or(0);
            f.insert("attempt".into(), json!(attempt + 1));
            f.insert("last_failed_at".into(), json!(ts(now)));
            f.insert("reason_code".into(), json!(reason));
        }
        payload = body.to_string().into_bytes();
    }
    let mut headers: Vec<Header> = raw
        .headers
        .iter()
        .filter(|h| h.name != "x-original-topic")
        .cloned()
        .collect();
    headers.push(h("x-original-topic", &origin));
    let partition = raw.key.as_ref().map_or(0, |k| {
        (k.iter()
            .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(*b)))
            % DLQ_PARTITIONS as u32) as i32
    });
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: dlq_for(&origin).to_string(),
            partition,
            offset: 0,
        }),
        key: raw.key.clone(),
        headers,
        properties: Vec::new(),
        payload,
        timestamp: Some(now),
    }
}

/// Letters in the other conventions, on a RabbitMQ DLQ (`billing.dlq`) and a Kafka
/// Connect DLQ: x-death with real AMQP types, MassTransit, NServiceBus, Azure-style.
pub fn convention_samples(seed: u64, now: DateTime<Utc>, per_kind: u32) -> Vec<RawLetter> {
    let mut rng = Rng::new(seed.wrapping_add(1));
    let mut out = Vec::new();
    let mut position = 0u64;
    let amqp = |headers: Vec<Header>,
                props: Vec<(String, String)>,
                payload: Vec<u8>,
                position: &mut u64| {
        *position += 1;
        RawLetter {
            coords: Some(Coords::Amqp {
                vhost: "/".into(),
                queue: "billing.dlq".into(),
                position: *position,
                stream_offset: None,
            }),
            key: None,
            headers,
            properties: props,
            payload,
            timestamp: None,
        }
    };
    for i in 0..per_kind {
        // RabbitMQ: rejected by the consumer, or expired in the retry queue.
        let p = person(&mut rng);
        let died = now - Duration::milliseconds(recent_age(&mut rng, 3 * MIN, 26 * HOUR));
        let (reason, queue) = if i % 3 == 0 {
            ("expired", "billing.retry")
        } else {
            ("rejected", "billing.work")
        };
        let death = HeaderValue::Table(vec![
            ("count".into(), HeaderValue::Int(1 + i64::from(i % 3))),
            ("reason".into(), HeaderValue::text(reason)),
            ("queue".into(), HeaderValue::text(queue)),
            (
                "time".into(),
                HeaderValue::Timestamp(died.timestamp() as u64),
            ),
            ("exchange".into(), HeaderValue::text("billing")),
            (
                "routing-keys".into(),
                HeaderValue::Array(vec![HeaderValue::text("invoice.paid")]),
            ),
        ]);
        let body = json!({"invoice_id": format!("INV-2026-{:06}", rng.below(1_000_000)), "paid_by": p.email, "phone": "+49 170 1234567"});
        out.push(amqp(
            vec![
                Header::new("x-death", HeaderValue::Array(vec![death])),
                h("x-first-death-queue", queue),
                h("x-first-death-reason", reason),
                h("x-first-death-exchange", "billing"),
            ],
            vec![
                ("message_id".into(), format!("rb-{}", rng.ulidish(10))),
                ("content_type".into(), "application/json".into()),
            ],
            body.to_string().into_bytes(),
            &mut position,
        ));

        // MassTransit fault.
        let at = now - Duration::milliseconds(recent_age(&mut rng, 10 * MIN, 3 * DAY));
        out.push(amqp(
            vec![
                h("MT-Reason", "fault"),
                h("MT-Fault-ExceptionType", "System.InvalidOperationException"),
                h(
                    "MT-Fault-Message",
                    &format!("Order {} not found", 8000 + rng.below(2000)),
                ),
                h(
                    "MT-Fault-ConsumerType",
                    "Billing.Consumers.SettleOrderConsumer",
                ),
                h(
                    "MT-Fault-MessageType",
                    "urn:message:Billing.Contracts:SettleOrder",
                ),
                h("MT-Fault-Timestamp", &ts(at)),
                Header::new("MT-Fault-RetryCount", HeaderValue::Int(2)),
                h("MT-Host-AssemblyVersion", "2.7.0.0"),
                h("MT-Host-MachineName", "billing-7f9c"),
            ],
            vec![("message_id".into(), format!("mt-{}", rng.ulidish(12)))],
            json!({"orderId": 8000 + rng.below(2000), "customerName": person(&mut rng).name})
                .to_string()
                .into_bytes(),
            &mut position,
        ));

        // NServiceBus error queue.
        let at = now - Duration::milliseconds(recent_age(&mut rng, 30 * MIN, 9 * DAY));
        out.push(amqp(
            vec![
                h(
                    "NServiceBus.MessageId",
                    &format!(
                        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                        rng.next_u64() as u32,
                        rng.below(65536),
                        rng.below(4096),
                        rng.below(4096),
                        rng.next_u64() & 0xffff_ffff_ffff
                    ),
                ),
                h(
                    "NServiceBus.ExceptionInfo.ExceptionType",
                    "Billing.PaymentDeclinedException",
                ),
                h(
                    "NServiceBus.ExceptionInfo.Message",
                    &format!(
                        "Card ending {} declined: insufficient funds",
                        1000 + rng.below(9000)
                    ),
                ),
                h("NServiceBus.ProcessingEndpoint", "Billing.Endpoint"),
                h("NServiceBus.FailedQ", "Billing.Endpoint"),
                h(
                    "NServiceBus.TimeOfFailure",
                    &at.format("%Y-%m-%d %H:%M:%S:%6f Z").to_string(),
                ),
                h(
                    "NServiceBus.EnclosedMessageTypes",
                    "Billing.Messages.ChargeCard, Billing.Messages, Version=1.4.0.0",
                ),
                h("NServiceBus.Retries", "3"),
            ],
            Vec::new(),
            json!({"CardNumber": "4000056655665556", "Amount": 42.0})
                .to_string()
                .into_bytes(),
            &mut position,
        ));

        // Azure Service Bus style, forwarded into RabbitMQ by a bridge.
        out.push(amqp(
            vec![
                h("DeadLetterReason", "MaxDeliveryCountExceeded"),
                h(
                    "DeadLetterErrorDescription",
                    "Message could not be consumed after 10 delivery attempts.",
                ),
                Header::new("DeliveryCount", HeaderValue::Int(10)),
            ],
            vec![(
                "timestamp".into(),
                ts(now - Duration::milliseconds(recent_age(&mut rng, HOUR, 2 * DAY))),
            )],
            b"plain text body: refund for jane.doe@example.com".to_vec(),
            &mut position,
        ));
    }
    // Kafka Connect sink DLQ.
    for i in 0..per_kind {
        let at = now - Duration::milliseconds(recent_age(&mut rng, 5 * MIN, 5 * HOUR));
        out.push(RawLetter {
            coords: Some(Coords::Kafka {
                topic: "connect.dlq".into(),
                partition: 0,
                offset: i64::from(i),
            }),
            key: Some(format!("row-{}", rng.below(100_000)).into_bytes()),
            headers: vec![
                h("__connect.errors.topic", "crm.contacts"),
                h("__connect.errors.partition", "2"),
                h(
                    "__connect.errors.offset",
                    &(40_000 + i64::from(i)).to_string(),
                ),
                h("__connect.errors.connector.name", "crm-postgres-sink"),
                h("__connect.errors.task.id", "0"),
                h("__connect.errors.stage", "VALUE_CONVERTER"),
                h(
                    "__connect.errors.class.name",
                    "io.confluent.connect.avro.AvroConverter",
                ),
                h(
                    "__connect.errors.exception.class.name",
                    "org.apache.kafka.connect.errors.DataException",
                ),
                h(
                    "__connect.errors.exception.message",
                    &format!("Unknown magic byte! at offset {}", 40_000 + i),
                ),
            ],
            properties: Vec::new(),
            payload: vec![0x00, 0x13, 0x37, 0xfe, 0xff, 0x10, 0x02],
            timestamp: Some(at),
        });
    }
    out
}

/// Letter `k` of a benchmark built by cycling the incident: its ids made its own, as in a
/// real DLQ. Cycled templates would repeat them, and anything remembered per value
/// (masks of ids) would look cheaper than it is.
pub fn make_distinct(l: &mut RawLetter, k: usize) {
    distinct_ids(&mut l.payload, k);
    for h in &mut l.headers {
        if let HeaderValue::Bytes(b) = &mut h.value {
            distinct_ids(b, k);
        }
    }
}

/// Make the scenario's ids in `text` (`msg_01K5…`, `pm_…`, `corr-…`) those of letter `k`:
/// the tail of each becomes `k` in the id's own alphabet and case, so lengths (and the
/// JSON around them) stay as they were.
fn distinct_ids(text: &mut [u8], k: usize) {
    const IDS: &[(&[u8], usize, bool)] = &[
        (b"msg_01K5", 22, false),
        (b"pm_", 20, false),
        (b"corr-", 12, true),
    ];
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    for (prefix, len, lower) in IDS {
        let mut from = 0;
        while let Some(at) = text[from..]
            .windows(prefix.len())
            .position(|w| w == *prefix)
            .map(|p| from + p)
        {
            let start = at + prefix.len();
            let end = start + len;
            if end > text.len() || !text[start..end].iter().all(u8::is_ascii_alphanumeric) {
                from = start;
                continue;
            }
            let mut n = k;
            for b in text[end - 6..end].iter_mut().rev() {
                let c = ALPHABET[n % 32];
                *b = if *lower { c.to_ascii_lowercase() } else { c };
                n /= 32;
            }
            from = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::HashSet;

    #[test]
    fn consumer_verdicts_follow_the_story() {
        let now = Utc
            .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
            .single()
            .expect("valid");
        let letters = incident(7, now, Scale(1.0));
        let verdict = |reason: &str| {
            let ls: Vec<&RawLetter> = letters
                .iter()
                .filter(|l| {
                    dlq_core::conventions::extract((*l).clone(), &[]).reason_code() == reason
                })
                .collect();
            let ok = ls.iter().filter(|l| consumer_verdict(l).is_ok()).count();
            (ok, ls.len())
        };
        let (ok, n) = verdict("customer_tax_profile_missing");
        assert!(ok * 100 / n > 70 && ok < n, "{ok}/{n} tax replays succeed");
        assert_eq!(verdict("amount_not_a_number").0, 0);
        let (ok, n) = verdict("attempt_budget_exhausted");
        assert_eq!(ok, n);
        // A revision that makes the amount a number fixes it.
        let mut fixed = letters
            .iter()
            .find(|l| {
                dlq_core::conventions::extract((*l).clone(), &[]).reason_code()
                    == "amount_not_a_number"
            })
            .cloned()
            .expect("an amount letter");
        let mut body: serde_json::Value = serde_json::from_slice(&fixed.payload).expect("json");
        body["payload"]["amount"] = json!(1500.0);
        body["failure"]["reason_code"] = json!("amount_not_a_number");
        fixed.payload = body.to_string().into_bytes();
        assert!(consumer_verdict(&fixed).is_ok());
        let tax = letters
            .iter()
            .find(|l| {
                dlq_core::conventions::extract((*l).clone(), &[]).reason_code()
                    == "customer_tax_profile_missing"
            })
            .cloned()
            .expect("a tax letter");
        let replayed = RawLetter {
            coords: Some(Coords::Kafka {
                topic: "invoices".into(),
                partition: 0,
                offset: 1,
            }),
            ..tax.clone()
        };
        let again = dead_letter_again(&replayed, "x", now);
        let d = dlq_core::conventions::extract(again, &[]);
        assert_eq!(
            d.id.value,
            dlq_core::conventions::extract(tax, &[]).id.value
        );
        assert_eq!(d.failure.attempt.as_ref().map(|a| a.value), Some(5));
        assert_eq!(d.reason_code(), "x");
        assert_eq!(
            d.raw
                .coords
                .as_ref()
                .map(|c| c.container().to_string())
                .as_deref(),
            Some(INVOICES_DLQ)
        );
    }

    #[test]
    fn deterministic_per_seed_and_sized() {
        let now = Utc
            .with_ymd_and_hms(2026, 11, 29, 18, 0, 0)
            .single()
            .expect("valid");
        let a = incident(7, now, Scale(1.0));
        let b = incident(7, now, Scale(1.0));
        let c = incident(8, now, Scale(1.0));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!((1_200..1_500).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
        assert!(a.iter().all(|l| l.timestamp.is_some_and(|t| t <= now)));
    }

    /// Cycled templates get ids of their own: each letter's message and correlation ids
    /// are distinct, the JSON still parses, and the lengths do not change.
    #[test]
    fn bench_letters_have_distinct_ids() {
        let now = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 29, 18, 0, 0)
            .single()
            .unwrap_or_default();
        let templates = incident(7, now, Scale(1.0));
        let (mut ids, mut corr) = (HashSet::new(), HashSet::new());
        let n = templates.len() * 3;
        for k in 0..n {
            let t = &templates[k % templates.len()];
            let mut l = t.clone();
            make_distinct(&mut l, k);
            let payload = l.payload;
            assert_eq!(payload.len(), t.payload.len());
            if let (Some(a), Some(b)) = (
                t.header("x-correlation-id"),
                l.headers.iter().find(|h| h.name == "x-correlation-id"),
            ) {
                assert_eq!(
                    a.as_text().map(|t| t.len()),
                    b.value.as_text().map(|t| t.len())
                );
                assert!(corr.insert(b.value.as_text().unwrap_or_default().to_string()));
            }
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&payload) else {
                // Poison pills stay as broken as they were.
                assert!(serde_json::from_slice::<serde_json::Value>(&t.payload).is_err());
                continue;
            };
            if let Some(id) = v["message_id"].as_str() {
                assert!(ids.insert(id.to_string()), "{id} repeats");
            }
            if let Some(c) = v["correlation_id"].as_str() {
                assert!(corr.insert(c.to_string()), "{c} repeats");
            }
        }
        assert!(ids.len() > n / 2, "{} ids", ids.len());
        assert!(corr.len() > n / 2, "{} correlation ids", corr.len());
    }
}
