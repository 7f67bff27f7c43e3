use super::*;
use crate::dump::from_line;
use crate::model::{Coords, Header, HeaderValue};
use chrono::TimeZone;

fn fixture(name: &str) -> RawLetter {
    let path = format!(
        "{}/../../tests/fixtures/conventions/{name}.ndjson",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    from_line(text.trim().as_bytes()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn dl(name: &str) -> DeadLetter {
    extract(fixture(name), &[])
}

fn v<T: Clone>(s: &Option<Sourced<T>>) -> T {
    s.as_ref().map(|s| s.value.clone()).expect("field present")
}

fn loc<T>(s: &Option<Sourced<T>>) -> (Convention, String) {
    s.as_ref()
        .map(|s| (s.from.convention.clone(), s.from.location.to_string()))
        .expect("field present")
}

fn t(s: &str) -> DateTime<Utc> {
    crate::timefmt::parse_timestamp(s).expect("valid time")
}

#[test]
fn body_envelope_every_field() {
    let d = dl("envelope");
    assert_eq!(d.body, BodyKind::Json);
    assert_eq!(d.id.value.0, "msg_01K5A1");
    assert_eq!(d.id.from.location, "body /message_id");
    assert_eq!(v(&d.event.event_type), "invoice.issue.requested");
    assert_eq!(v(&d.event.schema_version), "3");
    assert_eq!(v(&d.event.occurred_at), t("2026-09-21T10:00:00Z"));
    assert_eq!(v(&d.event.correlation_id), "corr-1");
    assert_eq!(v(&d.event.payload_ref), "s3://bucket/inv/1");
    let f = &d.failure;
    // The envelope beats the generic x- headers on the same letter.
    assert_eq!(v(&f.reason_code), "customer_tax_profile_missing");
    assert_eq!(
        loc(&f.reason_code),
        (Convention::BodyEnvelope, "body /failure/reason_code".into())
    );
    assert_eq!(v(&f.consumer), "invoice-worker");
    assert_eq!(v(&f.consumer_version), "release-2026-09-21");
    assert_eq!(v(&f.attempt), 4);
    assert_eq!(v(&f.first_failed_at), t("2026-09-21T10:00:05Z"));
    assert_eq!(v(&f.last_failed_at), t("2026-09-21T10:04:31Z"));
    assert_eq!(v(&d.dead_lettered_at), t("2026-09-21T10:04:31Z"));
    assert_eq!(loc(&d.dead_lettered_at).0, Convention::Broker);
    // Previews focus on the business payload inside the envelope.
    let span = d.payload_span.clone().expect("envelope has a payload");
    assert_eq!(
        &d.raw.payload[span],
        br#"{"customer": {"email": "jane.doe@example.com"}}"#
    );
}

#[test]
fn plain_x_headers_every_field() {
    let d = dl("x-headers");
    let f = &d.failure;
    assert_eq!(v(&f.reason_code), "attempt_budget_exhausted");
    assert_eq!(
        loc(&f.reason_code),
        (Convention::XHeaders, "header x-reason-code".into())
    );
    assert_eq!(v(&f.exception_type), "GatewayTimeoutException");
    assert_eq!(
        v(&f.reason_detail),
        "GatewayTimeoutException: upstream psp-eu-2 timed out after 30000 ms"
    );
    assert_eq!(v(&f.attempt), 5);
    assert_eq!(v(&f.consumer), "payment-worker");
    assert_eq!(v(&f.consumer_version), "v3.4.1");
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "payments".into(),
            partition: Some(2),
            offset: Some(51234)
        }
    );
    assert_eq!(d.id.value.0, "pm_1");
    assert_eq!(v(&d.event.correlation_id), "corr-2");
    assert_eq!(v(&d.event.event_type), "payment.capture.requested");
    assert_eq!(v(&d.event.schema_version), "2");
    assert_eq!(d.replay_count, 2);
}

#[test]
fn spring_kafka_binary_integers() {
    let d = dl("spring-kafka");
    let f = &d.failure;
    // The cause type is the real failure, not ListenerExecutionFailedException.
    assert_eq!(
        v(&f.exception_type),
        "com.acme.ledger.LedgerLockTimeoutException"
    );
    assert_eq!(
        loc(&f.exception_type),
        (
            Convention::SpringKafka,
            "header kafka_dlt-exception-cause-fqcn".into()
        )
    );
    assert_eq!(
        v(&f.reason_detail),
        "Lock on account acc-7 held by tx 9f3a11c2 not released after 5000 ms"
    );
    assert_eq!(
        v(&f.reason_code),
        "LedgerLockTimeoutException: Lock on account acc-<n> held by tx <id> not released after <n> ms"
    );
    assert_eq!(loc(&f.reason_code).0, Convention::Derived);
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "ledger-postings".into(),
            partition: Some(3),
            offset: Some(88121)
        }
    );
    assert_eq!(v(&f.consumer), "ledger-sync");
    assert_eq!(
        v(&d.event.occurred_at),
        Utc.timestamp_millis_opt(1_790_000_000_000)
            .single()
            .expect("valid")
    );
    // No message id: the Kafka coordinates are the id.
    assert_eq!(d.id.value.0, "ledger.DLT/0/3");
}

