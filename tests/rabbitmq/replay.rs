//! Replays on RabbitMQ: to the origin exchange, unroutable, killed and resumed, canary, Ctrl-C, a browse closed mid-replay.

use crate::prelude::*;

/// A slow replay of every rejected order (4/s, no canary, never auto-stopped) in the
/// background, returned once it has settled three letters.
fn replay_under_way(dir: &tempfile::TempDir, uri: &str) -> std::process::Child {
    let child = cli_command(
        dir.path(),
        &[
            "replay",
            uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "0",
            "--rate",
            "4",
            "--max-failed-ratio",
            "1",
            "--yes",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn");
    let started = Instant::now();
    while settled_so_far(dir) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never got going"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// `replay URI --filter reason=rejected` of all `n` letters at `rate`/s: no canary, a 1 s
/// watch, confirmed and bounded (`--expect n`) — the replay these tests start.
fn replay_all(dir: &std::path::Path, uri: &str, rate: &str, n: &str) -> std::process::Command {
    cli_command(
        dir,
        &[
            "replay",
            uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "0",
            "--rate",
            rate,
            "--watch",
            "1s",
            "--yes",
            "--expect",
            n,
        ],
    )
}

/// Letters replay `id` in `dir` journaled `sending` and never saw confirmed: in doubt.
fn sending_letters(dir: &tempfile::TempDir, id: &str) -> std::collections::BTreeSet<String> {
    let shown = replay_cli(dir.path(), &["replays", "show", id, "--json"]);
    in_doubt_in(&serde_json::from_slice(&shown.stdout).expect("json"))
}

/// The letters `replays show --json` lists as `sending`: in doubt.
fn in_doubt_in(shown: &serde_json::Value) -> std::collections::BTreeSet<String> {
    shown["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| l["state"] == "sending")
        .map(|l| l["letter_id"].as_str().expect("id").to_string())
        .collect()
}

/// The plan `--resume ID --dry-run` would run.
fn resume_dry_run(dir: &tempfile::TempDir, uri: &str, id: &str) -> serde_json::Value {
    let dry = replay_cli(
        dir.path(),
        &["replay", uri, "--resume", id, "--dry-run", "--json"],
    );
    serde_json::from_slice(&dry.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&dry.stderr)))
}

/// Letters the replay in `dir` has journaled as settled so far.
fn settled_so_far(dir: &tempfile::TempDir) -> usize {
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap_or_default();
    let Some(id) = rows[0]["id"].as_str() else {
        return 0;
    };
    let out = replay_cli(dir.path(), &["replays", "show", id, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    shown["by_state"]["settled"].as_u64().unwrap_or(0) as usize
}

#[test]
fn a_replay_goes_to_the_origin_exchange_acks_confirmed_letters_and_sees_failures_return() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("replay");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let (report, got) = replay_rejected(&t, dir.path(), &uri);
    assert_eq!(report["outcome"]["confirmed"], 20);
    assert_eq!(report["outcome"]["failed_again"], 2, "{report}");
    // The service got each order once, with its message id, without the death headers.
    let id = report["replay_id"].as_str().expect("id");
    assert_eq!(got.len(), 20, "{got:?}");
    let ids: std::collections::HashSet<&str> = got.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(ids.len(), 20);
    assert!(
        got.iter().all(|g| !g.1 && g.2.as_deref() == Some(id)),
        "{got:?}"
    );
    // The 20 originals were acked after their confirms; the 2 bad ones are back (once
    // the consumer has rejected them: waited for, not slept on).
    t.wait_for(&t.n("dlq"), 2);
    assert_eq!(t.count(&t.n("dlq")), 2);
    let shown = replay_cli(dir.path(), &["replays", "show", id, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(shown["by_state"]["settled"], 18, "{shown}");
    assert_eq!(shown["by_state"]["failed-again"], 2, "{shown}");
    verified(dir.path());
}

/// #57: the loop guard trusts the replay's own `x-dlq-replay-count`, never the broker's
/// `x-death` — RabbitMQ 4 drops an `x-death` a client publishes, so a replayed letter's
/// death history does not travel with it. A letter replayed three times, in the DLQ with
/// no `x-death` at all, is refused (and stays); `--force-replay-count` sends it.
#[test]
fn the_loop_guard_trusts_the_replay_count_without_x_death() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("loopguard");
    t.publish_headers(
        "",
        &t.n("dlq"),
        "m-loop",
        "{\"order\":1}",
        &[("x-dlq-replay-count", "3"), ("x-reason-code", "rejected")],
    );
    t.wait_for(&t.n("dlq"), 1);
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let to = format!("queue:{}", t.n("work"));
    allow_targets(dir.path(), &[&to]);
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "replay",
            &uri,
            "--filter",
            "id=m-loop",
            "--to",
            &to,
            "--canary",
            "0",
            "--watch",
            "1s",
            "--yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let refused = replay_cli(
        dir.path(),
        &args(&[]).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(refused.status.code(), Some(5), "{text}");
    assert!(text.contains("replayed 3 or more times already"), "{text}");
    assert_eq!(t.count(&t.n("dlq")), 1, "the letter stays in the DLQ");
    assert_eq!(t.count(&t.n("work")), 0, "nothing was sent");
    let forced = replay_cli(
        dir.path(),
        &args(&["--force-replay-count"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let text = String::from_utf8_lossy(&forced.stderr).to_string();
    assert_eq!(forced.status.code(), Some(0), "{text}");
    t.wait_for(&t.n("work"), 1);
}

#[test]
fn an_unroutable_replay_stops_and_leaves_every_dlq_copy() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("unroutable");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let to = format!("amqp:{}/nowhere", t.n("orders"));
    allow_targets(dir.path(), &[&to]);
    let out = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--to",
            &to,
            "--canary",
            "3",
            "--canary-rate",
            "20",
            "--watch",
            "1s",
            "--yes",
        ],
    );
    let stdout = exited(&out, 3);
    assert!(stdout.contains("unroutable"), "{stdout}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.count(&t.n("dlq")), 20, "nothing acked");
    assert_eq!(t.count(&t.n("work")), 0, "nothing delivered");
    let list = replay_cli(dir.path(), &["list", &uri, "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert!(
        rows["letters"]
            .as_array()
            .expect("letters")
            .iter()
            .all(|l| l["state"] == "open"),
        "a refused letter stays open"
    );
}

#[test]
fn a_crash_mid_replay_on_rabbitmq_resumes_and_acks_without_resending() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("resume");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let args = [
        "replay",
        &uri,
        "--filter",
        "reason=rejected",
        "--canary",
        "0",
        "--rate",
        "10",
        "--watch",
        "1s",
        "--max-failed-ratio",
        "0.9",
        "--yes",
    ];
    let crashed = cli_command(dir.path(), &args)
        .env("DLQ_TRIAGE_TEST_CRASH_AFTER_CONFIRMED", "5")
        .output()
        .expect("runs");
    assert!(!crashed.status.success(), "the hook aborts");
    let stdout = String::from_utf8_lossy(&crashed.stdout).to_string();
    let id = stdout
        .split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .expect("replay id")
        .to_string();
    let show = |dir: &std::path::Path| -> serde_json::Value {
        let out = replay_cli(dir, &["replays", "show", &id, "--json"]);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let before = show(dir.path());
    assert_eq!(before["state"], "interrupted", "{before}");
    let confirmed: Vec<String> = before["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| {
            matches!(
                l["state"].as_str(),
                Some("settled" | "confirmed" | "failed-again")
            )
        })
        .map(|l| l["letter_id"].as_str().expect("id").to_string())
        .collect();
    assert!(confirmed.len() >= 5, "{before}");
    let acked = before["by_state"]["settled"].as_u64().unwrap_or(0) as u32;
    let in_doubt = before["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter(|l| l["state"] == "sending")
        .count();
    // The dead connection gave every held letter back: nothing is lost.
    t.wait_for(&t.n("dlq"), 20 - acked);
    let resumed = replay_cli(dir.path(), &["replay", &uri, "--resume", &id, "--yes"]);
    let log = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{log}");
    // Every order reaches the consumer; what it has not taken yet is waited for (not
    // slept on), what it took is counted.
    let mut got: Vec<Seen> = Vec::new();
    let mut times: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while times.len() < 20 && std::time::Instant::now() < deadline {
        if let Ok(g) = seen.recv_timeout(Duration::from_millis(200)) {
            *times.entry(g.0.clone()).or_insert(0) += 1;
            got.push(g);
        }
    }
    assert_eq!(times.len(), 20, "every order was replayed: {times:?}");
    for c in &confirmed {
        assert_eq!(
            times[c.as_str()],
            1,
            "{c} was confirmed before the crash: never re-sent"
        );
    }
    // A letter in flight at the crash may have been sent: on RabbitMQ (whose target
    // cannot be read back) the resume leaves it out rather than risk a second copy, and
    // its original stays in the DLQ.
    let dups: usize = times.values().map(|n| n - 1).sum();
    assert_eq!(dups, 0, "nothing was sent twice: {times:?}");
    // Left in the DLQ: exactly the copies of bad orders that failed again, and the
    // originals of the letters left out as may-have-been-sent.
    let bad = got.iter().filter(|g| g.0 == "m-3" || g.0 == "m-13").count() as u32;
    let expected = bad + in_doubt as u32;
    t.wait_for(&t.n("dlq"), expected);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        t.count(&t.n("dlq")),
        expected,
        "originals all acked but those in doubt ({in_doubt})"
    );
    let after = show(dir.path());
    assert_eq!(after["state"], "completed", "{after}");
    assert!(
        after["by_state"].get("confirmed").is_none(),
        "reconciled acks are journaled: {after}"
    );
    assert!(log.contains("reconciled"), "{log}");
    verified(dir.path());
}

#[test]
fn a_canary_on_a_consumer_that_still_fails_stops_on_rabbitmq() {
    if !rabbit_available() {
        return;
    }
    let t = Topology::new("stop");
    for i in 0..10 {
        t.publish(
            &t.n("orders"),
            "order.created",
            &format!("b-{i}"),
            "{\"bad\":true}",
        );
    }
    t.reject_from_work(10);
    t.wait_for(&t.n("dlq"), 10);
    let (_seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let out = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "5",
            "--canary-rate",
            "5",
            "--watch",
            "3s",
            "--yes",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let stdout = exited(&out, 3);
    assert!(stdout.contains("failed again"), "{stdout}");
    // Never past the canary; the rest were not sent and are still in the DLQ.
    assert_eq!(t.count(&t.n("work")), 0);
    assert_eq!(
        t.count_becomes(&t.n("dlq"), 10),
        10,
        "5+ unsent originals + the copies that failed again"
    );
}

#[test]
fn ctrl_c_stops_a_rabbitmq_replay_and_every_publish_is_journaled() {
    if !rabbit_available() {
        return;
    }
    let t = dead_orders("kill");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let child = replay_under_way(&dir, &uri);
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = child.wait_with_output().expect("exits");
    exited(&out, 4);
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert_eq!(rows[0]["state"], "killed");
    let o = &rows[0]["outcome"];
    assert_eq!(o["in_doubt"], 0, "confirms in flight were awaited: {o}");
    let sent = o["sent"].as_u64().expect("sent") as usize;
    let delivered = seen_once_at_least(&seen, &stop, sent).len();
    assert_eq!(
        o["sent"].as_u64(),
        Some(delivered as u64),
        "every publish journaled, none after the kill: {o}"
    );
    assert!(delivered < 20);
    // The DLQ keeps every letter not replayed (confirmed ones were acked), plus the
    // copies that failed again.
    let confirmed = o["confirmed"].as_u64().expect("confirmed") as u32;
    let failed = o["failed_again"].as_u64().expect("failed") as u32;
    let want = 20 - confirmed + failed;
    assert_eq!(t.count_becomes(&t.n("dlq"), want), want, "{o}");
    verified(dir.path());
}

#[test]
fn a_browse_closed_by_the_server_mid_replay_stops_it_and_loses_nothing() {
    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    let t = dead_orders("closed");
    let (seen, stop) = work_consumer(t.n("work"));
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let child = replay_under_way(&dir, &uri);
    server_closes(&format!("dlq-triage browse (pid {})", child.id()));
    let out = child.wait_with_output().expect("exits");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("could not be watched"), "{stdout}");
    let list = replay_cli(dir.path(), &["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert_eq!(rows[0]["state"], "failed");
    let o = &rows[0]["outcome"];
    let confirmed = o["confirmed"].as_u64().expect("confirmed") as u32;
    let got = seen_once_at_least(&seen, &stop, confirmed as usize);
    let delivered = got.len() as u32;
    // Bad orders the service rejected again: their copies are back in the DLQ, seen by
    // the replay or not (the watch was gone).
    let bad = got.iter().filter(|g| g.0 == "m-3" || g.0 == "m-13").count() as u32;
    assert_eq!(
        delivered, confirmed,
        "no publish after the watch was lost: {o}"
    );
    // The closed browse gave its letters back, including confirmed ones not yet acked;
    // the next browse acks those (reconciled), once, and replays none of them again.
    let summary = replay_cli(dir.path(), &["summary", &uri, "--json"]);
    let notes = String::from_utf8_lossy(&summary.stderr).to_string();
    let want = 20 - confirmed + bad;
    assert_eq!(t.count_becomes(&t.n("dlq"), want), want, "{o}\n{notes}");
    let again = replay_cli(
        dir.path(),
        &[
            "replay",
            &uri,
            "--filter",
            "reason=rejected",
            "--dry-run",
            "--json",
        ],
    );
    let plan: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json");
    assert_eq!(
        plan["planned"].as_u64(),
        Some(u64::from(20 - confirmed + bad)),
        "replayed letters are not offered again: {plan}"
    );
    verified(dir.path());
}

/// The broker closes both of a replay's connections mid-run (its browse and its
/// publisher: what a broker restart does to them), at 3 seeded points — the replay
/// stops itself right after journaling its N-th letter `sending` (a test hook), the
/// connections are closed, it is let go: it stops; nothing is lost (held letters go back
/// to the DLQ); the letters whose confirm never came are listed in doubt and left out of
/// the resume as `may-have-been-sent`; the resume delivers every other letter once.
#[test]
fn a_replay_whose_connections_the_broker_closes_stops_lists_its_doubts_and_resumes_once() {
    if !rabbit_available() || !rabbitmqctl_available() {
        return;
    }
    const N: usize = 60;
    let mut seed: u64 = 0x5eed_c105;
    let mut in_doubt_seen = 0;
    for run in 0..3 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let at = 10 + (seed >> 33) as usize % 40;
        let what = format!("run {run}, sending:{at}");
        let (t, seen, stop, uri) = rejected_dlq(&format!("restart-{run}"), N);
        let dir = tempfile::tempdir().expect("tmp");
        let n = N.to_string();
        let mut child = replay_all(dir.path(), &uri, "200", &n)
            .env("DLQ_TRIAGE_TEST_FREEZE_AT", format!("sending:{at}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("replay starts");
        wait_stopped(&mut child);
        let closed = server_closes_every(&format!("(pid {})", child.id()));
        assert_eq!(closed, 2, "{what}: its browse and its publisher");
        signal("CONT", child.id());
        let out = child.wait_with_output().expect("exits");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{what}: it stopped: {said}");
        let list = replay_cli(dir.path(), &["replays", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
        let id = rows[0]["id"].as_str().expect("id").to_string();
        let in_doubt = sending_letters(&dir, &id);
        in_doubt_seen += in_doubt.len();
        let plan = resume_dry_run(&dir, &uri, &id);
        assert_eq!(
            plan["excluded"]["may-have-been-sent"].as_u64().unwrap_or(0) as usize,
            in_doubt.len(),
            "{what}: the in-doubt letters are listed and left out: {plan}"
        );
        let resumed = replay_cli(
            dir.path(),
            &["replay", &uri, "--resume", &id, "--yes", "--expect", &n],
        );
        assert_eq!(
            resumed.status.code(),
            Some(0),
            "{what}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        each_once_unless_in_doubt(&t, &seen, &stop, N, &in_doubt, &what);
        verified(dir.path());
    }
    eprintln!("in doubt when the broker closed the replay, over the runs: {in_doubt_seen}");
}

/// On the team ledger, a RabbitMQ replay's holder stops itself inside a journal write
/// (a seeded point; as Ctrl-Z or a paused VM would stop it). The server ends its session
/// (`idle_in_transaction_session_timeout`), which frees its replay; a teammate's
/// `--resume` takes the replay over. The stopped holder's browse still holds the letters
/// it had taken (unacked, until the broker drops its connection), so the taker can send
/// only what it sees and leaves the holder's in-doubt letters out as
/// `may-have-been-sent`; let go, the holder stops at its next write. Then, with the
/// holder gone, a second resume finishes: no letter lost, none delivered twice, the
/// in-doubt ones listed.
#[test]
fn on_the_team_ledger_a_rabbitmq_holder_stopped_mid_write_is_taken_over_without_a_duplicate() {
    if !rabbit_available() {
        return;
    }
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    const N: usize = 40;
    let (t, seen, stop, uri) = rejected_dlq("team-frozen", N);
    let n = N.to_string();
    let (alice, bob) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let mut holder = replay_all(alice.path(), &uri, "50", &n)
        .env("DLQ_TRIAGE_LEDGER", &db.url)
        .env("DLQ_TRIAGE_TEST_FREEZE_AT", "inside:12")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("replay starts");
    wait_stopped(&mut holder);
    // The server ends the stopped session: wait for that state (bounded only against a
    // broken build).
    let app = format!("dlq-triage {}@%", holder.id());
    let mut admin = db.client();
    let started = Instant::now();
    loop {
        let left: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1",
                &[&app],
            )
            .expect("activity")
            .get(0);
        if left == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the server never ended it"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let as_bob = |args: &[&str]| {
        cli_command(bob.path(), args)
            .env("DLQ_TRIAGE_LEDGER", &db.url)
            .env("DLQ_TRIAGE_ACTOR", "bob")
            .output()
            .expect("runs")
    };
    let list = as_bob(&["replays", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    let id = rows[0]["id"].as_str().expect("id").to_string();
    let said = |o: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let taken = as_bob(&["replay", &uri, "--resume", &id, "--yes", "--expect", &n]);
    let code = taken.status.code();
    assert!(
        code == Some(0) || code == Some(5),
        "the takeover runs (or finds nothing it may send): {}",
        said(&taken)
    );
    let marker = format!("(pid {})", holder.id());
    signal("CONT", holder.id());
    let out = holder.wait_with_output().expect("the holder ends");
    assert_ne!(
        out.status.code(),
        Some(0),
        "it stops at its next write: {}",
        said(&out)
    );
    // The holder is gone: its browse gave its letters back. A last resume finishes.
    wait_connections_gone(&marker);
    let last = as_bob(&["replay", &uri, "--resume", &id, "--yes", "--expect", &n]);
    let code = last.status.code();
    assert!(code == Some(0) || code == Some(5), "{}", said(&last));
    let shown = as_bob(&["replays", "show", &id, "--json"]);
    let in_doubt = in_doubt_in(&serde_json::from_slice(&shown.stdout).expect("json"));
    each_once_unless_in_doubt(&t, &seen, &stop, N, &in_doubt, "after the takeover");
    eprintln!("in doubt after the takeover (listed, not resent): {in_doubt:?}");
    let verify = as_bob(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", said(&verify));
}

/// SIGKILL (by the replay's own pid) at 20 seeded points of a 200-letter replay at 500/s
/// on RabbitMQ — the process stops itself right after the journal write that brings the
/// letters it marked `sending` to N, and is killed there — then `--resume`: an exchange cannot be read back, so the letters in flight
/// at the kill are listed as `may-have-been-sent` (exactly those the journal had in
/// flight) and not sent again; nothing is lost — every letter reached the service once,
/// or is still in the DLQ.
#[test]
fn sigkill_mid_replay_on_rabbitmq_lists_what_may_have_been_sent_and_loses_nothing() {
    if !rabbit_available() {
        return;
    }
    const N: usize = 200;
    let mut in_flight_seen = 0;
    // 20 seeded kill points: after 1 to 199 of the 200 letters were journaled `sending`.
    let mut seed: u64 = 0x5eed_4ab1;
    for run in 0..20 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let at = 1 + (seed >> 33) as usize % (N - 1);
        let t = Topology::new(&format!("kill-{run}"));
        rejected_orders(&t, N, |i| format!("{{\"order\":{i}}}"));
        t.wait_for(&t.n("dlq"), N as u32);
        let (seen, stop) = work_consumer(t.n("work"));
        let dir = tempfile::tempdir().expect("tmp");
        let uri = t.dlq_uri();
        let n = N.to_string();
        let mut child = replay_all(dir.path(), &uri, "500", &n)
            .env("DLQ_TRIAGE_TEST_FREEZE_AT", format!("sending:{at}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("replay starts");
        wait_stopped(&mut child);
        let kill = std::process::Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status()
            .expect("kill");
        let out = child.wait_with_output().expect("killed");
        assert!(kill.success(), "run {run}");
        // Stopped after a `sending` write: its plan is journaled and its id printed.
        let id = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .find(|w| w.starts_with("r-2"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("run {run}: no replay id printed"));
        let shown = replay_cli(dir.path(), &["replays", "show", &id, "--json"]);
        assert!(
            shown.status.success(),
            "run {run}: {}",
            String::from_utf8_lossy(&shown.stderr)
        );
        let in_flight = sending_letters(&dir, &id);
        assert!(!in_flight.is_empty(), "run {run}: stopped at sending:{at}");
        in_flight_seen += in_flight.len();
        // The killed connection gave its held letters back.
        t.wait_no_consumers(&t.n("dlq"));
        let plan = resume_dry_run(&dir, &uri, &id);
        assert_eq!(
            plan["excluded"]["may-have-been-sent"].as_u64().unwrap_or(0) as usize,
            in_flight.len(),
            "run {run}: {plan}"
        );
        // A teammate's new replay of the same filter (not --resume) leaves them out too:
        // they are the stopped replay's, in doubt, whatever filter finds them.
        let fresh = replay_cli(
            dir.path(),
            &[
                "replay",
                &uri,
                "--filter",
                "reason=rejected",
                "--dry-run",
                "--json",
            ],
        );
        let fresh: serde_json::Value = serde_json::from_slice(&fresh.stdout).unwrap_or_else(|e| {
            panic!("run {run}: {e}: {}", String::from_utf8_lossy(&fresh.stderr))
        });
        assert_eq!(
            fresh["excluded"]["may-have-been-sent"]
                .as_u64()
                .unwrap_or(0) as usize,
            in_flight.len(),
            "run {run}: a new replay: {fresh}"
        );
        let resumed = replay_cli(
            dir.path(),
            &["replay", &uri, "--resume", &id, "--yes", "--expect", &n],
        );
        let code = resumed.status.code();
        assert!(
            code == Some(0) || (code == Some(5) && plan["planned"] == 0),
            "run {run}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        let (_, accounted) = accounted_for(&t, &seen, &stop, N, &format!("run {run}"));
        for m in &in_flight {
            assert!(accounted.contains(m), "run {run}: {m} in flight, then lost");
        }
        verified(dir.path());
    }
    assert!(in_flight_seen > 0, "no kill landed with letters in flight");
}

/// Two engineers on the team ledger (PostgreSQL) replaying the same 1,000 rejected
/// orders from one RabbitMQ DLQ at once: between them every letter reaches the fixed
/// service exactly once, and none is lost (delivered, or still in the DLQ).
#[test]
fn two_engineers_replaying_one_rabbitmq_dlq_on_the_team_ledger_send_each_letter_once() {
    if !rabbit_available() {
        return;
    }
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    const N: usize = 1000;
    let (t, seen, stop, uri) = rejected_dlq("team-two", N);
    let n = N.to_string();
    let (da, dbob) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let spawn = |dir: &std::path::Path| {
        replay_all(dir, &uri, "1000", &n)
            .env("DLQ_TRIAGE_LEDGER", &db.url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("replay starts")
    };
    let (a, b) = (spawn(da.path()), spawn(dbob.path()));
    let (a, b) = (
        a.wait_with_output().expect("a"),
        b.wait_with_output().expect("b"),
    );
    let said = |o: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(
        a.status.code() == Some(0) || b.status.code() == Some(0),
        "one of them ran:\n{}\n{}",
        said(&a),
        said(&b)
    );
    let (times, _) = accounted_for(&t, &seen, &stop, N, "two engineers");
    assert!(
        times.len() > N / 2,
        "they replayed: {} delivered",
        times.len()
    );
    let v = cli_command(da.path(), &["audit", "verify"])
        .env("DLQ_TRIAGE_LEDGER", &db.url)
        .output()
        .expect("verify");
    assert!(v.status.success(), "{}", said(&v));
}

/// `--to-failed-queue`: each letter goes to the queue it failed in (its `x-death`
/// queue, through the default exchange), so another queue bound to the origin exchange
/// and key does not get it again; the dry-run says both the route and who it reaches.
#[test]
fn to_the_failed_queue_only_reaches_no_other_bound_queue() {
    if !rabbit_available() || !management_available() {
        return;
    }
    let t = dead_orders("failedq");
    let audit = t.n("audit");
    declare(&t, &audit, vec![]);
    t.bind(&audit, &t.n("orders"), "order.created");
    let dir = tempfile::tempdir().expect("tmp");
    let uri = t.dlq_uri();
    let args = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            uri.as_str(),
            "--filter",
            "reason=rejected",
            "--canary",
            "0",
            "--rate",
            "200",
            "--watch",
            "1s",
            "--to-failed-queue",
            "--expect",
            "20",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let dry = cli_command(dir.path(), &refs(&args(&["--dry-run"])))
        .output()
        .expect("dry run");
    let said = String::from_utf8_lossy(&dry.stdout).to_string();
    let work = t.n("work");
    for want in [
        "  route:    each letter to the queue it failed in".to_string(),
        format!("  reaches:  the default exchange to {work} (default): queue {work}"),
    ] {
        assert!(said.contains(&want), "no `{want}` in:\n{said}");
    }
    let out = cli_command(dir.path(), &refs(&args(&["--yes"])))
        .output()
        .expect("replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Counted on the broker: the failed queue has every letter, the other bound queue none.
    t.wait_for(&work, 20);
    assert_eq!(t.count(&work), 20);
    assert_eq!(t.count(&audit), 0);
    delete(&t, &audit);
}
