//! Decoding and masking schema-encoded letters: what preparation costs per letter for a
//! ~1 KiB Avro record and the same Protobuf message, next to the same record as a JSON
//! body (conventions, decoding, masked preview — `prepare_with`, as the scan does).
//!
//! `cargo bench --bench schema` prints letters/s for each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench may stop on a broken fixture

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use dlq_core::catalog::prepare_with;
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, HeaderValue, RawLetter};
use dlq_core::schema::{Format, PayloadCodec, SchemaInfo};
use dlq_schema::SchemaCodec;

const AVSC: &str = r#"{"type":"record","name":"Order","namespace":"com.acme","fields":[
 {"name":"order_id","type":"string"},{"name":"customer","type":{"type":"record","name":"Customer","fields":[
   {"name":"name","type":"string"},{"name":"email","type":"string"},{"name":"street","type":"string"},
   {"name":"city","type":"string"},{"name":"memo","type":"string","confluent:tags":["PII"]}]}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"currency","type":{"type":"enum","name":"Currency","symbols":["EUR","USD","GBP"]}},
 {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
   {"name":"sku","type":"string"},{"name":"title","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}}}]}"#;

const PROTO: &str = r#"syntax = "proto3";
package acme;
message Order {
  string order_id = 1;
  message Customer { string name = 1; string email = 2; string street = 3; string city = 4; string memo = 5 [debug_redact = true]; }
  Customer customer = 2;
  string amount = 3;
  enum Currency { EUR = 0; USD = 1; GBP = 2; }
  Currency currency = 4;
  string placed_at = 5;
  string note = 6;
  message Line { string sku = 1; string title = 2; int32 qty = 3; double price = 4; }
  repeated Line lines = 7;
}
"#;

fn record() -> serde_json::Value {
    let lines: Vec<serde_json::Value> = (0..9)
        .map(|i| serde_json::json!({"sku": format!("SKU-{i:05}"), "title": format!("Stainless steel widget, size {i}"), "qty": i + 1, "price": 19.5 + f64::from(i)}))
        .collect();
    serde_json::json!({
        "order_id": "ord_01K5T7Z0EJN3FKFTTQ23AVGRYY",
        "customer": {"name": "Jane Roe", "email": "jane.roe@example.com", "street": "12 Rue de Rivoli", "city": "Paris", "memo": "call before 9, gate code 4412"},
        "amount": "1500.25", "currency": "EUR", "placed_at": "2026-12-03T04:05:06.789Z", "note": "leave at the door",
        "lines": lines,
    })
}

fn letter(topic: &str, payload: Vec<u8>) -> RawLetter {
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: topic.into(),
            partition: 0,
            offset: 7,
        }),
        key: Some(b"ord_01K5T7Z0EJN3FKFTTQ23AVGRYY".to_vec()),
        headers: vec![
            dlq_core::conventions::header(
                "kafka_dlt-exception-fqcn",
                HeaderValue::text("com.acme.ValidationException"),
            ),
            dlq_core::conventions::header(
                "kafka_dlt-exception-message",
                HeaderValue::text("amount must be positive"),
            ),
            dlq_core::conventions::header("kafka_dlt-original-topic", HeaderValue::text("orders")),
        ],
        properties: Vec::new(),
        payload,
        timestamp: None,
    }
}

fn info(id: u32, format: Format, indexes: Vec<i32>) -> SchemaInfo {
    SchemaInfo::framed(format, id, indexes)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1.avsc"), AVSC).unwrap();
    std::fs::write(dir.path().join("2.proto"), PROTO).unwrap();
    let codec = SchemaCodec::for_dir(dir.path()).unwrap();
    let json = record();
    let avro = codec
        .encode(&info(1, Format::Avro, vec![]), &json.to_string())
        .unwrap();
    let proto = codec
        .encode(&info(2, Format::Protobuf, vec![0]), &json.to_string())
        .unwrap();
    let plain = serde_json::to_vec(&json).unwrap();
    let masker = Masker::with_key(b"bench".to_vec());
    eprintln!(
        "payload bytes: avro {} protobuf {} json {}",
        avro.len(),
        proto.len(),
        plain.len()
    );
    let mut g = c.benchmark_group("prepare 1 KiB record");
    g.throughput(Throughput::Elements(1));
    for (name, payload, with_codec) in [
        ("json", plain, false),
        ("avro", avro, true),
        ("protobuf", proto, true),
    ] {
        let raw = letter("orders.dlq", payload);
        let codec: Option<&dyn PayloadCodec> = if with_codec { Some(&codec) } else { None };
        let (dl, preview) = prepare_with(&masker, &[], codec, true, raw.clone());
        assert!(
            dl.schema.as_ref().is_none_or(|s| s.decoded().is_some()),
            "{name}: {:?}",
            dl.schema
        );
        assert!(!preview.contains("Jane"), "{preview}");
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(prepare_with(
                    &masker,
                    &[],
                    codec,
                    true,
                    black_box(raw.clone()),
                ))
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