#[test]
fn kafka_connect_every_field() {
    let d = dl("kafka-connect");
    let f = &d.failure;
    assert_eq!(d.body, BodyKind::Binary);
    assert_eq!(
        v(&f.exception_type),
        "org.apache.kafka.connect.errors.DataException"
    );
    assert_eq!(v(&f.reason_detail), "Unknown magic byte!");
    assert_eq!(v(&f.reason_code), "DataException: Unknown magic byte!");
    assert_eq!(v(&f.consumer), "crm-postgres-sink");
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "crm.contacts".into(),
            partition: Some(2),
            offset: Some(40000)
        }
    );
    assert_eq!(loc(&f.origin).0, Convention::KafkaConnect);
}

#[test]
fn rabbitmq_x_death_family() {
    let d = dl("rabbitmq-x-death");
    let f = &d.failure;
    // The original publish is the x-first-death-queue entry, not the latest death.
    assert_eq!(
        v(&f.origin),
        Origin::Amqp {
            exchange: "billing".into(),
            routing_keys: vec!["invoice.paid".into()],
            queue: Some("billing.work".into())
        }
    );
    assert_eq!(
        loc(&f.origin),
        (
            Convention::RabbitMqDeath,
            "x-death[1] exchange + routing-keys".into()
        )
    );
    assert_eq!(v(&f.death_reason), "expired");
    // No exception anywhere: the broker's death reason is the reason code.
    assert_eq!(v(&f.reason_code), "expired");
    assert_eq!(v(&f.attempt), 3);
    assert_eq!(
        v(&f.first_failed_at),
        Utc.timestamp_opt(1_790_000_000, 0).single().expect("valid")
    );
    assert_eq!(
        v(&f.last_failed_at),
        Utc.timestamp_opt(1_790_003_600, 0).single().expect("valid")
    );
    assert_eq!(
        v(&d.dead_lettered_at),
        Utc.timestamp_opt(1_790_003_600, 0).single().expect("valid")
    );
    assert_eq!(d.id.value.0, "rb-1");
    assert_eq!(loc(&d.event.message_id).0, Convention::AmqpProperties);
    assert_eq!(v(&d.event.correlation_id), "corr-3");
    assert_eq!(v(&d.event.event_type), "invoice.paid");
    // Parsed leniently: the second entry's count is a byte string.
    let deaths = rabbit::death_entries(&d.raw);
    assert_eq!(deaths.len(), 2);
    assert_eq!(deaths[1].count, Some(2));
}

