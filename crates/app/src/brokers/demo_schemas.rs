//! The demo's schema-encoded topic, `payouts.dlq`: a payouts service whose v2 producer
//! writes a schema its v1 consumer cannot read, a producer that framed v2 bytes with the
//! v1 id, records framed with an id nobody registered, and v1 records that decode fine
//! but fail validation. Avro, Confluent-framed, with the registry the demo needs served
//! in process (as the mock cluster is) for the life of the process.

use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_core::ports::SourceError;
use dlq_core::schema::{Format, PayloadCodec, SchemaInfo};
use dlq_kafka::demo::scenario::Rng;
use dlq_kafka::demo::Extra;
use dlq_schema::serve::{Registered, ServedRegistry};
use dlq_schema::SchemaCodec;
use std::sync::OnceLock;

pub const PAYOUTS_DLQ: &str = "payouts.dlq";
/// The origin topic replays go to.
pub const PAYOUTS: &str = "payouts";
const PARTITIONS: i32 = 3;
const V1: u32 = 101;
const V2: u32 = 102;

/// `memo` carries a name and an address that no detector or field name recognises: the
/// schema's `confluent:tags` is what masks it.
const PAYOUT_V1: &str = r#"{"type":"record","name":"Payout","namespace":"com.acme.payouts","fields":[
 {"name":"payout_id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"account","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"requested_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"memo","type":"string","confluent:tags":["PII"]}]}"#;

const PAYOUT_V2: &str = r#"{"type":"record","name":"Payout","namespace":"com.acme.payouts","fields":[
 {"name":"payout_id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"account","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"fee","type":{"type":"bytes","logicalType":"decimal","precision":8,"scale":2}},
 {"name":"channel","type":{"type":"enum","name":"Channel","symbols":["SEPA","SWIFT","CARD"]}},
 {"name":"requested_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"memo","type":"string","confluent:tags":["PII"]}]}"#;

/// The demo's registry, started on first use and kept for the process.
pub fn registry() -> Result<&'static ServedRegistry, SourceError> {
    static REGISTRY: OnceLock<Result<ServedRegistry, String>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| {
            let schema = |id, version, text: &str| Registered {
                id,
                subject: "payouts-value".into(),
                version,
                format: Format::Avro,
                text: text.into(),
                references: Vec::new(),
            };
            ServedRegistry::start(vec![schema(V1, 1, PAYOUT_V1), schema(V2, 2, PAYOUT_V2)], 0)
        })
        .as_ref()
        .map_err(|e| SourceError::failed(format!("demo: {e}")))
}

