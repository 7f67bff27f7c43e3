//! Core stays broker- and terminal-agnostic: no file under src/core may import ratatui,
//! crossterm, rdkafka or lapin, nor reach up into the front ends or adapters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use std::path::Path;

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

#[test]
fn core_imports_no_front_end_or_broker_crates() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    assert!(
        files.len() > 10,
        "expected the core modules under {}",
        core.display()
    );
    let forbidden = [
        "ratatui",
        "crossterm",
        "rdkafka",
        "lapin",
        "crate::tui",
        "crate::cli",
        "crate::brokers",
        "crate::config",
        "crate::credentials",
        "crate::editor",
        "crate::logging",
        "ureq",
        "arboard",
    ];
    let mut violations = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in forbidden {
                if code.contains(word) {
                    violations.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "core must not import these:\n{}",
        violations.join("\n")
    );
}

/// SQLite lives in the ledger module only: every other module reaches decisions and the
/// audit log through its API, so the chain's rules cannot be bypassed by a stray query.
#[test]
fn only_the_ledger_touches_sqlite() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let violations: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("core/ledger.rs") && !f.to_string_lossy().contains("core/ledger/"))
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("readable")
                .lines()
                .any(|l| l.split("//").next().unwrap_or("").contains("rusqlite"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        violations.is_empty(),
        "rusqlite outside core/ledger.rs: {violations:?}"
    );
}

/// The front ends translate and render; the pipeline and the ledger logic live in the
/// session. Neither may open a source's scan or decide on its own.
#[test]
fn front_ends_drive_the_session_not_the_pipeline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root.join("cli"), &mut files);
    rust_files(&root.join("tui"), &mut files);
    let forbidden = [
        "decisions::discard(",
        "decisions::reconcile(",
        "record_discard(",
        ".scan(&mut",
        ".tail(&mut",
    ];
    let mut violations = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in forbidden {
                // `session.scan(…)` and `session.tail(…)` are the way.
                if code.contains(word) && !code.contains("session.") {
                    violations.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "pipeline logic in a front end:\n{}",
        violations.join("\n")
    );
}