/// RabbitMQ 4's `x-opt-deaths` (AMQP 1.0's view of the deaths), where there is no
/// `x-death`: the same origin, reason and count, and `first-time`/`last-time` as the
/// first and last failure.
#[test]
fn rabbitmq_4_x_opt_deaths_read_like_x_death() {
    let s = |v: &str| HeaderValue::text(v);
    let entry = HeaderValue::Table(vec![
        ("queue".into(), s("billing.work")),
        ("reason".into(), s("rejected")),
        ("count".into(), HeaderValue::Int(3)),
        ("first-time".into(), HeaderValue::Timestamp(1_790_000_000)),
        ("last-time".into(), HeaderValue::Timestamp(1_790_003_600)),
        ("exchange".into(), s("billing")),
        (
            "routing-keys".into(),
            HeaderValue::Array(vec![s("invoice.paid")]),
        ),
    ]);
    let raw = RawLetter {
        headers: vec![Header::new("x-opt-deaths", HeaderValue::Array(vec![entry]))],
        payload: b"{}".to_vec(),
        ..RawLetter::default()
    };
    let d = extract(raw, &[]);
    let f = &d.failure;
    assert_eq!(
        v(&f.origin),
        Origin::Amqp {
            exchange: "billing".into(),
            routing_keys: vec!["invoice.paid".into()],
            queue: Some("billing.work".into())
        }
    );
    assert_eq!(loc(&f.origin).1, "x-opt-deaths[0] exchange + routing-keys");
    assert_eq!(v(&f.death_reason), "rejected");
    assert_eq!(v(&f.attempt), 3);
    assert_eq!(
        v(&f.first_failed_at),
        Utc.timestamp_opt(1_790_000_000, 0).single().expect("valid")
    );
    assert_eq!(loc(&f.first_failed_at).1, "x-opt-deaths[0].first-time");
    assert_eq!(
        v(&f.last_failed_at),
        Utc.timestamp_opt(1_790_003_600, 0).single().expect("valid")
    );
    assert_eq!(loc(&f.last_failed_at).1, "x-opt-deaths[0].last-time");
}

#[test]
fn x_delivery_count_is_attempts_without_x_death() {
    let raw = RawLetter {
        headers: vec![Header::new("x-delivery-count", HeaderValue::Int(4))],
        ..RawLetter::default()
    };
    let d = extract(raw, &[]);
    assert_eq!(v(&d.failure.attempt), 5);
    // Content hash id for RabbitMQ letters without a message id, stable across browses.
    assert!(d.id.value.0.starts_with("sha256:"));
    let again = extract(d.raw.clone(), &[]);
    assert_eq!(again.id.value, d.id.value);
}

#[test]
fn masstransit_every_field() {
    let d = dl("masstransit");
    let f = &d.failure;
    assert_eq!(v(&f.exception_type), "System.InvalidOperationException");
    assert_eq!(v(&f.reason_detail), "Order 8812 not found");
    assert_eq!(
        v(&f.reason_code),
        "InvalidOperationException: Order <n> not found"
    );
    assert_eq!(v(&f.consumer), "Billing.Consumers.SettleOrderConsumer");
    assert_eq!(v(&f.consumer_version), "2.7.0.0");
    // Header names matched case-insensitively; retries + 1 = attempts.
    assert_eq!(v(&f.attempt), 3);
    assert_eq!(loc(&f.attempt).1, "header MT-Fault-RetryCount + 1");
    assert_eq!(v(&f.last_failed_at), t("2026-09-21T14:00:00Z"));
    assert_eq!(v(&d.dead_lettered_at), t("2026-09-21T14:00:00Z"));
    assert_eq!(v(&f.death_reason), "fault");
    assert_eq!(
        v(&d.event.event_type),
        "urn:message:Billing.Contracts:SettleOrder"
    );
    assert_eq!(d.id.value.0, "mt-1");
}

