//! Header conventions that are a flat list of header → field rules: Spring Kafka,
//! Kafka Connect, MassTransit, NServiceBus, Azure-style and plain `x-` headers.

use super::{Candidates, Field};
use crate::model::{Convention, HeaderValue, Origin, RawLetter};
use crate::timefmt;
use std::sync::OnceLock;

/// How to read a header's value.
#[derive(Clone, Copy)]
pub(super) enum Read {
    Text,
    /// `Type: message` text: the type goes to exception_type, the whole to reason_detail.
    ErrorText,
    /// A retry count: attempts = retries + 1.
    RetriesPlusOne,
    /// Epoch milliseconds as an 8-byte big-endian long or decimal text.
    EpochMillis,
    /// `Ns.Type, Assembly, Version=…;Other` → `Ns.Type`.
    TypeList,
    /// A share group's DLQ message: one of the broker's two sentences → a reason code
    /// (`rejected-by-consumer`, `delivery-limit-reached`), the sentence as the detail.
    ShareGroupReason,
}

pub(super) struct Rule {
    pub header: &'static str,
    pub field: Field,
    pub read: Read,
    /// The provenance shown for a value this rule found.
    pub location: &'static str,
}

/// A rule, its location spelled out at compile time (`header <name>`, and
/// `header <name> + 1` for a retry count).
macro_rules! r {
    ($header:literal, $field:expr) => {
        r!($header, $field, Text)
    };
    ($header:literal, $field:expr, RetriesPlusOne) => {
        Rule {
            header: $header,
            field: $field,
            read: Read::RetriesPlusOne,
            location: concat!("header ", $header, " + 1"),
        }
    };
    ($header:literal, $field:expr, $read:ident) => {
        Rule {
            header: $header,
            field: $field,
            read: Read::$read,
            location: concat!("header ", $header),
        }
    };
}

/// A Kafka origin spread over three headers.
pub(super) struct KafkaOrigin {
    pub topic: &'static str,
    pub partition: &'static str,
    pub offset: &'static str,
    pub location: &'static str,
}

macro_rules! origin {
    ($topic:literal, $partition:literal, $offset:literal) => {
        KafkaOrigin {
            topic: $topic,
            partition: $partition,
            offset: $offset,
            location: concat!("headers ", $topic, " / ", $partition, " / ", $offset),
        }
    };
}

pub(super) struct HeaderConvention {
    pub convention: Convention,
    pub rules: &'static [Rule],
    pub origin: Option<KafkaOrigin>,
    /// Headers matched case-insensitively (.NET stacks vary the case).
    pub case_insensitive: bool,
    /// Lowercase name prefixes: a letter with no header starting with one of them is
    /// skipped without trying each rule (most letters carry one convention only).
    pub prefixes: &'static [&'static str],
    /// Which rules read a header name, built on first use (see [`Slots`]).
    pub slots: OnceLock<Slots>,
}

/// A rule's place in [`Found`]: rules in order, then the origin's topic, partition and
/// offset headers.
const MAX_SLOTS: usize = 16;

/// The header value each slot reads in one letter.
type Found<'a> = [Option<&'a HeaderValue>; MAX_SLOTS];

/// Header name → the slots that read it (a bit each). A letter's headers are looked up
/// once each, instead of each rule scanning every header: 16 scans of ~13 headers were
/// most of this module's cost on a million-letter scan.
pub(super) struct Slots {
    by_name: foldhash::HashMap<Box<[u8]>, u32>,
    /// Longer names match no rule (and need no lowercasing).
    longest: usize,
}

impl HeaderConvention {
    pub(super) fn slot_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        let origin = self
            .origin
            .iter()
            .flat_map(|o| [o.topic, o.partition, o.offset]);
        self.rules.iter().map(|r| r.header).chain(origin)
    }

    fn slots(&self) -> &Slots {
        self.slots.get_or_init(|| {
            let mut by_name = foldhash::HashMap::<Box<[u8]>, u32>::default();
            let mut longest = 0;
            for (i, name) in self.slot_names().enumerate() {
                let key = if self.case_insensitive {
                    name.to_ascii_lowercase()
                } else {
                    name.to_string()
                };
                longest = longest.max(key.len());
                *by_name.entry(key.into_bytes().into()).or_default() |= 1 << i;
            }
            Slots { by_name, longest }
        })
    }

    /// Each slot's header in `raw`: the last one of that name, as [`RawLetter::header`]
    /// (or `RawLetter::header_ci`) finds it.
    fn find<'a>(&self, raw: &'a RawLetter) -> Found<'a> {
        let slots = self.slots();
        let mut found: Found<'a> = [None; MAX_SLOTS];
        let mut lower = [0u8; 64];
        for h in raw.headers.iter().rev() {
            let name = h.name.as_bytes();
            if name.len() > slots.longest || name.len() > lower.len() {
                continue;
            }
            let key = if self.case_insensitive {
                let l = &mut lower[..name.len()];
                l.copy_from_slice(name);
                l.make_ascii_lowercase();
                &*l
            } else {
                name
            };
            let Some(mut bits) = slots.by_name.get(key).copied() else {
                continue;
            };
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(slot) = found.get_mut(i) {
                    slot.get_or_insert(&h.value);
                }
            }
        }
        found
    }
}

