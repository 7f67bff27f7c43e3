//! Decisions across a crash (ledger before ack, applied once later) and `watch --once`.

use crate::prelude::*;

#[test]
fn a_crash_between_ledger_and_ack_is_applied_exactly_once_later() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("crash");
    let dir = tempfile::tempdir().expect("tmp");
    let ledger = dir.path().join("ledger.db");
    let uri = t.dlq_uri();
    let run = |args: &[&str], crash: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"));
        c.args(args)
            .env("DLQ_TRIAGE_LEDGER", &ledger)
            .env("DLQ_TRIAGE_ACTOR", "bob")
            .env("XDG_STATE_HOME", dir.path());
        if crash {
            c.env("DLQ_TRIAGE_TEST_CRASH_AFTER_LEDGER", "1");
        }
        c.output().expect("binary runs")
    };
    // Dies after committing the decision, before the ack.
    let crashed = run(
        &[
            "discard",
            &uri,
            "--filter",
            "id=m-2",
            "--reason",
            "duplicate order",
            "--yes",
        ],
        true,
    );
    assert!(
        !crashed.status.success(),
        "the test hook aborts the process"
    );
    t.wait_for(&t.n("dlq"), 10); // the dead connection released everything: nothing lost
                                 // The next browse applies the recorded decision…
    let summary = run(&["summary", &uri, "--json"], false);
    exited(&summary, 0);
    assert!(
        String::from_utf8_lossy(&summary.stderr).contains("reconciled"),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("json");
    assert_eq!(
        doc["matched"], 9,
        "the discarded letter has left the open view"
    );
    assert_eq!(t.count_becomes(&t.n("dlq"), 9), 9, "m-2 acked");
    // …exactly once.
    let again = run(&["summary", &uri, "--json"], false);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("reconciled"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.count(&t.n("dlq")), 9);
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")]).expect("source");
    let (left, _) = browse(&mut src);
    assert!(!left.iter().any(|d| d.id.value.0 == "m-2"));
    drop(src);
    let verify = run(&["audit", "verify"], false);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// `watch --once` on a RabbitMQ DLQ filled by real dead-lettering: a breach for the
/// group over the threshold (exit 3), and the DLQ holds every message afterwards.
#[test]
fn watch_once_on_a_rabbitmq_dlq_alerts_and_leaves_it_as_it_was() {
    if !rabbit_available() {
        return;
    }
    let t = seeded("watch");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let out = cli_command(
        dir.path(),
        &[
            "watch",
            &uri,
            "--once",
            "--json",
            "--rule",
            "count > 3",
            "--queue-type",
            "classic",
        ],
    )
    .output()
    .expect("binary runs");
    exited(&out, 3);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["group"], "rejected");
    assert_eq!(lines[0]["count"], 5);
    t.wait_for(&t.n("dlq"), 10);
}
