//! `dlq-triage transform` end to end on librdkafka's mock cluster, through the built
//! binary: the demo's amount incident fixed by one program and replayed clean through
//! the simulated consumer; failures grouped by cause; runaway programs stopped per
//! letter; who may; and a transform killed (SIGKILL, the binary's own pid) at seeded
//! random points that resumes without recording a revision twice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::Utc;
use dlq_kafka::demo::scenario::Scale;
use dlq_kafka::demo::{Demo, Simulator};
use dlq_testkit::cli::Cli;
use std::collections::HashMap;
use std::process::Output;
use std::time::{Duration, Instant};

const AMOUNTS: &str = "reason=amount_not_a_number";
const FIX: &str = r#".payload.amount |= (gsub(",";"") | tonumber)"#;

struct Env {
    cli: Cli,
    uri: String,
}

impl Env {
    fn new(bootstrap: &str) -> Env {
        let cli = Cli::new(env!("CARGO_BIN_EXE_dlq-triage"));
        let ledger = cli.path().join("ledger.db");
        Env {
            cli: cli
                .with("DLQ_TRIAGE_LEDGER", ledger)
                .with("DLQ_TRIAGE_ACTOR", "alice"),
            uri: format!("kafka://{bootstrap}/invoices.dlq,payments.dlq"),
        }
    }

    /// `transform URI --filter F --expr P --reason …` and `extra`, ready to run.
    fn command(&self, filter: &str, program: &str, extra: &[&str]) -> std::process::Command {
        let mut args = vec![
            "transform",
            self.uri.as_str(),
            "--filter",
            filter,
            "--expr",
            program,
            "--reason",
            "INC-42 amounts sent as strings",
        ];
        args.extend_from_slice(extra);
        self.cli.command(&args)
    }

    fn transform(&self, filter: &str, program: &str, extra: &[&str]) -> Output {
        self.command(filter, program, extra).output().expect("runs")
    }

