//! Schema-encoded letters end to end on the mock cluster, through the binary: Avro,
//! Protobuf and JSON Schema, Confluent-framed, decoded and masked through a registry
//! (dlq-schema's in-process one: no Confluent registry can be had here) and through a
//! local schema directory; a field the schema tags PII masked in every output; an Avro
//! edit written back with its writer schema and replayed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test may stop on a broken fixture

use dlq_core::model::{Coords, HeaderValue, RawLetter};
use dlq_core::ports::{DlqSource, ScanEvent};
use dlq_core::schema::{Format, PayloadCodec, SchemaInfo};
use dlq_kafka::demo::produce_all;
use dlq_kafka::KafkaSource;
use dlq_schema::serve::{Registered, ServedRegistry};
use dlq_schema::SchemaCodec;
use dlq_testkit::cli::{exited, json, stdout, Cli};
use rdkafka::mocking::MockCluster;
use std::ops::ControlFlow;

/// `memo` is an innocent name holding a name and an address no detector finds: only
/// the schema's tag masks it.
const PAYMENT: &str = r#"{"type":"record","name":"Payment","namespace":"com.acme","fields":[
 {"name":"id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","FAILED"]}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"memo","type":"string","confluent:tags":["PII"]}]}"#;

const ORDERS: &str = r#"syntax = "proto3";
package acme;
message Envelope { string trace = 1; }
message Order {
  string id = 1;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 2;
  oneof pay { string card_ref = 3; string wallet = 4; }
  string memo = 5 [debug_redact = true];
}
"#;

const SHIPMENT: &str = r#"{"title":"Shipment","type":"object","properties":{
 "id":{"type":"string"},"memo":{"type":"string","confluent:tags":["PII"]}},"required":["id"]}"#;

const SECRET: &str = "Jane Roe at 12 Elm Row";

fn info(id: u32, format: Format, indexes: Vec<i32>) -> SchemaInfo {
    SchemaInfo::framed(format, id, indexes)
}

fn letter(topic: &str, payload: Vec<u8>, id: &str) -> RawLetter {
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: topic.into(),
            partition: 0,
            offset: 0,
        }),
        key: Some(id.as_bytes().to_vec()),
        headers: vec![
            dlq_core::conventions::header("x-message-id", HeaderValue::text(id)),
            dlq_core::conventions::header("x-reason-code", HeaderValue::text("validation_failed")),
            dlq_core::conventions::header("x-original-topic", HeaderValue::text("pay")),
        ],
        properties: Vec::new(),
        payload,
        timestamp: Some(chrono::Utc::now()),
    }
}

struct World {
    cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    registry: ServedRegistry,
    cli: Cli,
}

