//! The crate graph is the architecture: each crate may depend only on the layers below
//! it, so a wrong-way `use` (core → ledger, tui → kafka, cli → amqp …) does not compile.
//! This test reads the graph from `cargo metadata` and fails when a manifest adds an
//! edge the design forbids — the one place a wrong-way import could sneak back in.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Normal (non-dev) dependencies of every workspace member, by package name.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("name").to_string())
                .collect();
            (p["name"].as_str().expect("name").to_string(), deps)
        })
        .collect()
}

/// Crates that do I/O against a broker, a database, a terminal or the network.
const IO_CRATES: [&str; 10] = [
    "rusqlite",
    "tokio-postgres",
    "postgres",
    "rdkafka",
    "lapin",
    "ratatui",
    "crossterm",
    "ureq",
    "arboard",
    "tokio",
];

/// Which of our crates each crate may use.
const ALLOWED: [(&str, &[&str]); 11] = [
    ("dlq-core", &[]),
    // jq programs in a worker process: knows nothing of letters.
    ("dlq-transform", &[]),
    ("dlq-ledger", &["dlq-core"]),
    ("dlq-kafka", &["dlq-core"]),
    ("dlq-amqp", &["dlq-core"]),
    ("dlq-schema", &["dlq-core"]),
    (
        "dlq-app",
        &[
            "dlq-core",
            "dlq-ledger",
            "dlq-kafka",
            "dlq-amqp",
            "dlq-schema",
            "dlq-transform",
        ],
    ),
    // The two front ends are siblings on the application layer: neither knows the
    // other; the binary picks one.
    ("dlq-tui", &["dlq-core", "dlq-app"]),
    ("dlq-cli", &["dlq-core", "dlq-app"]),
    // The binary also starts as the transform worker (`dlq_transform::worker`).
    (
        "dlq-triage",
        &["dlq-core", "dlq-app", "dlq-cli", "dlq-tui", "dlq-transform"],
    ),
    // Test fixtures: a dev-dependency only. Being one of ours and in no other
    // crate's list, it fails this test the day a production crate depends on it.
    (
        "dlq-testkit",
        &["dlq-core", "dlq-app", "dlq-amqp", "dlq-tui"],
    ),
];

/// The edges between our crates that `ALLOWED` does not list.
fn wrong_edges(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let ours: BTreeSet<&str> = ALLOWED.iter().map(|(n, _)| *n).collect();
    let mut wrong = Vec::new();
    for (name, may) in ALLOWED {
        for dep in g.get(name).into_iter().flatten() {
            if ours.contains(dep.as_str()) && !may.contains(&dep.as_str()) {
                wrong.push(format!("{name} → {dep}"));
            }
        }
    }
    wrong
}

#[test]
fn every_layer_depends_only_downwards() {
    let g = graph();
    for (name, _) in ALLOWED {
        assert!(g.contains_key(name), "{name} is not a workspace member");
    }
    let wrong = wrong_edges(&g);
    assert!(wrong.is_empty(), "wrong-way crate edges: {wrong:?}");
}

/// The CLI and the TUI are siblings on the application layer: an edge either way (the
/// CLI launching the TUI, the TUI borrowing a command) is caught.
#[test]
fn the_front_ends_are_siblings() {
    for (from, to) in [("dlq-cli", "dlq-tui"), ("dlq-tui", "dlq-cli")] {
        let mut g = graph();
        assert!(!g[from].contains(to), "{from} → {to}");
        g.get_mut(from).expect("member").insert(to.to_string());
        assert_eq!(wrong_edges(&g), vec![format!("{from} → {to}")]);
    }
}

/// The graph in ARCHITECTURE.md is drawn from `cargo metadata`: a manifest's new edge
/// that the page does not show fails here. `DLQ_TRIAGE_BLESS=1` redraws it.
#[test]
fn architecture_md_shows_the_graph_cargo_sees() {
    const START: &str = "<!-- crate graph: drawn by tests/architecture.rs from cargo metadata -->";
    const END: &str = "<!-- /crate graph -->";
    let g = graph();
    let ours: BTreeSet<&str> = ALLOWED.iter().map(|(n, _)| *n).collect();
    let mut drawn = String::from("```\n");
    for (name, _) in ALLOWED {
        let deps: Vec<&str> = g[name]
            .iter()
            .map(String::as_str)
            .filter(|d| ours.contains(d))
            .collect();
        let deps = if deps.is_empty() {
            "(none of ours)".to_string()
        } else {
            deps.join(", ")
        };
        drawn.push_str(&format!("{name:<14} → {deps}\n"));
    }
    drawn.push_str("```\n");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let page = std::fs::read_to_string(&path).expect("ARCHITECTURE.md");
    let (Some(a), Some(b)) = (page.find(START), page.find(END)) else {
        panic!("ARCHITECTURE.md lacks the generated graph block ({START} … {END})");
    };
    let shown = &page[a + START.len() + 1..b];
    if shown != drawn {
        if std::env::var_os("DLQ_TRIAGE_BLESS").is_some() {
            let new = format!("{}{START}\n{drawn}{}", &page[..a], &page[b..]);
            std::fs::write(&path, new).expect("write ARCHITECTURE.md");
        } else {
            panic!(
                "ARCHITECTURE.md's crate graph is stale (DLQ_TRIAGE_BLESS=1 redraws it):\n{drawn}"
            );
        }
    }
}