/// The topics and letters the demo adds to the mock cluster.
pub fn extra(seed: u64, now: chrono::DateTime<chrono::Utc>) -> Result<Extra, SourceError> {
    let url = registry()?.url.clone();
    let codec =
        SchemaCodec::for_registry(&url).map_err(|e| SourceError::failed(format!("demo: {e}")))?;
    let encode = |id: u32, json: &serde_json::Value| {
        codec
            .encode(
                &SchemaInfo::framed(Format::Avro, id, Vec::new()),
                &json.to_string(),
            )
            .map_err(|e| SourceError::failed(format!("demo: encoding a payout: {e}")))
    };
    let mut rng = Rng::new(seed ^ 0x005e_eda7);
    let mut drafts: Vec<(i64, Vec<Header>, String, Vec<u8>)> = Vec::new();
    let names = ["Jane Roe", "Marco Rossi", "Aiko Tanaka", "Lena Berg"];
    let streets = ["12 Rue de Rivoli", "4 Unter den Linden", "9 Calle Mayor"];
    for k in 0..116u64 {
        let account = format!("acct-{}", 1000 + rng.below(60));
        let age_ms = 60_000 + (rng.below(5 * 3600) as i64) * 1000;
        let uuid = format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            rng.next_u64() as u32,
            rng.below(0xffff),
            rng.below(0xfff),
            rng.below(0xfff),
            rng.next_u64() & 0xffff_ffff_ffff
        );
        let cents = 500 + rng.below(250_000) as i64;
        let memo = format!("refund for {}, {}", rng.pick(&names), rng.pick(&streets));
        let at = now.timestamp_millis() - age_ms - 5_000;
        let v2 = serde_json::json!({
            "payout_id": uuid, "account": account, "amount": cents_text(cents), "fee": "1.50",
            "channel": *rng.pick(&["SEPA", "SWIFT", "CARD"]), "requested_at": at, "memo": memo,
        });
        let (headers, payload) = match k % 116 {
            // The v2 producer's records: the v1 consumer cannot read them.
            0..=47 => (
                spring("org.apache.avro.AvroTypeException", "Found com.acme.payouts.Payout, expecting com.acme.payouts.Payout, missing required field fee", "payout-worker 1.8.2"),
                encode(V2, &v2)?,
            ),
            // A producer that framed v2 bytes with the v1 id.
            48..=73 => {
                let mut b = encode(V2, &v2)?;
                b[1..5].copy_from_slice(&V1.to_be_bytes());
                (
                    spring("org.apache.kafka.common.errors.SerializationException", "Error deserializing Avro message for id 101", "payout-worker 1.8.2"),
                    b,
                )
            }
            // Framed with an id nobody registered.
            74..=85 => {
                let mut b = encode(V2, &v2)?;
                b[1..5].copy_from_slice(&4711u32.to_be_bytes());
                (
                    spring("org.apache.kafka.common.errors.SerializationException", "Error retrieving Avro schema for id 4711", "payout-worker 1.8.2"),
                    b,
                )
            }
            // v1 records that decode but fail validation.
            _ => {
                let v1 = serde_json::json!({
                    "payout_id": v2["payout_id"], "account": v2["account"],
                    "amount": cents_text(-cents), "requested_at": at, "memo": v2["memo"],
                });
                let mut h = spring("com.acme.payouts.ValidationException", "amount must be positive", "payout-worker 1.8.2");
                h.push(dlq_core::conventions::header("x-reason-code", HeaderValue::text("payout_amount_negative")));
                (h, encode(V1, &v1)?)
            }
        };
        drafts.push((age_ms, headers, account, payload));
    }
    // Oldest first, as a DLQ fills.
    drafts.sort_by_key(|d| std::cmp::Reverse(d.0));
    let mut next = [0i64; PARTITIONS as usize];
    let letters = drafts
        .into_iter()
        .map(|(age_ms, headers, account, payload)| {
            let partition =
                (account.bytes().map(u32::from).sum::<u32>() % PARTITIONS as u32) as i32;
            let offset = next[partition as usize];
            next[partition as usize] += 1;
            RawLetter {
                coords: Some(Coords::Kafka {
                    topic: PAYOUTS_DLQ.into(),
                    partition,
                    offset,
                }),
                key: Some(account.into_bytes()),
                headers: headers
                    .into_iter()
                    .chain([
                        dlq_core::conventions::header(
                            "kafka_dlt-original-topic",
                            HeaderValue::text(PAYOUTS),
                        ),
                        dlq_core::conventions::header(
                            "kafka_dlt-original-partition",
                            HeaderValue::Bytes(partition.to_be_bytes().to_vec()),
                        ),
                    ])
                    .collect(),
                properties: Vec::new(),
                payload,
                timestamp: Some(now - chrono::Duration::milliseconds(age_ms)),
            }
        })
        .collect();
    Ok(Extra {
        topics: vec![
            (PAYOUTS_DLQ.into(), PARTITIONS),
            (PAYOUTS.into(), PARTITIONS),
        ],
        dlqs: vec![PAYOUTS_DLQ.into()],
        letters,
    })
}

fn spring(fqcn: &str, message: &str, version: &str) -> Vec<Header> {
    vec![
        dlq_core::conventions::header("kafka_dlt-exception-fqcn", HeaderValue::text(fqcn)),
        dlq_core::conventions::header("kafka_dlt-exception-message", HeaderValue::text(message)),
        dlq_core::conventions::header("x-consumer-version", HeaderValue::text(version)),
    ]
}

fn cents_text(c: i64) -> String {
    format!(
        "{}{}.{:02}",
        if c < 0 { "-" } else { "" },
        c.abs() / 100,
        c.abs() % 100
    )
}