#[test]
fn nservicebus_every_field() {
    let d = dl("nservicebus");
    let f = &d.failure;
    assert_eq!(v(&f.exception_type), "Billing.PaymentDeclinedException");
    assert_eq!(v(&f.reason_detail), "Card ending 4242 declined");
    assert_eq!(
        v(&f.reason_code),
        "PaymentDeclinedException: Card ending <n> declined"
    );
    assert_eq!(v(&f.consumer), "Billing.Endpoint");
    assert_eq!(v(&f.attempt), 4);
    assert_eq!(v(&f.last_failed_at), t("2026-09-21T15:00:00Z"));
    assert_eq!(
        v(&f.origin),
        Origin::Endpoint("Billing.Endpoint@host".into())
    );
    assert_eq!(d.id.value.0, "3f2b8c1e-0d1a-4b7e-9a55-0c2f8e9d1a77");
    assert_eq!(v(&d.event.correlation_id), "corr-4");
    assert_eq!(v(&d.event.event_type), "Billing.Messages.ChargeCard");
}

#[test]
fn azure_style_every_field() {
    let d = dl("azure");
    let f = &d.failure;
    assert_eq!(v(&f.reason_code), "MaxDeliveryCountExceeded");
    assert_eq!(loc(&f.reason_code).0, Convention::AzureServiceBus);
    assert_eq!(
        v(&f.reason_detail),
        "Message could not be consumed after 10 delivery attempts."
    );
    assert_eq!(v(&f.attempt), 10);
    assert_eq!(d.body, BodyKind::Text);
}

#[test]
fn user_mapping_runs_first() {
    let cfg: user::UserMappingConfig = toml::from_str(
        r#"
        name = "acme"
        fields.reason_code = ["header:acme-missing", "json:/error/code"]
        fields.consumer_version = ["header:acme-build"]
        fields.reason_detail = ["json:/error/text"]
        fields.message_id = ["key"]
        "#,
    )
    .expect("valid mapping");
    let m = UserMapping::try_from(cfg).expect("valid mapping");
    let d = extract(fixture("user-mapping"), &[m]);
    let f = &d.failure;
    assert_eq!(v(&f.reason_code), "ACME-4711");
    assert_eq!(
        loc(&f.reason_code),
        (Convention::User("acme".into()), "body /error/code".into())
    );
    assert_eq!(v(&f.consumer_version), "2026.09.3");
    assert_eq!(v(&f.reason_detail), "ledger closed");
    assert_eq!(d.id.value.0, "k-1");
}

#[test]
fn specific_convention_beats_generic() {
    let d = dl("precedence");
    let f = &d.failure;
    // Spring (framework) beats plain x- headers for origin and detail.
    assert_eq!(loc(&f.origin).0, Convention::SpringKafka);
    assert_eq!(
        v(&f.reason_detail),
        "Listener failed; order 77 in state SHIPPED"
    );
    // The x-error type fills what Spring did not give.
    assert_eq!(
        v(&f.exception_type),
        "org.springframework.kafka.listener.ListenerExecutionFailedException"
    );
}

#[test]
fn poison_pill_without_metadata() {
    let raw = RawLetter {
        coords: Some(Coords::Kafka {
            topic: "t".into(),
            partition: 0,
            offset: 1,
        }),
        payload: b"{\"amount\": 1,500.00".to_vec(),
        ..RawLetter::default()
    };
    let d = extract(raw, &[]);
    assert_eq!(d.body, BodyKind::BrokenJson);
    assert!(d.body_error.is_some());
    assert_eq!(d.reason_code(), "poison: unparseable JSON");
}

/// The envelope is read from text checked once as UTF-8; a body that is not UTF-8 still
/// goes to the byte parser, which says where it breaks.
#[test]
fn envelope_from_text_and_a_body_that_is_not_utf8() {
    let ok = RawLetter {
        payload: "{\"message_id\":\"m-ü\",\"failure\":{\"reason_code\":\"e\\u00e9\"}}"
            .as_bytes()
            .to_vec(),
        ..RawLetter::default()
    };
    let d = extract(ok, &[]);
    assert_eq!(d.body, BodyKind::Json);
    assert_eq!(v(&d.event.message_id), "m-ü");
    assert_eq!(d.reason_code(), "eé");
    let bad = RawLetter {
        payload: b"{\"message_id\":\"m\xff\"}".to_vec(),
        ..RawLetter::default()
    };
    let d = extract(bad, &[]);
    assert_eq!(d.body, BodyKind::BrokenJson);
    let why = d.body_error.unwrap_or_default();
    assert!(why.contains("line 1 column"), "{why}");
}

