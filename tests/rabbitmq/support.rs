//! Helpers several topics use: browsing a source into letters, the fixed service that consumes replays, the binary as alice, the ledger check.

use crate::prelude::*;

/// The letters of a scan event (none for the others).
pub(crate) fn letters_of(ev: ScanEvent) -> Vec<RawLetter> {
    match ev {
        ScanEvent::Letters(b) => b,
        _ => Vec::new(),
    }
}

pub(crate) fn browse(src: &mut RabbitSource) -> (Vec<DeadLetter>, Vec<String>) {
    let mut letters = Vec::new();
    let mut problems = Vec::new();
    src.scan(&mut |ev| {
        match ev {
            ScanEvent::Letters(b) => letters.extend(b.into_iter().map(|raw| extract(raw, &[]))),
            // Unreadable records are marked: a notice about the browse is not one.
            ScanEvent::Problem { message, .. } => problems.push(format!("problem: {message}")),
            ScanEvent::Notice { message, .. } => problems.push(message),
            ScanEvent::Partial {
                browsed,
                total,
                why,
                ..
            } => problems.push(format!("browsed {browsed} of {total}: {why}")),
            ScanEvent::Progress { .. } => {}
        }
        ControlFlow::Continue(())
    })
    .expect("browse");
    (letters, problems)
}

/// (message id, had x-death, x-dlq-replay-id) of one delivery to the fixed service.
pub(crate) type Seen = (String, bool, Option<String>);

pub(crate) type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// A consumer of the work queue in its own thread, as the fixed service would be:
/// letters whose body says `"bad":true` are rejected (dead-lettered again), the rest
/// acked. Reports (message id, had x-death, replay id) per delivery.
pub(crate) fn work_consumer(queue: String) -> (std::sync::mpsc::Receiver<Seen>, StopFlag) {
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let rt = rt();
        rt.block_on(async {
            let conn = Connection::connect(
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                ConnectionProperties::default(),
            )
            .await
            .expect("connect");
            let ch = conn.create_channel().await.expect("channel");
            let mut c = ch
                .basic_consume(
                    ShortString::from(queue),
                    ShortString::from("fixed-service"),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .expect("consume");
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(Some(Ok(d))) =
                    tokio::time::timeout(Duration::from_millis(100), c.next()).await
                else {
                    continue;
                };
                let headers = d.properties.headers().clone().unwrap_or_default();
                let h = |n: &str| headers.inner().get(n).cloned();
                let replay = h("x-dlq-replay-id").and_then(|v| match v {
                    AMQPValue::LongString(s) => {
                        Some(String::from_utf8_lossy(s.as_bytes()).to_string())
                    }
                    _ => None,
                });
                let id = d
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default();
                let _ = tx.send((id, h("x-death").is_some(), replay));
                if String::from_utf8_lossy(&d.data).contains("\"bad\":true") {
                    d.reject(BasicRejectOptions { requeue: false })
                        .await
                        .expect("reject");
                } else {
                    d.ack(BasicAckOptions::default()).await.expect("ack");
                }
            }
            let _ = conn.close(200, ShortString::from("bye")).await;
        });
    });
    (rx, stop)
}

/// 20 orders rejected by the broken service: the DLQ holds them with x-death.
/// Every rejected order of `t` replayed from `uri` with a canary of 2 and a 5 s watch,
/// as JSON, while the fixed service consumes `t`'s work queue; the system's CA store as
/// it is (no SSL_CERT_FILE from the caller's environment). The run must complete:
/// returns its report and what the service got.
pub(crate) fn replay_rejected(
    t: &Topology,
    dir: &std::path::Path,
    uri: &str,
) -> (serde_json::Value, Vec<Seen>) {
    let (seen, stop) = work_consumer(t.n("work"));
    let out = cli_command(
        dir,
        &[
            "replay",
            uri,
            "--filter",
            "reason=rejected",
            "--canary",
            "2",
            "--canary-rate",
            "20",
            // Long enough for a failure to come back through a broker busy with the
            // other tests (the 100k fill runs beside this one in CI).
            "--watch",
            "5s",
            "--rate",
            "100",
            "--max-failed-ratio",
            "0.5",
            "--yes",
            "--json",
        ],
    )
    .env_remove("SSL_CERT_FILE")
    .env_remove("SSL_CERT_DIR")
    .output()
    .expect("binary runs");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{log}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["state"], "completed", "{report}");
    (report, seen.try_iter().collect())
}