#[test]
fn core_names_no_io_crate_and_front_ends_no_adapter_crate() {
    let g = graph();
    let core_io: Vec<&String> = g["dlq-core"]
        .iter()
        .filter(|d| IO_CRATES.contains(&d.as_str()))
        .collect();
    assert!(core_io.is_empty(), "dlq-core depends on {core_io:?}");
    // Payloads are decoded behind core's PayloadCodec port, by dlq-schema alone: neither
    // core nor a front end names a codec (or the demo registry's server).
    const CODECS: [&str; 6] = [
        "apache-avro",
        "prost",
        "prost-reflect",
        "protox",
        "jsonschema",
        "tiny_http",
    ];
    for layer in ["dlq-core", "dlq-tui", "dlq-cli", "dlq-app", "dlq-kafka"] {
        let named: Vec<&String> = g[layer]
            .iter()
            .filter(|d| CODECS.contains(&d.as_str()))
            .collect();
        assert!(named.is_empty(), "{layer} depends on {named:?}");
    }
    // jq programs run in dlq-transform's worker alone: nobody else may run one in
    // process, where a runaway program could not be stopped.
    for (name, deps) in &g {
        let jaq: Vec<&String> = deps.iter().filter(|d| d.starts_with("jaq")).collect();
        assert!(
            name == "dlq-transform" || jaq.is_empty(),
            "{name} depends on {jaq:?}"
        );
    }
    // The front ends reach brokers and the ledger through the app, never directly.
    for front in ["dlq-tui", "dlq-cli"] {
        let bad: Vec<&String> = g[front]
            .iter()
            .filter(|d| {
                ["rusqlite", "rdkafka", "lapin", "ureq", "tokio-postgres"].contains(&d.as_str())
            })
            .collect();
        assert!(bad.is_empty(), "{front} depends on {bad:?}");
    }
    // Only the TUI draws.
    for other in ["dlq-core", "dlq-ledger", "dlq-kafka", "dlq-amqp", "dlq-app"] {
        assert!(
            !g[other].contains("ratatui") && !g[other].contains("crossterm"),
            "{other} depends on a terminal crate"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let p = entry.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Lines of code (comments cut) in a crate's sources containing any of `words`.
fn offending_lines(krate: &str, words: &[&str], except: impl Fn(&str) -> bool) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(krate);
    let mut files = Vec::new();
    rust_files(&dir.join("src"), &mut files);
    assert!(!files.is_empty(), "no sources under {}", dir.display());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if words.iter().any(|w| code.contains(w)) && !except(code) {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

/// The app may not hand an adapter crate to the front ends wholesale: a `pub use` of
/// one would let the TUI or the CLI reach past the session.
#[test]
fn the_app_re_exports_no_adapter_crate() {
    let found = offending_lines(
        "app",
        &[
            "pub use dlq_ledger",
            "pub use dlq_kafka as",
            "pub use dlq_amqp as",
            "pub use dlq_kafka::*",
            "pub use dlq_amqp::*",
        ],
        |_| false,
    );
    assert!(
        found.is_empty(),
        "adapter re-exports:\n{}",
        found.join("\n")
    );
}

/// The front ends translate and render; the pipeline and the ledger logic live in the
/// session. Neither may open a source's scan or decide on its own.
#[test]
fn front_ends_drive_the_session_not_the_pipeline() {
    let forbidden = [
        "decisions::discard(",
        "decisions::reconcile(",
        "record_discard(",
        ".scan(&mut",
        ".tail(&mut",
    ];
    let mut found = Vec::new();
    for krate in ["cli", "tui"] {
        // `session.scan(…)` and `session.tail(…)` are the way.
        found.extend(offending_lines(krate, &forbidden, |code| {
            code.contains("session.")
        }));
    }
    assert!(
        found.is_empty(),
        "pipeline logic in a front end:\n{}",
        found.join("\n")
    );
}

/// Core decides; it reads no file and asks the OS nothing itself: who runs the tool and
/// the roles file come through its `access::Os` port, read by the application layer.
#[test]
fn core_reads_no_file_and_asks_the_os_nothing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
        let text = std::fs::read_to_string(f).expect("readable source");
        // Unit tests (at the end of a file) may read their fixtures.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            if [
                "std::fs",
                "File::open",
                "/proc/",
                "/etc/passwd",
                "/etc/group",
            ]
            .iter()
            .any(|w| line.contains(w))
            {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "core does I/O:\n{}", found.join("\n"));
}
