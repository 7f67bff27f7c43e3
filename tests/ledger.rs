//! Discard and the audit ledger, end to end on the binary (file source: ledger-only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use dlq_testkit::cli::{exited, json, Cli};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// The binary in a scratch home with a fixed clock; `command` plays `actor`.
struct Env {
    cli: Cli,
}

impl std::ops::Deref for Env {
    type Target = Cli;
    fn deref(&self) -> &Cli {
        &self.cli
    }
}

impl Env {
    fn new() -> Self {
        Env {
            cli: Cli::new(env!("CARGO_BIN_EXE_dlq-triage"))
                .with("DLQ_TRIAGE_NOW", "2026-11-29T18:00:00Z"),
        }
    }

    fn ledger(&self) -> std::path::PathBuf {
        self.cli.default_ledger()
    }

    /// The binary as `actor` (a `test-hooks` build takes it from DLQ_TRIAGE_ACTOR).
    fn command(&self, actor: &str, args: &[&str]) -> Command {
        let mut c = self.cli.command(args);
        c.env("DLQ_TRIAGE_ACTOR", actor);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command("alice", args).output().expect("binary runs")
    }
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/incident.ndjson")
        .display()
        .to_string()
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
    let text = exited(&out, 0);
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
    // `show` says so too, with who and why, in text and JSON.
    let id = shown["letters"][0]["id"].as_str().expect("id").to_string();
    let text = env.run(&["show", &ex, &id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("discarded by alice") && text.contains("retry queue TTL misconfigured"),
        "{text}"
    );
    let doc = json(&env.run(&["show", &ex, &id, "--json"]));
    assert_eq!(doc["state"], "discarded");
    assert_eq!(doc["decision"]["actor"], "alice");
    assert_eq!(
        doc["decision"]["reason"],
        "retry queue TTL misconfigured; replaced by fix #88"
    );
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
    // Each discard is recorded, then its application (ledger-only for a file) is too.
    let actions: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["discard", "discard-applied", "discard", "discard-applied"]
    );
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
        (
            // Said before the letter is looked for, and before any editor opens.
            vec![
                "--read-only",
                "edit",
                ex.as_str(),
                "any-id",
                "--reason",
                "x",
            ],
            "--read-only: an edit records a revision",
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

/// Run as `user` with a roles file.
fn run_as(env: &Env, roles: &Path, user: &str, args: &[&str]) -> Output {
    env.command(user, args)
        .env("DLQ_TRIAGE_ROLES_FILE", roles)
        .output()
        .expect("binary runs")
}

#[test]
fn roles_gate_payloads_actions_and_unmask_and_refusals_are_audited() {
    let env = Env::new();
    let ex = example();
    let roles = env.dir.path().join("roles.toml");
    std::fs::write(
        &roles,
        "privileged = [\"alice\"]\noperator = [\"bob\"]\nviewer = [\"*\"]\n",
    )
    .expect("roles");
    let id = "msg_01K5F39XMCJ9DAGFY80Y88ZV6B";

    // A viewer sees metadata and groups, never payloads, and cannot act.
    let list = json(&run_as(
        &env,
        &roles,
        "carol",
        &["list", &ex, "--json", "--limit", "3"],
    ));
    assert!(list["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .all(|l| l["preview"].is_null()));
    let show = run_as(&env, &roles, "carol", &["show", &ex, id]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("payload · hidden") && !text.contains("\"amount\""),
        "{text}"
    );
    let refused = run_as(
        &env,
        &roles,
        "carol",
        &[
            "discard",
            &ex,
            "--filter",
            "reason=expired",
            "--reason",
            "x",
            "--yes",
        ],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr)
        .contains("discarding needs the operator role; you are viewer"));
    assert_eq!(
        run_as(&env, &roles, "carol", &["export", &ex])
            .status
            .code(),
        Some(1)
    );

    // An operator sees masked payloads but cannot unmask.
    let op = run_as(
        &env,
        &roles,
        "bob",
        &[
            "show",
            &ex,
            id,
            "--unmask",
            "--reason",
            "customer ticket 991",
        ],
    );
    assert_eq!(op.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&op.stderr)
        .contains("unmasking needs the privileged role; you are operator"));

    // Privileged: raw payload, audited before it is shown.
    let un = run_as(
        &env,
        &roles,
        "alice",
        &[
            "show",
            &ex,
            id,
            "--unmask",
            "--reason",
            "customer ticket 991",
        ],
    );
    let raw = exited(&un, 0);
    assert!(
        raw.contains("UNMASKED (audited)") && raw.contains("@"),
        "{raw}"
    );
    let masked = String::from_utf8_lossy(&run_as(&env, &roles, "alice", &["show", &ex, id]).stdout)
        .to_string();
    assert!(
        masked.contains("masked") && !masked.contains("UNMASKED"),
        "unmask lasts for that command only"
    );
    let no_reason = run_as(
        &env,
        &roles,
        "alice",
        &["show", &ex, id, "--unmask", "--reason", " "],
    );
    assert_eq!(no_reason.status.code(), Some(2));

    let audit = json(&run_as(&env, &roles, "alice", &["audit", "list", "--json"]));
    let entries: Vec<(String, String)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or("").to_string(),
                e["action"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for want in [("carol", "denied"), ("bob", "denied"), ("alice", "unmask")] {
        assert!(
            entries.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} not in {entries:?}"
        );
    }
    assert_eq!(
        json(&run_as(
            &env,
            &roles,
            "alice",
            &["audit", "verify", "--json"]
        ))["verification"]["ok"],
        true
    );
}

#[test]
fn masked_edit_round_trip_changes_only_the_edited_path() {
    let env = Env::new();
    let ex = example();
    let id = "msg_01K5F39XMCJ9DAGFY80Y88ZV6B";
    let edit = |editor: &str, reason: &str| {
        env.command("bob", &["edit", &ex, id, "--reason", reason])
            .env("EDITOR", editor)
            .env_remove("VISUAL")
            .output()
            .expect("binary runs")
    };
    // The operator fixes the amount on the masked payload; PII is never shown.
    let out = edit(
        r#"sed -i 's/"amount": "3,022.17"/"amount": 3022.17/'"#,
        "amount as a number for the new schema",
    );
    exited(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("revision 1 of msg_01K5F39XMCJ9DAGFY80Y88ZV6B: changed /payload/amount"));
    let conn = rusqlite::Connection::open(env.ledger()).expect("ledger");
    let (payload, paths): (Vec<u8>, String) = conn
        .query_row(
            "SELECT payload, changed_paths FROM revisions WHERE letter_id = ?1 AND number = 1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("revision 1");
    assert_eq!(paths, "[\"/payload/amount\"]");
    let revised: Value = serde_json::from_slice(&payload).expect("json");
    let line = std::fs::read_to_string(&ex)
        .expect("example")
        .lines()
        .find(|l| l.contains(id))
        .expect("letter line")
        .to_string();
    let dump: Value = serde_json::from_str(&line).expect("dump line");
    let original: Value =
        serde_json::from_str(dump["payload"].as_str().expect("payload")).expect("json");
    assert_eq!(revised["payload"]["amount"], serde_json::json!(3022.17));
    assert_eq!(
        revised["payload"]["customer"], original["payload"]["customer"],
        "PII byte-identical to the original"
    );
    let mut without_amount = revised.clone();
    without_amount["payload"]["amount"] = original["payload"]["amount"].clone();
    assert_eq!(without_amount, original, "nothing else changed");
    // diff --revision shows exactly that change, masked.
    let d = json(&env.run(&["diff", &ex, id, "--revision", "1", "--json"]));
    let changes = d["payload"]["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["path"], "/payload/amount");
    // Editing a masked hint in place is refused (it would overwrite real data with ***).
    let bad = edit(
        r#"sed -i 's/"email": "\([a-z]\)\*\*\*@/"email": "\1***x@/'"#,
        "oops",
    );
    assert_eq!(
        bad.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&bad.stdout)
    );
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("masked values were edited, moved or copied at /payload/customer/email"));
    // A failing editor saves nothing.
    assert_eq!(edit("false", "x").status.code(), Some(1));
    let v = json(&env.run(&["audit", "verify", "--json"]));
    assert_eq!(v["verification"]["entries"], 1, "one edit, one audit entry");
}

#[test]
fn edit_unmasked_is_audited_before_the_editor_opens() {
    let env = Env::new();
    let roles = env.dir.path().join("roles.toml");
    std::fs::write(&roles, "privileged = [\"carol\"]\n").expect("roles");
    let id = "msg_01K5F39XMCJ9DAGFY80Y88ZV6B";
    // The editor quits without changes: the raw payload was still shown, so it is on
    // the record.
    let out = env
        .command(
            "carol",
            &[
                "edit",
                &example(),
                id,
                "--reason",
                "look at it",
                "--unmasked",
            ],
        )
        .env("DLQ_TRIAGE_ROLES_FILE", &roles)
        .env("EDITOR", "true")
        .env_remove("VISUAL")
        .output()
        .expect("runs");
    exited(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no changes"));
    let audit = json(&env.run(&["audit", "list", "--json"]));
    let entries = audit["entries"].as_array().expect("entries");
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "unmask" && e["target"] == id && e["actor"] == "carol"),
        "{entries:?}"
    );
}

#[test]
fn identity_comes_from_the_os_not_from_user_or_logname() {
    let env = Env::new();
    let me = String::from_utf8(Command::new("id").arg("-un").output().expect("id").stdout)
        .expect("utf8")
        .trim()
        .to_string();
    let out = env
        .command(
            "ignored",
            &[
                "discard",
                &example(),
                "--filter",
                "reason=expired",
                "--reason",
                "r",
                "--yes",
            ],
        )
        .env_remove("DLQ_TRIAGE_ACTOR")
        .env("USER", "mallory")
        .env("LOGNAME", "mallory")
        .output()
        .expect("runs");
    exited(&out, 0);
    let audit = json(&env.run(&["audit", "list", "--json"]));
    let actors: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["actor"].as_str())
        .collect();
    assert!(
        !actors.is_empty() && actors.iter().all(|a| *a == me),
        "{actors:?} vs {me}"
    );
}