pub(super) static SPRING: HeaderConvention = HeaderConvention {
    convention: Convention::SpringKafka,
    rules: &[
        // The cause is the real failure; the outer type is usually
        // ListenerExecutionFailedException.
        r!("kafka_dlt-exception-cause-fqcn", Field::ExceptionType),
        r!("kafka_dlt-exception-fqcn", Field::ExceptionType),
        r!("kafka_dlt-exception-message", Field::ReasonDetail),
        r!("kafka_dlt-key-exception-fqcn", Field::ExceptionType),
        r!("kafka_dlt-key-exception-message", Field::ReasonDetail),
        r!("kafka_dlt-original-consumer-group", Field::Consumer),
        r!(
            "kafka_dlt-original-timestamp",
            Field::OccurredAt,
            EpochMillis
        ),
    ],
    origin: Some(origin!(
        "kafka_dlt-original-topic",
        "kafka_dlt-original-partition",
        "kafka_dlt-original-offset"
    )),
    case_insensitive: false,
    prefixes: &["kafka_dlt-"],
    slots: OnceLock::new(),
};

/// Spring Cloud Stream's binders and Spring AMQP's republishing recoverer. Its
/// `x-original-topic/partition/offset` are the Kafka binder's; the RabbitMQ origin
/// (`x-original-exchange` / `x-original-routingKey`) is read in `spring_amqp_origin`.
pub(super) static SPRING_STREAM: HeaderConvention = HeaderConvention {
    convention: Convention::SpringStream,
    rules: &[
        r!("x-exception-fqcn", Field::ExceptionType),
        r!("x-exception-message", Field::ReasonDetail, ErrorText),
    ],
    origin: Some(origin!(
        "x-original-topic",
        "x-original-partition",
        "x-original-offset"
    )),
    case_insensitive: false,
    prefixes: &["x-exception-"],
    slots: OnceLock::new(),
};

pub(super) static CONNECT: HeaderConvention = HeaderConvention {
    convention: Convention::KafkaConnect,
    rules: &[
        r!(
            "__connect.errors.exception.class.name",
            Field::ExceptionType
        ),
        r!("__connect.errors.class.name", Field::ExceptionType),
        r!("__connect.errors.exception.message", Field::ReasonDetail),
        r!("__connect.errors.connector.name", Field::Consumer),
    ],
    origin: Some(origin!(
        "__connect.errors.topic",
        "__connect.errors.partition",
        "__connect.errors.offset"
    )),
    case_insensitive: false,
    prefixes: &["__connect.errors."],
    slots: OnceLock::new(),
};

pub(super) static MASSTRANSIT: HeaderConvention = HeaderConvention {
    convention: Convention::MassTransit,
    rules: &[
        r!("MT-Fault-ExceptionType", Field::ExceptionType),
        r!("MT-Fault-Message", Field::ReasonDetail),
        r!("MT-Fault-ConsumerType", Field::Consumer),
        r!("MT-Host-AssemblyVersion", Field::ConsumerVersion),
        r!("MT-Fault-RetryCount", Field::Attempt, RetriesPlusOne),
        r!("MT-Fault-Timestamp", Field::LastFailedAt),
        r!("MT-Fault-MessageType", Field::EventType),
        r!("MT-Reason", Field::DeathReason),
    ],
    origin: None,
    case_insensitive: true,
    prefixes: &["mt-"],
    slots: OnceLock::new(),
};