#[test]
fn hostile_inputs_never_panic() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let huge = format!(
        "{{\"message_id\":\"big\",\"blob\":\"{}\"}}",
        "x".repeat(10 * 1024 * 1024)
    );
    let bodies: Vec<Vec<u8>> = vec![
        deep.into_bytes(),
        huge.into_bytes(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        b"{\"failure\": \"not an object\", \"message_id\": {\"nested\": 1}}".to_vec(),
        b"{\"failure\": {\"attempt\": \"many\", \"first_failed_at\": \"yesterday\"}}".to_vec(),
    ];
    for body in bodies {
        let raw = RawLetter {
            headers: vec![
                Header::new(
                    "kafka_dlt-original-partition",
                    HeaderValue::Bytes(vec![1, 2, 3]),
                ),
                Header::new("x-attempt", HeaderValue::Bytes(vec![0xff, 0xff])),
                Header::new("x-death", HeaderValue::Bytes(b"not a table".to_vec())),
                Header::new("x-error", HeaderValue::Bytes(vec![0x1b, b'[', b'2', b'J'])),
            ],
            payload: body,
            ..RawLetter::default()
        };
        let d = extract(raw, &[]);
        assert!(!d.reason_code().is_empty());
    }
}

/// The envelope is read from borrowed raw JSON: escaped strings still decode, numbers
/// and booleans read as before, null and objects are not text, and a `failure` with a
/// repeated key is still read (the last one wins) rather than losing every field.
#[test]
fn envelope_fields_read_from_raw_json_as_from_a_parsed_tree() {
    let letter = |body: &str| RawLetter {
        payload: body.as_bytes().to_vec(),
        ..RawLetter::default()
    };
    let d = extract(
        letter(
            r#"{"message_id": "m\u002d1", "schema_version": 3, "payload_ref": true,
                "correlation_id": null, "event_type": {"x": 1},
                "failure": {"reason_code": "tax\u005fmissing", "attempt": 4,
                            "reason_detail": "line one\nline two"}}"#,
        ),
        &[],
    );
    assert_eq!(d.body, BodyKind::Json);
    assert_eq!(d.id.value.0, "m-1");
    assert_eq!(v(&d.event.schema_version), "3");
    assert_eq!(v(&d.event.payload_ref), "true");
    assert!(d.event.correlation_id.is_none());
    assert!(d.event.event_type.is_none());
    assert_eq!(v(&d.failure.reason_code), "tax_missing");
    assert_eq!(
        loc(&d.failure.reason_code),
        (Convention::BodyEnvelope, "body /failure/reason_code".into())
    );
    assert_eq!(v(&d.failure.attempt), 4);
    assert_eq!(v(&d.failure.reason_detail), "line one\nline two");

    let repeated = extract(
        letter(r#"{"failure": {"reason_code": "first", "reason_code": "second"}}"#),
        &[],
    );
    assert_eq!(v(&repeated.failure.reason_code), "second");
}

/// Names the conventions read, and common DLQ names, are not copied per letter; any other
/// name (or another case of a known one) is kept as the broker wrote it.
#[test]
fn well_known_header_names_are_borrowed_and_others_kept_exactly() {
    use std::borrow::Cow;
    for name in [
        "x-error",
        "x-death",
        "kafka_dlt-exception-fqcn",
        "MT-Fault-Message",
    ] {
        let h = header(name, HeaderValue::Null);
        assert!(matches!(h.name, Cow::Borrowed(_)), "{name}");
        assert_eq!(h.name, name);
    }
    for name in ["X-Error", "x-error ", "tenant\u{1b}[2J", ""] {
        let h = header(name, HeaderValue::Null);
        assert!(matches!(h.name, Cow::Owned(_)), "{name:?}");
        assert_eq!(h.name, name);
    }
}