/// The ledger's audit chain and rows check out.
pub(crate) fn verified(dir: &std::path::Path) {
    let verify = replay_cli(dir, &["audit", "verify"]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// The binary as alice, with its ledger and config in `dir`.
pub(crate) fn cli_command(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlq-triage"));
    c.args(args)
        .env("DLQ_TRIAGE_LEDGER", dir.join("ledger.db"))
        .env("DLQ_TRIAGE_ACTOR", "alice")
        .env("XDG_STATE_HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env_remove("DLQ_TRIAGE_ROLES_FILE")
        .stdin(std::process::Stdio::null());
    c
}

/// `[replay] allowed_targets` in the config `cli_command` reads.
pub(crate) fn allow_targets(dir: &std::path::Path, allowed: &[&str]) {
    let conf = dir.join("dlq-triage");
    std::fs::create_dir_all(&conf).expect("config dir");
    let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        conf.join("config.toml"),
        format!("[replay]\nallowed_targets = [{}]\n", list.join(", ")),
    )
    .expect("config");
}

pub(crate) fn replay_cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    cli_command(dir, args).output().expect("binary runs")
}

/// Stop the fixed service and account for `n` letters: none reached it twice, and each
/// either reached it or is still in the DLQ. Deliveries per letter id, and the ids
/// accounted for.
pub(crate) fn accounted_for(
    t: &Topology,
    seen: &std::sync::mpsc::Receiver<Seen>,
    stop: &StopFlag,
    n: usize,
    what: &str,
) -> (
    std::collections::HashMap<String, usize>,
    std::collections::BTreeSet<String>,
) {
    // Letters a replay published may still be on their way to the service (in the work
    // queue, or in its consumer's buffer): wait until the service has seen, or the DLQ
    // holds, as many as were rejected — a state, not a time. The bound only keeps a lost
    // letter from hanging the suite; the assertion below then names it.
    let mut times: std::collections::HashMap<String, usize> = Default::default();
    let started = std::time::Instant::now();
    loop {
        for (m, _, _) in seen.try_iter() {
            *times.entry(m).or_default() += 1;
        }
        let held = t.count(&t.n("dlq")) as usize;
        if times.len() + held >= n || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for (m, _, _) in seen.try_iter() {
        *times.entry(m).or_default() += 1;
    }
    assert!(
        times.values().all(|n| *n == 1),
        "{what}: a letter reached the service twice: {:?}",
        times.iter().find(|(_, n)| **n > 1)
    );
    let mut src = RabbitSource::new(target(), vec![t.n("dlq")])
        .expect("source")
        .with_queue_policy(Some("classic".into()), false);
    let (left, _) = browse(&mut src);
    drop(src);
    let mut accounted: std::collections::BTreeSet<String> = times.keys().cloned().collect();
    accounted.extend(left.iter().map(|d| d.id.value.0.clone()));
    assert_eq!(
        accounted.len(),
        n,
        "{what}: every letter delivered or still in the DLQ"
    );
    (times, accounted)
}

/// `n` orders rejected into a fresh topology's DLQ, and the fixed service consuming the
/// work queue: the topology, what the service saw, its stop flag, and the DLQ's URI.
pub(crate) fn rejected_dlq(
    tag: &str,
    n: usize,
) -> (Topology, std::sync::mpsc::Receiver<Seen>, StopFlag, String) {
    let t = Topology::new(tag);
    rejected_orders(&t, n, |i| format!("{{\"order\":{i}}}"));
    t.wait_for(&t.n("dlq"), n as u32);
    let (seen, stop) = work_consumer(t.n("work"));
    let uri = t.dlq_uri();
    (t, seen, stop, uri)
}

/// What the service has seen, once it has seen `want` letters: a replay's publishes
/// reach it after the replay returns. Waited for, not slept on; after 30 s, what there
/// is, for the caller's assertion to show. Stops the service.
pub(crate) fn seen_once_at_least(
    seen: &std::sync::mpsc::Receiver<Seen>,
    stop: &StopFlag,
    want: usize,
) -> Vec<Seen> {
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    while got.len() < want && started.elapsed() < Duration::from_secs(30) {
        if let Ok(s) = seen.recv_timeout(Duration::from_millis(50)) {
            got.push(s);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    got.extend(seen.try_iter());
    got
}

/// After a replay that left `in_doubt` letters: each of the `n` orders `m-0`… reached
/// the service exactly once, except the in-doubt ones, which reached it at most once or
/// are still in the DLQ — none lost, none twice.
pub(crate) fn each_once_unless_in_doubt(
    t: &Topology,
    seen: &std::sync::mpsc::Receiver<Seen>,
    stop: &StopFlag,
    n: usize,
    in_doubt: &std::collections::BTreeSet<String>,
    what: &str,
) {
    let (times, accounted) = accounted_for(t, seen, stop, n, what);
    for i in 0..n {
        let m = format!("m-{i}");
        if in_doubt.contains(&m) {
            assert!(accounted.contains(&m), "{what}: {m} in doubt, then lost");
        } else {
            assert_eq!(
                times.get(&m),
                Some(&1),
                "{what}: {m} not in doubt: delivered once"
            );
        }
    }
}
