#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::serve::{Fault, Registered, ServedRegistry};
use super::*;

pub const PAYMENT_V1: &str = r#"{
  "type": "record", "name": "Payment", "namespace": "com.acme",
  "fields": [
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "SETTLED", "FAILED"]}},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "holder", "type": "string", "confluent:tags": ["PII"]},
    {"name": "ref", "type": ["null", "long", "string"], "default": null}
  ]
}"#;

const ORDERS_PROTO: &str = r#"
syntax = "proto3";
package acme;
import "confluent/meta.proto";
message Envelope { string trace = 1; }
message Order {
  string id = 1;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 2;
  oneof pay { string card = 3; string iban = 4; }
  string buyer = 5 [(confluent.field_meta).tags = "PII"];
  string courier = 6 [debug_redact = true];
}
"#;

const ORDER_JSON_SCHEMA: &str = r#"{
  "title": "Order", "type": "object",
  "properties": {
    "id": {"type": "string"},
    "qty": {"type": "integer", "minimum": 1},
    "contact": {"type": "string", "confluent:tags": ["PII"]}
  },
  "required": ["id", "qty"]
}"#;

fn registered() -> Vec<Registered> {
    vec![
        Registered {
            id: 1,
            subject: "payments-value".into(),
            version: 1,
            format: Format::Avro,
            text: PAYMENT_V1.into(),
            references: vec![],
        },
        Registered {
            id: 2,
            subject: "orders-value".into(),
            version: 3,
            format: Format::Protobuf,
            text: ORDERS_PROTO.into(),
            references: vec![],
        },
        Registered {
            id: 3,
            subject: "orders-json-value".into(),
            version: 1,
            format: Format::JsonSchema,
            text: ORDER_JSON_SCHEMA.into(),
            references: vec![],
        },
    ]
}

fn codec_for(url: &str) -> SchemaCodec {
    SchemaCodec::open(&SchemaSettings {
        registry: Some(RegistryConfig {
            url: url.into(),
            // Short, so the hung-registry case stays quick.
            timeout: Some(Duration::from_millis(800)),
            ..Default::default()
        }),
        dir: None,
        ..Default::default()
    })
    .unwrap()
}

fn info(id: u32, format: Format, indexes: Vec<i32>) -> SchemaInfo {
    SchemaInfo::framed(format, id, indexes)
}

const PAYMENT: &str = r#"{"id":"5f0c6c1e-2d6e-4b8e-9a55-0d7e1c1f2a3b","amount":"1500.25","at":"2026-12-03T04:05:06.789Z","status":"FAILED","note":null,"holder":"Jane Roe","ref":"R-7"}"#;

