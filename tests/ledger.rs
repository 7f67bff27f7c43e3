//! Discard and the audit ledger, end to end on the binary (file source: ledger-only).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("tmp"),
        }
    }

    fn ledger(&self) -> std::path::PathBuf {
        self.dir.path().join("state/dlq-triage/ledger.db")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_dlq-triage"))
            .args(args)
            .env("DLQ_TRIAGE_NOW", "2026-11-29T18:00:00Z")
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("DLQ_TRIAGE_ACTOR", "alice")
            .env_remove("DLQ_TRIAGE_LEDGER")
            .stdin(Stdio::null())
            .output()
            .expect("binary runs")
    }
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/incident.ndjson")
        .display()
        .to_string()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("json")
}

#[test]
fn discard_is_recorded_leaves_the_open_groups_and_stays_viewable() {
    let env = Env::new();
    let ex = example();
    let before = json(&env.run(&["summary", &ex, "--json", "-g", "reason"]));
    assert_eq!(before["total"], 429);
    let out = env.run(&[
        "discard",
        &ex,
        "--filter",
        "reason=expired",
        "--reason",
        "retry queue TTL misconfigured; replaced by fix #88",
        "--yes",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("discarded 2 letters") && text.contains("2 recorded in the ledger only"),
        "{text}"
    );
    let after = json(&env.run(&["summary", &ex, "--json", "-g", "reason"]));
    assert_eq!(
        after["matched"], 427,
        "discarded letters leave the default view"
    );
    assert!(!after["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .any(|g| g["reason_code"] == "expired"));
    let shown = json(&env.run(&["list", &ex, "--json", "--filter", "state=discarded"]));
    assert_eq!(shown["matched"], 2);
    assert_eq!(shown["letters"][0]["state"], "discarded");
    // Again: nothing left to discard, nothing recorded twice.
    let again = env.run(&[
        "discard",
        &ex,
        "--filter",
        "reason=expired",
        "--reason",
        "again",
        "--yes",
    ]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("no open letters match"));
    let audit = json(&env.run(&["audit", "list", "--json"]));
    let entries = audit["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["action"], "discard");
    assert_eq!(entries[0]["actor"], "alice");
    assert!(entries[0]["detail"]
        .as_str()
        .is_some_and(|d| d.contains("retry queue TTL misconfigured")));
    let v = json(&env.run(&["audit", "verify", "--json"]));
    assert_eq!(v["verification"]["ok"], true);
}

#[test]
fn tampering_with_the_ledger_file_fails_verify_naming_the_entry() {
    let env = Env::new();
    let ex = example();
    assert!(env
        .run(&[
            "discard",
            &ex,
            "--filter",
            "reason=rejected",
            "--reason",
            "bad batch",
            "--yes"
        ])
        .status
        .success());
    let conn = rusqlite::Connection::open(env.ledger()).expect("open ledger file");
    conn.execute(
        "UPDATE audit SET detail = '{\"reason\":\"nothing happened\"}' WHERE seq = 2",
        [],
    )
    .expect("tamper");
    drop(conn);
    let out = env.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("TAMPERED: entry 2") && text.contains("edited"),
        "{text}"
    );
}

#[test]
fn discard_refuses_without_confirmation_reason_or_when_read_only() {
    let env = Env::new();
    let ex = example();
    for (args, needle) in [
        (
            vec![
                "discard",
                ex.as_str(),
                "--filter",
                "reason=expired",
                "--reason",
                "x",
            ],
            "pass --yes",
        ),
        (
            vec![
                "discard",
                ex.as_str(),
                "--filter",
                "reason=expired",
                "--reason",
                "  ",
                "--yes",
            ],
            "--reason must say why",
        ),
        (
            vec![
                "discard",
                ex.as_str(),
                "--filter",
                "",
                "--reason",
                "x",
                "--yes",
            ],
            "--filter must select",
        ),
        (
            vec![
                "--read-only",
                "discard",
                ex.as_str(),
                "--filter",
                "reason=expired",
                "--reason",
                "x",
                "--yes",
            ],
            "--read-only",
        ),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        !env.ledger().exists()
            || json(&env.run(&["audit", "list", "--json"]))["entries"]
                .as_array()
                .is_some_and(|e| e.is_empty())
    );
}