pub(super) static NSERVICEBUS: HeaderConvention = HeaderConvention {
    convention: Convention::NServiceBus,
    rules: &[
        r!(
            "NServiceBus.ExceptionInfo.ExceptionType",
            Field::ExceptionType
        ),
        r!("NServiceBus.ExceptionInfo.Message", Field::ReasonDetail),
        r!("NServiceBus.ProcessingEndpoint", Field::Consumer),
        r!("NServiceBus.TimeOfFailure", Field::LastFailedAt),
        r!("NServiceBus.Retries", Field::Attempt, RetriesPlusOne),
        r!("NServiceBus.MessageId", Field::MessageId),
        r!("NServiceBus.CorrelationId", Field::CorrelationId),
        r!(
            "NServiceBus.EnclosedMessageTypes",
            Field::EventType,
            TypeList
        ),
        r!("NServiceBus.FailedQ", Field::Origin),
    ],
    origin: None,
    case_insensitive: true,
    prefixes: &["nservicebus."],
    slots: OnceLock::new(),
};

pub(super) static AZURE: HeaderConvention = HeaderConvention {
    convention: Convention::AzureServiceBus,
    rules: &[
        r!("DeadLetterReason", Field::ReasonCode),
        r!("DeadLetterErrorDescription", Field::ReasonDetail),
        r!("DeliveryCount", Field::Attempt),
    ],
    origin: None,
    case_insensitive: true,
    prefixes: &["deadletter", "deliverycount"],
    slots: OnceLock::new(),
};

/// A Kafka share group's DLQ, written by the broker (KIP-1191, Kafka 4.4): the origin
/// record's coordinates, the group, the delivery count and why. By default the record
/// has no key and no value: the payload is the source record at the origin.
pub(super) static SHARE_GROUP: HeaderConvention = HeaderConvention {
    convention: Convention::KafkaShareGroup,
    rules: &[
        r!("__dlq.errors.message", Field::ReasonCode, ShareGroupReason),
        r!("__dlq.errors.group", Field::Consumer),
        r!("__dlq.errors.delivery.count", Field::Attempt),
    ],
    origin: Some(origin!(
        "__dlq.errors.topic",
        "__dlq.errors.partition",
        "__dlq.errors.offset"
    )),
    case_insensitive: false,
    prefixes: &["__dlq.errors."],
    slots: OnceLock::new(),
};

/// Kafka Streams' dead-letter queue (KIP-1034, Kafka 4.2).
pub(super) static STREAMS: HeaderConvention = HeaderConvention {
    convention: Convention::KafkaStreams,
    rules: &[
        r!("__streams.errors.exception", Field::ExceptionType),
        r!("__streams.errors.message", Field::ReasonDetail),
    ],
    origin: Some(origin!(
        "__streams.errors.topic",
        "__streams.errors.partition",
        "__streams.errors.offset"
    )),
    case_insensitive: false,
    prefixes: &["__streams.errors."],
    slots: OnceLock::new(),
};

/// Karafka (Ruby) dispatching to its DLQ topic.
pub(super) static KARAFKA: HeaderConvention = HeaderConvention {
    convention: Convention::Karafka,
    rules: &[
        r!("source_consumer_group", Field::Consumer),
        r!("source_attempts", Field::Attempt),
        r!("source_trace_id", Field::CorrelationId),
    ],
    origin: Some(origin!("source_topic", "source_partition", "source_offset")),
    case_insensitive: false,
    prefixes: &["source_"],
    slots: OnceLock::new(),
};

/// Watermill's poison-queue middleware (Go): the handler's error and where it came from.
pub(super) static WATERMILL: HeaderConvention = HeaderConvention {
    convention: Convention::Watermill,
    rules: &[
        r!("reason_poisoned", Field::ReasonDetail, ErrorText),
        r!("handler_poisoned", Field::Consumer),
        r!("topic_poisoned", Field::Origin),
    ],
    origin: None,
    case_insensitive: false,
    prefixes: &[
        "reason_poisoned",
        "handler_poisoned",
        "topic_poisoned",
        "subscriber_poisoned",
    ],
    slots: OnceLock::new(),
};

/// Hand-rolled retry/DLQ pipelines. Generic, so they rank below the frameworks.
pub(super) static X_HEADERS: HeaderConvention = HeaderConvention {
    convention: Convention::XHeaders,
    rules: &[
        r!("x-reason-code", Field::ReasonCode),
        r!("x-error", Field::ReasonDetail, ErrorText),
        r!("x-exception-type", Field::ExceptionType),
        r!("x-consumer", Field::Consumer),
        r!("x-consumer-version", Field::ConsumerVersion),
        r!("x-attempt", Field::Attempt),
        r!("x-delivery-count", Field::Attempt, RetriesPlusOne),
        r!("x-message-id", Field::MessageId),
        r!("x-correlation-id", Field::CorrelationId),
        r!("x-event-type", Field::EventType),
        r!("x-schema-version", Field::SchemaVersion),
        r!("x-first-failed-at", Field::FirstFailedAt),
        r!("x-last-failed-at", Field::LastFailedAt),
    ],
    origin: Some(origin!(
        "x-original-topic",
        "x-original-partition",
        "x-original-offset"
    )),
    case_insensitive: false,
    prefixes: &["x-"],
    slots: OnceLock::new(),
};

