//! `dlq-triage replay` end to end on librdkafka's mock cluster: the demo's incident and
//! its simulated consumer (which dead-letters a replay that fails again), driven through
//! the built binary as an operator would. Never skips: no external broker is needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::Utc;
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_core::ports::{DlqSource, ScanEvent};
use dlq_kafka::demo::scenario::Scale;
use dlq_kafka::demo::{produce_all, Demo, Simulator};
use dlq_kafka::KafkaSource;
use dlq_testkit::cli::Cli;
use dlq_testkit::pg::TempDb;
use dlq_testkit::process::{signal, wait_stopped};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary as alice in a scratch home with its ledger, on the demo's cluster
/// (`command`, `run` and `dir` are the testkit's).
struct Env {
    cli: Cli,
    bootstrap: String,
    uri: String,
}

impl std::ops::Deref for Env {
    type Target = Cli;
    fn deref(&self) -> &Cli {
        &self.cli
    }
}

impl Env {
    fn new(bootstrap: String, topics: &str) -> Self {
        Self::on(bootstrap, topics, None)
    }

    /// With the ledger at `ledger` (a team's PostgreSQL), else a file in the scratch home.
    fn on(bootstrap: String, topics: &str, ledger: Option<&str>) -> Self {
        let cli = Cli::new(env!("CARGO_BIN_EXE_dlq-triage"));
        let ledger: std::ffi::OsString = match ledger {
            Some(url) => url.into(),
            None => cli.path().join("ledger.db").into(),
        };
        Env {
            cli: cli
                .with("DLQ_TRIAGE_LEDGER", ledger)
                .with("DLQ_TRIAGE_ACTOR", "alice"),
            uri: format!("kafka://{bootstrap}/{topics}"),
            bootstrap,
        }
    }