    fn json(&self, filter: &str, program: &str, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let out = self.transform(filter, program, &args);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("json: {}", text(&out)))
    }

    /// Revisions in the ledger by letter id.
    fn revisions(&self) -> HashMap<String, u32> {
        let path = self.cli.path().join("ledger.db");
        if !path.exists() {
            return HashMap::new();
        }
        let db = rusqlite::Connection::open(path).expect("ledger");
        // A kill can land after the file was created and before its schema was: the next
        // run makes it; nothing is recorded yet.
        let made: bool = db
            .query_row(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'revisions'",
                [],
                |r| r.get(0),
            )
            .expect("schema");
        if !made {
            return HashMap::new();
        }
        let mut st = db
            .prepare("SELECT letter_id, COUNT(*) FROM revisions GROUP BY letter_id")
            .expect("query");
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .map(|r| r.expect("row"))
            .collect()
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

#[test]
fn the_amount_group_is_fixed_by_one_program_and_replays_without_failing_again() {
    let demo = Demo::start(7, Utc::now(), Scale(1.0)).expect("demo");
    let _sim = Simulator::start(demo.bootstrap(), 7, None).expect("simulator");
    let env = Env::new(&demo.bootstrap());
    // Dry-run: the counts and a masked sample; nothing recorded.
    let dry = env.json(AMOUNTS, FIX, &["--dry-run"]);
    let n = dry["changed"].as_u64().expect("changed");
    assert!(n >= 300, "{dry}");
    assert_eq!(dry["matched"], n, "{dry}");
    assert_eq!(dry["unchanged"], 0);
    assert_eq!(dry["failed"], serde_json::json!({}));
    assert_eq!(dry["recorded"], 0);
    let change = &dry["sample"][0]["changes"][0];
    assert_eq!(change["path"], "/payload/amount", "{dry}");
    assert!(change["old"].as_str().expect("old").starts_with('"'));
    assert!(change["new"].as_str().expect("new").parse::<f64>().is_ok());
    assert!(env.revisions().is_empty());
    // Over confirm_above: --yes alone is refused, nothing recorded.
    let refused = env.transform(AMOUNTS, FIX, &["--yes"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(env.revisions().is_empty());
    let ns = n.to_string();
    let done = env.json(AMOUNTS, FIX, &["--yes", "--expect", &ns]);
    assert_eq!(done["recorded"], n, "{done}");
    let revs = env.revisions();
    assert_eq!(revs.len() as u64, n);
    assert!(revs.values().all(|c| *c == 1));
    // Again: every letter already revised by this program, nothing recorded twice.
    let again = env.json(AMOUNTS, FIX, &["--yes", "--expect", &ns]);
    assert_eq!(
        (again["already"].as_u64(), again["recorded"].as_u64()),
        (Some(n), Some(0))
    );
    // One revision, as `diff --revision 1` shows it.
    let id = revs.keys().next().expect("a letter").clone();
    let diff = env
        .cli
        .run(&["diff", &env.uri, &id, "--revision", "1", "--json"]);
    assert!(diff.status.success(), "{}", text(&diff));
    assert!(String::from_utf8_lossy(&diff.stdout).contains("/payload/amount"));
    // Replayed from the revisions: the simulated consumer accepts every one.
    let out = env.cli.run(&[
        "replay",
        &env.uri,
        "--filter",
        AMOUNTS,
        "--use-revisions",
        "--canary",
        "5",
        "--canary-rate",
        "100",
        "--rate",
        "500",
        "--watch",
        "3s",
        "--yes",
        "--expect",
        &ns,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let replay = stdout
        .split_whitespace()
        .find(|w| w.starts_with("r-2"))
        .expect("replay id");
    let shown = env.cli.run(&["replays", "show", replay, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(shown["state"], "completed", "{shown}");
    let letters = shown["letters"].as_array().expect("letters");
    assert_eq!(letters.len() as u64, n);
    assert!(
        letters.iter().all(|l| l["state"] != "failed-again"),
        "{shown}"
    );
}

#[test]
fn failures_group_by_cause_change_nothing_and_runaway_programs_stop_per_letter() {
    let demo = Demo::start(8, Utc::now(), Scale(0.1)).expect("demo");
    let env = Env::new(&demo.bootstrap());
    // Amounts with a thousands separator fail (each quoting its own value); the rest change.
    let picky = r#".payload.amount |= (if test(",") then error("cannot read \(.) as an amount") else tonumber end)"#;
    let t = env.json(AMOUNTS, picky, &["--dry-run"]);
    let failed = t["failed"].as_object().expect("failed");
    assert_eq!(failed.len(), 1, "one cause, not one per value: {t}");
    let (cause, count) = failed.iter().next().expect("a cause");
    assert!(
        !cause.chars().any(|c| c.is_ascii_digit()),
        "the value is left out: {cause}"
    );
    let (changed, failed_n) = (t["changed"].as_u64().unwrap(), count.as_u64().unwrap());
    assert!(changed > 0 && failed_n > 0, "{t}");
    assert_eq!(changed + failed_n, t["matched"].as_u64().unwrap());
    let done = env.json(AMOUNTS, picky, &["--yes", "--expect", "1000"]);
    assert_eq!(done["recorded"], changed);
    assert_eq!(
        env.revisions().len() as u64,
        changed,
        "failed letters got no revision"
    );
    // An infinite loop on some letters and a 100 MB string on others: those letters
    // fail, each stopped alone, and the run finishes with the rest.
    let runaway = r#"(.payload.amount | tostring) as $a | if ($a | test("^1")) then (def f: f; f) elif ($a | test("^2")) then .x = ("x" * 100000000) else .payload.amount |= (tostring | gsub(",";"") | tonumber + 1) end"#;
    let started = Instant::now();
    // 3 s: a 100 MB string takes ~0.1 s to build in a debug build, ~0.5 s on a busy CI
    // machine; the loops are the ones that must reach the limit.
    let t = env.json(AMOUNTS, runaway, &["--dry-run", "--time-limit", "3s"]);
    let failed = t["failed"].as_object().expect("failed");
    assert!(failed.keys().any(|k| k.contains("time limit")), "{t}");
    assert!(failed.keys().any(|k| k.contains("over 16 MiB")), "{t}");
    assert!(
        t["changed"].as_u64().unwrap() > 0,
        "the other letters still ran: {t}"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
    // A program that does not compile is a usage error, before any scan.
    let bad = env.transform(AMOUNTS, ".a +", &["--dry-run"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("does not compile"));
}

#[test]
fn a_viewer_and_read_only_are_refused() {
    let demo = Demo::start(9, Utc::now(), Scale(0.1)).expect("demo");
    let env = Env::new(&demo.bootstrap());
    let roles = env.cli.path().join("roles.toml");
    std::fs::write(&roles, "operator = [\"bob\"]\nviewer = [\"*\"]\n").expect("roles");
    let out = env
        .command(AMOUNTS, FIX, &["--dry-run"])
        .env("DLQ_TRIAGE_ROLES_FILE", &roles)
        .output()
        .expect("runs");
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("operator"),
        "{}",
        text(&out)
    );
    let ro = env.cli.run(&[
        "--read-only",
        "transform",
        &env.uri,
        "-f",
        AMOUNTS,
        "-e",
        FIX,
        "--reason",
        "x",
    ]);
    assert_eq!(ro.status.code(), Some(2), "{}", text(&ro));
    assert!(env.revisions().is_empty());
}

/// Killed at seeded points of its recording (the process stops itself after the scan
/// or right after the batch that brings its committed revisions to N, and is SIGKILLed
/// there): exactly what was committed stays, the next run records only the rest, and no
/// letter ever has two revisions. Each outcome is exact; none depends on timing.
#[test]
fn a_killed_transform_resumes_without_recording_a_revision_twice() {
    use dlq_app::transform::BATCH;
    let demo = Demo::start(10, Utc::now(), Scale(1.0)).expect("demo");
    let env = Env::new(&demo.bootstrap());
    let n = env.json(AMOUNTS, FIX, &["--dry-run"])["changed"]
        .as_u64()
        .expect("changed") as usize;
    assert!(
        n > 2 * BATCH,
        "too few letters to kill between batches: {n}"
    );
    let ns = n.to_string();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut kills = Vec::new();
    for round in 0..5 {
        let before = env.revisions().len();
        let left = n - before;
        if left == 0 {
            break;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // First after the scan, before any batch; then after some batch of this run.
        let at = if round == 0 {
            0
        } else {
            1 + (rng % left as u64) as usize
        };
        let mut child = env
            .command(AMOUNTS, FIX, &["--yes", "--expect", &ns])
            .env("DLQ_TRIAGE_TEST_FREEZE_AT", format!("revisions:{at}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        dlq_testkit::process::wait_stopped(&mut child);
        // SIGKILL to the binary itself (spawned directly, no shell between), stopped.
        let _ = child.kill();
        let _ = child.wait();
        let revs = env.revisions();
        assert!(revs.values().all(|c| *c == 1), "a letter revised twice");
        let committed = left.min(at.div_ceil(BATCH) * BATCH);
        assert_eq!(
            revs.len(),
            before + committed,
            "killed at revisions:{at} with {left} left"
        );
        kills.push((at, revs.len()));
    }
    assert!(
        kills.iter().any(|(_, r)| *r > 0 && *r < n),
        "no kill landed between two batches: {kills:?}"
    );
    let done = env.json(AMOUNTS, FIX, &["--yes", "--expect", &ns]);
    let revs = env.revisions();
    assert_eq!(revs.len(), n, "kills: {kills:?}");
    assert!(revs.values().all(|c| *c == 1), "kills: {kills:?}");
    assert_eq!(
        done["recorded"].as_u64().unwrap() + done["already"].as_u64().unwrap(),
        n as u64
    );
    let verify = env.cli.run(&["audit", "verify"]);
    assert!(verify.status.success(), "{}", text(&verify));
    eprintln!("kills (revisions:N, revisions then): {kills:?}");
}

/// #49: letters go to the worker ahead of their answers, and each keeps its own time
/// limit and its own failure: a letter that loops past the limit, and one that the worker
/// dies of (its address space), are stopped alone — the letters between and after them
/// are answered, in order, by a fresh worker.
#[test]
fn letters_sent_ahead_are_stopped_one_by_one_and_the_rest_answered_in_order() {
    use dlq_transform::{Applied, Limits, Sandbox, WorkerCommand};
    let cmd = WorkerCommand {
        program: env!("CARGO_BIN_EXE_dlq-triage").into(),
        args: vec![dlq_transform::WORKER_ARG.into()],
    };
    let program = r#"if .n == 2 then (def f: f; f) elif .n == 4 then "x" * 4000000000 | length else .n * 10 end"#;
    let limits = Limits {
        time: Duration::from_secs(1),
        memory: 512 << 20,
        output: 1 << 20,
    };
    let mut sandbox = Sandbox::start(cmd, program, limits).expect("worker");
    let inputs: Vec<Vec<u8>> = (0..7)
        .map(|n| format!(r#"{{"n":{n}}}"#).into_bytes())
        .collect();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let got = sandbox.apply_all(&refs).expect("answers");
    let seen: Vec<String> = got
        .iter()
        .map(|a| match a {
            Applied::Output(o) => String::from_utf8_lossy(o).into_owned(),
            Applied::Raised(w) => format!("raised: {w}"),
            Applied::Stopped(w) if w.contains("time limit") => "time".into(),
            Applied::Stopped(w) if w.contains("memory") => "memory".into(),
            Applied::Stopped(w) => format!("stopped: {w}"),
        })
        .collect();
    assert_eq!(seen, ["0", "10", "time", "30", "memory", "50", "60"]);
    // And one by one, as before.
    assert_eq!(
        sandbox.apply(br#"{"n":7}"#).expect("answer"),
        Applied::Output(b"70".to_vec())
    );
}