/// Framework conventions in priority order (x-headers run later, after x-death).
pub(super) static CONVENTIONS: [&HeaderConvention; 10] = [
    &SPRING,
    &SPRING_STREAM,
    &CONNECT,
    &SHARE_GROUP,
    &STREAMS,
    &KARAFKA,
    &WATERMILL,
    &MASSTRANSIT,
    &NSERVICEBUS,
    &AZURE,
];

/// The bit of [`X_HEADERS`] in [`present`]'s answer (after the [`CONVENTIONS`]').
pub(super) const X_HEADERS_BIT: u32 = 1 << CONVENTIONS.len();

/// Prefixes by their first byte: (the convention's bit, the prefix).
type PrefixTable = Vec<Vec<(u32, &'static [u8])>>;

/// Which conventions a letter's headers may belong to: bit `i` for `CONVENTIONS[i]`,
/// [`X_HEADERS_BIT`] for the `x-` headers. One pass over the headers, each name
/// lowercased once and compared only with the prefixes that start with its first byte
/// (each convention comparing every header with its prefixes, case-folding as it went,
/// was ~6% of preparing a letter).
pub(super) fn present(raw: &RawLetter) -> u32 {
    static TABLE: OnceLock<PrefixTable> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t: PrefixTable = vec![Vec::new(); 256];
        let all = CONVENTIONS.iter().copied().chain([&X_HEADERS]);
        for (i, conv) in all.enumerate() {
            for p in conv.prefixes {
                let p = p.as_bytes();
                if let Some(&first) = p.first() {
                    t[usize::from(first.to_ascii_lowercase())].push((1 << i, p));
                }
            }
        }
        t
    });
    let mut bits = 0;
    let mut lower = [0u8; PREFIX_MAX];
    for h in &raw.headers {
        let name = h.name.as_bytes();
        let Some(&first) = name.first() else {
            continue;
        };
        let candidates = &table[usize::from(first.to_ascii_lowercase())];
        if candidates.is_empty() {
            continue;
        }
        let n = name.len().min(PREFIX_MAX);
        lower[..n].copy_from_slice(&name[..n]);
        lower[..n].make_ascii_lowercase();
        for (bit, p) in candidates {
            if lower[..n].starts_with(p) {
                bits |= bit;
            }
        }
    }
    bits
}

/// Longest prefix a convention may name (the test below holds them to it).
const PREFIX_MAX: usize = 32;

/// Read one convention's headers (the caller checked with [`present`] that it may
/// apply).
pub(super) fn apply(conv: &HeaderConvention, raw: &RawLetter, c: &mut Candidates) {
    let found = conv.find(raw);
    let cv = &conv.convention;
    for (rule, value) in conv.rules.iter().zip(found) {
        let Some(value) = value else {
            continue;
        };
        offer(rule, value, cv, c);
    }
    if let Some(o) = &conv.origin {
        let n = conv.rules.len();
        let at = |i: usize| found.get(n + i).copied().flatten();
        if let Some(topic) = at(0).and_then(HeaderValue::as_nonempty_text) {
            let partition = at(1)
                .and_then(HeaderValue::as_i64_lenient)
                .and_then(|p| i32::try_from(p).ok());
            let offset = at(2).and_then(HeaderValue::as_i64_lenient);
            c.offer_origin(
                Origin::Kafka {
                    topic,
                    partition,
                    offset,
                },
                cv,
                o.location,
            );
        }
    }
}