#[test]
fn user_supplied_paths_are_shown_sanitized() {
    let env = Env::new();
    let hostile = env.dir.path().join("led\x1b]0;pwned\x07ger.db");
    let out = env
        .command(
            "alice",
            &[
                "--ledger",
                &hostile.to_string_lossy(),
                "discard",
                &example(),
                "--filter",
                "reason=expired",
                "--reason",
                "r",
                "--yes",
            ],
        )
        .output()
        .expect("runs");
    exited(&out, 0);
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !stream.contains(&0x1b) && !stream.contains(&0x07),
            "{}",
            String::from_utf8_lossy(stream)
        );
    }
    let out = env
        .command(
            "alice",
            &["--ledger", &hostile.to_string_lossy(), "audit", "verify"],
        )
        .output()
        .expect("runs");
    assert!(out.status.success());
    assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07));
}

/// `discard --yes` over `confirm_above` letters needs `--expect N`, as replay does;
/// `--expect` below the match count refuses too; nothing is recorded by a refusal.
#[test]
fn a_big_discard_needs_expect_and_a_refusal_records_nothing() {
    let env = Env::new();
    let ex = example();
    let discard = |extra: &[&str]| {
        let mut args = vec![
            "discard",
            &ex,
            "--filter",
            "reason=customer_tax_profile_missing",
            "--reason",
            "bulk",
            "--yes",
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let refused = discard(&[]);
    exited(&refused, 2);
    let said = dlq_testkit::cli::stderr(&refused);
    assert!(
        said.contains("184 letters is more than 100: confirm with --expect 184"),
        "{said}"
    );
    let refused = discard(&["--expect", "100"]);
    exited(&refused, 2);
    let said = dlq_testkit::cli::stderr(&refused);
    assert!(
        said.contains("--expect 100 but 184 letters match"),
        "{said}"
    );
    assert!(
        !env.ledger().exists()
            || json(&env.run(&["audit", "list", "--json"]))["entries"]
                .as_array()
                .is_some_and(Vec::is_empty),
        "a refused discard recorded something"
    );
    let done = discard(&["--expect", "184"]);
    exited(&done, 0);
    let after = json(&env.run(&["summary", &ex, "--json"]));
    assert_eq!(after["matched"], 429 - 184);
}

/// The team ledger from the binary: `--ledger postgres://…` records, verifies and is
/// shown without its password; another engineer's `summary` sees the discard; a ledger
/// value with an unknown scheme is an error, never a directory.
#[test]
fn discard_and_audit_on_the_team_ledger() {
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    let env = Env::new();
    let ex = example();
    let ledger = db.url.replacen("postgres@", "postgres:never-shown@", 1);
    let out = env.run(&[
        "--ledger",
        &ledger,
        "discard",
        &ex,
        "--filter",
        "reason=expired",
        "--reason",
        "ttl",
        "--yes",
    ]);
    let said = exited(&out, 0);
    assert!(said.contains("discarded 2 letters"), "{said}");
    assert!(said.contains("ledger: postgres://postgres@"), "{said}");
    assert!(!said.contains("never-shown"), "{said}");
    // Another engineer (another home, same server): the letters are handled.
    let bob = Env::new();
    let seen = json(&bob.run(&["--ledger", &db.url, "summary", &ex, "--json"]));
    assert_eq!(seen["matched"], 427);
    let v = json(&bob.run(&["--ledger", &db.url, "audit", "verify", "--json"]));
    assert_eq!(v["verification"]["ok"], true, "{v}");
    assert_eq!(v["verification"]["entries"], 4);
    assert!(!v.to_string().contains("never-shown"));
    // An unknown scheme: exit 2, nothing created.
    let odd = env.run(&["--ledger", "mysql://root@db/x", "summary", &ex]);
    exited(&odd, 2);
    assert!(dlq_testkit::cli::stderr(&odd).contains("unknown ledger scheme"));
    assert!(!std::path::Path::new("mysql:").exists());
}

/// Roles on the team ledger: the owner starts them, a privileged role changes them, each
/// change audited; a viewer there cannot discard whatever its bastion's roles file says,
/// nor make itself privileged; an edit of the roles table is named by `audit verify`.
#[test]
fn the_team_ledger_decides_roles() {
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    let env = Env::new();
    let ex = example();
    exited(&env.run(&["--ledger", &db.url, "audit", "verify"]), 0);
    let (alice, bob) = (db.engineer("alice"), db.engineer("bob"));
    let name = |url: &str| {
        url.split("://")
            .nth(1)
            .and_then(|r| r.split('@').next())
            .expect("user")
            .to_string()
    };
    let (alice_role, bob_role) = (name(&alice), name(&bob));
    exited(
        &env.run(&[
            "--ledger",
            &db.url,
            "roles",
            "set",
            &alice_role,
            "privileged",
        ]),
        0,
    );
    exited(
        &env.run(&["--ledger", &alice, "roles", "set", &bob_role, "viewer"]),
        0,
    );
    let listed = json(&env.run(&["--ledger", &alice, "roles", "--json"]));
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let refused = env.run(&[
        "--ledger",
        &bob,
        "discard",
        &ex,
        "--filter",
        "reason=expired",
        "--reason",
        "x",
        "--yes",
    ]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        dlq_testkit::cli::stderr(&refused).contains("operator"),
        "{}",
        dlq_testkit::cli::stderr(&refused)
    );
    let promote = env.run(&["--ledger", &bob, "roles", "set", &bob_role, "privileged"]);
    assert_ne!(promote.status.code(), Some(0));
    assert!(
        dlq_testkit::cli::stderr(&promote).contains("changing roles needs the privileged role"),
        "{}",
        dlq_testkit::cli::stderr(&promote)
    );
    let v = json(&env.run(&["--ledger", &db.url, "audit", "verify", "--json"]));
    assert_eq!(v["verification"]["ok"], true, "{v}");
    db.client()
        .batch_execute(&format!(
            "UPDATE dlq_roles SET role = 'privileged' WHERE actor = '{bob_role}'"
        ))
        .expect("tamper");
    let v = env.run(&["--ledger", &db.url, "audit", "verify", "--json"]);
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("roles table was edited"),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

/// Four eyes on a big discard: recorded for approval (exit 7, nothing recorded as
/// discarded), approved by a second engineer, then done by its author.
#[test]
fn a_discard_over_approval_above_waits_for_a_second_operator() {
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    let env = Env::new();
    let ex = example();
    exited(&env.run(&["--ledger", &db.url, "audit", "verify"]), 0);
    let (alice, bob) = (db.engineer("alice"), db.engineer("bob"));
    // The team's policy on the server (its owner, privileged); alice's own config is
    // looser, and loses: a config tightens the team's policy, never loosens it.
    exited(
        &env.run(&[
            "--ledger",
            &db.url,
            "policy",
            "set",
            "discard_approval_above",
            "100",
        ]),
        0,
    );
    let refused = env.run(&["--ledger", &alice, "policy", "set", "approval_above", "1"]);
    assert!(
        dlq_testkit::cli::stderr(&refused).contains("needs the privileged role"),
        "{}",
        dlq_testkit::cli::stderr(&refused)
    );
    let policy = json(&env.run(&["--ledger", &alice, "policy", "--json"]));
    assert_eq!(
        policy,
        serde_json::json!([{"key": "discard_approval_above", "value": "100"}])
    );
    env.config("[discard]\napproval_above = 100000\n");
    let discard = || {
        env.run(&[
            "--ledger",
            &alice,
            "discard",
            &ex,
            "--filter",
            "reason=customer_tax_profile_missing",
            "--reason",
            "known bad deploy",
            "--yes",
            "--expect",
            "184",
        ])
    };
    let first = discard();
    exited(&first, 7);
    let said = dlq_testkit::cli::stderr(&first);
    let id = dlq_testkit::cli::approval_id(&said);
    let before = json(&env.run(&["--ledger", &alice, "summary", &ex, "--json"]));
    assert_eq!(before["matched"], 429, "nothing discarded before approval");
    let shown = exited(&env.run(&["--ledger", &bob, "approve", &id]), 0);
    assert!(shown.contains("Discard 184 letters"), "{shown}");
    exited(&env.run(&["--ledger", &bob, "approve", &id, "--yes"]), 0);
    exited(&discard(), 0);
    let after = json(&env.run(&["--ledger", &bob, "summary", &ex, "--json"]));
    assert_eq!(after["matched"], 429 - 184);
}

/// A named source carries its own ledger (`[sources.NAME] ledger = "postgres://…"`),
/// like a k9s context: its decisions go to its team's server, others' to the default.
#[test]
fn a_named_source_records_in_its_own_ledger() {
    let Some(db) = dlq_testkit::pg::TempDb::create() else {
        return;
    };
    let env = Env::new();
    env.config(&format!(
        "[sources.payments]\nuri = \"{}\"\nledger = \"{}\"\n",
        example(),
        db.url
    ));
    let out = env.run(&[
        "discard",
        "payments",
        "--filter",
        "reason=expired",
        "--reason",
        "ttl",
        "--yes",
    ]);
    let said = exited(&out, 0);
    assert!(said.contains("ledger: postgres://"), "{said}");
    let audit = json(&env.run(&["--ledger", &db.url, "audit", "list", "--json"]));
    assert_eq!(
        audit["entries"].as_array().map(Vec::len),
        Some(4),
        "{audit}"
    );
    assert!(
        !env.ledger().exists(),
        "nothing went to the default file ledger"
    );
}

/// #68, 4: browsing never needs the ledger. With the team ledger unreachable, `summary`,
/// `list` and `show` work (exit 0), say the decisions are unknown — `unknown` in every
/// state, `decisions_known: false` in JSON — and a write is refused for the real reason
/// (the ledger cannot be reached), never for a stand-in role.
#[test]
fn browsing_works_with_the_team_ledger_unreachable_and_writes_say_why_not() {
    let env = Cli::new(env!("CARGO_BIN_EXE_dlq-triage"))
        .with("DLQ_TRIAGE_NOW", "2026-11-29T18:00:00Z")
        .with(
            "DLQ_TRIAGE_LEDGER",
            "postgres://oncall:s3cr3t@127.0.0.1:1/ledger",
        );
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson");
    let dump = dump.to_str().expect("utf-8");
    let summary = env.run(&["summary", dump]);
    assert_eq!(summary.status.code(), Some(0), "{}", exited(&summary, 0));
    let said = String::from_utf8_lossy(&summary.stderr).to_string();
    assert!(said.contains("decisions unknown"), "{said}");
    assert!(!said.contains("s3cr3t"), "{said}");
    let listed = json(&env.run(&["list", dump, "--json", "--limit", "5"]));
    let states: Vec<&str> = listed["letters"]
        .as_array()
        .expect("letters")
        .iter()
        .filter_map(|l| l["state"].as_str())
        .collect();
    assert_eq!(states, vec!["unknown"; 5], "{listed}");
    assert_eq!(listed["coverage"]["decisions_known"], false, "{listed}");
    let id = listed["letters"][0]["id"].as_str().expect("id");
    let shown = env.run(&["show", dump, id]);
    assert_eq!(shown.status.code(), Some(0), "{}", exited(&shown, 0));
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("unknown (ledger unreachable)"),
        "{}",
        exited(&shown, 0)
    );
    // A write: refused because nothing can be recorded, said as such.
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock");
    cluster.create_topic("orders.dlq", 1, 1).expect("topic");
    let uri = format!("kafka://{}/orders.dlq", cluster.bootstrap_servers());
    for args in [
        vec![
            "discard",
            uri.as_str(),
            "--filter",
            "reason=x",
            "--reason",
            "r",
            "--yes",
        ],
        vec!["replay", uri.as_str(), "--resume", "r-1", "--yes"],
    ] {
        let out = env.run(&args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("cannot be reached"), "{args:?}: {text}");
        assert!(!text.contains("you are viewer"), "{args:?}: {text}");
        assert!(!text.contains("s3cr3t"), "{text}");
    }
}
