//! The binary, end to end: exit codes, JSON shapes, human output, hostile input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::{DateTime, Duration, Utc};
use dlq_core::dump::to_line;
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_testkit::cli::{exited, Cli};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

const NOW: &str = "2026-11-29T18:00:00Z";

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW)
        .expect("valid")
        .with_timezone(&Utc)
}

/// The binary in a scratch home with the fixed clock.
fn env() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_dlq-triage")).with("DLQ_TRIAGE_NOW", NOW)
}

/// A dump file `name` in the scratch home: `letters`, then `extra` lines as they are.
fn dump(env: &Cli, name: &str, letters: &[RawLetter], extra: &[&[u8]]) -> PathBuf {
    let p = env.path().join(name);
    let mut f = std::fs::File::create(&p).expect("create dump");
    for l in letters {
        writeln!(f, "{}", to_line(l, false)).expect("write");
    }
    for e in extra {
        f.write_all(e).expect("write");
        f.write_all(b"\n").expect("write");
    }
    p
}

fn letter(i: i64, reason: &str, version: &str, age_min: i64) -> RawLetter {
    RawLetter {
        coords: Some(Coords::Kafka { topic: "orders.dlq".into(), partition: (i % 3) as i32, offset: i }),
        key: Some(format!("cus-{i}").into_bytes()),
        headers: vec![
            Header::new("x-reason-code", HeaderValue::text(reason)),
            Header::new("x-consumer-version", HeaderValue::text(version)),
            Header::new("x-event-type", HeaderValue::text("invoice.issue.requested")),
            Header::new("x-message-id", HeaderValue::text(&format!("msg-{i}"))),
        ],
        properties: vec![],
        payload: format!("{{\"customer\":{{\"email\":\"user{i}@example.com\",\"name\":\"Jane Doe\"}},\"amount\":{i}}}").into_bytes(),
        timestamp: Some(now() - Duration::minutes(age_min)),
    }
}

/// 10 tax/r2 (2 under 5 minutes, 8 within the hour), 4 tax/r1 (2 days), 3 amount/r2 (3 hours).
fn mixed() -> Vec<RawLetter> {
    let mut v = Vec::new();
    let mut i = 0;
    let mut add = |reason: &str, version: &str, ages: &[i64]| {
        for a in ages {
            v.push(letter(i, reason, version, *a));
            i += 1;
        }
    };
    add("tax", "r2", &[1, 3, 10, 12, 20, 30, 40, 50, 55, 59]);
    add("tax", "r1", &[2880, 2890, 2900, 2910]);
    add("amount", "r2", &[180, 181, 182]);
    v
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn group_counts(doc: &Value) -> Vec<(Vec<String>, u64)> {
    let dims: Vec<String> = doc["group_by"]
        .as_array()
        .expect("group_by")
        .iter()
        .map(|d| d.as_str().expect("str").to_string())
        .collect();
    let key = |d: &str| {
        match d {
            "reason" => "reason_code",
            "version" => "consumer_version",
            "age" => "age_bucket",
            "event" => "event_type",
            "consumer" => "consumer",
            other => panic!("unexpected dim {other}"),
        }
        .to_string()
    };
    doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                dims.iter()
                    .map(|d| g[key(d)].as_str().expect("label").to_string())
                    .collect(),
                g["count"].as_u64().expect("count"),
            )
        })
        .collect()
}

#[test]
fn summary_json_has_the_documented_shape_and_counts() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let doc = json(&env.run(&["summary", p.to_str().expect("utf8"), "--json"]));
    assert_eq!(doc["total"], 17);
    assert_eq!(doc["matched"], 17);
    assert_eq!(doc["scanned_at"], NOW);
    assert_eq!(
        doc["group_by"],
        serde_json::json!(["reason", "version", "age"])
    );
    assert!(doc["source"]
        .as_str()
        .is_some_and(|s| s.starts_with("file://")));
    let g0 = &doc["groups"][0];
    for field in [
        "reason_code",
        "consumer_version",
        "age_bucket",
        "count",
        "oldest",
        "newest",
        "inflow_per_min",
        "event_types",
        "share",
    ] {
        assert!(g0.get(field).is_some(), "missing {field} in {g0}");
    }
    let mut counts = group_counts(&doc);
    counts.sort();
    let s = |a: &str, b: &str, c: &str| vec![a.to_string(), b.to_string(), c.to_string()];
    assert_eq!(
        counts,
        vec![
            (s("amount", "r2", "1h-24h"), 3),
            (s("tax", "r1", "1d-7d"), 4),
            (s("tax", "r2", "5m-1h"), 8),
            (s("tax", "r2", "<5m"), 2),
        ]
    );
    let tax_recent = doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["age_bucket"] == "5m-1h")
        .expect("group");
    assert_eq!(tax_recent["oldest"], "2026-11-29T17:01:00Z");
    assert_eq!(tax_recent["newest"], "2026-11-29T17:50:00Z");
    assert_eq!(tax_recent["inflow_per_min"], 0.13); // 8 letters in the last hour / 60
    assert_eq!(
        tax_recent["event_types"],
        serde_json::json!(["invoice.issue.requested"])
    );
}

/// The 2026 brokers' and libraries' dead letters, header for header as they write them,
/// group by their own reason and consumer (docs/conventions.md).
#[test]
fn letters_of_share_groups_streams_karafka_and_watermill_group_by_their_reason() {
    let env = env();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conventions");
    let mut all = String::new();
    for name in [
        "kafka-share-group",
        "kafka-share-group-rejected",
        "kafka-streams",
        "karafka",
        "watermill",
    ] {
        let text =
            std::fs::read_to_string(fixtures.join(format!("{name}.ndjson"))).expect("fixture");
        all.push_str(text.trim_end());
        all.push('\n');
    }
    let p = env.path().join("2026.ndjson");
    std::fs::write(&p, all).expect("write");
    let doc = json(&env.run(&[
        "summary",
        p.to_str().expect("utf8"),
        "-g",
        "reason,consumer",
        "--json",
    ]));
    let mut c = group_counts(&doc);
    c.sort();
    let g = |r: &str, c: &str| (vec![r.to_string(), c.to_string()], 1);
    assert_eq!(
        c,
        vec![
            g(
                "SerializationException: Size of data received by IntegerDeserializer is not <n>",
                // Kafka Streams does not write its application id.
                ""
            ),
            g(
                "could not handle message: invalid character <str> looking for beginning of value",
                "orders-projector"
            ),
            g("delivery-limit-reached", "payments-share"),
            g("rejected-by-consumer", "payments-share"),
            g("unknown", "example_app_group"),
        ]
    );
}