#[test]
fn avro_through_the_registry_decodes_logical_types_unions_and_enums_and_round_trips() {
    let reg = ServedRegistry::start(registered(), 0).unwrap();
    let codec = codec_for(&reg.url);
    let bytes = codec
        .encode(&info(1, Format::Avro, vec![]), PAYMENT)
        .unwrap();
    assert_eq!(&bytes[..5], &[0, 0, 0, 0, 1]);
    // A standard Avro reader reads what we wrote.
    let schema = apache_avro::Schema::parse_str(PAYMENT_V1).unwrap();
    let mut rest = &bytes[5..];
    let v = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .unwrap()
        .read_value(&mut rest)
        .unwrap();
    assert!(rest.is_empty());
    assert!(format!("{v:?}").contains("FAILED"));
    let d = codec.decode("payments", Part::Value, &bytes).unwrap();
    let Decoding::Decoded(d) = d else {
        panic!("{d:?}")
    };
    assert_eq!(d.json, PAYMENT);
    assert_eq!(d.schema.name, "com.acme.Payment");
    assert_eq!(
        (d.schema.subject.as_deref(), d.schema.version),
        (Some("payments-value"), Some(1))
    );
    assert_eq!(d.schema.pii_fields, vec!["holder".to_string()]);
    // An edit that no longer fits is refused with the field named.
    let bad = PAYMENT.replace(r#""status":"FAILED""#, r#""status":"LOST""#);
    let e = codec.encode(&d.schema, &bad).unwrap_err();
    assert!(e.0.contains("status") && e.0.contains("LOST"), "{e}");
    let e = codec
        .encode(&d.schema, &PAYMENT.replace("1500.25", "1,500.25"))
        .unwrap_err();
    assert!(e.0.contains("amount"), "{e}");
    let e = codec
        .encode(
            &d.schema,
            &PAYMENT.replace(r#""ref":"R-7""#, r#""ref":"R-7","extra":1"#),
        )
        .unwrap_err();
    assert!(e.0.contains("extra"), "{e}");
}

#[test]
fn avro_written_with_another_schema_is_a_poison_pill_by_cause() {
    let reg = ServedRegistry::start(registered(), 0).unwrap();
    let codec = codec_for(&reg.url);
    let mut bytes = framing::header(1);
    bytes.extend_from_slice(&[0x02, b'x']);
    let d = codec.decode("payments", Part::Value, &bytes).unwrap();
    let why = d.reason().unwrap();
    assert!(
        why.starts_with("undecodable: Avro for com.acme.Payment v1"),
        "{why}"
    );
    let d = codec
        .decode("payments", Part::Value, &[0, 0, 0, 0x12, 0x67, 1])
        .unwrap();
    assert!(
        d.reason().unwrap().contains("unknown schema id 4711"),
        "{d:?}"
    );
    let d = codec
        .decode("payments", Part::Value, &[0xff, 0x01, 0x02, 0x00])
        .unwrap();
    assert_eq!(d.reason().unwrap(), "undecodable: not Confluent-framed");
    // Unframed JSON is left alone.
    assert_eq!(codec.decode("payments", Part::Value, br#"{"a":1}"#), None);
}

#[test]
fn protobuf_nested_oneof_and_a_message_index_other_than_the_first() {
    let reg = ServedRegistry::start(registered(), 0).unwrap();
    let codec = codec_for(&reg.url);
    let order = r#"{"id":"o-1","lines":[{"sku":"SKU-18","qty":2}],"iban":"DE89370400440532013000","buyer":"Jane","courier":"Bob"}"#;
    let bytes = codec
        .encode(&info(2, Format::Protobuf, vec![1]), order)
        .unwrap();
    assert_eq!(
        &bytes[..7],
        &[0, 0, 0, 0, 2, 2, 2],
        "header then indexes [1]"
    );
    let Decoding::Decoded(d) = codec.decode("orders", Part::Value, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(d.schema.name, "acme.Order");
    assert_eq!(d.schema.message_indexes, vec![1]);
    let v: serde_json::Value = serde_json::from_str(&d.json).unwrap();
    assert_eq!(v["lines"][0]["sku"], "SKU-18");
    assert_eq!(v["iban"], "DE89370400440532013000");
    assert_eq!(v["card"], serde_json::Value::Null, "{}", d.json);
    assert!(
        d.schema.pii_fields.contains(&"buyer".to_string()),
        "{:?}",
        d.schema.pii_fields
    );
    assert!(
        d.schema.pii_fields.contains(&"courier".to_string()),
        "{:?}",
        d.schema.pii_fields
    );
    // Index [0] is the Envelope.
    let env = codec
        .encode(&info(2, Format::Protobuf, vec![0]), r#"{"trace":"t"}"#)
        .unwrap();
    assert_eq!(&env[5..6], &[0]);
    let Decoding::Decoded(d) = codec.decode("orders", Part::Value, &env).unwrap() else {
        panic!()
    };
    assert_eq!(d.schema.name, "acme.Envelope");
    let e = codec
        .encode(&info(2, Format::Protobuf, vec![1]), r#"{"qty_typo":1}"#)
        .unwrap_err();
    assert!(e.0.contains("qty_typo"), "{e}");
}

#[test]
fn json_schema_decodes_and_validates_an_edit() {
    let reg = ServedRegistry::start(registered(), 0).unwrap();
    let codec = codec_for(&reg.url);
    let mut bytes = framing::header(3);
    bytes.extend_from_slice(br#"{"id":"o-9","qty":0,"contact":"x"}"#);
    let Decoding::Decoded(d) = codec.decode("orders-json", Part::Value, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(d.schema.format, Format::JsonSchema);
    assert_eq!(d.schema.pii_fields, vec!["contact".to_string()]);
    let e = codec
        .encode(&d.schema, r#"{"id":"o-9","qty":0}"#)
        .unwrap_err();
    assert!(e.0.contains("/qty"), "{e}");
    let ok = codec.encode(&d.schema, r#"{"id":"o-9","qty":2}"#).unwrap();
    assert_eq!(&ok[..5], &bytes[..5]);
}

#[test]
fn registry_faults_each_give_a_named_reason_and_never_hang() {
    let reg = ServedRegistry::start(registered(), 0).unwrap();
    reg.inject(1, Fault::Status(500));
    reg.inject(2, Fault::Hang);
    reg.inject(3, Fault::Garbage);
    let codec = codec_for(&reg.url);
    let framed = |id: u32| {
        let mut b = framing::header(id);
        b.push(0);
        b
    };
    let started = Instant::now();
    let d = codec.decode("t", Part::Value, &framed(1)).unwrap();
    assert!(
        matches!(&d, Decoding::Pending(w) if w.contains("answered 500")),
        "{d:?}"
    );
    let d = codec.decode("t", Part::Value, &framed(2)).unwrap();
    assert!(matches!(&d, Decoding::Pending(_)), "{d:?}");
    // The next letter of a hung id does not wait again.
    let again = Instant::now();
    assert!(matches!(
        codec.decode("t", Part::Value, &framed(2)),
        Some(Decoding::Pending(_))
    ));
    assert!(again.elapsed() < Duration::from_millis(500));
    let d = codec.decode("t", Part::Value, &framed(3)).unwrap();
    assert!(
        matches!(&d, Decoding::Undecodable(w) if w.contains("schema id 3 does not parse as Avro")),
        "{d:?}"
    );
    let d = codec.decode("t", Part::Value, &framed(99)).unwrap();
    assert!(
        matches!(&d, Decoding::Undecodable(w) if w.contains("unknown schema id 99")),
        "{d:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Unreachable.
    let gone = codec_for("http://127.0.0.1:9");
    let d = gone.decode("t", Part::Value, &framed(1)).unwrap();
    assert!(
        matches!(&d, Decoding::Pending(w) if w.contains("127.0.0.1:9")),
        "{d:?}"
    );
}

#[test]
fn a_schema_directory_reads_ids_files_and_topic_mappings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1.avsc"), PAYMENT_V1).unwrap();
    std::fs::write(dir.path().join("orders.proto"), ORDERS_PROTO).unwrap();
    std::fs::write(
        dir.path().join("schemas.toml"),
        "[ids]\n2 = \"orders.proto\"\n[topics.\"orders.raw\"]\nvalue = \"orders.proto:acme.Order\"\n",
    )
    .unwrap();
    let codec = SchemaCodec::for_dir(dir.path()).unwrap();
    let bytes = codec
        .encode(&info(1, Format::Avro, vec![]), PAYMENT)
        .unwrap();
    let Decoding::Decoded(d) = codec.decode("payments", Part::Value, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(
        (d.schema.source.as_str(), d.json.as_str()),
        ("1.avsc", PAYMENT)
    );
    let order = codec
        .encode(&info(2, Format::Protobuf, vec![1]), r#"{"id":"o-2"}"#)
        .unwrap();
    assert!(matches!(
        codec.decode("orders", Part::Value, &order),
        Some(Decoding::Decoded(_))
    ));
    // Unframed, named by the topic mapping.
    let Decoding::Decoded(d) = codec
        .decode("orders.raw", Part::Value, &order[7..])
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (d.schema.name.as_str(), d.schema.framed),
        ("acme.Order", false)
    );
    let back = codec.encode(&d.schema, r#"{"id":"o-3"}"#).unwrap();
    assert_ne!(back.first(), Some(&0), "written back unframed");
    let d = codec
        .decode("payments", Part::Value, &framing::header(77))
        .unwrap();
    assert!(
        d.reason().unwrap().contains("unknown schema id 77"),
        "{d:?}"
    );
    // A mapping to a file that is not there is refused at open.
    std::fs::write(
        dir.path().join("schemas.toml"),
        "[topics.x]\nvalue = \"nope.avsc\"\n",
    )
    .unwrap();
    let e = SchemaCodec::for_dir(dir.path()).unwrap_err();
    assert!(e.contains("nope.avsc"), "{e}");
}

/// An envelope inside a decoded record is read like one in a JSON body: message id and
/// reason code come from it, with their provenance.
#[test]
fn conventions_read_an_envelope_inside_an_avro_record() {
    const ENVELOPE: &str = r#"{"type":"record","name":"Envelope","namespace":"com.acme","fields":[
      {"name":"message_id","type":"string"},
      {"name":"failure","type":{"type":"record","name":"Failure","fields":[{"name":"reason_code","type":"string"}]}},
      {"name":"payload","type":{"type":"record","name":"Body","fields":[{"name":"sku","type":"string"}]}}]}"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("9.avsc"), ENVELOPE).unwrap();
    let codec = SchemaCodec::for_dir(dir.path()).unwrap();
    let bytes = codec
        .encode(&info(9, Format::Avro, vec![]), r#"{"message_id":"m-77","failure":{"reason_code":"sku_unknown"},"payload":{"sku":"SKU-18"}}"#)
        .unwrap();
    let raw = dlq_core::model::RawLetter {
        payload: bytes,
        ..Default::default()
    };
    let dl = dlq_core::conventions::extract_decoding(raw, &[], Some(&codec));
    assert_eq!(dl.reason_code(), "sku_unknown");
    assert_eq!(dl.id.value.0, "m-77");
    assert_eq!(dl.body, dlq_core::model::BodyKind::Json);
    let (_, preview) = dlq_core::catalog::prepare_with(
        &dlq_core::masking::Masker::with_key(b"k".to_vec()),
        &[],
        Some(&codec),
        true,
        dlq_core::model::RawLetter {
            payload: dl.raw.payload.clone(),
            ..Default::default()
        },
    );
    assert_eq!(
        preview, r#"{"sku":"SKU-18"}"#,
        "the preview shows the business payload"
    );
}

/// A recursive schema with hostile depth: decoded on a big stack, or refused by size;
/// never a stack overflow. A hostile length prefix is an error, not an allocation.
#[test]
fn hostile_avro_is_refused_by_cause_not_a_crash() {
    // One byte per level: the deepest nesting a payload of a given size can hold.
    const LIST: &str =
        r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
    const BLOB: &str = r#"{"type":"record","name":"Blob","fields":[{"name":"b","type":"bytes"}]}"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("5.avsc"), LIST).unwrap();
    std::fs::write(dir.path().join("6.avsc"), BLOB).unwrap();
    let codec = SchemaCodec::for_dir(dir.path()).unwrap();
    let nested = |levels: usize| {
        let mut b = framing::header(5);
        b.extend(std::iter::repeat_n(0x02u8, levels));
        b.push(0x00);
        b
    };
    // As deep as the size bound allows: decoded on the big stack, then refused for display.
    let d = codec
        .decode("t", Part::Value, &nested(avro::RECURSIVE_MAX_BYTES - 1))
        .unwrap();
    assert!(
        matches!(&d, Decoding::Undecodable(w) if w.contains("deeper")),
        "{d:?}"
    );
    // Shallow: decoded.
    assert!(matches!(
        codec.decode("t", Part::Value, &nested(3)),
        Some(Decoding::Decoded(_))
    ));
    // Past the bound: refused by size, never decoded.
    let d = codec
        .decode("t", Part::Value, &nested(avro::RECURSIVE_MAX_BYTES + 10))
        .unwrap();
    assert!(
        matches!(&d, Decoding::Undecodable(w) if w.contains("recursive")),
        "{d:?}"
    );
    // 10 MiB of bytes: decodes to over 16 MiB of text, so it is shown as bytes, and
    // that takes no reason code from the consumer's.
    let mut big = framing::header(6);
    let n: u64 = 10 << 20;
    prost::encoding::encode_varint(n << 1, &mut big);
    big.extend(std::iter::repeat_n(0x01u8, n as usize));
    let d = codec.decode("t", Part::Value, &big).unwrap();
    assert!(
        matches!(&d, Decoding::Undecodable(w) if w.starts_with("decoded form over 16 MiB")),
        "{:?}",
        d.reason()
    );
    assert!(!d.outranks_derived());
    // A bytes field claiming 2^62 bytes.
    let mut bomb = framing::header(6);
    bomb.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    let d = codec.decode("t", Part::Value, &bomb).unwrap();
    assert!(matches!(d, Decoding::Undecodable(_)), "{d:?}");
}

/// Schema references, as the registry serves them: a Protobuf schema importing another
/// subject's file, and an Avro schema naming another subject's record.
#[test]
fn references_are_fetched_and_compiled_with_the_schema() {
    const MONEY: &str = "syntax = \"proto3\";\npackage acme.common;\nmessage Money { string currency = 1; int64 cents = 2; }\n";
    const INVOICE: &str = "syntax = \"proto3\";\npackage acme;\nimport \"acme/common/money.proto\";\nmessage Invoice { string id = 1; acme.common.Money total = 2; }\n";
    const ADDRESS: &str = r#"{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}"#;
    const CUSTOMER: &str = r#"{"type":"record","name":"Customer","namespace":"com.acme","fields":[{"name":"home","type":"com.acme.Address"}]}"#;
    let reg = |id, subject: &str, format, text: &str, references| Registered {
        id,
        subject: subject.into(),
        version: 1,
        format,
        text: text.into(),
        references,
    };
    let served = ServedRegistry::start(
        vec![
            reg(30, "money", Format::Protobuf, MONEY, vec![]),
            reg(
                31,
                "invoices-value",
                Format::Protobuf,
                INVOICE,
                vec![("acme/common/money.proto".into(), "money".into(), 1)],
            ),
            reg(40, "address", Format::Avro, ADDRESS, vec![]),
            reg(
                41,
                "customers-value",
                Format::Avro,
                CUSTOMER,
                vec![("com.acme.Address".into(), "address".into(), 1)],
            ),
        ],
        0,
    )
    .unwrap();
    let codec = codec_for(&served.url);
    let json = r#"{"id":"inv-1","total":{"currency":"EUR","cents":"150025"}}"#;
    let bytes = codec
        .encode(&info(31, Format::Protobuf, vec![0]), json)
        .unwrap();
    let Decoding::Decoded(d) = codec.decode("invoices", Part::Value, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(d.schema.name, "acme.Invoice");
    assert!(d.json.contains(r#""cents":"150025""#), "{}", d.json);
    let bytes = codec
        .encode(
            &info(41, Format::Avro, vec![]),
            r#"{"home":{"city":"Lyon"}}"#,
        )
        .unwrap();
    let Decoding::Decoded(d) = codec.decode("customers", Part::Value, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(
        (d.schema.name.as_str(), d.json.as_str()),
        ("com.acme.Customer", r#"{"home":{"city":"Lyon"}}"#)
    );
}

/// Letters without framing, mapped to a registry subject: read with its latest version
/// and written back unframed; an unknown subject is a named reason.
#[test]
fn unframed_letters_read_with_a_subjects_latest_version() {
    let served = ServedRegistry::start(registered(), 0).unwrap();
    let codec = SchemaCodec::open(&SchemaSettings {
        registry: Some(RegistryConfig {
            url: served.url.clone(),
            ..Default::default()
        }),
        value_subjects: [
            ("payments.raw".to_string(), "payments-value".to_string()),
            ("gone.raw".into(), "nope-value".into()),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    })
    .unwrap();
    let framed = codec
        .encode(&info(1, Format::Avro, vec![]), PAYMENT)
        .unwrap();
    let Decoding::Decoded(d) = codec
        .decode("payments.raw", Part::Value, &framed[5..])
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(d.json, PAYMENT);
    assert_eq!(
        (
            d.schema.framed,
            d.schema.subject.as_deref(),
            d.schema.version
        ),
        (false, Some("payments-value"), Some(1))
    );
    let back = codec.encode(&d.schema, PAYMENT).unwrap();
    assert_eq!(back, &framed[5..], "written back unframed, byte for byte");
    let d = codec.decode("gone.raw", Part::Value, &framed[5..]).unwrap();
    assert!(
        d.reason().unwrap().contains("unknown subject nope-value"),
        "{d:?}"
    );
    // Not mapped: unframed binary stays a poison pill by cause.
    assert_eq!(
        codec
            .decode("other", Part::Value, &framed[5..])
            .unwrap()
            .reason()
            .unwrap(),
        "undecodable: not Confluent-framed"
    );
}