/// A count or retry header written as text is read as decimal text, never as the bytes'
/// integer value: `"x"` is no count (it read as 120), `" 7 "` is 7. Binary integers, as
/// Spring writes them, still read big-endian.
#[test]
fn a_text_count_is_read_as_text_and_a_binary_one_as_an_integer() {
    let with = |headers: Vec<Header>| {
        extract(
            RawLetter {
                headers,
                ..RawLetter::default()
            },
            &[],
        )
    };
    let xdeath = |count: HeaderValue| {
        Header::new(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(vec![
                ("count".into(), count),
                ("reason".into(), HeaderValue::text("rejected")),
                ("queue".into(), HeaderValue::text("orders")),
            ])]),
        )
    };
    assert!(with(vec![xdeath(HeaderValue::text("x"))])
        .failure
        .attempt
        .is_none());
    assert!(with(vec![xdeath(HeaderValue::text("ab"))])
        .failure
        .attempt
        .is_none());
    assert_eq!(
        v(&with(vec![xdeath(HeaderValue::text(" 7 "))]).failure.attempt),
        7
    );
    assert_eq!(
        v(&with(vec![xdeath(HeaderValue::Int(3))]).failure.attempt),
        3
    );
    let retries = |bytes: Vec<u8>| {
        with(vec![Header::new(
            "x-delivery-count",
            HeaderValue::Bytes(bytes),
        )])
    };
    assert!(retries(b"x".to_vec()).failure.attempt.is_none());
    // Three deliveries before, as a 4-byte big-endian int: the fourth attempt.
    assert_eq!(v(&retries(vec![0, 0, 0, 3]).failure.attempt), 4);
}

/// Spring Cloud Stream (Kafka and RabbitMQ binders) and Spring AMQP's republishing
/// recoverer: the exception and its message are the reason, the original topic or
/// exchange and routing key the origin — such letters grouped as `unknown` before.
#[test]
fn spring_cloud_stream_and_spring_amqp_headers() {
    let text = |n: &'static str, v: &str| Header::new(n, HeaderValue::text(v));
    let rabbit = RawLetter {
        headers: vec![
            text(
                "x-exception-fqcn",
                "org.springframework.messaging.MessageHandlingException",
            ),
            text(
                "x-exception-message",
                "java.lang.NumberFormatException: For input string: \"1,500.00\"",
            ),
            text(
                "x-exception-stacktrace",
                "at com.acme.Billing.handle(Billing.java:42)",
            ),
            text("x-original-exchange", "billing"),
            text("x-original-routingKey", "invoice.created"),
        ],
        payload: br#"{"amount":"1,500.00"}"#.to_vec(),
        ..RawLetter::default()
    };
    let d = extract(rabbit, &[]);
    let f = &d.failure;
    assert_eq!(
        v(&f.exception_type),
        "org.springframework.messaging.MessageHandlingException"
    );
    assert_eq!(loc(&f.exception_type).0, Convention::SpringStream);
    assert!(v(&f.reason_detail).contains("For input string"));
    assert!(!v(&f.reason_code).is_empty() && v(&f.reason_code) != "unknown");
    assert_eq!(
        v(&f.origin),
        Origin::Amqp {
            exchange: "billing".into(),
            routing_keys: vec!["invoice.created".into()],
            queue: None
        }
    );
    let kafka = RawLetter {
        headers: vec![
            text("x-exception-fqcn", "java.lang.IllegalStateException"),
            text("x-exception-message", "no tax profile"),
            text("x-original-topic", "invoices"),
            Header::new("x-original-partition", HeaderValue::text("2")),
            Header::new("x-original-offset", HeaderValue::text("77")),
        ],
        ..RawLetter::default()
    };
    let d = extract(kafka, &[]);
    assert_eq!(
        v(&d.failure.origin),
        Origin::Kafka {
            topic: "invoices".into(),
            partition: Some(2),
            offset: Some(77)
        }
    );
    assert_eq!(
        v(&d.failure.exception_type),
        "java.lang.IllegalStateException"
    );
}

