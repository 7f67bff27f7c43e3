//! The PII corpus end to end: letters carrying secrets in every field a letter has
//! (payload, header values and names, key, message id, reason code, consumer, version,
//! event type, origin) go through every output — `summary`, `list`, `show`, `export`,
//! each human and `--json` — and no secret survives, while near-misses stay readable.
//! The TUI's screens are checked the same way in tests/tui.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_core::dump::to_line;
use dlq_core::model::{Coords, HeaderValue, RawLetter};
use dlq_tui::action::{BrowseEvent, Nav, ViewKey};
use std::io::Write;
use std::process::Command;

/// (value placed in the letter, the part that must never be printed).
pub const SECRETS: &[(&str, &str)] = &[
    ("jane.doe@example.com", "jane.doe@example.com"),
    ("4111 1111 1111 1111", "1111 1111 1111"),
    ("ref_4111111111111111", "4111111111111111"),
    ("de89370400440532013000", "370400440532013000"),
    ("555-123-4567", "555-123-4567"),
    ("123-45-6789", "123-45-6789"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
        "1234567890abcdefghijklmnopqrstuvwxyzAB",
    ),
    ("Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    (
        "eyJlbWFpbCI6ImphbmVAZXhhbXBsZS5jb20ifQ==",
        "ImphbmVAZXhhbXBsZS5jb20",
    ),
];

const NEAR_MISSES: &[&str] = &[
    "release-2026-09-21",
    "order-8812",
    "invoice.issue.requested",
];

fn letter(i: usize, secret: &str) -> RawLetter {
    let h = |n: &str, v: &str| dlq_core::conventions::header(n, HeaderValue::text(v));
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: "pii.dlq".into(),
            partition: 0,
            offset: i as i64,
        }),
        key: Some(format!("key {secret}").into_bytes()),
        headers: vec![
            h("x-message-id", &format!("msg-{i}-{secret}")),
            h("x-reason-code", &format!("failed for {secret}")),
            h("x-consumer", &format!("worker {secret}")),
            h(
                "x-consumer-version",
                &format!("release-2026-09-21 {secret}"),
            ),
            h("x-event-type", &format!("invoice.issue.requested {secret}")),
            h("x-original-topic", &format!("orders {secret}")),
            h(&format!("x-note-{secret}"), "order-8812"),
            h("x-error", &format!("lookup of {secret} failed")),
        ],
        payload: serde_json::json!({
            "note": format!("customer {secret}"),
            "order": "order-8812",
        })
        .to_string()
        .into_bytes(),
        timestamp: chrono::DateTime::from_timestamp_millis(1_764_000_000_000 + i as i64),
        ..RawLetter::default()
    }
}