impl World {
    fn start() -> World {
        let registry = ServedRegistry::start(
            vec![
                Registered {
                    id: 21,
                    subject: "pay-value".into(),
                    version: 3,
                    format: Format::Avro,
                    text: PAYMENT.into(),
                    references: vec![],
                },
                Registered {
                    id: 22,
                    subject: "ord-value".into(),
                    version: 1,
                    format: Format::Protobuf,
                    text: ORDERS.into(),
                    references: vec![],
                },
                Registered {
                    id: 23,
                    subject: "ship-value".into(),
                    version: 1,
                    format: Format::JsonSchema,
                    text: SHIPMENT.into(),
                    references: vec![],
                },
            ],
            0,
        )
        .unwrap();
        let codec = SchemaCodec::for_registry(&registry.url).unwrap();
        let cluster = MockCluster::new(1).unwrap();
        for t in ["pay.dlq", "ord.dlq", "ship.dlq", "pay"] {
            cluster.create_topic(t, 1, 1).unwrap();
        }
        let pay = |amount: &str, status: &str| {
            let json = format!(
                r#"{{"id":"5f0c6c1e-2d6e-4b8e-9a55-0d7e1c1f2a3b","amount":"{amount}","at":"2026-12-03T04:05:06.789Z","status":"{status}","note":null,"memo":"{SECRET}"}}"#
            );
            codec
                .encode(&info(21, Format::Avro, vec![]), &json)
                .unwrap()
        };
        let order = codec
            .encode(&info(22, Format::Protobuf, vec![1]), &format!(r#"{{"id":"o-1","lines":[{{"sku":"SKU-18","qty":2}}],"wallet":"w-9","memo":"{SECRET}"}}"#))
            .unwrap();
        let mut ship = dlq_schema::frame_header(23);
        ship.extend_from_slice(format!(r#"{{"id":"s-1","memo":"{SECRET}"}}"#).as_bytes());
        produce_all(
            &cluster.bootstrap_servers(),
            &[
                letter("pay.dlq", pay("1500.25", "FAILED"), "p-1"),
                letter("pay.dlq", pay("7.00", "NEW"), "p-2"),
                // Framed with an id nobody registered: its text must not show either.
                letter(
                    "pay.dlq",
                    [&[0, 0, 0, 0, 77, 2][..], SECRET.as_bytes()].concat(),
                    "p-3",
                ),
                letter("ord.dlq", order, "o-1"),
                letter("ship.dlq", ship, "s-1"),
            ],
        )
        .unwrap();
        let cli = Cli::new(env!("CARGO_BIN_EXE_dlq-triage")).with("DLQ_TRIAGE_ACTOR", "alice");
        World {
            cluster,
            registry,
            cli,
        }
    }

    fn uri(&self, topic: &str) -> String {
        format!("kafka://{}/{topic}", self.cluster.bootstrap_servers())
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--schema-registry", self.registry.url.as_str()]);
        self.cli.run(&all)
    }
}

/// Every letter of `topic`, as the broker holds it.
fn scan_topic(bootstrap: String, topic: &str) -> Vec<RawLetter> {
    let mut got = Vec::new();
    KafkaSource::new(vec![bootstrap], vec![topic.into()], Vec::new())
        .scan(&mut |ev| {
            if let ScanEvent::Letters(b) = ev {
                got.extend(b);
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    got
}

fn no_secret(what: &str, text: &str) {
    assert!(
        !text.contains("Jane") && !text.contains("Elm Row"),
        "{what} shows the PII-tagged field:\n{text}"
    );
}

#[test]
fn avro_protobuf_and_json_schema_letters_are_decoded_and_masked_in_every_output() {
    let w = World::start();
    let all = w.uri("pay.dlq,ord.dlq,ship.dlq");
    // show (text and JSON): decoded, schema named, the tagged field masked.
    let shown = exited(&w.run(&["show", &w.uri("pay.dlq"), "pay.dlq/0/0"]), 0);
    no_secret("show", &shown);
    assert!(
        shown.contains("schema: avro com.acme.Payment v3 (id 21, subject pay-value, registry)"),
        "{shown}"
    );
    assert!(
        shown.contains(r#""amount": "1500.25""#) && shown.contains(r#""status": "FAILED""#),
        "{shown}"
    );
    assert!(
        shown.contains(r#""at": "2026-12-03T04:05:06.789Z""#),
        "{shown}"
    );
    let doc = json(&w.run(&["show", &w.uri("ord.dlq"), "ord.dlq/0/0", "--json"]));
    no_secret("show --json", &doc.to_string());
    let poison = exited(&w.run(&["show", &w.uri("pay.dlq"), "pay.dlq/0/2"]), 0);
    no_secret("show (undecodable)", &poison);
    assert!(
        poison.contains("schema: undecodable: unknown schema id 77"),
        "{poison}"
    );
    assert_eq!(doc["payload"]["schema"]["name"], "acme.Order");
    assert!(
        doc["payload"]["text"].as_str().unwrap().contains("SKU-18"),
        "{doc}"
    );
    let doc = json(&w.run(&["show", &w.uri("ship.dlq"), "ship.dlq/0/0", "--json"]));
    no_secret("show --json (JSON Schema)", &doc.to_string());
    assert_eq!(doc["payload"]["schema"]["format"], "json-schema");
    // list (previews), summary, export, diff.
    let listed = exited(&w.run(&["list", &all, "--json"]), 0);
    no_secret("list", &listed);
    assert!(
        listed.contains(r#""preview": "{\"id\":"#),
        "previews are decoded: {listed}"
    );
    no_secret("summary", &exited(&w.run(&["summary", &all, "--json"]), 0));
    // Payload field filters read the decoded form, as masked.
    let ids = |filter: &str| -> Vec<String> {
        let doc = json(&w.run(&["list", &all, "--filter", filter, "--json"]));
        doc["letters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("payload.status=FAILED"), ["p-1"]);
    assert_eq!(ids("payload.amount=7.*"), ["p-2"]);
    assert_eq!(ids("payload.lines.0.sku=SKU-18"), ["o-1"]);
    assert!(
        ids("payload.memo=Jane*").is_empty(),
        "a masked field is matched as masked"
    );
    let out = w.run(&["list", &all, "--filter", "x-error=boom"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a header name, not a fuzzy word"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no letter has a header named `x-error`"),
        "{out:?}"
    );
    let out = w.cli.path().join("export.ndjson");
    exited(&w.run(&["export", &all, "--out", out.to_str().unwrap()]), 0);
    let exported = std::fs::read_to_string(&out).unwrap();
    no_secret("export", &exported);
    assert!(
        exported.contains("x-dlq-schema-id") && exported.contains("1500.25"),
        "{exported}"
    );
    let diff = exited(
        &w.run(&["diff", &w.uri("pay.dlq"), "pay.dlq/0/0", "pay.dlq/0/1"]),
        0,
    );
    no_secret("diff", &diff);
    assert!(
        diff.contains("/amount") && diff.contains("/status"),
        "field by field: {diff}"
    );
}

#[test]
fn a_schema_directory_reads_the_same_letters_without_a_registry() {
    let w = World::start();
    let dir = w.cli.path().join("schemas");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("21.avsc"), PAYMENT).unwrap();
    std::fs::write(dir.join("orders.proto"), ORDERS).unwrap();
    std::fs::write(dir.join("schemas.toml"), "[ids]\n22 = \"orders.proto\"\n").unwrap();
    let dir = dir.to_str().unwrap();
    let shown = exited(
        &w.cli
            .run(&["show", &w.uri("pay.dlq"), "pay.dlq/0/0", "--schemas", dir]),
        0,
    );
    no_secret("show --schemas", &shown);
    assert!(
        shown.contains("schema: avro com.acme.Payment (id 21, 21.avsc)"),
        "{shown}"
    );
    let doc = json(&w.cli.run(&[
        "show",
        &w.uri("ord.dlq"),
        "ord.dlq/0/0",
        "--json",
        "--schemas",
        dir,
    ]));
    no_secret("show --schemas (protobuf)", &doc.to_string());
    assert_eq!(doc["payload"]["schema"]["name"], "acme.Order");
    // An id the directory does not hold is a poison pill by cause (its own reason code
    // header still names the group; the decoder's reason is on the letter).
    let doc = json(&w.cli.run(&[
        "show",
        &w.uri("ship.dlq"),
        "ship.dlq/0/0",
        "--json",
        "--schemas",
        dir,
    ]));
    assert_eq!(doc["payload"]["schema"]["state"], "undecodable", "{doc}");
    assert!(
        doc["payload"]["schema"]["why"]
            .as_str()
            .unwrap()
            .contains("unknown schema id 23"),
        "{doc}"
    );
}

/// Plays two people (an operator and a privileged one) through `DLQ_TRIAGE_ACTOR`,
/// which only a `test-hooks` build honours: identity otherwise comes from the OS.
#[cfg(feature = "test-hooks")]
#[test]
fn an_avro_edit_is_written_back_with_its_schema_refused_when_it_does_not_fit_and_replayed() {
    let w = World::start();
    let src = w.uri("pay.dlq");
    let ledger = w.cli.path().join("ledger.db");
    let edit = |sed: &str| {
        let mut c = w.cli.command(&[
            "edit",
            &src,
            "pay.dlq/0/0",
            "--reason",
            "fix",
            "--schema-registry",
            &w.registry.url,
        ]);
        c.env("DLQ_TRIAGE_LEDGER", &ledger)
            .env("EDITOR", sed)
            .env_remove("VISUAL");
        c.output().unwrap()
    };
    // Breaks the schema: refused, the field named, nothing recorded.
    let bad = edit(r#"sed -i 's/"FAILED"/"LOST"/'"#);
    assert_ne!(bad.status.code(), Some(0));
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("status") && said.contains("LOST") && said.contains("nothing saved"),
        "{said}"
    );
    assert!(!ledger.exists() || revision(&ledger).is_none());
    // Fits: one revision, same id and framing, a standard Avro reader reads the edit.
    exited(&edit(r#"sed -i 's/"1500.25"/"1500.00"/'"#), 0);
    let bytes = revision(&ledger).expect("revision 1");
    assert_eq!(&bytes[..5], &[0, 0, 0, 0, 21]);
    let schema = apache_avro::Schema::parse_str(PAYMENT).unwrap();
    let mut rest = &bytes[5..];
    let v = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .unwrap()
        .read_value(&mut rest)
        .unwrap();
    let shown = format!("{v:?}");
    assert!(
        shown.contains("Jane Roe"),
        "the masked field keeps its real value: {shown}"
    );
    let mut dl = dlq_core::conventions::extract(letter("pay.dlq", bytes.clone(), "x"), &[]);
    let codec = SchemaCodec::for_registry(&w.registry.url).unwrap();
    dl.schema = codec.decode("pay.dlq", dlq_core::schema::Part::Value, &bytes);
    assert!(
        dl.decoded().unwrap().json.contains(r#""amount":"1500.00""#),
        "{:?}",
        dl.schema
    );
    // The dry-run's sample shows the revision decoded and masked — to a role that may
    // unmask; an operator sees that there is one, not what it holds (#56).
    w.cli
        .config("[replay]\nallowed_targets = [\"kafka:pay\"]\n");
    let roles = w.cli.path().join("roles.toml");
    std::fs::write(&roles, "privileged = [\"pat\"]\noperator = [\"*\"]\n").expect("roles");
    let replay_as = |actor: &str, extra: &[&str]| {
        let mut args = vec![
            "replay",
            &src,
            "--filter",
            "id=p-1",
            "--use-revisions",
            "--to",
            "kafka:pay",
        ];
        args.extend_from_slice(extra);
        args.extend(["--schema-registry", w.registry.url.as_str()]);
        let mut c = w.cli.command(&args);
        c.env("DLQ_TRIAGE_LEDGER", &ledger)
            .env("DLQ_TRIAGE_ROLES_FILE", &roles)
            .env("DLQ_TRIAGE_ACTOR", actor);
        c.output().unwrap()
    };
    let replay = |extra: &[&str]| replay_as("ops", extra);
    let dry = stdout(&replay_as("pat", &["--dry-run"]));
    assert!(dry.contains(r#"(revision 1) {"id":"#), "{dry}");
    no_secret("the dry-run", &dry);
    let dry = stdout(&replay(&["--dry-run"]));
    assert!(
        dry.contains("(revision 1) revision 1 — not shown to your role"),
        "{dry}"
    );
    // Replayed with the revision: the origin topic gets the re-encoded bytes.
    let out = replay(&["--watch", "1s", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let landed = scan_topic(w.cluster.bootstrap_servers(), "pay");
    assert_eq!(landed.len(), 1);
    assert_eq!(
        landed[0].payload, bytes,
        "the revision's bytes, as recorded"
    );
}

/// The revision the ledger holds (for the test above, which needs `test-hooks`).
#[cfg(feature = "test-hooks")]
fn revision(ledger: &std::path::Path) -> Option<Vec<u8>> {
    let conn = rusqlite::Connection::open(ledger).ok()?;
    conn.query_row("SELECT payload FROM revisions WHERE number = 1", [], |r| {
        r.get(0)
    })
    .ok()
}

/// The TUI's screens (groups, letters, each detail tab, 80×24 and 120×40) on decoded
/// letters: the schema named, the decoded fields shown, the PII-tagged field never.
#[test]
fn the_tui_shows_decoded_letters_and_never_the_tagged_field() {
    use dlq_tui::action::{Action, BrowseEvent, Nav, ViewKey};
    use dlq_tui::state::Tab;
    use dlq_tui::update::update;
    let w = World::start();
    let codec = SchemaCodec::for_registry(&w.registry.url).unwrap();
    let masker = dlq_core::masking::Masker::with_key(b"k".to_vec());
    let raws: Vec<RawLetter> = ["pay.dlq", "ord.dlq", "ship.dlq"]
        .into_iter()
        .flat_map(|t| scan_topic(w.cluster.bootstrap_servers(), t))
        .collect();
    assert_eq!(raws.len(), 5);
    let batch: Vec<_> = raws
        .into_iter()
        .map(|r| dlq_core::catalog::prepare_with(&masker, &[], Some(&codec), true, r).into())
        .collect();
    for size in [(80, 24), (120, 40)] {
        let mut s = dlq_testkit::tui::empty_state(
            "schemas",
            masker.clone(),
            chrono::Utc::now().timestamp_millis(),
            64 << 20,
        );
        update(
            &mut s,
            Action::from(BrowseEvent::Letters(
                batch.iter().map(clone_prepared).collect(),
            )),
            size,
        );
        update(&mut s, Action::from(BrowseEvent::ScanDone), size);
        update(&mut s, Action::from(Nav::FocusNext), size);
        let mut seen = String::new();
        for _ in 0..5 {
            for tab in [Tab::Failure, Tab::Headers, Tab::Payload] {
                update(&mut s, Action::from(ViewKey::SetTab(tab)), size);
                let screen = dlq_testkit::tui::screen(&s, size);
                no_secret("the TUI", &screen);
                seen.push_str(&screen);
            }
            update(&mut s, Action::from(Nav::Down), size);
        }
        assert!(seen.contains("schema: avro com.acme.Payment"), "{seen}");
        assert!(seen.contains("SKU-18") || size.0 < 100, "{seen}");
        assert!(
            seen.contains("\"memo\": \"[redacted]\"") || seen.contains("\"memo\": \""),
            "{seen}"
        );
    }
}

fn clone_prepared(p: &dlq_core::prepared::Prepared) -> dlq_core::prepared::Prepared {
    dlq_core::prepared::Prepared {
        letter: std::sync::Arc::clone(&p.letter),
        preview: p.preview.clone(),
        state: p.state,
        fp: p.fp,
        receipt: None,
    }
}

/// Registry credentials from the environment are sent, and never shown: a wrong
/// password is a named reason (the letters wait as pending), the right one decodes.
#[test]
fn registry_credentials_are_sent_and_never_shown() {
    let w = World::start();
    use base64::Engine as _;
    let good = base64::engine::general_purpose::STANDARD.encode("svc-dlq:s3cret-pw");
    w.registry.require_auth(&format!("Basic {good}"));
    let show = |password: &str| {
        let mut c = w.cli.command(&[
            "show",
            &w.uri("pay.dlq"),
            "pay.dlq/0/0",
            "--json",
            "--schema-registry",
            &w.registry.url,
        ]);
        c.env("DLQ_TRIAGE_SCHEMA_REGISTRY_USER", "svc-dlq")
            .env("DLQ_TRIAGE_SCHEMA_REGISTRY_PASSWORD", password);
        c.output().unwrap()
    };
    let out = show("wrong-pw");
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("wrong-pw"), "{all}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["payload"]["schema"]["state"], "pending", "{doc}");
    assert!(
        doc["payload"]["schema"]["why"]
            .as_str()
            .unwrap()
            .contains("refused the credentials (401)"),
        "{doc}"
    );
    let out = show("s3cret-pw");
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("s3cret-pw"), "{all}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["payload"]["schema"]["state"], "decoded", "{doc}");
}

/// A registry behind a private CA: refused without the CA (the letters wait as pending,
/// with why), decoded with `--schema-registry-ca`.
#[test]
fn a_registry_behind_a_private_ca_is_read_with_its_ca_file() {
    let w = World::start();
    let port: u16 = w.registry.url.rsplit(':').next().unwrap().parse().unwrap();
    let front = dlq_testkit::tls::tls_front(&["localhost"], &[port], false);
    let ca = w.cli.path().join("registry-ca.pem");
    std::fs::write(&ca, &front.ca_pem).unwrap();
    let url = format!("https://localhost:{}", front.ports[0]);
    let show = |extra: &[&str]| {
        let mut args = vec![
            "show",
            "",
            "pay.dlq/0/0",
            "--json",
            "--schema-registry",
            url.as_str(),
        ];
        let uri = w.uri("pay.dlq");
        args[1] = uri.as_str();
        args.extend_from_slice(extra);
        json(&w.cli.run(&args))
    };
    let doc = show(&[]);
    assert_eq!(doc["payload"]["schema"]["state"], "pending", "{doc}");
    let why = doc["payload"]["schema"]["why"].as_str().unwrap();
    assert!(
        why.contains("certificate") && why.contains("--schema-registry-ca"),
        "{why}"
    );
    let doc = show(&["--schema-registry-ca", ca.to_str().unwrap()]);
    assert_eq!(doc["payload"]["schema"]["state"], "decoded", "{doc}");
    assert_eq!(doc["payload"]["schema"]["name"], "com.acme.Payment");
}