#[test]
fn group_by_and_filter_change_the_result() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let path = p.to_str().expect("utf8");
    let by_reason = json(&env.run(&["summary", path, "--group-by", "reason", "--json"]));
    let mut c = group_counts(&by_reason);
    c.sort();
    assert_eq!(
        c,
        vec![
            (vec!["amount".to_string()], 3),
            (vec!["tax".to_string()], 14)
        ]
    );

    let filtered = json(&env.run(&[
        "summary",
        path,
        "-g",
        "version",
        "--filter",
        "reason=tax age<1h",
        "--json",
    ]));
    assert_eq!(filtered["total"], 17);
    assert_eq!(filtered["matched"], 10);
    assert_eq!(filtered["filter"], "reason=tax age<1h");
    assert_eq!(group_counts(&filtered), vec![(vec!["r2".to_string()], 10)]);

    let list = json(&env.run(&[
        "list",
        path,
        "--filter",
        "version=r1",
        "--json",
        "--sort",
        "oldest",
    ]));
    assert_eq!(list["matched"], 4);
    let letters = list["letters"].as_array().expect("letters");
    assert_eq!(letters.len(), 4);
    let l0 = &letters[0];
    for field in [
        "id",
        "coords",
        "key",
        "dead_lettered_at",
        "reason_code",
        "consumer_version",
        "event_type",
        "attempt",
        "state",
        "body",
        "preview",
    ] {
        assert!(l0.get(field).is_some(), "missing {field} in {l0}");
    }
    assert_eq!(l0["id"], "msg-13"); // oldest of tax/r1
    assert_eq!(l0["state"], "open");
    // Previews are masked.
    let preview = l0["preview"].as_str().expect("preview");
    assert!(
        !preview.contains("example.com") && !preview.contains("Jane"),
        "{preview}"
    );

    let limited = json(&env.run(&["list", path, "--limit", "2", "--json"]));
    assert_eq!(limited["letters"].as_array().map(Vec::len), Some(2));
    assert_eq!(limited["letters"][0]["id"], "msg-0"); // newest first by default
}