#[test]
fn no_secret_survives_any_output_and_near_misses_stay_readable() {
    let dir = tempfile::tempdir().expect("tmp");
    let dump = dir.path().join("pii.ndjson");
    let mut f = std::fs::File::create(&dump).expect("dump");
    for (i, (value, _)) in SECRETS.iter().enumerate() {
        writeln!(f, "{}", to_line(&letter(i, value), false)).expect("write");
    }
    drop(f);
    let src = dump.to_string_lossy().to_string();
    let run = |args: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_dlq-triage"))
            .args(args)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("DLQ_TRIAGE_NOW", "2026-11-29T18:00:00Z")
            .env_remove("DLQ_TRIAGE_CONFIG")
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let export = dir.path().join("out.ndjson");
    let ids: Vec<String> = {
        let list: serde_json::Value =
            serde_json::from_str(&run(&["list", &src, "--json"])).expect("json");
        list["letters"]
            .as_array()
            .expect("letters")
            .iter()
            .filter_map(|l| l["coords"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(ids.len(), SECRETS.len());
    let mut outputs = vec![
        ("summary", run(&["summary", &src])),
        ("summary --json", run(&["summary", &src, "--json"])),
        (
            "summary by every field",
            run(&[
                "summary",
                &src,
                "-g",
                "reason,version,event,consumer,origin,exception",
            ]),
        ),
        ("list", run(&["list", &src])),
        ("list --json", run(&["list", &src, "--json"])),
    ];
    for id in &ids {
        outputs.push(("show", run(&["show", &src, id])));
        outputs.push(("show --json", run(&["show", &src, id, "--json"])));
    }
    run(&["export", &src, "--out", &export.to_string_lossy()]);
    outputs.push((
        "export",
        std::fs::read_to_string(&export).expect("exported"),
    ));
    // A transform copies the secrets into fields of their own and builds strings from
    // them: its dry-run sample, its record and each revision's diff stay masked.
    let program = r#".copy = .note | .built = ("for " + .note + "!") | .order = "order-8812""#;
    let transform = |extra: &[&str]| {
        let mut args = vec![
            "transform",
            &src,
            "-f",
            "age>0s",
            "-e",
            program,
            "--reason",
            "pii",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    outputs.push(("transform --dry-run", transform(&["--dry-run"])));
    outputs.push((
        "transform --dry-run --json",
        transform(&["--dry-run", "--json"]),
    ));
    outputs.push(("transform", transform(&["--yes"])));
    for id in &ids {
        outputs.push((
            "diff --revision",
            run(&["diff", &src, id, "--revision", "1"]),
        ));
        outputs.push((
            "diff --revision --json",
            run(&["diff", &src, id, "--revision", "1", "--json"]),
        ));
    }
    // A discard whose reason an engineer typed with a customer's data in it, then the
    // incident report: its groups, decisions and reasons stay masked.
    let n = SECRETS.len().to_string();
    let reason = format!("asked by {} re card {}", SECRETS[0].0, SECRETS[1].0);
    let discarded = run(&[
        "discard", &src, "-f", "age>0s", "--reason", &reason, "--yes", "--expect", &n,
    ]);
    outputs.push(("discard", discarded));
    let report = run(&["report", &src]);
    assert!(
        report.contains(&format!("**Discarded** {n} letters"))
            && report.contains(&format!("**Revised** {n} letters by the program")),
        "{report}"
    );
    outputs.push(("report", report));
    for (what, text) in &outputs {
        for (_, secret) in SECRETS {
            assert!(
                !text.contains(secret),
                "{what}: {secret:?} survived:\n{text}"
            );
        }
    }
    let all: String = outputs.iter().map(|(_, t)| t.as_str()).collect();
    for near in NEAR_MISSES {
        assert!(all.contains(near), "near-miss {near:?} was masked");
    }
}

/// Every TUI screen a user can reach for these letters: each grouping preset, each
/// letter, each detail tab.
#[test]
fn no_secret_survives_the_tui_screens() {
    use dlq_core::catalog::prepare_letter;
    use dlq_core::masking::Masker;

    use dlq_tui::action::Action;
    use dlq_tui::state::{AppState, Tab, GROUPINGS};

    use dlq_tui::update::update;

    let size = (220, 60);
    let masker = Masker::with_key(b"pii".to_vec());
    let batch: Vec<_> = SECRETS
        .iter()
        .enumerate()
        .map(|(i, (v, _))| prepare_letter(&masker, &[], letter(i, v)).into())
        .collect();
    let mut s = dlq_testkit::tui::empty_state("pii", masker, 1_764_100_000_000, 64 << 20);
    update(&mut s, Action::from(BrowseEvent::Letters(batch)), size);
    update(&mut s, Action::from(BrowseEvent::ScanDone), size);
    let mut screens = Vec::new();
    let mut shot = |s: &AppState| screens.push(dlq_testkit::tui::screen(s, size));
    for _ in 0..GROUPINGS.len() {
        shot(&s);
        update(&mut s, Action::from(ViewKey::CycleGrouping), size);
    }
    update(&mut s, Action::from(Nav::FocusNext), size);
    for _ in 0..SECRETS.len() {
        for tab in [Tab::Failure, Tab::Headers, Tab::Payload] {
            update(&mut s, Action::from(ViewKey::SetTab(tab)), size);
            shot(&s);
        }
        update(&mut s, Action::from(Nav::Down), size);
    }
    for screen in &screens {
        for (_, secret) in SECRETS {
            // The screen cuts long lines; check every fragment of 8+ characters too.
            let probe: String = secret.chars().take(12).collect();
            assert!(
                !screen.contains(&probe),
                "{secret:?} survived on screen:\n{screen}"
            );
        }
    }
    assert!(screens.iter().any(|s| s.contains("order-8812")));
    // The detail tabs really rendered the letters (header names, masked).
    assert!(
        screens.iter().any(|s| s.contains("x-note-")),
        "no headers tab"
    );
    assert!(
        screens
            .iter()
            .any(|s| s.contains("customer [redacted]") || s.contains("customer ***")),
        "no payload tab"
    );
}

/// A hostile 2 MB payload is not masked on the UI thread: the detail shows a placeholder
/// and asks the render thread, whose answer then shows, masked.
#[test]
fn a_huge_hostile_payload_renders_off_the_ui_thread() {
    use dlq_core::catalog::prepare_letter;
    use dlq_core::masking::Masker;

    use dlq_tui::action::{Action, Command};
    use dlq_tui::state::Tab;
    use dlq_tui::update::{render_payload, update};

    let size = (120, 40);
    let masker = Masker::with_key(b"pii".to_vec());
    let mut raw = letter(0, "x");
    raw.payload = format!("jane@example.com {}", "1 ".repeat(1_000_000)).into_bytes();
    let mut s = dlq_testkit::tui::empty_state("big", masker.clone(), 1_764_100_000_000, 64 << 20);
    let mut cmds = update(
        &mut s,
        Action::from(BrowseEvent::Letters(vec![prepare_letter(
            &masker,
            &[],
            raw,
        )
        .into()])),
        size,
    );
    for a in [
        Action::from(BrowseEvent::ScanDone),
        Action::from(ViewKey::SetTab(Tab::Payload)),
        Action::from(Nav::FocusNext),
        Action::from(Nav::FocusNext),
    ] {
        cmds.extend(update(&mut s, a, size));
    }
    let job = cmds.into_iter().find_map(|c| match c {
        Command::RenderPayload {
            row,
            letter,
            unmasked,
        } => Some((row, letter, unmasked)),
        _ => None,
    });
    let (row, letter, unmasked) = job.expect("rendering was handed off");
    let d = s.detail.shown().expect("detail");
    assert!(
        d.payload.text.starts_with("rendering 1.9 MiB"),
        "{}",
        d.payload.text
    );
    // What the render thread does, then its answer.
    let view = render_payload(&masker, &letter, unmasked);
    assert!(!view.text.contains("jane@example.com") && view.truncated);
    update(
        &mut s,
        Action::from(BrowseEvent::Rendered(row, unmasked, view)),
        size,
    );
    let shown = &s.detail.shown().expect("detail").payload.text;
    assert!(
        shown.contains("j***@e***.com"),
        "{}",
        &shown[..100.min(shown.len())]
    );
}