/// What one rule reads from its header's value, offered to the candidates.
fn offer(rule: &Rule, value: &HeaderValue, cv: &Convention, c: &mut Candidates) {
    let loc = || rule.location.into();
    match rule.read {
        Read::Text => {
            if let Some(t) = value.nonempty_text() {
                c.offer_text(rule.field, &t, cv, loc);
            }
        }
        Read::ErrorText => {
            if let Some(t) = value.nonempty_text() {
                let first_line = t.lines().next().unwrap_or(&t);
                if let (Some(ty), _) = crate::fingerprint::split_exception(first_line) {
                    c.offer_text(Field::ExceptionType, ty, cv, loc);
                }
                c.offer_text(rule.field, &t, cv, loc);
            }
        }
        Read::RetriesPlusOne => {
            if let Some(n) = value.as_i64_lenient().and_then(|n| u32::try_from(n).ok()) {
                c.offer_attempt(n.saturating_add(1), cv, rule.location);
            }
        }
        Read::EpochMillis => {
            if let Some(t) = value.as_i64_lenient().and_then(timefmt::from_epoch_guess) {
                c.offer_time(rule.field, t, cv, rule.location);
            }
        }
        Read::ShareGroupReason => {
            if let Some(t) = value.nonempty_text() {
                let lower = t.to_ascii_lowercase();
                let code = if lower.contains("rejected") {
                    Some("rejected-by-consumer")
                } else if lower.contains("delivery count") {
                    Some("delivery-limit-reached")
                } else {
                    None
                };
                if let Some(code) = code {
                    c.offer_text(Field::ReasonCode, code, cv, loc);
                }
                c.offer_text(Field::ReasonDetail, &t, cv, loc);
            }
        }
        Read::TypeList => {
            if let Some(t) = value.nonempty_text() {
                let first = t.split(';').next().unwrap_or(&t);
                let ty = first.split(',').next().unwrap_or(first);
                c.offer_text(rule.field, ty, cv, loc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Header;
    use proptest::prelude::*;

    /// The presence check in one pass finds what each convention's own scan found:
    /// prefixes in any case, none beyond `PREFIX_MAX`, a letter of several conventions.
    #[test]
    fn presence_is_found_in_one_pass_in_any_case() {
        let all: Vec<&HeaderConvention> = CONVENTIONS.iter().copied().chain([&X_HEADERS]).collect();
        assert!(all.len() <= 32);
        for conv in &all {
            for p in conv.prefixes {
                assert!(p.len() <= PREFIX_MAX, "{p}");
                assert_eq!(*p, p.to_ascii_lowercase(), "prefixes are lowercase");
            }
        }
        let letter = |names: &[&'static str]| RawLetter {
            headers: names
                .iter()
                .map(|n| Header::new(*n, HeaderValue::text("v")))
                .collect(),
            ..RawLetter::default()
        };
        let bit = |c: &HeaderConvention| {
            1u32 << all
                .iter()
                .position(|x| std::ptr::eq(*x, c))
                .expect("listed")
        };
        assert_eq!(present(&letter(&[])), 0);
        assert_eq!(present(&letter(&["traceparent", "", "content-type"])), 0);
        assert_eq!(
            present(&letter(&[
                "KAFKA_DLT-EXCEPTION-FQCN",
                "NServiceBus.ExceptionInfo.Message"
            ])),
            bit(&SPRING) | bit(&NSERVICEBUS)
        );
        assert_eq!(present(&letter(&["x-reason-code"])), X_HEADERS_BIT);
        assert_eq!(
            present(&letter(&["x-exception-message"])),
            bit(&SPRING_STREAM) | X_HEADERS_BIT
        );
        assert_eq!(present(&letter(&["__dlq.errors.group"])), bit(&SHARE_GROUP));
    }

    fn all() -> impl Iterator<Item = &'static HeaderConvention> {
        CONVENTIONS.into_iter().chain([&X_HEADERS])
    }

    #[test]
    fn every_convention_fits_its_slots() {
        for conv in all() {
            assert!(conv.slot_names().count() <= MAX_SLOTS);
        }
    }

    /// Names of every rule, in their case and others, plus names no rule reads.
    fn name() -> impl Strategy<Value = String> {
        let known: Vec<&'static str> = all().flat_map(HeaderConvention::slot_names).collect();
        prop_oneof![
            proptest::sample::select(known.clone()).prop_map(str::to_string),
            proptest::sample::select(known.clone()).prop_map(|n| n.to_ascii_uppercase()),
            proptest::sample::select(known).prop_map(|n| format!("{n}-not")),
            "[a-zA-Z._-]{0,70}",
        ]
    }

    proptest! {
        /// One pass over the headers finds, for every rule, what a lookup per rule finds:
        /// the last header of that name, ignoring case where the convention does.
        #[test]
        fn one_pass_finds_what_each_lookup_finds(
            names in proptest::collection::vec(name(), 0..24),
        ) {
            let raw = RawLetter {
                headers: names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| Header::new(n.clone(), HeaderValue::Int(i as i64)))
                    .collect(),
                ..RawLetter::default()
            };
            for conv in all() {
                let found = conv.find(&raw);
                for (i, name) in conv.slot_names().enumerate() {
                    let want = if conv.case_insensitive {
                        raw.header_ci(name)
                    } else {
                        raw.header(name)
                    };
                    prop_assert_eq!(found[i], want, "{}", name);
                }
            }
        }
    }
}