#[test]
fn human_summary_is_a_tree() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let out = env.run(&["summary", p.to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf8");
    assert!(text.contains("17 letters"), "{text}");
    assert!(text.contains("grouped by reason › version › age"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let tax = lines
        .iter()
        .position(|l| l.ends_with("  tax"))
        .expect("tax row");
    assert!(lines[tax].trim_start().starts_with("14 "), "{}", lines[tax]);
    assert!(lines[tax + 1].ends_with("    r2"), "{}", lines[tax + 1]);
}

#[test]
fn exit_codes_and_messages() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let path = p.to_str().expect("utf8");
    for (args, code, needle) in [
        (
            vec!["summary", path, "--filter", "colour=red"],
            2,
            "unknown filter field",
        ),
        (
            vec!["summary", path, "--group-by", "colour"],
            2,
            "unknown group dimension",
        ),
        (vec!["summary", "nats://x"], 2, "unknown source scheme"),
        (
            vec!["summary", "amqp://guest:secret@127.0.0.1:1/v?queue=q"],
            1,
            "cannot connect to amqp://guest:***@127.0.0.1:1",
        ),
        (
            vec!["summary", "/nonexistent/dump.ndjson"],
            1,
            "cannot read dump",
        ),
        (vec!["summary", "orders"], 2, "not a source"),
        (vec!["sumary", "x.ndjson"], 2, "Usage:"),
        (vec!["bogus"], 2, "neither a command nor a source"),
        (vec![], 2, "nothing to do"),
        (
            vec!["summary", path, "--config", "/nonexistent/c.toml"],
            2,
            "cannot read config",
        ),
    ] {
        let out = env.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn named_sources_from_config() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let cfg_dir = env.dir.path().join("config/dlq-triage");
    std::fs::create_dir_all(&cfg_dir).expect("mkdir");
    std::fs::write(
        cfg_dir.join("config.toml"),
        format!(
            "group_by = \"reason\"\n[sources.incident]\nuri = \"file://{}\"\n",
            p.display()
        ),
    )
    .expect("write");
    let doc = json(&env.run(&["summary", "incident", "--json"]));
    assert_eq!(doc["total"], 17);
    assert_eq!(doc["group_by"], serde_json::json!(["reason"]));
}

/// `--since` keeps the letters dead-lettered within the window, on every source (a dump
/// and the demo ignored it and showed everything); letters with no known time are kept.
#[test]
fn since_keeps_the_recent_letters_on_every_source() {
    let env = env();
    let mut letters = mixed();
    letters.push(RawLetter {
        timestamp: None,
        ..letter(50, "untimed", "r3", 0)
    });
    let p = dump(&env, "mixed.ndjson", &letters, &[]);
    let path = p.to_str().expect("utf8");
    let all = json(&env.run(&["summary", path, "--json"]));
    assert_eq!(all["total"], 18);
    let recent = json(&env.run(&["summary", path, "--since", "1h", "--json"]));
    // The 10 tax/r2 letters of the last hour, and the one with no time.
    assert_eq!(recent["total"], 11, "{recent}");
    assert_eq!(recent["since"], "2026-11-29T17:00:00Z", "{recent}");
    let text =
        String::from_utf8(env.run(&["summary", path, "--since", "1h"]).stdout).expect("utf8");
    assert!(text.contains(" · 11 letters in the last 1h · "), "{text}");
    let mut c = group_counts(&json(
        &env.run(&["summary", path, "--since", "1h", "-g", "reason", "--json"]),
    ));
    c.sort();
    assert_eq!(
        c,
        vec![
            (vec!["tax".to_string()], 10),
            (vec!["untimed".to_string()], 1)
        ]
    );
}

/// An empty DLQ reads as calm, not as `+-0.0/min` (a float sum of no groups is -0.0).
#[test]
fn an_empty_dlq_summarises_as_zero() {
    let env = env();
    let p = dump(&env, "empty.ndjson", &[], &[]);
    let out = env.run(&["summary", p.to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf8");
    assert!(
        text.contains(" · 0 letters · +0.0/min · oldest -"),
        "{text}"
    );
}

#[test]
fn malformed_input_is_reported_never_a_panic() {
    let env = env();
    let mut letters = mixed();
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    letters.push(RawLetter {
        payload: deep.into_bytes(),
        ..letter(100, "deep", "r9", 5)
    });
    letters.push(RawLetter {
        payload: vec![b'x'; 10 * 1024 * 1024],
        ..letter(101, "huge", "r9", 5)
    });
    letters.push(RawLetter {
        payload: vec![0xff, 0xfe, 0xfd, 0x00],
        ..letter(102, "binary", "r9", 5)
    });
    letters.push(RawLetter {
        payload: b"{\"amount\": 1,500.00".to_vec(),
        ..letter(103, "truncated", "r9", 5)
    });
    let mut bin_hdr = letter(104, "binhdr", "r9", 5);
    bin_hdr.headers.push(Header::new(
        "kafka_dlt-original-offset",
        HeaderValue::Bytes(vec![0xff; 3]),
    ));
    bin_hdr.headers.push(Header::new(
        "x-weird",
        HeaderValue::Bytes(vec![0x1b, b']', b'0', b';', b'p', 0x07]),
    ));
    letters.push(bin_hdr);
    let p = dump(
        &env,
        "bad.ndjson",
        &letters,
        &[
            b"{\"payload\": \"truncated",
            &[0xff, 0xfe, b'{', b'}'],
            b"{\"headers\":[[\"h\",{\"b64\":\"!!\"}]]}",
        ],
    );
    let path = p.to_str().expect("utf8");
    let out = env.run(&["summary", path]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("3 record(s) could not be read"), "{err}");
    for line in [23, 24, 25] {
        assert!(
            err.contains(&format!("line {line}:")),
            "line {line} not named: {err}"
        );
    }
    let doc = json(&env.run(&["summary", path, "--json", "-g", "reason"]));
    assert_eq!(doc["total"], 22);
    assert_eq!(doc["problems"]["count"], 3);
    assert_eq!(doc["problems"]["first"][0]["location"], "line 23");
    let list = env.run(&["list", path, "--limit", "0"]);
    assert!(list.status.success());
    assert!(!list.stdout.contains(&0x1b), "raw ESC reached stdout");
}

#[test]
fn escape_sequences_print_as_visible_escapes() {
    let env = env();
    let mut l = letter(1, "evil\x1b]0;pwned\x07", "r1", 5);
    l.payload = b"\xe2\x80\xae\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b]0;title\x07 hello".to_vec();
    l.key = Some(b"k\x1b[31mred".to_vec());
    let p = dump(&env, "evil.ndjson", &[l], &[]);
    for args in [
        vec!["list", p.to_str().expect("utf8")],
        vec!["summary", p.to_str().expect("utf8")],
    ] {
        let out = env.run(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).expect("utf8");
        assert!(
            !text
                .chars()
                .any(|c| c == '\x1b' || c == '\x07' || c == '\u{202e}'),
            "{text:?}"
        );
        assert!(text.contains("\\x1b"), "{text}");
    }
    let out = env.run(&["list", p.to_str().expect("utf8")]);
    let text = String::from_utf8(out.stdout).expect("utf8");
    assert!(text.contains("\\x1b]52;c;"), "{text}");
    assert!(text.contains("\\u{202e}"), "{text}");

    // A message id with an escape is listed escaped; `show` finds the letter by what
    // was listed, as the user copies it, and still by the raw id.
    let mut l = letter(2, "tax", "r1", 5);
    l.headers[3] = Header::new("x-message-id", HeaderValue::text("id\x1b[31mred"));
    let p = dump(&env, "evil-id.ndjson", &[l], &[]);
    let path = p.to_str().expect("utf8");
    let listed = String::from_utf8(env.run(&["list", path]).stdout).expect("utf8");
    assert!(listed.contains("id\\x1b[31mred"), "{listed}");
    for id in ["id\\x1b[31mred", "id\x1b[31mred"] {
        let out = env.run(&["show", path, id]);
        assert!(
            out.status.success(),
            "{id:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = String::from_utf8(out.stdout).expect("utf8");
        assert!(shown.starts_with("letter id\\x1b[31mred"), "{shown}");
    }
}

#[test]
fn the_shipped_example_dump_loads_cleanly() {
    let env = env();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson");
    let doc = json(&env.run(&[
        "summary",
        example.to_str().expect("utf8"),
        "--json",
        "-g",
        "reason",
    ]));
    assert_eq!(doc["problems"]["count"], 0);
    assert!(
        doc["total"].as_u64().is_some_and(|t| t > 300),
        "{}",
        doc["total"]
    );
    let reasons: Vec<&str> = doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["reason_code"].as_str())
        .collect();
    for r in [
        "customer_tax_profile_missing",
        "amount_not_a_number",
        "attempt_budget_exhausted",
        "expired",
        "MaxDeliveryCountExceeded",
    ] {
        assert!(reasons.contains(&r), "{r} not in {reasons:?}");
    }
}

#[test]
fn show_prints_provenance_masked_headers_and_payload() {
    let env = env();
    let mut l = letter(7, "tax", "r2", 3);
    l.headers.push(Header::new(
        "authorization",
        HeaderValue::text("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"),
    ));
    l.headers.push(Header::new(
        "x-error",
        HeaderValue::text("NoProfile: no tax profile for jane.roe@example.com"),
    ));
    let p = dump(&env, "one.ndjson", &[l], &[]);
    let path = p.to_str().expect("utf8");
    let out = env.run(&["show", path, "msg-7"]);
    exited(&out, 0);
    let text = String::from_utf8(out.stdout).expect("utf8");
    for needle in [
        "letter msg-7  ← header x-message-id (x-headers)",
        "reason         tax  ← header x-reason-code (x-headers)",
        "authorization",
        "[redacted]",
        "payload · json",
        "\"email\": \"u***@e***.com\"",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    for secret in ["user7@example.com", "Jane Doe", "eyJhbGci", "jane.roe@"] {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
    }
    // By coordinates too, and as JSON.
    let doc = json(&env.run(&["show", path, "orders.dlq/1/7", "--json"]));
    assert_eq!(doc["id"]["value"], "msg-7");
    assert_eq!(doc["failure"]["reason_code"]["convention"], "x-headers");
    assert_eq!(doc["payload"]["masked"], true);
    assert_eq!(doc["payload"]["view"], "json");
    assert!(!doc.to_string().contains("user7@example.com"));
    let missing = env.run(&["show", path, "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no letter with id"));
    let unmask = env.run(&["show", path, "msg-7", "--unmask"]);
    assert_eq!(unmask.status.code(), Some(2));
}

#[test]
fn show_hex_dumps_binary_and_guards_size() {
    let env = env();
    let mut bin = letter(1, "bin", "r1", 3);
    bin.payload = [&[0u8, 1, 2][..], b" mail jane@example.com ", &[0xff; 40]].concat();
    let mut huge = letter(2, "huge", "r1", 3);
    huge.payload = format!("{{\"blob\":\"{}\"}}", "x".repeat(10 * 1024 * 1024)).into_bytes();
    let p = dump(&env, "bin.ndjson", &[bin, huge], &[]);
    let path = p.to_str().expect("utf8");
    let text = String::from_utf8(env.run(&["show", path, "msg-1"]).stdout).expect("utf8");
    assert!(
        text.contains("payload · binary") && text.contains("00000000  00 01 02"),
        "{text}"
    );
    assert!(
        !text.contains("jane") && !text.contains("6a 61 6e 65"),
        "{text}"
    );
    let out = env.run(&["show", path, "msg-2"]);
    assert!(out.status.success());
    assert!(
        out.stdout.len() < 200 * 1024,
        "size guard: {} bytes printed",
        out.stdout.len()
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("10.0 MiB; the rest is hidden"));
}

#[test]
fn diff_two_letters_structurally_masked() {
    let env = env();
    let a = letter(1, "amount", "r2", 3);
    let mut b = letter(2, "amount", "r2", 4);
    b.payload = b"{\"customer\":{\"email\":\"other@example.com\",\"name\":\"Jane Doe\"},\"amount\":\"1,500.00\",\"extra\":true}".to_vec();
    let p = dump(&env, "two.ndjson", &[a, b], &[]);
    let path = p.to_str().expect("utf8");
    let doc = json(&env.run(&["diff", path, "msg-1", "msg-2", "--json"]));
    assert_eq!(doc["payload"]["kind"], "json");
    let changes = doc["payload"]["changes"].as_array().expect("changes");
    let ops: Vec<(String, String)> = changes
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or("").to_string(),
                c["op"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        ops.contains(&("/amount".into(), "changed".into())),
        "{ops:?}"
    );
    assert!(
        ops.contains(&("/customer/email".into(), "changed".into())),
        "{ops:?}"
    );
    assert!(ops.contains(&("/extra".into(), "added".into())), "{ops:?}");
    assert!(
        !ops.iter().any(|(p, _)| p == "/customer/name"),
        "unchanged name reported: {ops:?}"
    );
    let s = doc.to_string();
    assert!(
        !s.contains("other@example.com") && !s.contains("user1@example.com"),
        "{s}"
    );
    let human = String::from_utf8(env.run(&["diff", path, "msg-1", "msg-2"]).stdout).expect("utf8");
    assert!(
        human.contains("~ /amount") && human.contains("→ \"1,500.00\""),
        "{human}"
    );
}

#[test]
fn export_is_masked_and_reads_back() {
    let env = env();
    let mut letters = mixed();
    letters[0].headers.push(Header::new(
        "authorization",
        HeaderValue::text("Bearer sekrit-token-123"),
    ));
    letters[1].payload = vec![0x00, b'j', b'@', b'x', b'.', b'c', b'o', b'm', 0xff];
    let p = dump(&env, "mixed.ndjson", &letters, &[]);
    let path = p.to_str().expect("utf8");
    let out_path = env.dir.path().join("export.ndjson");
    let out = env.run(&[
        "export",
        path,
        "--filter",
        "reason=tax",
        "--out",
        out_path.to_str().expect("utf8"),
    ]);
    exited(&out, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("exported 14 masked letter(s) of 17"));
    let text = std::fs::read_to_string(&out_path).expect("export written");
    assert_eq!(text.lines().count(), 14);
    assert!(text.lines().all(|l| l.contains("\"masked\":true")));
    for secret in ["@example.com", "Jane Doe", "sekrit", "j@x.com"] {
        assert!(!text.contains(secret), "{secret} leaked into export");
    }
    assert!(!env.dir.path().join("export.ndjson.partial").exists());
    // The export is itself a source, and groups the same way.
    let doc = json(&env.run(&[
        "summary",
        out_path.to_str().expect("utf8"),
        "--json",
        "-g",
        "reason,version",
    ]));
    assert_eq!(doc["total"], 14);
    assert_eq!(doc["problems"]["count"], 0);
    let mut counts = group_counts(&doc);
    counts.sort();
    assert_eq!(
        counts,
        vec![
            (vec!["tax".to_string(), "r1".to_string()], 4),
            (vec!["tax".to_string(), "r2".to_string()], 10)
        ]
    );
    // To stdout as well.
    let stdout = env.run(&["export", path, "-f", "reason=amount"]);
    assert_eq!(String::from_utf8_lossy(&stdout.stdout).lines().count(), 3);
}

#[test]
fn json_output_escapes_what_terminals_interpret() {
    let env = env();
    let mut l = letter(1, "evil\u{202e}\u{9b}31m", "r1", 5);
    l.payload = "{\"note\":\"\u{202e}\u{85}\u{7f}\"}".as_bytes().to_vec();
    let p = dump(&env, "evil.ndjson", &[l], &[]);
    let path = p.to_str().expect("utf8");
    for args in [
        vec!["summary", path, "--json"],
        vec!["list", path, "--json"],
        vec!["show", path, "msg-1", "--json"],
        vec!["export", path],
    ] {
        let out = env.run(&args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).expect("utf8");
        assert!(
            !text
                .chars()
                .any(dlq_core::sanitize::is_unsafe_char_in_output),
            "{args:?}: {text:?}"
        );
    }
}

#[test]
fn demo_summary_matches_the_seeded_scenario() {
    let env = env();
    let doc = json(&env.run(&["summary", "demo", "--json", "-g", "reason"]));
    let expected =
        dlq_kafka::demo::scenario::incident(42, now(), dlq_kafka::demo::scenario::Scale(1.0));
    let avro = dlq_app::brokers::demo_schemas::extra(42, now()).expect("demo's Avro topic");
    assert_eq!(
        doc["total"].as_u64(),
        Some((expected.len() + avro.letters.len()) as u64)
    );
    assert!(
        doc["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("demo · kafka://127.0.0.1:")),
        "{}",
        doc["source"]
    );
    let count = |reason: &str| {
        doc["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .find(|g| g["reason_code"] == reason)
            .and_then(|g| g["count"].as_u64())
    };
    assert_eq!(count("customer_tax_profile_missing"), Some(612));
    assert_eq!(count("amount_not_a_number"), Some(301));
    assert_eq!(count("attempt_budget_exhausted"), Some(280));
    // payouts.dlq, decoded through the demo's registry: poison pills by cause.
    assert_eq!(count("payout_amount_negative"), Some(30));
    assert_eq!(count("undecodable: unknown schema id 4711"), Some(12));
    assert_eq!(
        count("undecodable: Avro for com.acme.payouts.Payout v1 leaves bytes unread (written with another schema?)"),
        Some(26)
    );
    let out = env.run(&["demo"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Demo: an in-process Kafka mock cluster"));
}

#[test]
fn kafka_flags_are_validated() {
    let env = env();
    let out = env.run(&["summary", "kafka://127.0.0.1:1/t", "-X", "novalue"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-X takes key=value"));
}

/// `watch --once` for cron and CI: rules from the flag and the config, a breach per
/// group with its owner (config globs) and a masked example, exit 3; the `--exec` hook
/// gets each breach as JSON on stdin; a quiet run exits 0 and prints nothing; a bad rule
/// is a usage error that says why.
#[test]
fn watch_once_reports_breaches_with_owners_and_runs_the_hook() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    // Quiet: exit 0, nothing printed.
    let out = env.run(&[
        "watch",
        p.to_str().expect("utf-8"),
        "--once",
        "--rule",
        "count > 100",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    // A bad rule says why.
    let out = env.run(&[
        "watch",
        p.to_str().expect("utf-8"),
        "--once",
        "--rule",
        "count is big",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no condition"));
    let cfg_dir = env.dir.path().join("config/dlq-triage");
    std::fs::create_dir_all(&cfg_dir).expect("mkdir");
    std::fs::write(
        cfg_dir.join("config.toml"),
        "[[owners]]\nowner = \"team-tax\"\nreason = \"ta*\"\n\n[[watch.rules]]\nname = \"tax-rate\"\nseverity = \"critical\"\nrule = \"reason=tax rate > 0.1/min for 10m\"\n",
    )
    .expect("write");
    let hook = env.dir.path().join("hook.ndjson");
    let src = p.to_str().expect("utf-8");
    let exec = format!("tee -a {}", hook.display());
    let out = env.run(&[
        "watch",
        src,
        "--once",
        "--json",
        "--rule",
        "oldest > 1d",
        "--rule",
        "count > 100",
        "--exec",
        &exec,
    ]);
    let stdout = exited(&out, 3);
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let got: Vec<(String, String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["rule"].as_str().unwrap_or("").to_string(),
                l["severity"].as_str().unwrap_or("").to_string(),
                l["group"].as_str().unwrap_or("").to_string(),
                l["owner"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "tax-rate".into(),
                "critical".into(),
                "tax".into(),
                "team-tax".into()
            ),
            (
                "oldest > 1d".into(),
                "warning".into(),
                "tax".into(),
                "team-tax".into()
            ),
        ]
    );
    assert_eq!(lines[0]["event"], "breach");
    assert_eq!(lines[0]["value"], "0.2/min over 10m");
    assert_eq!(lines[1]["count"], 14);
    assert_eq!(lines[1]["oldest_s"], 2910 * 60);
    assert!(lines[0]["example"]
        .as_str()
        .is_some_and(|e| e.starts_with("msg-")));
    // `summary` shows the same owners, and counts the unowned letters.
    let doc = json(&env.run(&["summary", src, "--json", "--group-by", "reason"]));
    assert_eq!(doc["unowned"], 3);
    let owners: Vec<(String, String)> = doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["reason_code"].as_str().unwrap_or("").to_string(),
                g["owner"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("tax".to_string(), "team-tax".to_string()),
            ("amount".to_string(), "(unowned)".to_string())
        ]
    );
    let text = String::from_utf8_lossy(&env.run(&["summary", src, "--group-by", "reason"]).stdout)
        .to_string();
    assert!(
        text.contains("OWNER") && text.contains("team-tax"),
        "{text}"
    );
    assert!(text.contains("3 letters have no owner"), "{text}");
    let hooked = std::fs::read_to_string(&hook).expect("the hook ran");
    assert_eq!(hooked.lines().count(), 2, "{hooked}");
    assert!(hooked.contains("\"rule\":\"tax-rate\""), "{hooked}");
    // Human lines say the same.
    let out = env.run(&["watch", src, "--once", "--rule", "oldest > 1d"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2026-11-29T18:00:00Z BREACH warning · oldest > 1d · tax · oldest 2d (> 24h) · 14 letters · owner team-tax"),
        "{text}"
    );
}

/// `watch --metrics`: Prometheus text on a loopback port while it watches; a public
/// address is refused without --metrics-any-interface.
#[test]
fn watch_serves_prometheus_metrics_on_loopback() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let src = p.to_str().expect("utf-8");
    let out = env.run(&[
        "watch",
        src,
        "--rule",
        "count > 1",
        "--metrics",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
    let (mut child, addr) = watch_serving(&env, src);
    // The page is empty until the first evaluation, right after the scan.
    let page = metrics_page_until(&addr, |p| p.contains("dlq_scan_letters"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    for want in [
        "dlq_letters{reason=\"tax\",version=\"r2\",event_type=\"invoice.issue.requested\"} 10",
        "dlq_oldest_age_seconds{reason=\"tax\"} 174600",
        "dlq_watch_breaches{rule=\"count > 1\",severity=\"warning\"} 2",
        "dlq_scan_letters 17",
    ] {
        assert!(page.contains(want), "no `{want}` in\n{page}");
    }
}

/// `watch` follows decisions made while it runs (another terminal, another engineer on
/// a team ledger): a group discarded elsewhere leaves its counts at the next tick.
#[test]
fn watch_counts_decisions_made_elsewhere_without_a_restart() {
    let env = env();
    let p = dump(&env, "mixed.ndjson", &mixed(), &[]);
    let src = p.to_str().expect("utf-8");
    let (mut child, addr) = watch_serving(&env, src);
    let tax =
        "dlq_letters{reason=\"tax\",version=\"r2\",event_type=\"invoice.issue.requested\"} 10";
    let before = metrics_page_until(&addr, |p| p.contains("dlq_scan_letters"));
    assert!(before.contains(tax), "{before}");
    let out = env.run(&[
        "discard",
        src,
        "--filter",
        "reason=tax",
        "--reason",
        "fixed upstream",
        "--yes",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A later tick (every second) follows the ledger: waited for, not slept on.
    let after = metrics_page_until(&addr, |p| {
        p.contains("dlq_scan_letters") && !p.contains(tax)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !after.contains(tax),
        "the discarded group is still counted:\n{after}"
    );
}

/// `watch SRC --rule 'count > 1' --every 1s --metrics 127.0.0.1:0`, started, and the
/// address it says its metrics page is on.
fn watch_serving(env: &Cli, src: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = env
        .command(&[
            "watch",
            src,
            "--rule",
            "count > 1",
            "--every",
            "1s",
            "--metrics",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while err.read_line(&mut line).expect("stderr") > 0 {
        if let Some(a) = line.trim().strip_prefix("metrics: http://") {
            let addr = a.trim_end_matches("/metrics").to_string();
            // Keep reading what it says: a closed pipe would end it.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            return (child, addr);
        }
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the metrics address is never printed");
}

/// The metrics page once `ready` holds, read every 50 ms: how long the watch takes to
/// get there is the machine's business, so no test here rests on a sleep's length. After
/// 60 s it gives the last page, for the caller's assertion to show.
fn metrics_page_until(addr: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let page = metrics_page(addr);
        if ready(&page) || std::time::Instant::now() > deadline {
            return page;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The metrics page, as a scraper gets it.
fn metrics_page(addr: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
    let mut page = String::new();
    s.read_to_string(&mut page).expect("response");
    page
}

/// `… | head` closes the pipe early: a clean exit, never a panic (101). The replay
/// dry-run printed its JSON with `println!`, which panics on a closed pipe.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let env = env();
    let letters: Vec<RawLetter> = (0..400)
        .map(|i| letter(i, "timeout", "v1", 10 + i))
        .collect();
    let dump = dump(&env, "big.ndjson", &letters, &[]);
    let dump = dump.to_str().expect("utf-8 path");
    for args in [
        vec![
            "replay",
            "demo",
            "--filter",
            "reason=attempt_budget_exhausted",
            "--dry-run",
            "--json",
        ],
        vec!["list", dump, "--json"],
        vec!["summary", dump, "--json"],
    ] {
        let mut child = env
            .command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("binary runs");
        let mut first = [0u8; 16];
        let read = child.stdout.take().expect("stdout").read_exact(&mut first);
        if let Err(e) = read {
            let out = child.wait_with_output().expect("exits");
            panic!(
                "{args:?}: no output ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The read end is dropped here: the rest of the output meets a closed pipe.
        let out = child.wait_with_output().expect("exits");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A typo of a command is said, with what was meant — never run as something else
/// (`sumary demo` used to open the demo TUI and exit 0).
#[test]
fn a_misspelt_command_says_what_was_meant() {
    let env = env();
    for (args, meant) in [
        (&["sumary", "demo"][..], "did you mean `summary`"),
        (
            &["replya", "demo", "--filter", "x"][..],
            "did you mean `replay`",
        ),
        (&["sumary"][..], "Did you mean `summary`"),
        (&["lits", "demo"][..], "did you mean `list`"),
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(meant), "{args:?}: {said}");
    }
    // A real command and a source are still what they are.
    assert_eq!(
        env.run(&["summary", "demo", "--json"]).status.code(),
        Some(0)
    );
}

/// Completions and the man page come from the same definitions as `--help`.
#[test]
fn completions_and_the_man_page_are_generated() {
    let env = env();
    let bash = env.run(&["completions", "bash"]);
    assert_eq!(bash.status.code(), Some(0));
    let text = String::from_utf8_lossy(&bash.stdout);
    assert!(text.contains("dlq-triage") && text.contains("summary") && text.contains("--expect"));
    for shell in ["zsh", "fish"] {
        assert_eq!(
            env.run(&["completions", shell]).status.code(),
            Some(0),
            "{shell}"
        );
    }
    let man = env.run(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH"),
        "{}",
        &page[..page.len().min(200)]
    );
    assert!(page.contains("discard"));
    assert_eq!(env.run(&["completions", "tcsh"]).status.code(), Some(2));
}

/// Every group `summary --json` prints carries a `filter` that, pasted into `--filter`,
/// selects exactly that group's letters — for every grouping dimension, over the sample
/// incident, every conventions fixture and the demo's letters (labels with commas, quotes,
/// controls, `|`, `*` and `?` among them).
#[test]
fn every_groups_filter_selects_exactly_its_letters() {
    let env = env();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conventions");
    let mut sources: Vec<String> = std::fs::read_dir(&fixtures)
        .expect("fixtures")
        .map(|e| e.expect("entry").path().to_string_lossy().to_string())
        .filter(|p| p.ends_with(".ndjson"))
        .collect();
    sources.sort();
    sources.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/incident.ndjson")
            .to_string_lossy()
            .to_string(),
    );
    // The demo, read once: its letters exported (masked) to a dump.
    let demo = env.path().join("demo.ndjson");
    exited(
        &env.run(&["export", "demo", "--out", &demo.to_string_lossy()]),
        0,
    );
    sources.push(demo.to_string_lossy().to_string());
    let dims = [
        "reason",
        "version",
        "age",
        "event",
        "schema",
        "origin",
        "consumer",
        "exception",
        "state",
        "topic",
    ];
    let mut checked = 0;
    for src in &sources {
        for dim in dims {
            let out = env.run(&["summary", src, "-g", dim, "--json"]);
            let doc: Value = serde_json::from_str(&exited(&out, 0)).expect("summary json");
            for g in doc["groups"].as_array().expect("groups") {
                let Some(filter) = g["filter"].as_str() else {
                    continue;
                };
                let out = env.run(&["list", src, "--filter", filter, "--json", "--limit", "1"]);
                let list: Value = serde_json::from_str(&exited(&out, 0)).expect("list json");
                assert_eq!(
                    list["matched"], g["count"],
                    "{src} -g {dim}: `{filter}` selects {} letters, the group has {}",
                    list["matched"], g["count"]
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} groups checked");
    eprintln!("{checked} group filters checked");
}

/// Header values filter by name (`x-error=…`, `header.NAME=…`), as masked; a bare word
/// that is only deep in payloads says so and names a term that finds it; a header no
/// letter carries is said, not a silent 0.
#[test]
fn header_terms_and_bare_words_that_only_payloads_hold() {
    let env = env();
    let mut a = letter(1, "tax", "r1", 5);
    a.headers.push(Header::new(
        "X-Error",
        HeaderValue::text("lookup timeout after 30s"),
    ));
    a.payload = br#"{"padding":"0123456789012345678901234567890123456789012345678901234567890123456789","lines":[{"sku":"SKU-18"}]}"#.to_vec();
    let mut b = letter(2, "tax", "r1", 6);
    b.headers.push(Header::new(
        "x-error",
        HeaderValue::text("boom for jane@example.com"),
    ));
    let p = dump(
        &env,
        "headers.ndjson",
        &[a, b, letter(3, "amount", "r2", 7)],
        &[],
    );
    let path = p.to_str().expect("utf8");
    let matched = |filter: &str| -> (u64, String) {
        let out = env.run(&["list", path, "--filter", filter, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{filter}: {out:?}");
        let doc = json(&out);
        (
            doc["matched"].as_u64().expect("matched"),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(matched("x-error=*timeout*").0, 1);
    assert_eq!(matched("header.x-error=boom*").0, 1);
    assert_eq!(
        matched("x-error!=boom*").0,
        1,
        "a letter without it matches neither"
    );
    assert_eq!(matched("x-error=*").0, 2);
    assert_eq!(
        matched("x-error=*jane@example.com*").0,
        0,
        "a header is matched as masked"
    );
    let (n, said) = matched("x-nope=1");
    assert_eq!(n, 0);
    assert!(
        said.contains("no letter has a header named `x-nope`"),
        "{said}"
    );
    // The word is past the 48-byte preview: found nowhere a bare word looks.
    let (n, said) = matched("sku-18");
    assert_eq!(n, 0);
    assert!(
        said.contains("`sku-18`: not in any id, key, reason or preview")
            && said.contains(
                "in the payload of 1 letter: payload.lines.0.sku=\"*SKU-18*\" finds them"
            ),
        "{said}"
    );
    assert_eq!(matched("payload.lines.0.sku=\"*SKU-18*\"").0, 1);
    let (_, said) = matched("nowhere-at-all");
    assert!(
        said.contains("in no letter's id, key, reason, preview or payload"),
        "{said}"
    );
    // Still an error for a name that is neither a field nor a header's shape.
    assert_eq!(
        env.run(&["list", path, "--filter", "colour=red"])
            .status
            .code(),
        Some(2)
    );
}

/// A mistake in `[keys]` is said before the TUI takes the terminal, naming it (exit 2).
#[test]
fn a_keymap_mistake_is_said_before_the_tui_starts() {
    let env = env();
    let config = env.path().join("keys.toml");
    std::fs::write(&config, "[keys]\ndiscard = \"r\"\n").expect("config");
    let out = env.run(&["--config", config.to_str().expect("utf8"), "tui", "demo"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`r` is bound to both `discard` and `replay`"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\u{1b}[?1049h"),
        "the terminal was not taken"
    );
}

/// `report` on the demo after a discard and a replay: every decision is in it with who
/// and how it ended, what is still open is listed with its sentence, and nothing of a
/// payload is.
#[test]
fn report_after_a_discard_and_a_replay_names_every_decision() {
    let env = env();
    let ok = |args: &[&str]| {
        let out = env.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            dlq_testkit::cli::stderr(&out)
        );
        dlq_testkit::cli::stdout(&out)
    };
    let reason = "INC-7 negative payouts are a bug upstream";
    ok(&[
        "discard",
        "demo",
        "-f",
        "reason=payout_amount_negative",
        "--reason",
        reason,
        "--yes",
        "--expect",
        "30",
    ]);
    ok(&[
        "replay",
        "demo",
        "-f",
        "reason=amount_not_a_number",
        "--canary",
        "2",
        "--canary-rate",
        "50",
        "--watch",
        "1s",
        "--rate",
        "1000",
        "--yes",
        "--expect",
        "301",
    ]);
    let md = ok(&["report", "demo"]);
    let actor = dlq_app::identity::current_actor();
    for want in [
        "# Incident report: demo · kafka://127.0.0.1:",
        "## What is failing",
        "| customer\\_tax\\_profile\\_missing | 612 |",
        "started 5h",
        "- **Discarded** 30 letters — ",
        &format!("by {}: “{reason}”", actor.replace('_', "\\_")),
        "→ kafka topic invoices: **completed** — 301 of 301 confirmed, 0 failed again, 0 refused",
        "Verified: the hash chain holds",
    ] {
        assert!(md.contains(want), "no `{want}` in:\n{md}");
    }
    // Decided letters are no longer open; nothing of a payload is in the report.
    assert!(!md.contains("| payout\\_amount\\_negative |"), "{md}");
    assert!(!md.contains("| amount\\_not\\_a\\_number |"), "{md}");
    for payload_bit in ["\"amount\"", "INV-2026-", "@"] {
        assert!(!md.contains(payload_bit), "{payload_bit} in:\n{md}");
    }
}

/// `why` on the demo: the Avro group names the writer schema its letters were written
/// with and the fields the v1 consumer cannot read (decoded through the demo's
/// registry); the amount group, as JSON, carries the difference and the program.
#[test]
fn why_names_the_writer_schema_and_the_fix() {
    let env = env();
    let out = env.run(&["why", "demo", "-f", "reason=AvroTypeException*"]);
    assert!(out.status.success(), "{}", dlq_testkit::cli::stderr(&out));
    let text = dlq_testkit::cli::stdout(&out);
    for want in [
        "why 48 letters of demo",
        "baseline: 30 letters of other groups in payouts.dlq",
        "writer schema: avro com.acme.payouts.Payout v2 (id 102",
        "in 48 of 48; avro com.acme.payouts.Payout v1 (id 101",
        "/fee: string \"12.50\"-like in 48 of 48; not in the baseline's letters",
        "/channel: string in 48 of 48",
    ] {
        assert!(text.contains(want), "no `{want}` in:\n{text}");
    }
    assert!(!text.contains("suggested fix"), "no mechanical fix: {text}");
    let doc = json(&env.run(&["why", "demo", "-f", "reason=amount_not_a_number", "--json"]));
    let d = &doc["payloads"]["differences"][0];
    assert_eq!(d["path"], "/payload/amount", "{doc:#}");
    assert_eq!(d["change"], "type", "{doc:#}");
    assert_eq!(d["to"], "grouped_number_text", "{doc:#}");
    assert_eq!(d["group"], serde_json::json!([301, 301]));
    assert!(doc["payloads"]["suggestion"]["program"]
        .as_str()
        .is_some_and(|p| p.starts_with(".payload.amount |= ")));
    assert!(doc["since"]["sentence"]
        .as_str()
        .is_some_and(|s| s.contains("was already failing other letters")));
    let none = env.run(&["why", "demo", "-f", "reason=nothing-like-this"]);
    assert_eq!(
        none.status.code(),
        Some(2),
        "{}",
        dlq_testkit::cli::stderr(&none)
    );
}

/// `[[links]]`: `show` fills the templates from the letter (a trace from `traceparent`,
/// the consumer version percent-encoded), says why a link cannot be made (a masked
/// correlation id never leaves in a URL), and a broken template is refused at start.
#[test]
fn show_prints_links_out_filled_from_the_letter() {
    let env = env();
    env.config(
        r#"
[[links]]
name = "trace"
url = "https://tempo.example/trace/{trace_id}"

[[links]]
name = "release"
url = "https://ci.example/releases?v={consumer_version}"

[[links]]
name = "logs"
url = "https://logs.example/?q={correlation_id}"
"#,
    );
    let mut l = letter(7, "tax", "release 2026/09", 3);
    l.headers.push(Header::new(
        "traceparent",
        HeaderValue::text("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ));
    l.headers.push(Header::new(
        "x-correlation-id",
        HeaderValue::text("jane.roe@example.com"),
    ));
    let p = dump(&env, "one.ndjson", &[l], &[]);
    let out = env.run(&["show", p.to_str().expect("utf8"), "msg-7"]);
    exited(&out, 0);
    let text = String::from_utf8(out.stdout).expect("utf8");
    for want in [
        "links\n",
        "  trace    https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736\n",
        "  release  https://ci.example/releases?v=release%202026%2F09\n",
        "  logs     (not for this letter: its correlation_id is masked)\n",
    ] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
    assert!(
        !text.contains("jane.roe") && !text.contains('\u{1b}'),
        "{text}"
    );
    env.config("[[links]]\nname = \"x\"\nurl = \"https://x/{nope}\"\n");
    let bad = env.run(&["show", p.to_str().expect("utf8"), "msg-7"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        dlq_testkit::cli::stderr(&bad).contains("link `x`: unknown placeholder {nope}"),
        "{}",
        dlq_testkit::cli::stderr(&bad)
    );
}