/// KIP-1191: the broker writes the DLQ record itself; by default it has no key and no
/// value (the payload is the source record at the origin).
#[test]
fn kafka_share_group_delivery_limit() {
    let d = dl("kafka-share-group");
    let f = &d.failure;
    assert_eq!(v(&f.reason_code), "delivery-limit-reached");
    assert_eq!(
        loc(&f.reason_code),
        (
            Convention::KafkaShareGroup,
            "header __dlq.errors.message".into()
        )
    );
    assert_eq!(
        v(&f.reason_detail),
        "Offset delivery count exceeded the threshold."
    );
    assert_eq!(v(&f.consumer), "payments-share");
    assert_eq!(v(&f.attempt), 5);
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "payments.requests".into(),
            partition: Some(3),
            offset: Some(918204)
        }
    );
    assert!(d.raw.payload.is_empty());
}

#[test]
fn kafka_share_group_rejected_by_consumer() {
    let d = dl("kafka-share-group-rejected");
    let f = &d.failure;
    assert_eq!(v(&f.reason_code), "rejected-by-consumer");
    assert_eq!(v(&f.reason_detail), "Offset rejected by client.");
    assert_eq!(v(&f.attempt), 1);
    assert_eq!(v(&f.consumer), "payments-share");
    assert_eq!(d.body, BodyKind::Json);
}

/// KIP-1034: every header is a UTF-8 string, the exception's class and message apart.
#[test]
fn kafka_streams_every_field() {
    let d = dl("kafka-streams");
    let f = &d.failure;
    assert_eq!(
        v(&f.exception_type),
        "org.apache.kafka.common.errors.SerializationException"
    );
    assert_eq!(
        v(&f.reason_detail),
        "Size of data received by IntegerDeserializer is not 4"
    );
    assert_eq!(
        v(&f.reason_code),
        "SerializationException: Size of data received by IntegerDeserializer is not <n>"
    );
    assert_eq!(loc(&f.exception_type).0, Convention::KafkaStreams);
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "orders".into(),
            partition: Some(4),
            offset: Some(120077)
        }
    );
}

/// Karafka's DLQ says where the message came from and how often it was tried, not why.
#[test]
fn karafka_every_field() {
    let d = dl("karafka");
    let f = &d.failure;
    assert_eq!(v(&f.consumer), "example_app_group");
    assert_eq!(loc(&f.consumer).0, Convention::Karafka);
    assert_eq!(v(&f.reason_code), "unknown");
    assert_eq!(v(&f.attempt), 3);
    assert_eq!(
        v(&d.event.correlation_id),
        "5f0a8d4c-6e3b-4f52-9d7a-3c2b1a0f9e88"
    );
    assert_eq!(
        v(&f.origin),
        Origin::Kafka {
            topic: "orders_states".into(),
            partition: Some(2),
            offset: Some(3141)
        }
    );
}

/// Watermill's poison queue: the handler's error text, the handler and the topic.
#[test]
fn watermill_every_field() {
    let d = dl("watermill");
    let f = &d.failure;
    assert_eq!(
        v(&f.reason_detail),
        "could not handle message: invalid character 'x' looking for beginning of value"
    );
    assert_eq!(loc(&f.reason_detail).0, Convention::Watermill);
    assert_eq!(v(&f.consumer), "orders-projector");
    // Watermill runs on any pub/sub: the topic is an endpoint, not a Kafka coordinate.
    assert_eq!(v(&f.origin), Origin::Endpoint("orders.created".into()));
    assert_eq!(
        v(&f.reason_code),
        "could not handle message: invalid character <str> looking for beginning of value"
    );
}
