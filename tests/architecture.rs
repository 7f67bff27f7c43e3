//! Core stays broker- and terminal-agnostic: no file under src/core may import ratatui,
//! crossterm, rdkafka or lapin, nor reach up into the front ends or adapters.

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