    fn replay(&self, filter: &str, extra: &[&str]) -> Output {
        let mut args = vec!["replay", self.uri.as_str(), "--filter", filter];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    fn show(&self, id: &str) -> serde_json::Value {
        let out = self.run(&["replays", "show", id, "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).expect("json")
    }

    /// Records in the origin topics stamped with this replay id, by the DLQ letter they
    /// came from.
    fn landed(&self, id: &str) -> HashMap<String, Vec<RawLetter>> {
        let topics = ["invoices", "payments", "ledger-postings", "orders"];
        let mut by_from: HashMap<String, Vec<RawLetter>> = HashMap::new();
        for t in topics {
            let mut src =
                KafkaSource::new(vec![self.bootstrap.clone()], vec![t.into()], Vec::new());
            let r = src.scan(&mut |ev| {
                if let ScanEvent::Letters(b) = ev {
                    for l in b {
                        let h = |n: &str| l.header(n).and_then(|v| v.as_nonempty_text());
                        if h("x-dlq-replay-id").as_deref() == Some(id) {
                            by_from
                                .entry(h("x-dlq-replayed-from").expect("from"))
                                .or_default()
                                .push(l);
                        }
                    }
                }
                ControlFlow::Continue(())
            });
            if let Err(e) = r {
                assert!(e.to_string().contains("Unknown topic"), "{t}: {e}"); // an absent topic
            }
        }
        by_from
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The replay id the plan line names (`Replay plan r-… · …`).
fn replay_id(o: &Output) -> String {
    let s = String::from_utf8_lossy(&o.stdout);
    s.split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .unwrap_or_else(|| panic!("no replay id in {}", text(o)))
        .to_string()
}

fn demo() -> (Demo, Simulator, Env) {
    let demo = Demo::start(11, Utc::now(), Scale(0.1)).expect("demo");
    let sim = Simulator::start(demo.bootstrap(), 11, None).expect("simulator");
    let env = Env::new(demo.bootstrap(), "invoices.dlq,payments.dlq");
    (demo, sim, env)
}

fn count(o: &serde_json::Value, state: &str) -> usize {
    o["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| l["state"] == state)
        .count()
}

#[test]
fn the_demo_story_canary_stops_on_bad_amounts_then_a_revision_goes_through() {
    let (_demo, _sim, env) = demo();
    let fast = [
        "--canary",
        "3",
        "--canary-rate",
        "20",
        "--watch",
        "3s",
        "--rate",
        "50",
        "--yes",
        "--expect",
    ];
    // The dry-run says what would happen and sends nothing.
    let dry = env.replay("reason=amount_not_a_number", &["--dry-run", "--json"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    let n = plan["planned"].as_u64().expect("planned");
    assert!(n > 5, "{plan}");
    assert_eq!(plan["by_group"][0]["target"], "kafka topic invoices");
    assert!(env
        .landed(plan["replay_id"].as_str().expect("id"))
        .is_empty());
    // Amounts as strings fail again: the canary stops the replay (exit 3).
    let mut args = fast.to_vec();
    let ns = n.to_string();
    args.push(&ns);
    let out = env.replay("reason=amount_not_a_number", &args);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("auto-stopped"),
        "{}",
        text(&out)
    );
    let id = replay_id(&out);
    let shown = env.show(&id);
    assert_eq!(shown["state"], "auto-stopped");
    assert!(count(&shown, "failed-again") >= 1, "{shown}");
    assert!(
        count(&shown, "planned") as u64 >= n - 3,
        "no ramp after a failing canary"
    );
    assert!(env.landed(&id).values().all(|v| v.len() == 1));
    // A revision that makes one letter's amount a number, replayed: it resolves.
    let letter = shown["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .find(|l| l["state"] == "planned")
        .expect("an unsent letter")["letter_id"]
        .as_str()
        .expect("id")
        .to_string();
    let edit = env
        .command(&["edit", &env.uri, &letter, "--reason", "amount as a number"])
        .env(
            "EDITOR",
            r#"sed -i -E 's/"amount": *"[^"]*"/"amount": 1500.0/'"#,
        )
        .env_remove("VISUAL")
        .output()
        .expect("edit runs");
    assert!(edit.status.success(), "{}", text(&edit));
    let filter = format!("id={letter}");
    let dry = env.replay(&filter, &["--use-revisions", "--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    assert_eq!(plan["letters"][0]["revision"], 1, "{plan}");
    let out = env.replay(
        &filter,
        &["--use-revisions", "--canary", "1", "--watch", "3s", "--yes"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let id = replay_id(&out);
    let shown = env.show(&id);
    assert_eq!(shown["state"], "completed");
    assert_eq!(count(&shown, "settled"), 1, "{shown}");
    let landed = env.landed(&id);
    let copy = &landed.values().next().expect("landed")[0];
    let body: serde_json::Value = serde_json::from_slice(&copy.payload).expect("json body");
    assert_eq!(body["payload"]["amount"], 1500.0);
    // Replayed letters are not offered again.
    let again = env.replay(&filter, &["--yes"]);
    assert_eq!(again.status.code(), Some(5), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already-replayed"),
        "{}",
        text(&again)
    );
    let verify = env.run(&["audit", "verify"]);
    assert!(verify.status.success(), "{}", text(&verify));
}

#[test]
fn a_completed_replay_lands_each_letter_once_keyed_and_stamped() {
    let (_demo, _sim, env) = demo();
    let filter = "reason=attempt_budget_exhausted";
    let dry = env.replay(filter, &["--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    let n = plan["planned"].as_u64().expect("n").to_string();
    let out = env.replay(
        filter,
        &[
            "--canary",
            "2",
            "--canary-rate",
            "50",
            "--rate",
            "200",
            "--watch",
            "2s",
            "--yes",
            "--expect",
            &n,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(report["state"], "completed");
    assert_eq!(report["outcome"]["confirmed"].to_string(), n);
    let id = report["replay_id"].as_str().expect("id");
    let landed = env.landed(id);
    assert_eq!(landed.len().to_string(), n, "every letter landed");
    for (from, copies) in &landed {
        assert_eq!(copies.len(), 1, "{from} landed once");
        let c = &copies[0];
        assert!(c.key.is_some(), "the key is kept");
        assert!(c.header("x-dlq-replayed-by").is_some());
        assert_eq!(
            c.header("x-dlq-replay-count")
                .and_then(|v| v.as_nonempty_text())
                .as_deref(),
            Some("1")
        );
    }
    let shown = env.show(id);
    assert_eq!(count(&shown, "settled").to_string(), n);
    // They left the default view; in a new process (as after a restart) the completed
    // run's letters read `resolved`, as the TUI that ran it showed them, not `replayed`.
    let default = env.run(&["list", &env.uri, "--filter", filter, "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&default.stdout).expect("json");
    assert_eq!(
        rows["matched"], 0,
        "replayed letters still counted as failing: {rows}"
    );
    let states = |state: &str| -> Vec<String> {
        let with_state = format!("{filter} state={state}");
        let list = env.run(&["list", &env.uri, "--filter", &with_state, "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
        rows["letters"]
            .as_array()
            .expect("letters")
            .iter()
            .filter_map(|l| l["state"].as_str().map(str::to_string))
            .collect()
    };
    let resolved = states("resolved");
    assert_eq!(resolved.len().to_string(), n, "{resolved:?}");
    assert!(states("replayed").is_empty());
}

#[test]
fn a_crash_mid_replay_resumes_without_resending_a_confirmed_letter() {
    let (_demo, _sim, env) = demo();
    let filter = "reason=attempt_budget_exhausted";
    let crashed = env
        .command(&[
            "replay", &env.uri, "--filter", filter, "--canary", "0", "--rate", "20", "--watch",
            "1s", "--yes", "--expect", "3",
        ])
        .env("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED", "4")
        .output()
        .expect("runs");
    // --expect must match: find n first.
    let dry = env.replay(filter, &["--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    let n = plan["planned"].as_u64().expect("n");
    assert_eq!(
        crashed.status.code(),
        Some(2),
        "a wrong --expect is refused: {}",
        text(&crashed)
    );
    let ns = n.to_string();
    let crashed = env
        .command(&[
            "replay", &env.uri, "--filter", filter, "--canary", "0", "--rate", "20", "--watch",
            "1s", "--yes", "--expect", &ns,
        ])
        .env("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED", "4")
        .output()
        .expect("runs");
    assert!(
        !crashed.status.success(),
        "the hook aborts: {}",
        text(&crashed)
    );
    let id = replay_id(&crashed);
    let before = env.show(&id);
    assert_eq!(before["state"], "interrupted", "{before}");
    let confirmed: Vec<String> = before["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| l["state"] == "settled")
        .map(|l| l["location"].as_str().expect("loc").to_string())
        .collect();
    assert!(confirmed.len() >= 4, "{before}");
    let in_doubt = count(&before, "sending");
    let listed = env.run(&["replays"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("interrupted"),
        "{}",
        text(&listed)
    );
    // Resume: the rest goes, nothing confirmed goes twice.
    let resumed = env.run(&["replay", &env.uri, "--resume", &id, "--yes", "--rate", "50"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let after = env.show(&id);
    assert_eq!(after["state"], "completed");
    assert_eq!(
        after["detail"]["options"]["rate"], 50.0,
        "the pace given with --resume"
    );
    assert_eq!(
        after["detail"]["options"]["canary"], 0,
        "the rest as stored"
    );
    assert_eq!(count(&after, "settled") as u64, n, "{after}");
    // `replays` counts the whole replay, not only the resumed part.
    let rows: serde_json::Value =
        serde_json::from_slice(&env.run(&["replays", "--json"]).stdout).expect("json");
    assert_eq!(rows[0]["outcome"]["confirmed"].as_u64(), Some(n), "{rows}");
    assert_eq!(rows[0]["outcome"]["planned"].as_u64(), Some(n), "{rows}");
    let landed = env.landed(&id);
    assert_eq!(landed.len() as u64, n, "every letter landed");
    for loc in &confirmed {
        assert_eq!(
            landed[loc].len(),
            1,
            "{loc} was confirmed before the crash: never re-sent"
        );
    }
    // Letters in flight at the crash were looked up in the origin, not sent blind.
    let dups: usize = landed.values().map(|v| v.len() - 1).sum();
    assert_eq!(
        dups, 0,
        "{in_doubt} in doubt at the crash; none may land twice"
    );
    let verify = env.run(&["audit", "verify"]);
    assert!(verify.status.success(), "{}", text(&verify));
}

#[test]
fn ctrl_c_is_the_kill_switch_no_publish_after_it() {
    let (_demo, _sim, env) = demo();
    let filter = "reason=customer_tax_profile_missing";
    let dry = env.replay(filter, &["--dry-run", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    let ns = plan["planned"].as_u64().expect("n").to_string();
    let child = env
        .command(&[
            "replay",
            &env.uri,
            "--filter",
            filter,
            "--canary",
            "0",
            "--rate",
            "5",
            "--max-failed-ratio",
            "1",
            "--yes",
            "--expect",
            &ns,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until a few are confirmed (the journal is readable while it runs).
    let started = Instant::now();
    let mut child = child;
    let id = loop {
        if let Ok(Some(_)) = child.try_wait() {
            panic!(
                "the replay ended early: {}",
                text(&child.wait_with_output().expect("output"))
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "never got going"
        );
        std::thread::sleep(Duration::from_millis(200));
        // Reading the journal while the replay writes it must work (a second terminal).
        let list = env.run(&["replays", "--json"]);
        assert!(list.status.success(), "{}", text(&list));
        let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
        let Some(id) = rows[0]["id"].as_str().map(str::to_string) else {
            continue;
        };
        if count(&env.show(&id), "settled") >= 3 {
            break id;
        }
    };
    let pid = child.id().to_string();
    let kill = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = child.wait_with_output().expect("exits");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kill switch"),
        "{}",
        text(&out)
    );
    let shown = env.show(&id);
    assert_eq!(shown["state"], "killed");
    assert_eq!(
        count(&shown, "sending"),
        0,
        "confirms in flight were awaited"
    );
    let journaled = count(&shown, "settled") + count(&shown, "failed-again");
    std::thread::sleep(Duration::from_secs(1));
    let landed: usize = env.landed(&id).values().map(Vec::len).sum();
    assert_eq!(
        landed, journaled,
        "every publish is journaled; none started after the kill"
    );
    assert!((journaled as u64) < ns.parse::<u64>().expect("n"));
}

/// An origin topic `orders` (one partition) and a DLQ of Spring-style letters pointing
/// at its offsets.
fn spring_dlq(cluster_bootstrap: &str, letters: &[(&str, i64, Option<&str>)]) {
    let origin: Vec<RawLetter> = (0..10)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders".into(),
                partition: 0,
                offset: 0,
            }),
            key: Some(if i == 7 {
                b"A".to_vec()
            } else {
                format!("k{i}").into_bytes()
            }),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .collect();
    produce_all(cluster_bootstrap, &origin).expect("origin");
    let dlq: Vec<RawLetter> = letters
        .iter()
        .enumerate()
        .map(|(i, (key, offset, count))| {
            let mut headers = vec![
                Header::new("kafka_dlt-original-topic", HeaderValue::text("orders")),
                Header::new(
                    "kafka_dlt-original-partition",
                    HeaderValue::Bytes(0i32.to_be_bytes().to_vec()),
                ),
                Header::new(
                    "kafka_dlt-original-offset",
                    HeaderValue::Bytes(offset.to_be_bytes().to_vec()),
                ),
                Header::new("x-message-id", HeaderValue::text(&format!("m-{i}"))),
                Header::new("x-reason-code", HeaderValue::text("boom")),
            ];
            if let Some(c) = count {
                headers.push(Header::new("x-dlq-replay-count", HeaderValue::text(c)));
            }
            RawLetter {
                coords: Some(Coords::Kafka {
                    topic: "orders.dlq".into(),
                    partition: 0,
                    offset: 0,
                }),
                key: Some(key.as_bytes().to_vec()),
                headers,
                payload: b"{}".to_vec(),
                ..Default::default()
            }
        })
        .collect();
    produce_all(cluster_bootstrap, &dlq).expect("dlq");
}

#[test]
fn stale_keys_and_tired_letters_are_excluded_unless_asked() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock");
    cluster.create_topic("orders", 1, 1).expect("topic");
    cluster.create_topic("orders.dlq", 1, 1).expect("topic");
    let b = cluster.bootstrap_servers();
    // A failed at offset 2 but the origin has key A again at 7: stale. B is fresh.
    // C was replayed 3 times already.
    // B's letters were dead-lettered out of order (offset 3, then 1).
    spring_dlq(
        &b,
        &[
            ("A", 2, None),
            ("B", 3, None),
            ("C", 4, Some("3")),
            ("B", 1, None),
        ],
    );
    let env = Env::new(b, "orders.dlq");
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--dry-run", "--json"];
        args.extend_from_slice(extra);
        let out = env.replay("reason=boom", &args);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let p = plan(&[]);
    assert_eq!(p["planned"], 2, "{p}");
    assert_eq!(p["letters"][0]["letter_id"], "m-3", "B@1 before B@3");
    assert_eq!(p["letters"][1]["letter_id"], "m-1");
    assert_eq!(p["excluded"]["stale-key"], 1);
    assert_eq!(p["excluded"]["replay-count"], 1);
    assert_eq!(p["stale_check"]["stale"], 1);
    let p = plan(&["--include-stale", "--force-replay-count"]);
    assert_eq!(p["planned"], 4, "{p}");
    // The replay itself: B's two letters and only them land in `orders`, in their
    // original order.
    let out = env.replay("reason=boom", &["--canary", "0", "--watch", "1s", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let id = replay_id(&out);
    let landed = env.landed(&id);
    assert_eq!(landed.len(), 2);
    assert_eq!(landed["orders.dlq/0/1"][0].key.as_deref(), Some(&b"B"[..]));
    let mut orders = KafkaSource::new(
        vec![env.bootstrap.clone()],
        vec!["orders".into()],
        Vec::new(),
    );
    let mut order = Vec::new();
    orders
        .scan(&mut |ev| {
            if let ScanEvent::Letters(b) = ev {
                order.extend(b.iter().filter_map(|l| {
                    l.header("x-dlq-replayed-from")
                        .and_then(|v| v.as_nonempty_text())
                }));
            }
            ControlFlow::Continue(())
        })
        .expect("scan orders");
    assert_eq!(
        order,
        ["orders.dlq/0/3", "orders.dlq/0/1"],
        "per key, in origin order"
    );
}

#[test]
fn viewers_read_only_and_files_cannot_replay() {
    let (_demo, _sim, env) = demo();
    let roles = env.dir.path().join("roles.toml");
    std::fs::write(&roles, "operator = [\"bob\"]\nviewer = [\"*\"]\n").expect("roles");
    let out = env
        .command(&["replay", &env.uri, "--filter", "reason=timeout", "--yes"])
        .env("DLQ_TRIAGE_ROLES_FILE", &roles)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("operator"),
        "{}",
        text(&out)
    );
    let audit = env.run(&["audit", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&audit.stdout).contains("denied"),
        "{}",
        text(&audit)
    );
    let ro = env.run(&[
        "--read-only",
        "replay",
        &env.uri,
        "--filter",
        "reason=timeout",
        "--yes",
    ]);
    assert_eq!(ro.status.code(), Some(5), "{}", text(&ro));
    let dump = env.dir.path().join("d.ndjson");
    std::fs::write(
        &dump,
        "{\"payload\":\"{}\",\"headers\":{\"x-reason-code\":\"x\"}}\n",
    )
    .expect("dump");
    let file = env.run(&[
        "replay",
        dump.to_str().expect("utf8"),
        "--filter",
        "reason=x",
        "--yes",
    ]);
    assert_eq!(file.status.code(), Some(2), "{}", text(&file));
    assert!(
        String::from_utf8_lossy(&file.stderr).contains("cannot be replayed"),
        "{}",
        text(&file)
    );
}

/// `n` letters from `orders` in `orders.dlq` (four partitions each), Spring-style, with
/// distinct keys and ids and the reason `boom`: what the exactly-once tests replay.
fn orders_dlq(bootstrap: &str, n: usize) {
    orders_dlq_from(bootstrap, 0, n)
}

/// Letters `m-{from}` … `m-{from + n - 1}` into `orders.dlq`.
fn orders_dlq_from(bootstrap: &str, from: usize, n: usize) {
    group_into_dlq(bootstrap, from, n, ("m", "k"), "boom")
}

/// `n` letters `ID-i` keyed `KEYi` with reason `reason` into `orders.dlq`, as `orders`
/// dead-lettered them.
fn group_into_dlq(bootstrap: &str, from: usize, n: usize, (id, key): (&str, &str), reason: &str) {
    let letters: Vec<RawLetter> = (from..from + n)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders.dlq".into(),
                partition: (i % 4) as i32,
                offset: 0,
            }),
            key: Some(format!("{key}{i}").into_bytes()),
            headers: vec![
                Header::new("kafka_dlt-original-topic", HeaderValue::text("orders")),
                Header::new(
                    "kafka_dlt-original-partition",
                    HeaderValue::Bytes(((i % 4) as i32).to_be_bytes().to_vec()),
                ),
                Header::new(
                    "kafka_dlt-original-offset",
                    HeaderValue::Bytes((i as i64).to_be_bytes().to_vec()),
                ),
                Header::new("x-message-id", HeaderValue::text(&format!("{id}-{i}"))),
                Header::new("x-reason-code", HeaderValue::text(reason)),
            ],
            payload: format!("{{\"order\":{i}}}").into_bytes(),
            ..Default::default()
        })
        .collect();
    produce_all(bootstrap, &letters).expect("dlq");
}

/// A mock cluster with `orders` and `orders.dlq` (`n` letters), and an operator's
/// environment on it.
type Cluster = rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>;

fn orders_cluster(n: usize) -> (Cluster, Env) {
    orders_cluster_on(n, None)
}

/// `n` letters in `orders.dlq`, the binary's ledger at `ledger` (else a file).
fn orders_cluster_on(n: usize, ledger: Option<&str>) -> (Cluster, Env) {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock");
    cluster.create_topic("orders", 4, 1).expect("topic");
    cluster.create_topic("orders.dlq", 4, 1).expect("topic");
    orders_dlq(&cluster.bootstrap_servers(), n);
    let env = Env::on(cluster.bootstrap_servers(), "orders.dlq", ledger);
    (cluster, env)
}

impl Env {
    /// `replay … --filter reason=boom` of all `n` letters at `rate`/s, started. Stale keys
    /// included: runs on one cluster replay the same keys into `orders` again and again.
    fn spawn_replay(&self, n: usize, rate: &str) -> std::process::Child {
        self.spawn_replay_with(n, rate, &[])
    }

    /// `spawn_replay` with `extra` arguments.
    fn spawn_replay_with(&self, n: usize, rate: &str, extra: &[&str]) -> std::process::Child {
        self.replay_command(n, rate, extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("replay starts")
    }

    /// A replay of `n` letters at `rate`/s started with `DLQ_TRIAGE_TEST_FREEZE_AT` at
    /// `point`, returned once it has stopped itself there (a seeded point, never a time).
    fn replay_stopped_at(&self, n: usize, rate: &str, point: &str) -> std::process::Child {
        let mut child = self
            .replay_command(n, rate, &[])
            .env("DLQ_TRIAGE_TEST_FREEZE_AT", point)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("replay starts");
        wait_stopped(&mut child);
        child
    }

    /// The command `spawn_replay_with` runs.
    fn replay_command(&self, n: usize, rate: &str, extra: &[&str]) -> Command {
        let n = n.to_string();
        let mut args = vec![
            "replay",
            &self.uri,
            "--filter",
            "reason=boom",
            "--canary",
            "0",
            "--rate",
            rate,
            "--watch",
            "1s",
            "--yes",
            "--expect",
            &n,
            "--include-stale",
        ];
        args.extend_from_slice(extra);
        self.command(&args)
    }

    /// `replay --resume ID --yes` at `rate`/s, at most `expect` letters.
    fn resume(&self, id: &str, rate: &str, expect: usize) -> Output {
        self.run(&[
            "replay",
            &self.uri,
            "--resume",
            id,
            "--yes",
            "--rate",
            rate,
            "--expect",
            &expect.to_string(),
        ])
    }

    /// The id of the replay under way, once it has settled `n` letters (30 s at most).
    fn running_replay(&self, n: usize) -> String {
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the replay never got going"
            );
            let list = self.run(&["replays", "--json"]);
            let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap_or_default();
            if let Some(id) = rows[0]["id"].as_str() {
                if count(&self.show(id), "settled") >= n {
                    return id.to_string();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every one of `n` letters landed exactly once under replay `id`, and the ledger
    /// (its replay journal included) verifies.
    fn exactly_once(&self, id: &str, n: usize, what: &str) {
        let verify = self.run(&["audit", "verify"]);
        assert_eq!(verify.status.code(), Some(0), "{what}: {}", text(&verify));
        let landed = self.landed(id);
        let twice: Vec<_> = landed.iter().filter(|(_, v)| v.len() > 1).collect();
        assert!(
            twice.is_empty(),
            "{what}: {} letters landed more than once, e.g. {:?}",
            twice.len(),
            twice.first().map(|(k, v)| (k, v.len()))
        );
        if landed.len() != n {
            let shown = self.show(id);
            let missing: Vec<&serde_json::Value> = shown["letters"]
                .as_array()
                .expect("letters")
                .iter()
                .filter(|l| !landed.contains_key(l["location"].as_str().unwrap_or("")))
                .collect();
            panic!(
                "{what}: {} of {n} landed; not landed: {missing:?}",
                landed.len()
            );
        }
    }
}

/// SIGKILL the replay process itself (by its own pid, not a wrapper's) and reap it:
/// whether the kill landed, and what it had printed.
fn kill9(child: std::process::Child) -> (bool, Output) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .expect("kill")
        .success();
    (killed, child.wait_with_output().expect("killed replay"))
}

/// The replay id a (killed) run had printed with its plan, if it got that far.
fn printed_replay_id(out: &Output) -> Option<String> {
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .map(str::to_string)
}

/// Run `run`'s kill point of an `n`-letter replay for `DLQ_TRIAGE_TEST_FREEZE_AT`: the
/// process stops itself there and the test kills it stopped, so every run lands where
/// its seed says, however fast the machine. The runs take the three kinds in turn (after
/// a `sending` write, inside a `confirmed` write, after one; on Kafka, inside and after
/// mean every letter sent so far is committed on the broker); the seed picks the letter.
fn kill_point(run: u64, seed: &mut u64, n: usize) -> String {
    let kind = ["sending", "inside", "outside"][(run % 3) as usize];
    format!("{kind}:{}", 1 + lcg(seed) as usize % (n - 1))
}

/// A tiny deterministic generator for the kill points (seeded: a failure names its seed).
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *seed >> 33
}

/// SIGKILL (by the replay's own pid) at seeded journal points of a 1,000-letter replay
/// at 500/s (`kill_point`), then `--resume`: every letter reaches the origin exactly once, whatever was in
/// flight at the kill — the resume looks each in-flight letter up in `orders` instead
/// of sending it again. 20 runs.
#[test]
fn sigkill_at_random_points_then_resume_lands_every_letter_exactly_once() {
    const N: usize = 1000;
    let (cluster, _) = orders_cluster(N);
    let mut in_doubt_seen = 0;
    for run in 0..20u64 {
        let mut seed = 0x5eed_0000 + run;
        // Each run has its own ledger: all N letters are replayed again, under a new id.
        let env = Env::new(cluster.bootstrap_servers(), "orders.dlq");
        let child = env.replay_stopped_at(N, "500", &kill_point(run, &mut seed, N));
        let (killed, out) = kill9(child);
        let Some(id) = printed_replay_id(&out) else {
            // Killed before it planned: nothing was journaled, nothing sent.
            assert!(env.run(&["replays", "--json"]).stdout.starts_with(b"[]"));
            continue;
        };
        let listed = env.run(&["replays", "show", &id, "--json"]);
        if !listed.status.success() {
            // Killed after printing its plan, before journaling it: nothing was sent.
            assert!(
                env.landed(&id).is_empty(),
                "run {run}: sent without a journal"
            );
            continue;
        }
        let shown: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
        in_doubt_seen += count(&shown, "sending");
        if shown["state"] != "completed" {
            assert!(killed, "run {run}: the kill did not land");
            let resumed = env.resume(&id, "2000", N);
            // 5: killed after its last confirmed write, every letter already sent.
            let nothing_left = resumed.status.code() == Some(5)
                && String::from_utf8_lossy(&resumed.stdout).contains("0 to send");
            assert!(
                resumed.status.code() == Some(0) || nothing_left,
                "run {run}: {}",
                text(&resumed)
            );
        }
        env.exactly_once(
            &id,
            N,
            &format!("run {run} (seed {:#x})", 0x5eed_0000 + run),
        );
    }
    // The property is only tested if some kill caught letters in flight.
    assert!(in_doubt_seen > 0, "no kill landed with letters in flight");
}

/// SIGKILL (by its own pid) at 20 seeded points of a 1,000-letter replay at 1,000/s,
/// then a teammate starts a **new** replay of the same filter (not `--resume`): every
/// letter reaches the origin exactly once across both replays. The dead replay's
/// in-flight letters are nobody's to resend blindly: the new plan reads the target back
/// for the dead replay's id and leaves out what it finds.
#[test]
fn sigkill_at_random_points_then_a_new_replay_lands_every_letter_once() {
    const N: usize = 1000;
    let (cluster, _) = orders_cluster(N);
    let mut in_doubt_seen = 0;
    let mut found_seen = 0;
    for run in 0..20u64 {
        let mut seed = 0x0dd5_0000 + run;
        let env = Env::new(cluster.bootstrap_servers(), "orders.dlq");
        let child = env.replay_stopped_at(N, "1000", &kill_point(run, &mut seed, N));
        let (_, out) = kill9(child);
        let first = printed_replay_id(&out);
        if let Some(id) = &first {
            if let Ok(shown) = serde_json::from_slice::<serde_json::Value>(
                &env.run(&["replays", "show", id, "--json"]).stdout,
            ) {
                in_doubt_seen += count(&shown, "sending");
            }
        }
        // The teammate's new replay of the same filter, as many letters as are left.
        let second = env.run(&[
            "replay",
            &env.uri,
            "--filter",
            "reason=boom",
            "--canary",
            "0",
            "--rate",
            "2000",
            "--watch",
            "1s",
            "--yes",
            "--expect",
            &N.to_string(),
            "--include-stale",
            "--json",
        ]);
        let code = second.status.code();
        let report: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap_or_default();
        let what = format!("run {run} (seed {:#x})", 0x0dd5_0000 + run);
        // 5: a kill after the first replay's last confirmed write leaves nothing to send.
        let nothing_left = code == Some(5) && text(&second).contains("nothing to replay");
        assert!(
            code == Some(0) || code == Some(6) || nothing_left,
            "{what}: {}",
            text(&second)
        );
        let second_id = report["replay_id"].as_str().map(str::to_string);
        if let Some(id) = &second_id {
            let shown = env.run(&["replays", "show", id, "--json"]);
            let shown: serde_json::Value =
                serde_json::from_slice(&shown.stdout).unwrap_or_default();
            found_seen += shown["detail"]["excluded"]["found-in-target"]
                .as_u64()
                .unwrap_or(0) as usize;
        }
        // Counted on the broker: each DLQ letter in `orders` once, whichever replay sent it.
        let mut landed: HashMap<String, usize> = HashMap::new();
        for id in first.iter().chain(second_id.iter()) {
            for (from, copies) in env.landed(id) {
                *landed.entry(from).or_default() += copies.len();
            }
        }
        let twice: Vec<_> = landed.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{what}: {} letters sent twice, e.g. {:?}\n{}",
            twice.len(),
            twice.first(),
            text(&second)
        );
        let verify = env.run(&["audit", "verify"]);
        assert_eq!(verify.status.code(), Some(0), "{what}: {}", text(&verify));
        // None lost: what is not in `orders` is still offered (in doubt, or never sent).
        let offered = env.run(&["list", &env.uri, "--filter", "reason=boom", "--json"]);
        let left = serde_json::from_slice::<serde_json::Value>(&offered.stdout).unwrap_or_default()
            ["letters"]
            .as_array()
            .map_or(0, |l| l.iter().filter(|l| l["state"] != "replayed").count());
        assert!(
            landed.len() + left >= N,
            "{what}: {} landed, {left} left of {N}",
            landed.len()
        );
    }
    assert!(in_doubt_seen > 0, "no kill landed with letters in flight");
    eprintln!("in doubt at the kills: {in_doubt_seen}; found in the target by the new replays: {found_seen}");
}

/// A publish whose confirm never comes (the broker down past `message.timeout.ms`) may
/// have been written: its letter stays in doubt (`sending`), never `refused` — a refused
/// letter is offered again and a second replay would send it twice. The run stops; once
/// the broker is back, `--resume` reads the target back and lands every letter once.
#[test]
fn a_publish_that_times_out_leaves_its_letter_in_doubt_not_refused() {
    const N: usize = 200;
    let (cluster, env) = orders_cluster(N);
    let child = env.spawn_replay_with(N, "40", &["-X", "message.timeout.ms=1500"]);
    let id = env.running_replay(20);
    cluster.broker_down(1).expect("down");
    let out = child.wait_with_output().expect("the replay ends");
    cluster.broker_up(1).expect("up");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(3), "auto-stopped: {said}");
    assert!(said.contains("stays in doubt"), "{said}");
    let shown = env.show(&id);
    assert_eq!(
        count(&shown, "refused"),
        0,
        "a timeout is no refusal: {shown}"
    );
    assert!(count(&shown, "sending") > 0, "in doubt: {shown}");
    let resumed = env.resume(&id, "2000", N);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    env.exactly_once(&id, N, "after the timeout");
}

/// `cmd` run on another host name: a UTS namespace of its own (`unshare --uts`, root),
/// as a second bastion is. `None` where namespaces cannot be made here.
fn on_host(cmd: &Command, host: &str) -> Option<Command> {
    let ok = Command::new("unshare")
        .args(["--uts", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    Some(wrapped(
        cmd,
        &[
            "unshare",
            "--uts",
            "sh",
            "-c",
            &format!("hostname {host} && exec \"$0\" \"$@\""),
        ],
    ))
}

/// `discard` of the `other` group (see [`other_group`]) by `run`.
fn discard_other(run: impl Fn(&[&str]) -> Output, env: &Env) -> Output {
    run(&[
        "discard",
        &env.uri,
        "--filter",
        "reason=other",
        "--reason",
        "obsolete",
        "--yes",
    ])
}

/// `n` letters with reason `other` after the `boom` ones (from an offset of their own): a
/// group nobody replays.
fn other_group(bootstrap: &str, from: usize, n: usize) {
    group_into_dlq(bootstrap, from, n, ("o", "o"), "other")
}

/// Where the holder froze, and what the team meets while it is frozen.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Freeze {
    /// Between two ledger transactions: nothing of the ledger's is held but the replay.
    Outside,
    /// Inside one, its write lock taken (on the team ledger, the server's lock).
    Inside,
}

/// A replay's holder stops itself (SIGSTOP, as Ctrl-Z or a paused VM) at a seeded
/// ledger write, inside or outside its transaction; from a second host name the team
/// then discards another group and tries to take the replay over; then the holder is let
/// go (SIGCONT). Each outcome is asserted exactly, and each letter lands once.
///
/// - Outside, either ledger: the holder keeps its replay (its lock is the kernel's or the
///   server's, whatever any clock says): the takeover exits 6 naming it, the discard
///   goes through, and the holder finishes every letter when let go.
/// - Inside, file ledger: nobody can end a stopped process's transaction for it: the
///   discard exits 8 after the bounded wait, the takeover 6 (the holder lives), both
///   naming the stopped pid and `kill -CONT`/`kill`; the holder finishes when let go.
/// - Inside, team ledger: the server ends the stopped session
///   (`idle_in_transaction_session_timeout`), which frees the write lock and the
///   replay's holder lock: the discard and the takeover succeed, the takeover reads back
///   what the holder had confirmed on the broker and completes; the holder, let go,
///   stops at its next write.
fn frozen_holder(ledger: Option<&str>, freeze: Freeze, seed: u64) {
    const N: usize = 150;
    let (cluster, env) = orders_cluster_on(N, ledger);
    other_group(&cluster.bootstrap_servers(), 1_000_000, 3);
    let mut seed = seed;
    // After 10 to 99 of the 150 letters were confirmed.
    let at = 10 + (lcg(&mut seed) % 90) as usize;
    let point = match freeze {
        Freeze::Outside => format!("outside:{at}"),
        Freeze::Inside => format!("inside:{at}"),
    };
    let what = format!(
        "{} ledger, {point}",
        if ledger.is_some() { "team" } else { "file" }
    );
    let holder = env.replay_stopped_at(N, "100", &point);
    let rows: serde_json::Value =
        serde_json::from_slice(&env.run(&["replays", "--json"]).stdout).expect("json");
    let id = rows[0]["id"].as_str().expect("the replay's id").to_string();
    // A team ledger's teammates are on other bastions (a host name of their own); a
    // file ledger's are on this machine.
    let elsewhere = |args: &[&str]| -> Output {
        let cmd = env.command(args);
        match on_host(&cmd, "bastion-b").filter(|_| ledger.is_some()) {
            Some(mut c) => c.output().expect("runs"),
            None => env.run(args),
        }
    };
    let discard = discard_other(elsewhere, &env);
    let expect = N.to_string();
    let taker = elsewhere(&[
        "replay", &env.uri, "--resume", &id, "--yes", "--rate", "2000", "--expect", &expect,
    ]);
    let team_inside = ledger.is_some() && freeze == Freeze::Inside;
    match (ledger.is_some(), freeze) {
        (_, Freeze::Outside) => {
            assert_eq!(discard.status.code(), Some(0), "{what}: {}", text(&discard));
            assert_eq!(taker.status.code(), Some(6), "{what}: {}", text(&taker));
            assert!(
                text(&taker).contains("is running on"),
                "{what}: {}",
                text(&taker)
            );
            if ledger.is_none() {
                assert!(
                    text(&taker).contains("stopped (Ctrl-Z or SIGSTOP)"),
                    "{what}: {}",
                    text(&taker)
                );
            }
        }
        (false, Freeze::Inside) => {
            // The takeover sees a live holder before it needs the write lock: exit 6;
            // the discard waits for the lock in vain: exit 8. Both name the stopped pid.
            for (out, code) in [(&discard, 8), (&taker, 6)] {
                let said = text(out);
                assert_eq!(out.status.code(), Some(code), "{what}: {said}");
                for words in [
                    format!("pid {}", holder.id()),
                    "stopped (Ctrl-Z or SIGSTOP)".to_string(),
                    format!("kill -CONT {}", holder.id()),
                ] {
                    assert!(said.contains(&words), "{what}: `{words}` in {said}");
                }
                if code == 8 {
                    assert!(said.contains("nothing was recorded"), "{what}: {said}");
                }
            }
        }
        (true, Freeze::Inside) => {
            assert_eq!(discard.status.code(), Some(0), "{what}: {}", text(&discard));
            assert_eq!(taker.status.code(), Some(0), "{what}: {}", text(&taker));
        }
    }
    signal("CONT", holder.id());
    let out = holder.wait_with_output().expect("the holder ends");
    if team_inside {
        assert_ne!(out.status.code(), Some(0), "{what}: {}", text(&out));
        assert!(text(&out).contains("ledger"), "{what}: {}", text(&out));
    } else {
        assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
        if freeze == Freeze::Inside {
            // The discard waited in vain while the holder was stopped: now it goes.
            let again = discard_other(|a| env.run(a), &env);
            assert_eq!(again.status.code(), Some(0), "{what}: {}", text(&again));
        }
    }
    env.exactly_once(&id, N, &what);
}

#[test]
fn a_holder_frozen_between_writes_keeps_its_replay_and_the_team_goes_on() {
    for run in 0..2 {
        frozen_holder(None, Freeze::Outside, 0xf0f0_0000 + run);
    }
}

#[test]
fn a_holder_frozen_inside_a_file_ledger_write_is_named_stopped_with_what_frees_it() {
    for run in 0..2 {
        frozen_holder(None, Freeze::Inside, 0xf1f1_0000 + run);
    }
}

#[test]
fn on_the_team_ledger_a_holder_frozen_between_writes_keeps_its_replay() {
    let Some(db) = TempDb::create() else { return };
    frozen_holder(Some(&db.url), Freeze::Outside, 0xf2f2_0000);
}

#[test]
fn on_the_team_ledger_a_holder_frozen_inside_a_write_is_ended_by_the_server_and_taken_over() {
    for run in 0..2 {
        let Some(db) = TempDb::create() else { return };
        frozen_holder(Some(&db.url), Freeze::Inside, 0xf3f3_0000 + run);
    }
}

/// Ctrl-Z (SIGTSTP) on a CLI replay is a pause, not a freeze: the run stops sending,
/// waits for what is in flight, journals `replay-suspend` and only then stops itself —
/// no letter `sending`, no ledger lock held (a discard of another group goes through
/// while it is suspended) and its replay still its own (a takeover exits 6). `fg`
/// (SIGCONT) continues it: every letter once.
#[test]
fn ctrl_z_suspends_a_replay_at_a_safe_point_and_fg_finishes_it() {
    const N: usize = 150;
    let (cluster, env) = orders_cluster(N);
    other_group(&cluster.bootstrap_servers(), 1_000_000, 3);
    let mut holder = env.spawn_replay(N, "100");
    let id = env.running_replay(20);
    signal("TSTP", holder.id());
    wait_stopped(&mut holder);
    let shown = env.show(&id);
    assert_eq!(count(&shown, "sending"), 0, "nothing in flight: {shown}");
    assert!(count(&shown, "settled") < N, "suspended mid-run: {shown}");
    let audit: serde_json::Value =
        serde_json::from_slice(&env.run(&["audit", "list", "--json"]).stdout).expect("json");
    let suspended = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"] == "replay-suspend" && e["target"] == id.as_str())
        .count();
    assert_eq!(suspended, 1, "the suspension is journaled: {audit}");
    let discard = discard_other(|a| env.run(a), &env);
    assert_eq!(
        discard.status.code(),
        Some(0),
        "no lock held: {}",
        text(&discard)
    );
    let taker = env.resume(&id, "2000", N);
    assert_eq!(
        taker.status.code(),
        Some(6),
        "still its own: {}",
        text(&taker)
    );
    signal("CONT", holder.id());
    let out = holder.wait_with_output().expect("the replay ends");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("suspended at a safe point"), "{said}");
    env.exactly_once(&id, N, "after Ctrl-Z and fg");
}

/// One sender per replay, one live replay per letter: a `--resume` of a replay another
/// process is sending refuses (exit 6) and sends nothing; a second replay of the same
/// letters started while the first runs leaves them all out, saying who holds them;
/// once the holder is SIGKILLed its lease is dead and the resume completes, each letter
/// exactly once.
#[test]
fn a_live_replay_is_held_and_a_dead_holder_is_taken_over_exactly_once() {
    let (_cluster, env) = orders_cluster(200);
    held_then_taken_over(&env, 200);
}

/// The same on the team ledger: the holder is another engineer's process, SIGKILLed.
#[test]
fn on_the_team_ledger_a_live_replay_is_held_and_a_dead_holder_is_taken_over() {
    let Some(db) = TempDb::create() else { return };
    let (_cluster, env) = orders_cluster_on(200, Some(&db.url));
    held_then_taken_over(&env, 200);
}

fn held_then_taken_over(env: &Env, n: usize) {
    let child = env.spawn_replay(n, "20");
    // Wait until it journaled and settled a few.
    let id = env.running_replay(5);
    // A resume while it runs: refused with who holds it.
    let resume = env.run(&["replay", &env.uri, "--resume", &id, "--yes"]);
    assert_eq!(resume.status.code(), Some(6), "{}", text(&resume));
    assert!(text(&resume).contains("is running on"), "{}", text(&resume));
    // A second replay of the same letters: all held, said, nothing sent.
    let second = env.run(&[
        "replay",
        &env.uri,
        "--filter",
        "reason=boom",
        "--yes",
        "--canary",
        "0",
    ]);
    assert_ne!(second.status.code(), Some(0), "{}", text(&second));
    assert!(
        text(&second).contains("held by another running replay"),
        "{}",
        text(&second)
    );
    // The holder dies mid-run; its lease goes with it (same host, pid gone).
    kill9(child);
    let taken = env.resume(&id, "1000", n);
    assert_eq!(taken.status.code(), Some(0), "{}", text(&taken));
    env.exactly_once(&id, n, "after the takeover");
    // Every replay id in the ledger: only this one sent anything.
    let rows: serde_json::Value =
        serde_json::from_slice(&env.run(&["replays", "--json"]).stdout).expect("json");
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
}

/// On the team ledger leases are written and judged by the server's clock: a taker on
/// another bastion whose clock runs 30 s ahead cannot take a live holder's
/// lease (exit 6, who holds it); once the holder is dead, the resume completes, each
/// letter once.
#[test]
fn a_taker_whose_clock_runs_30s_ahead_cannot_take_a_live_lease_on_the_team_ledger() {
    let Some(db) = TempDb::create() else { return };
    const N: usize = 200;
    let (_cluster, env) = orders_cluster_on(N, Some(&db.url));
    let child = env.spawn_replay(N, "20");
    let id = env.running_replay(5);
    // It gets as far as the journal: its own look at the lease (its clock) says stale.
    let resume = env.command(&[
        "replay",
        &env.uri,
        "--resume",
        &id,
        "--yes",
        "--expect",
        &N.to_string(),
    ]);
    // 30 s ahead: libfaketime stalls librdkafka's threads, so the binary's test hook
    // skews its clock (every lease time it would write or judge by).
    let mut ahead = resume;
    ahead.env("DLQ_TRIAGE_TEST_CLOCK_SKEW_MS", "30000");
    let taken = match on_host(&ahead, "bastion-b") {
        Some(mut c) => c.output(),
        None => ahead.output(),
    }
    .expect("the taker runs");
    assert_eq!(taken.status.code(), Some(6), "{}", text(&taken));
    assert!(text(&taken).contains("is running on"), "{}", text(&taken));
    kill9(child);
    let done = env.resume(&id, "1000", N);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    env.exactly_once(&id, N, "after the holder died");
}

/// Two replays of one group started at the same moment: whoever journals first holds
/// the letters, the other is told who holds them and sends nothing (or only what the
/// first did not take); between them each letter is sent once.
#[test]
fn two_replays_started_at_once_send_each_letter_once() {
    let (_cluster, env) = orders_cluster(300);
    two_at_once(&env, 300);
}

/// The team ledger's server goes away mid-replay (its connection is cut, as a failover
/// or a lost network would): no publish after the journal write fails, the replay stops
/// and says why, nothing is lost; with the server back, the resume lands every letter
/// exactly once.
#[test]
fn the_team_ledger_lost_mid_replay_stops_it_and_the_resume_completes_exactly_once() {
    let Some(db) = TempDb::create() else { return };
    const N: usize = 300;
    let (_cluster, env) = orders_cluster_on(N, Some(&db.url));
    let child = env.spawn_replay(N, "50");
    let id = env.running_replay(10);
    // Cut every connection the replay holds to the ledger's database.
    let mut admin = db.client();
    let name = db.url.rsplit('/').next().expect("db name").to_string();
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&name],
        )
        .expect("terminate");
    let out = child.wait_with_output().expect("replay ends");
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    eprintln!("the stopped replay said:\n{said}");
    assert!(
        said.contains("ledger"),
        "the reason names the ledger: {said}"
    );
    let sent_before = env.landed(&id).len();
    assert!(sent_before < N, "it stopped early: {sent_before} sent");
    // Every letter sent so far is journaled (nothing published after the failed write).
    let shown = env.show(&id);
    let journaled =
        count(&shown, "settled") + count(&shown, "confirmed") + count(&shown, "sending");
    assert!(
        sent_before <= journaled,
        "{sent_before} landed but {journaled} journaled"
    );
    let resumed = env.resume(&id, "1000", N);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    env.exactly_once(&id, N, "after the server came back");
}

/// The team ledger's sessions cut (`pg_terminate_backend` of every session of the
/// ledger's database — what a server restart, a failover or a lost network does to them)
/// at 5 seeded points of a 1,000-letter replay at 1,000/s, each point exactly inside or
/// exactly between two journal writes (the holder stops itself there, the cut happens,
/// it is let go): the replay stops at its next write — nothing more is sent without its
/// ledger — and `--resume` lands every letter once; `audit verify` stays clean.
#[test]
fn a_team_ledger_cut_at_seeded_points_of_a_1000_letter_replay_loses_and_repeats_nothing() {
    const N: usize = 1000;
    let mut seed = 0x5eed_ca75_u64;
    for run in 0..5 {
        let Some(db) = TempDb::create() else { return };
        let (_cluster, env) = orders_cluster_on(N, Some(&db.url));
        let at = 50 + (lcg(&mut seed) % 900) as usize;
        let point = if lcg(&mut seed).is_multiple_of(2) {
            format!("inside:{at}")
        } else {
            format!("outside:{at}")
        };
        let what = format!("run {run}, {point}");
        let holder = env.replay_stopped_at(N, "1000", &point);
        let name = db.url.rsplit('/').next().expect("db name").to_string();
        let cut = db
            .client()
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&name],
            )
            .expect("terminate");
        assert!(!cut.is_empty(), "{what}: the replay's session was cut");
        signal("CONT", holder.id());
        let out = holder.wait_with_output().expect("the replay ends");
        let said = text(&out);
        assert_ne!(out.status.code(), Some(0), "{what}: {said}");
        assert!(
            said.contains("ledger"),
            "{what}: the reason names the ledger: {said}"
        );
        let rows: serde_json::Value =
            serde_json::from_slice(&env.run(&["replays", "--json"]).stdout).expect("json");
        let id = rows[0]["id"].as_str().expect("the replay").to_string();
        assert!(env.landed(&id).len() < N, "{what}: it stopped early");
        let resumed = env.resume(&id, "2000", N);
        assert_eq!(resumed.status.code(), Some(0), "{what}: {}", text(&resumed));
        env.exactly_once(&id, N, &what);
    }
}

/// `ledger migrate --to postgres://…`: a file ledger with a discard, a revision and a
/// replay killed mid-run becomes the team's record — verified, the killed replay
/// resumable from the server, each letter landing once; running it again does nothing.
#[test]
fn ledger_migrate_moves_a_file_ledger_with_a_killed_replay_to_the_team_ledger() {
    let Some(db) = TempDb::create() else { return };
    const N: usize = 60;
    let (_cluster, env) = orders_cluster(N);
    let discard = env.run(&[
        "discard", &env.uri, "--filter", "id=m-0", "--reason", "spam", "--yes",
    ]);
    assert_eq!(discard.status.code(), Some(0), "{}", text(&discard));
    {
        let mut l =
            dlq_ledger::Ledger::open(&env.path().join("ledger.db"), "alice").expect("file ledger");
        dlq_core::journal::Journal::record_revision(
            &mut l,
            &env.uri,
            "m-1",
            "fix",
            &["/n".into()],
            b"{}",
            b"{\"n\":1}",
        )
        .expect("revision");
    }
    let child = env.spawn_replay(N, "20");
    let id = env.running_replay(5);
    kill9(child);
    let moved = env.run(&["ledger", "migrate", "--to", &db.url]);
    assert_eq!(moved.status.code(), Some(0), "{}", text(&moved));
    assert!(text(&moved).contains("both verify"), "{}", text(&moved));
    let again = env.run(&["ledger", "migrate", "--to", &db.url]);
    assert!(text(&again).contains("nothing to do"), "{}", text(&again));
    // From now on the team works on the server: the killed replay is there, resumable.
    let team = Env::on(env.bootstrap.clone(), "orders.dlq", Some(&db.url));
    let rows: serde_json::Value =
        serde_json::from_slice(&team.run(&["replays", "--json"]).stdout).expect("json");
    assert_eq!(rows[0]["id"], id.as_str(), "{rows}");
    let resumed = team.resume(&id, "1000", N);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    team.exactly_once(&id, N - 1, "resumed on the team ledger");
    let audit: serde_json::Value =
        serde_json::from_slice(&team.run(&["audit", "list", "--json"]).stdout).expect("json");
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"edit") && actions.contains(&"ledger-migrated"),
        "{actions:?}"
    );
}

/// Four eyes: with `approval_above = 10`, alice's replay of 30 letters is recorded for
/// approval and sends nothing (again: still awaiting); she cannot approve her own plan;
/// bob sees it and approves; alice's next start runs, each letter once.
#[test]
fn a_plan_over_approval_above_waits_for_a_second_operator() {
    let Some(db) = TempDb::create() else { return };
    const N: usize = 30;
    let (cluster, _file_env) = orders_cluster(N);
    drop(dlq_ledger::Ledger::open_at(
        &dlq_ledger::Location::Server(db.url.clone()),
        "owner",
    ));
    let (alice_url, bob_url) = (db.engineer("alice"), db.engineer("bob"));
    let alice = Env::on(cluster.bootstrap_servers(), "orders.dlq", Some(&alice_url));
    let bob = Env::on(cluster.bootstrap_servers(), "orders.dlq", Some(&bob_url));
    alice.config("[replay]\napproval_above = 10\n");
    let start = || {
        alice.run(&[
            "replay",
            &alice.uri,
            "--filter",
            "reason=boom",
            "--yes",
            "--expect",
            "30",
            "--canary",
            "0",
            "--watch",
            "1s",
            "--rate",
            "1000",
            "--include-stale",
        ])
    };
    let first = start();
    assert_eq!(first.status.code(), Some(7), "{}", text(&first));
    assert!(
        text(&first).contains("recorded for a second operator"),
        "{}",
        text(&first)
    );
    let id = dlq_testkit::cli::approval_id(&text(&first));
    assert!(alice.landed(&id).is_empty(), "nothing sent before approval");
    let again = start();
    assert_eq!(again.status.code(), Some(7), "{}", text(&again));
    assert!(text(&again).contains("awaits approval"), "{}", text(&again));
    // Her own approval is refused; bob sees the plan, then approves it.
    let own = alice.run(&["approve", &id, "--yes"]);
    assert_ne!(own.status.code(), Some(0), "{}", text(&own));
    assert!(text(&own).contains("cannot approve it"), "{}", text(&own));
    let look = bob.run(&["approve", &id]);
    assert_eq!(look.status.code(), Some(0), "{}", text(&look));
    assert!(
        text(&look).contains("30 letters") && text(&look).contains("nothing recorded"),
        "{}",
        text(&look)
    );
    let yes = bob.run(&[
        "approve",
        &id,
        "--yes",
        "--note",
        "checked the fix is deployed",
    ]);
    assert_eq!(yes.status.code(), Some(0), "{}", text(&yes));
    assert!(text(&yes).contains("approved by bob_"), "{}", text(&yes));
    // Now alice's start runs: each letter once.
    let run = start();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let replay_id = String::from_utf8_lossy(&run.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .expect("replay id")
        .to_string();
    alice.exactly_once(&replay_id, N, "after approval");
    // The approval is spent: it does not let another run start.
    let verify = bob.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
}

/// Two engineers on the team ledger replaying the same 1,000 letters at once.
#[test]
fn two_engineers_replaying_one_group_on_the_team_ledger_send_each_letter_once() {
    let Some(db) = TempDb::create() else { return };
    let (_cluster, env) = orders_cluster_on(1000, Some(&db.url));
    two_at_once(&env, 1000);
}

fn two_at_once(env: &Env, n: usize) {
    let a = env.spawn_replay(n, "1000");
    let b = env.spawn_replay(n, "1000");
    let (a, b) = (
        a.wait_with_output().expect("a"),
        b.wait_with_output().expect("b"),
    );
    let codes = [a.status.code(), b.status.code()];
    assert!(
        codes.contains(&Some(0)),
        "one of them runs: {}\n{}",
        text(&a),
        text(&b)
    );
    let ids: Vec<String> = [&a, &b]
        .iter()
        .filter_map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .find(|w| w.starts_with("r-2"))
                .map(str::to_string)
        })
        .collect();
    let mut per_letter: HashMap<String, usize> = HashMap::new();
    for id in &ids {
        for (from, copies) in env.landed(id) {
            *per_letter.entry(from).or_default() += copies.len();
        }
    }
    assert_eq!(per_letter.len(), n, "every letter sent");
    assert!(
        per_letter.values().all(|n| *n == 1),
        "a letter sent twice between them: {:?}",
        per_letter.iter().find(|(_, n)| **n > 1)
    );
    let loser = if a.status.code() == Some(0) { &b } else { &a };
    if loser.status.code() != Some(0) {
        // Refused while the other runs, or — when the other finished every letter before
        // this one claimed any — told there is nothing left to send (exit 6).
        let said = text(loser);
        assert!(
            said.contains("held by another running replay")
                || (loser.status.code() == Some(6)
                    && said.contains("every letter was replayed by another process")),
            "{said}"
        );
    }
}

/// The whole ledger is in the chain: an update, a delete and an insert of one row in
/// each table (audit, decisions, replays, replay_items) is named by `audit verify`; and
/// then discard, replay and resume refuse, nothing sent (counted in `orders`).
#[test]
fn an_edit_of_any_ledger_table_is_named_and_every_write_then_refuses() {
    const N: usize = 20;
    let (cluster, env) = orders_cluster(N);
    let discard = env.run(&[
        "discard", &env.uri, "--filter", "id=m-0", "--reason", "spam", "--yes",
    ]);
    assert_eq!(discard.status.code(), Some(0), "{}", text(&discard));
    // A replay that dies after 5 confirmed: interrupted, resumable.
    let replay = env
        .command(&[
            "replay",
            &env.uri,
            "--filter",
            "reason=boom",
            "--canary",
            "0",
            "--rate",
            "50",
            "--watch",
            "1s",
            "--yes",
        ])
        .env("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED", "5")
        .output()
        .expect("replay");
    assert_ne!(replay.status.code(), Some(0), "{}", text(&replay));
    let id = replay_id(&replay);
    let verify = env.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let db = env.path().join("ledger.db");
    let pristine = env.path().join("pristine.db");
    rusqlite::Connection::open(&db)
        .expect("ledger")
        .execute("VACUUM INTO ?1", [pristine.to_str().expect("path")])
        .expect("backup");
    let in_orders = || {
        let mut src = KafkaSource::new(
            vec![cluster.bootstrap_servers()],
            vec!["orders".into()],
            Vec::new(),
        );
        let mut n = 0;
        src.scan(&mut |ev| {
            if let ScanEvent::Letters(b) = ev {
                n += b.len();
            }
            ControlFlow::Continue(())
        })
        .expect("orders");
        n
    };
    let sent = in_orders();
    assert!(sent >= 5, "{sent}");
    let cases = [
        ("UPDATE audit SET detail = '{}' WHERE seq = 2", "MAC"),
        ("DELETE FROM audit WHERE seq = 3", "deleted"),
        (
            "INSERT INTO audit SELECT seq + 1000, at, actor, action, target, detail, prev_hash, hash FROM audit WHERE seq = 1",
            "entry",
        ),
        ("UPDATE decisions SET reason = 'other' WHERE kind = 'discard'", "decisions table"),
        ("DELETE FROM decisions WHERE id = (SELECT MAX(id) FROM decisions)", "no decision row"),
        (
            "INSERT INTO decisions (source, letter_id, binding, coords, kind, reason, actor, at, audit_seq) SELECT source, 'm-forged', binding, coords, kind, reason, actor, at, audit_seq FROM decisions LIMIT 1",
            "decisions table",
        ),
        ("UPDATE replays SET state = 'killed'", "replays table"),
        ("DELETE FROM replays", "not in the replays table"),
        (
            "INSERT INTO replays (id, source, target, actor, started_at, state, detail) VALUES ('r-forged', 's', 't', 'a', 'x', 'completed', '{}')",
            "no audit entry",
        ),
        ("UPDATE replay_items SET state = 'planned' WHERE seq = 3", "letter 3"),
        ("DELETE FROM replay_items WHERE seq = 4", "planned letters differ"),
        (
            "INSERT INTO replay_items (replay_id, seq, letter_id, binding, location, state) SELECT replay_id, 999, 'm-forged', binding, location, 'planned' FROM replay_items LIMIT 1",
            "planned letters differ",
        ),
    ];
    for (sql, named) in cases {
        std::fs::copy(&pristine, &db).expect("restore");
        for side in ["ledger.db-wal", "ledger.db-shm"] {
            let _ = std::fs::remove_file(env.path().join(side));
        }
        rusqlite::Connection::open(&db)
            .expect("ledger")
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let verify = env.run(&["audit", "verify"]);
        assert_ne!(verify.status.code(), Some(0), "{sql}: {}", text(&verify));
        assert!(text(&verify).contains(named), "{sql}: {}", text(&verify));
        // Every write refuses, naming the broken entry; nothing reaches the broker.
        let writes: [&[&str]; 3] = [
            &[
                "discard", &env.uri, "--filter", "id=m-19", "--reason", "x", "--yes",
            ],
            &[
                "replay",
                &env.uri,
                "--filter",
                "reason=boom",
                "--yes",
                "--canary",
                "0",
                "--include-stale",
                "--force-replay-count",
                "--expect",
                "20",
            ],
            &[
                "replay", &env.uri, "--resume", &id, "--yes", "--expect", "20",
            ],
        ];
        for args in writes {
            let out = env.run(args);
            assert_ne!(
                out.status.code(),
                Some(0),
                "{sql}: {args:?}: {}",
                text(&out)
            );
            assert!(
                text(&out).contains("fails verification at entry"),
                "{sql}: {args:?}: {}",
                text(&out)
            );
        }
        assert_eq!(
            in_orders(),
            sent,
            "{sql}: nothing sent from a tampered ledger"
        );
    }
}

/// `--to` sends a replay elsewhere than the origins only where `[replay]
/// allowed_targets` says it may: refused before anything is planned or sent otherwise,
/// with the list (or its absence) in the message.
#[test]
fn replays_go_only_to_origins_unless_the_config_allows_the_target() {
    let (_demo, _sim, env) = demo();
    let filter = "reason=attempt_budget_exhausted";
    let out = env.replay(filter, &["--to", "kafka:payments-retry", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kafka:payments-retry") && err.contains("allowed_targets"),
        "{err}"
    );
    env.config("[replay]\nallowed_targets = [\"invoices\", \"queue:orders.*\"]\n");
    let out = env.replay(filter, &["--to", "kafka:payments-retry", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invoices, queue:orders.*"), "{err}");
    let replays = env.run(&["replays", "--json"]);
    assert!(
        !String::from_utf8_lossy(&replays.stdout).contains("payments-retry"),
        "a refused replay left a journal entry: {}",
        text(&replays)
    );
    env.config("[replay]\nallowed_targets = [\"payments-*\"]\n");
    let out = env.replay(
        filter,
        &["--to", "kafka:payments-retry", "--dry-run", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        plan["by_group"][0]["target"], "kafka topic payments-retry",
        "{plan}"
    );
}

/// A replay sends exactly the letters its plan counted: letters of the same group that
/// arrive while it runs stay in the DLQ, open, for another decision. They arrive while
/// the replay is stopped right after its first `sending` write (its plan journaled): a
/// seeded point, not a time.
#[test]
fn letters_arriving_after_the_plan_are_never_swept_into_the_replay() {
    const N: usize = 40;
    let (cluster, env) = orders_cluster(N);
    let child = env.replay_stopped_at(N, "20", "sending:1");
    orders_dlq_from(&cluster.bootstrap_servers(), N, 10);
    signal("CONT", child.id());
    let out = child.wait_with_output().expect("replay ends");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let id = replay_id(&out);
    let shown = env.show(&id);
    let sent: Vec<&str> = shown["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .map(|l| l["letter_id"].as_str().expect("id"))
        .collect();
    assert_eq!(sent.len(), N, "{shown}");
    assert!(sent
        .iter()
        .all(|id| id[2..].parse::<usize>().expect("m-N") < N));
    let dry =
        String::from_utf8_lossy(&env.replay("reason=boom", &["--dry-run"]).stdout).to_string();
    assert!(
        dry.contains("10 to send"),
        "the late letters are still open: {dry}"
    );
    assert!(
        dry.contains("letters arriving after this plan are not added"),
        "{dry}"
    );
}

/// Records in `topic` by the message id each copy keeps.
fn copies_in(bootstrap: &str, topic: &str) -> HashMap<String, usize> {
    let mut src = KafkaSource::new(vec![bootstrap.to_string()], vec![topic.into()], Vec::new());
    let mut by_id: HashMap<String, usize> = HashMap::new();
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(b) = ev {
            for l in b {
                let id = l
                    .header("x-message-id")
                    .and_then(|v| v.as_nonempty_text())
                    .unwrap_or_default();
                *by_id.entry(id).or_default() += 1;
            }
        }
        ControlFlow::Continue(())
    })
    .expect("scan");
    by_id
}

/// A 1,000-letter replay held by its pause file for 10 s: the origin topic receives
/// nothing in that window (counted on the consumer side), then the replay completes with
/// every letter there exactly once.
#[test]
fn a_paused_replay_sends_nothing_until_resumed_then_each_letter_once() {
    const N: usize = 1000;
    let (cluster, env) = orders_cluster(N);
    let pause = env.path().join("pause");
    let pause_arg = pause.to_string_lossy().to_string();
    let child = env.spawn_replay_with(N, "200", &["--pause-file", &pause_arg]);
    let bootstrap = cluster.bootstrap_servers();
    let started = Instant::now();
    while copies_in(&bootstrap, "orders").values().sum::<usize>() < 50 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the replay never sent"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(&pause, "").expect("pause");
    // The pause is read within 0.1 s; letters already in flight still land.
    std::thread::sleep(Duration::from_secs(1));
    let before: usize = copies_in(&bootstrap, "orders").values().sum();
    std::thread::sleep(Duration::from_secs(10));
    let after: usize = copies_in(&bootstrap, "orders").values().sum();
    assert_eq!(before, after, "sent while paused");
    assert!(after < N, "the replay finished before the pause: {after}");
    std::fs::remove_file(&pause).expect("resume");
    let out = child.wait_with_output().expect("replay ends");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("paused"),
        "{}",
        text(&out)
    );
    let copies = copies_in(&bootstrap, "orders");
    assert_eq!(copies.len(), N, "every letter landed");
    assert!(copies.values().all(|c| *c == 1), "a letter landed twice");
    let audit = String::from_utf8_lossy(&env.run(&["audit", "list", "--json"]).stdout).to_string();
    assert!(
        audit.contains("replay-pause") && audit.contains("replay-unpause"),
        "{audit}"
    );
    eprintln!("paused at {before} of {N} for 10 s; then all {N} once");
}

/// #68, 1: one decision per letter, whoever decides first. A 40-letter replay stops
/// itself (SIGSTOP) at a seeded point — with its plan made but not yet journaled
/// (`planned:0`), or after its Nth `sending` write — while a second run discards the 11
/// letters keyed `k1*`. Let go, the replay finishes. Counted on the broker and in the
/// ledger, exactly:
///
/// - discard first (`planned:0`): all 11 discarded; the replay withdraws them in the
///   transaction that would have journaled them `sending`, and lands the other 29;
/// - replay first (`sending:N`): the discard is refused for every letter (exit 1, each
///   naming the replay and how to stop it); the replay lands all 40.
///
/// Never a letter both discarded and sent, never one sent twice, none lost.
/// `ledger()`: each run's ledger (a team ledger: a database of its own — every run's
/// cluster holds the same letters at the same offsets, and the ledger takes a letter
/// for itself whatever source string named it).
fn discard_while_replaying(ledger: &dyn Fn() -> Option<TempDb>, runs: u64, seed: u64) {
    const N: usize = 40;
    let mut seed = seed;
    for run in 0..runs {
        let db = ledger();
        let ledger = db.as_ref().map(|d| d.url.as_str());
        let (_cluster, env) = orders_cluster_on(N, ledger);
        let point = if run % 2 == 0 {
            "planned:0".to_string()
        } else {
            format!("sending:{}", 1 + lcg(&mut seed) as usize % (N - 1))
        };
        let what = format!("run {run} ({point})");
        let child = env.replay_stopped_at(N, "400", &point);
        let discard = env.run(&[
            "discard",
            &env.uri,
            "--filter",
            "reason=boom key=k1*",
            "--reason",
            "duplicate",
            "--yes",
        ]);
        signal("CONT", child.id());
        let out = child.wait_with_output().expect("replay");
        assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
        let id = printed_replay_id(&out).expect("replay id");
        let discarded = discards_recorded(&env, ledger);
        let landed = env.landed(&id);
        let sent: Vec<String> = landed
            .values()
            .flatten()
            .filter_map(|l| l.header("x-message-id").and_then(|v| v.as_nonempty_text()))
            .collect();
        let both: Vec<&String> = sent.iter().filter(|m| discarded.contains(m)).collect();
        assert!(both.is_empty(), "{what}: discarded and sent: {both:?}");
        let twice = landed.values().filter(|v| v.len() > 1).count();
        assert_eq!(twice, 0, "{what}: letters sent twice");
        assert_eq!(
            sent.len() + discarded.len(),
            N,
            "{what}: every letter decided once"
        );
        if point == "planned:0" {
            assert_eq!(discard.status.code(), Some(0), "{what}: {}", text(&discard));
            assert_eq!(discarded.len(), 11, "{what}");
            assert!(
                text(&out).contains("11 withdrawn"),
                "{what}: the replay says what it withdrew: {}",
                text(&out)
            );
        } else {
            assert_eq!(discard.status.code(), Some(1), "{what}: {}", text(&discard));
            let said = text(&discard);
            assert!(
                said.contains(&id) && said.contains("running on") && said.contains("stop it"),
                "{what}: the refusal names the replay and how to stop it: {said}"
            );
            assert_eq!(discarded.len(), 0, "{what}");
        }
        let verify = env.run(&["audit", "verify"]);
        assert_eq!(verify.status.code(), Some(0), "{what}: {}", text(&verify));
    }
}

/// The letters the ledger holds a discard of on this run's cluster (its audit entries,
/// whatever any view makes of a letter also replayed).
fn discards_recorded(env: &Env, ledger: Option<&str>) -> Vec<String> {
    let at = match ledger {
        Some(url) => dlq_ledger::Location::Server(url.to_string()),
        None => dlq_ledger::Location::File(env.path().join("ledger.db")),
    };
    let l = dlq_ledger::Ledger::open_at(&at, "alice").expect("ledger");
    l.audit_entries()
        .expect("entries")
        .into_iter()
        .filter(|e| e.action == "discard" && e.detail.contains(&env.bootstrap))
        .map(|e| e.target)
        .collect()
}

#[test]
fn a_discard_and_a_replay_of_one_group_decide_each_letter_once_on_the_file_ledger() {
    discard_while_replaying(&|| None, 4, 68);
}

#[test]
fn a_discard_and_a_replay_of_one_group_decide_each_letter_once_on_the_team_ledger() {
    if TempDb::create().is_none() {
        return;
    }
    discard_while_replaying(&TempDb::create, 4, 6_868);
}

/// `cmd` run as another OS user: uid `uid`, group `gid` only, umask 022 (the default that
/// made a teammate's lock file unreadable as "no holder"). `None` unless this test runs
/// as root, which may change users (CI does).
fn as_user(cmd: &Command, uid: u32, gid: u32) -> Option<Command> {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").ok()?.uid() != 0 {
        eprintln!("SKIPPED: changing users needs root");
        return None;
    }
    Some(wrapped(
        cmd,
        &[
            "setpriv",
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--clear-groups",
            "sh",
            "-c",
            "umask 022 && exec \"$0\" \"$@\"",
        ],
    ))
}

/// #68, 2: one file ledger in a group's setgid folder, two OS users with umask 022. Alice
/// creates the ledger and starts a replay, frozen after its third `sending` write; Bob
/// (another uid, the same group) plans the same letters: refused, every letter held by
/// Alice's replay — never taken for "no holder" because her lock file is hers — and his
/// resume of her replay exits 6. Alice, let go, lands every letter once; Bob verifies the
/// chain and reads the replay; the ledger's parts are group-writable whatever the umask.
#[test]
fn two_os_users_with_umask_022_on_one_file_ledger_send_each_letter_once() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    const N: usize = 60;
    const GID: u32 = 64_068;
    let (cluster, _) = orders_cluster(N);
    let folder = tempfile::tempdir().expect("shared folder");
    let probe = Command::new("true");
    if as_user(&probe, 64_001, GID).is_none() {
        return;
    }
    std::os::unix::fs::chown(folder.path(), Some(0), Some(GID)).expect("chgrp");
    // Setgid and sticky, as docs/ledger.md says.
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o3775))
        .expect("setgid and sticky folder");
    let ledger = folder.path().join("ledger.db");
    let user = |name: &str, uid: u32| {
        let env = Env::on(
            cluster.bootstrap_servers(),
            "orders.dlq",
            Some(ledger.to_str().expect("utf-8 path")),
        );
        let env = Env {
            cli: env.cli.with("DLQ_TRIAGE_ACTOR", name),
            ..env
        };
        let chown = Command::new("chown")
            .args(["-R", &format!("{uid}:{GID}")])
            .arg(env.path())
            .status()
            .expect("chown");
        assert!(chown.success());
        env
    };
    let (alice, bob) = (user("alice", 64_001), user("bob", 64_002));
    let run_as = |env: &Env, uid: u32, args: &[&str]| {
        as_user(&env.command(args), uid, GID)
            .expect("root")
            .output()
            .expect("runs")
    };
    let mut frozen = as_user(
        alice
            .replay_command(N, "300", &[])
            .env("DLQ_TRIAGE_TEST_FREEZE_AT", "sending:3"),
        64_001,
        GID,
    )
    .expect("root")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("alice's replay");
    wait_stopped(&mut frozen);
    // Her lock file as a umask-022 creator outside a setgid folder leaves it (0644):
    // Bob can read it, not write it — and reading is all `flock` needs.
    let locks = folder.path().join("ledger.db.locks");
    for f in std::fs::read_dir(&locks).expect("lock folder") {
        let f = f.expect("lock file").path();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    // Bob plans the same letters: all held by Alice's live replay.
    let second = run_as(
        &bob,
        64_002,
        &[
            "replay",
            &bob.uri,
            "--filter",
            "reason=boom",
            "--canary",
            "0",
            "--yes",
            "--include-stale",
        ],
    );
    assert_ne!(second.status.code(), Some(0), "{}", text(&second));
    assert!(
        text(&second).contains("held by another running replay"),
        "{}",
        text(&second)
    );
    let listed = run_as(&bob, 64_002, &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    let id = rows[0]["id"].as_str().expect("alice's replay").to_string();
    let resume = run_as(
        &bob,
        64_002,
        &["replay", &bob.uri, "--resume", &id, "--yes"],
    );
    assert_eq!(resume.status.code(), Some(6), "{}", text(&resume));
    signal("CONT", frozen.id());
    let out = frozen.wait_with_output().expect("alice's replay");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let verify = run_as(&bob, 64_002, &["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    alice.exactly_once(&id, N, "two OS users");
    // Only Alice's replay sent anything.
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    for part in ["ledger.db", "ledger.db.key"] {
        let m = std::fs::metadata(folder.path().join(part)).expect(part);
        assert_eq!(
            m.mode() & 0o060,
            0o060,
            "{part} is group-writable: {:o}",
            m.mode()
        );
        assert_eq!(m.gid(), GID, "{part} has the folder's group");
    }
    // The lock folder the tool made is setgid and sticky: nobody removes another's lock.
    let locks_mode = std::fs::metadata(&locks).expect("locks").mode();
    assert_eq!(locks_mode & 0o3000, 0o3000, "{locks_mode:o}");
    // A folder made setgid but not sticky is refused, saying so: a member could remove
    // another's lock file and take a live replay over.
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o2775))
        .expect("not sticky");
    let refused = run_as(&bob, 64_002, &["audit", "verify"]);
    assert_ne!(refused.status.code(), Some(0), "{}", text(&refused));
    assert!(text(&refused).contains("not sticky"), "{}", text(&refused));
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o3775))
        .expect("sticky again");
    // A key made private by hand: Bob is told which part and the command that fixes it,
    // not a bare "Permission denied".
    let key = folder.path().join("ledger.db.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let refused = run_as(&bob, 64_002, &["audit", "verify"]);
    assert_ne!(refused.status.code(), Some(0), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("audit key") && said.contains("chmod g+r") && said.contains("docs/ledger.md"),
        "{said}"
    );
}

/// `cmd` on another bastion as far as this host can tell: a host name and a pid
/// namespace of its own, with its own `/proc` (`unshare --uts --pid --fork
/// --mount-proc`, root). `None` where namespaces cannot be made here.
fn on_other_bastion(cmd: &Command, host: &str) -> Option<Command> {
    let ok = Command::new("unshare")
        .args(["--uts", "--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: namespaces cannot be made here");
        return None;
    }
    Some(wrapped(
        cmd,
        &[
            "unshare",
            "--uts",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            &format!("hostname {host} && exec \"$0\" \"$@\""),
        ],
    ))
}

/// `cmd` run under `prefix` (a program and its arguments that end by exec'ing the rest,
/// as `sh -c '… exec "$0" "$@"'`), with `cmd`'s environment and directory.
fn wrapped(cmd: &Command, prefix: &[&str]) -> Command {
    let mut u = Command::new(prefix[0]);
    u.args(&prefix[1..])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        u.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => u.env(k, v),
            None => u.env_remove(k),
        };
    }
    u
}

/// #68, 3: who sends a replay comes from the ledger's lock, never from `/proc`. A replay
/// frozen (SIGSTOP) after its second `sending` write is live — its lock is held — and a
/// teammate on another host name, in another pid namespace (its `/proc` cannot see the
/// sender), reads it `running`, with the host, pid, user and heartbeat age from the
/// ledger; its resume is refused as held, never offered as a takeover of a dead run.
fn a_live_replay_seen_from_another_bastion(ledger: Option<&str>) {
    const N: usize = 30;
    let (_cluster, env) = orders_cluster_on(N, ledger);
    let probe = Command::new("true");
    if on_other_bastion(&probe, "bastion-2").is_none() {
        return;
    }
    let frozen = env.replay_stopped_at(N, "300", "sending:2");
    let there = |args: &[&str]| {
        on_other_bastion(&env.command(args), "bastion-2")
            .expect("namespaces")
            .output()
            .expect("runs")
    };
    let listed = there(&["replays", "--json"]);
    assert!(listed.status.success(), "{}", text(&listed));
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(rows[0]["state"], "running", "{rows}");
    let on = rows[0]["running_on"].as_str().unwrap_or_default();
    let pid = format!("(pid {})", frozen.id());
    let by = format!("by {}", rows[0]["actor"].as_str().unwrap_or("?"));
    assert!(
        on.contains("running on")
            && on.contains(&pid)
            && on.contains(&by)
            && on.contains("heartbeat"),
        "{on}"
    );
    let id = rows[0]["id"].as_str().expect("id").to_string();
    let resume = there(&["replay", &env.uri, "--resume", &id, "--yes"]);
    assert_eq!(resume.status.code(), Some(6), "{}", text(&resume));
    assert!(
        !text(&resume).contains("no longer running"),
        "{}",
        text(&resume)
    );
    signal("CONT", frozen.id());
    let out = frozen.wait_with_output().expect("replay");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    env.exactly_once(&id, N, "seen from another bastion");
}

#[test]
fn a_live_replay_is_running_from_another_bastion_on_the_file_ledger() {
    a_live_replay_seen_from_another_bastion(None);
}

#[test]
fn a_live_replay_is_running_from_another_bastion_on_the_team_ledger() {
    let Some(db) = TempDb::create() else { return };
    a_live_replay_seen_from_another_bastion(Some(&db.url));
}

/// #68, 5: a replay to a topic that does not exist is refused — in the dry-run, said;
/// at the start, with nothing journaled or sent — unless `--create-topics` asks for it
/// (a broker that auto-creates topics would otherwise make one with its defaults, as
/// librdkafka's mock cluster does).
#[test]
fn a_replay_to_a_topic_that_does_not_exist_is_refused_unless_asked() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock");
    cluster.create_topic("orders.dlq", 1, 1).expect("topic");
    let letters: Vec<RawLetter> = (0..3)
        .map(|i| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders.dlq".into(),
                partition: 0,
                offset: 0,
            }),
            key: Some(format!("k{i}").into_bytes()),
            headers: vec![
                Header::new(
                    "kafka_dlt-original-topic",
                    HeaderValue::text("ghost-orders"),
                ),
                Header::new("x-message-id", HeaderValue::text(&format!("g-{i}"))),
                Header::new("x-reason-code", HeaderValue::text("boom")),
            ],
            payload: format!("{{\"order\":{i}}}").into_bytes(),
            ..Default::default()
        })
        .collect();
    produce_all(&cluster.bootstrap_servers(), &letters).expect("dlq");
    let env = Env::new(cluster.bootstrap_servers(), "orders.dlq");
    let dry = env.replay("reason=boom", &["--dry-run", "--json"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    assert_eq!(plan["missing_targets"][0], "ghost-orders", "{plan}");
    let said = env.replay("reason=boom", &["--dry-run"]);
    assert!(
        text(&said).contains("MISSING:  target ghost-orders does not exist"),
        "{}",
        text(&said)
    );
    let refused = env.replay("reason=boom", &["--yes", "--canary", "0"]);
    assert_ne!(refused.status.code(), Some(0), "{}", text(&refused));
    assert!(
        text(&refused).contains("--create-topics"),
        "{}",
        text(&refused)
    );
    let rows = env.run(&["replays", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&rows.stdout).trim(),
        "[]",
        "nothing journaled"
    );
    let asked = env.replay(
        "reason=boom",
        &["--yes", "--canary", "0", "--watch", "1s", "--create-topics"],
    );
    assert_eq!(asked.status.code(), Some(0), "{}", text(&asked));
    let id = replay_id(&asked);
    assert_eq!(env.show(&id)["by_state"]["settled"], 3);
}
