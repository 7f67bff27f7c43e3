//! Masked means masked, whatever a program does: an evasion corpus of jq programs that
//! launder customer data (encodings, code points, slices, keys, `error`, captures…) run
//! through `transform --dry-run` — text and JSON, then recorded and read back with `diff
//! --revision` — as an operator: nothing of the secrets in any form. The privileged role
//! with `--unmask` sees them, and the ledger says so; every dry-run is in `audit list`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use base64::Engine;
use dlq_core::dump::to_line;
use dlq_core::model::{Coords, RawLetter};
use dlq_testkit::cli::{exited, json, stderr, Cli};
use std::io::Write;

/// Made-up names, so any fragment of them in an output is a leak.
const NAMES: [&str; 2] = ["Zorblax Quimby", "Vintrelle Oxhaven"];
const EMAILS: [&str; 2] = [
    "zorblax.quimby@example.com",
    "vintrelle.oxhaven@mail.example.org",
];
const TAX_IDS: [&str; 2] = ["QX9187364520", "QZ5647382910"];
const PHONES: [u64; 2] = [15551234567, 15559876543];

/// Programs that try to get a masked value out in another form.
pub const EVASIONS: &[&str] = &[
    "error(.customer.name)",
    "error(.customer.email | @base64)",
    r#"error("no luck for " + .customer.name)"#,
    "error({who: .customer.email})",
    ".customer.name | tonumber",
    ".customer.tax_id | tonumber",
    ".note = (.customer.email | @base64)",
    ".note = (.customer.name | @base64)",
    ".note = (.customer.name | @base32)",
    ".note = (.customer.email | @uri)",
    ".note = (.customer.name | @html)",
    ".note = (.customer.name | @sh)",
    ".note = (.customer.name | @json)",
    ".note = ([.customer.name, .customer.email] | @csv)",
    ".note = (.customer.name | explode)",
    ".note = (.customer.name | explode | implode)",
    r#".note = ([.customer.name | explode[] | tostring] | join(","))"#,
    r#".note = (.customer.name | split("") | join("-"))"#,
    ".note = (.customer.name | explode | reverse | implode)",
    ".note = (.customer.tax_id | .[1:])",
    ".note = (.customer.tax_id | .[2:8])",
    ".customer.tax_id |= .[1:]",
    ".note = (.customer.name * 2)",
    ".note = (.customer.phone | tostring)",
    ".note = (.customer.phone + 1)",
    ".note = (.customer.name | ascii_downcase)",
    ".customer.name |= ascii_upcase",
    ".note = (.customer | tostring)",
    ".note = (.customer | tojson)",
    r#".note = (.customer | to_entries | map(.value | tostring) | join(" "))"#,
    r#".note = (.customer.name | match("(\\w+) (\\w+)") | .captures | map(.string))"#,
    r#".note = (.customer.name | capture("(?<a>\\w+)"))"#,
    r#".note = (.customer.email | split("@")[0])"#,
    r#".note = (.customer.name | ltrimstr("Z") | rtrimstr("y"))"#,
    r#".note = (.customer.name | sub("(?<x>.)"; "\(.x)."))"#,
    ".by = {(.customer.name): 1}",
    ".keys = ({(.customer.email): 1} | keys)",
    ".customer = (.customer | with_entries(.key = .value | .value = 1))",
    r#".note = (.customer.name | test("^Z"))"#,
    ".note = [.customer.name | length, utf8bytelength]",
    "[paths(..)] as $p | .note = ($p | tostring)",
    ".note = (.customer.name | ascii_downcase | explode | map(. + 1) | implode)",
    ".amount |= (gsub(\",\"; \"\") | tonumber)",
];

fn fixture(dir: &std::path::Path) -> String {
    let path = dir.join("evasion.ndjson");
    let mut f = std::fs::File::create(&path).expect("dump");
    for i in 0..2 {
        let payload = serde_json::json!({
            "customer": {
                "name": NAMES[i],
                "email": EMAILS[i],
                "tax_id": TAX_IDS[i],
                "phone": PHONES[i],
            },
            "amount": "1,500.00",
            "note": "",
        });
        let letter = RawLetter {
            coords: Some(Coords::Kafka {
                topic: "fixture.dlq".into(),
                partition: 0,
                offset: i as i64,
            }),
            payload: payload.to_string().into_bytes(),
            headers: vec![dlq_core::conventions::header(
                "x-reason-code",
                dlq_core::model::HeaderValue::text("amount_not_a_number"),
            )],
            timestamp: chrono::DateTime::from_timestamp_millis(1_764_000_000_000 + i as i64),
            ..RawLetter::default()
        };
        writeln!(f, "{}", to_line(&letter, false)).expect("write");
    }
    path.display().to_string()
}

/// Every form in which a secret of the fixture could come out.
fn leaks(text: &str) -> Vec<String> {
    let lower = without_digests(&without_times(&text.to_lowercase()));
    let alnum: String = lower.chars().filter(|c| c.is_alphanumeric()).collect();
    let mut forms: Vec<String> = Vec::new();
    let windows = |s: &str, n: usize| -> Vec<String> {
        let c: Vec<char> = s.chars().collect();
        c.windows(n).map(|w| w.iter().collect()).collect()
    };
    for name in NAMES {
        for word in name.to_lowercase().split(' ') {
            // Any four letters of a name, forwards or backwards (the first shows in
            // the mask's hint, so windows start after it).
            for w in windows(&word[1..], 4) {
                forms.push(w.clone());
                forms.push(w.chars().rev().collect());
            }
            // Its code points, as explode or ascii codes would print them.
            let codes: String = word
                .bytes()
                .skip(1)
                .take(3)
                .map(|b| b.to_string())
                .collect();
            forms.push(codes);
        }
    }
    for digits in TAX_IDS
        .iter()
        .map(|t| t[2..].to_string())
        .chain(PHONES.iter().map(|p| p.to_string()))
    {
        for w in windows(&digits, 5) {
            forms.push(w.clone());
            forms.push(w.chars().rev().collect());
        }
    }
    let secrets: Vec<String> = NAMES
        .iter()
        .chain(EMAILS.iter())
        .chain(TAX_IDS.iter())
        .map(|s| s.to_string())
        .collect();
    for s in &secrets {
        let b64 = base64::engine::general_purpose::STANDARD.encode(s);
        forms.push(b64[..12].to_lowercase());
        forms.push(base32(s.as_bytes())[..12].to_lowercase());
    }
    forms.sort();
    forms.dedup();
    forms
        .into_iter()
        .filter(|f| alnum.contains(f.as_str()))
        .collect()
}

/// RFC 3339 times out (`2026-12-05t10:06:54.321z`, lower-cased): they are the ledger's
/// clock, not a letter's, and their digits joined (`100654321`) hold a window of a
/// secret at some times of day (`65432`, a phone number's backwards) — a check that
/// failed by the hour it ran.
fn without_times(s: &str) -> String {
    let b = s.as_bytes();
    let shape = b"dddd-dd-ddtdd:dd:dd";
    let fits = |at: usize| {
        b.len() >= at + shape.len()
            && shape.iter().zip(&b[at..]).all(|(want, got)| match want {
                b'd' => got.is_ascii_digit(),
                w => w == got,
            })
    };
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if !fits(i) {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += shape.len();
        if b.get(i) == Some(&b'.') {
            i += 1;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        if b.get(i) == Some(&b'z') {
            i += 1;
        } else if matches!(b.get(i), Some(b'+' | b'-')) && b.len() >= i + 6 && b[i + 3] == b':' {
            i += 6;
        }
        out.push(b' ');
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Digests (16+ hex digits) out: their digits would match a window of the secrets by chance.
fn without_digests(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        if run.len() < 16 {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out
}

/// RFC 4648 base32 (no crate here has it), for jq's `@base32`.
fn base32(b: &[u8]) -> String {
    const A: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let (mut acc, mut bits) = (0u32, 0);
    for &x in b {
        acc = (acc << 8) | u32::from(x);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(A[((acc >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(A[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

fn env() -> (Cli, String) {
    let cli = Cli::new(env!("CARGO_BIN_EXE_dlq-triage"));
    let roles = cli.path().join("roles.toml");
    std::fs::write(&roles, "privileged = [\"alice\"]\noperator = [\"bob\"]\n").expect("roles");
    let cli = cli
        .with("DLQ_TRIAGE_ROLES_FILE", roles)
        .with("DLQ_TRIAGE_NOW", "2026-11-29T18:00:00Z");
    let src = fixture(cli.path());
    (cli, src)
}

fn as_user(cli: &Cli, user: &str, args: &[&str]) -> std::process::Output {
    cli.command(args)
        .env("DLQ_TRIAGE_ACTOR", user)
        .output()
        .expect("runs")
}

fn transform(cli: &Cli, user: &str, src: &str, program: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "transform",
        src,
        "-f",
        "age>0s",
        "-e",
        program,
        "--reason",
        "probe",
    ];
    args.extend_from_slice(extra);
    let out = as_user(cli, user, &args);
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(2),
        "{program}: exit {code:?}\n{}",
        stderr(&out)
    );
    scrub(
        cli,
        format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out)),
    )
}

/// What the tool printed, without the scratch directory's random name (the dump, the
/// ledger and the state all live under it): the oracle judges only what the tool derived
/// from the letters — a temporary name whose letters happen to spell part of a name
/// (`…/.tmpnzfJuN` + `/evasion.ndjson` reads `neva`) is no leak.
fn scrub(cli: &Cli, text: String) -> String {
    let scratch = cli.path().display().to_string();
    text.replace(&scratch, "SCRATCH")
}

/// The oracle itself: it finds the secrets in every form the corpus would print them.
#[test]
fn the_oracle_sees_every_form_of_a_secret() {
    let b64 = base64::engine::general_purpose::STANDARD.encode(EMAILS[0]);
    for shown in [
        "Zorblax Quimby".to_string(),
        "z-o-r-b-l-a-x".into(),
        "ybmiuQ".into(),
        "[90,111,114,98]".into(),
        b64,
        base32(NAMES[1].as_bytes()),
        "X9187364520".into(),
        "15551234567".into(),
        "Zorblax%20Quimby".into(),
    ] {
        assert!(!leaks(&shown).is_empty(), "{shown} is not seen as a leak");
    }
    assert!(leaks("Z*** Q***** z***@e***.com [redacted] ‹masked string› 1500").is_empty());
    // The ledger's clock is not a letter's: at 10:06:54.321 its digits hold `65432`.
    assert!(leaks(r#"{"at":"2026-12-05T10:06:54.321Z","seq":3}"#).is_empty());
    assert!(leaks("at 2026-12-05T10:06:54.321+00:00").is_empty());
    assert!(!leaks("at 2026-12-05T10:06:54 [1,555,123,4567]").is_empty());
}

#[test]
fn no_program_gets_a_masked_value_out_of_a_dry_run() {
    let (cli, src) = env();
    let mut compiled = 0;
    for program in EVASIONS {
        for extra in [&["--dry-run"][..], &["--dry-run", "--json"][..]] {
            let out = transform(&cli, "bob", &src, program, extra);
            if out.contains("does not compile")
                || out.contains("compile") && !out.contains("change")
            {
                continue;
            }
            compiled += 1;
            let found = leaks(&out);
            assert!(
                found.is_empty(),
                "{program} {extra:?} shows {found:?}:\n{out}"
            );
        }
    }
    assert!(
        compiled >= EVASIONS.len() * 2 - 6,
        "only {compiled} runs compiled"
    );
    // The repair itself stays readable: values made of unmasked fields are shown.
    let fix = transform(
        &cli,
        "bob",
        &src,
        ".amount |= (gsub(\",\"; \"\") | tonumber)",
        &["--dry-run"],
    );
    assert!(fix.contains("\"1,500.00\" → 1500"), "{fix}");
    // Every dry-run is in the ledger with its program and digest.
    let audit = json(&as_user(&cli, "bob", &["audit", "list", "--json"]));
    let dry: Vec<&serde_json::Value> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"] == "transform-dry-run")
        .collect();
    assert_eq!(dry.len(), compiled + 1, "one entry per dry-run");
    let detail: serde_json::Value =
        serde_json::from_str(dry[0]["detail"].as_str().expect("detail")).expect("json");
    assert_eq!(detail["program"], EVASIONS[0]);
    assert_eq!(detail["letters"], 2);
    assert_eq!(detail["program_sha256"].as_str().map(str::len), Some(64));
    assert_eq!(dry[0]["actor"], "bob");
    // Each dry-run tells a bit per letter: `watch` names a user who runs many.
    let quiet = as_user(
        &cli,
        "bob",
        &["watch", &src, "--once", "--rule", "dry-runs > 100000"],
    );
    assert_eq!(quiet.status.code(), Some(0), "{}", stderr(&quiet));
    let loud = as_user(
        &cli,
        "bob",
        &[
            "watch",
            &src,
            "--once",
            "--json",
            "--rule",
            "dry-runs > 20 for 1h",
        ],
    );
    assert_eq!(loud.status.code(), Some(3), "{}", stderr(&loud));
    let said = String::from_utf8_lossy(&loud.stdout);
    assert!(said.contains("dry-runs by bob"), "{said}");
}

#[test]
fn recorded_revisions_read_back_masked_and_record_no_derived_path() {
    let (cli, src) = env();
    let program = ".note = (.customer.email | @base64) | .by = {(.customer.name): 1} | .amount |= (gsub(\",\"; \"\") | tonumber)";
    let out = transform(&cli, "bob", &src, program, &["--yes"]);
    assert!(out.contains("recorded 2 revisions"), "{out}");
    let list = json(&as_user(&cli, "bob", &["list", &src, "--json"]));
    for l in list["letters"].as_array().expect("letters") {
        let id = l["id"].as_str().expect("id");
        for extra in [&[][..], &["--json"][..]] {
            let mut args = vec!["diff", src.as_str(), id, "--revision", "1"];
            args.extend_from_slice(extra);
            let shown = scrub(&cli, exited(&as_user(&cli, "bob", &args), 0));
            assert!(leaks(&shown).is_empty(), "{:?}:\n{shown}", leaks(&shown));
            assert!(shown.contains("1500"), "the repair is shown:\n{shown}");
            // What the program computes on the masked view: the masked name as a key.
            assert!(shown.contains("***"), "{shown}");
        }
    }
    // The paths each revision records (read by everyone in `audit list`) name no value.
    let audit = scrub(
        &cli,
        exited(&as_user(&cli, "bob", &["audit", "list", "--json"]), 0),
    );
    assert!(leaks(&audit).is_empty(), "{:?}:\n{audit}", leaks(&audit));
    assert!(
        audit.contains(r#"[\"/amount\",\"/by\",\"/note\"]"#),
        "{audit}"
    );
}

#[test]
fn the_privileged_role_sees_the_real_sample_with_an_audit_entry_and_an_operator_is_refused() {
    let (cli, src) = env();
    let program = ".note = (.customer.email | @base64)";
    let refused = as_user(
        &cli,
        "bob",
        &[
            "transform",
            &src,
            "-f",
            "age>0s",
            "-e",
            program,
            "--reason",
            "INC-7",
            "--dry-run",
            "--unmask",
        ],
    );
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        stderr(&refused).contains("privileged"),
        "{}",
        stderr(&refused)
    );
    let shown = transform(&cli, "alice", &src, program, &["--dry-run", "--unmask"]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(EMAILS[0]);
    let b64b = base64::engine::general_purpose::STANDARD.encode(EMAILS[1]);
    assert!(shown.contains(&b64) || shown.contains(&b64b), "{shown}");
    let audit = json(&as_user(&cli, "alice", &["audit", "list", "--json"]));
    let actions: Vec<(String, String)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or_default().to_string(),
                e["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        actions.contains(&("bob".into(), "denied".into())),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("alice".into(), "unmask".into())),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("alice".into(), "transform-dry-run".into())),
        "{actions:?}"
    );
}

/// Passwords as people paste them: every byte but the separators is a marker
/// (`Pq7`, `Wz4`) that must never be printed or stored.
const PASSWORDS: &[&str] = &[
    "Pq7#Wz4",
    "Pq7?Wz4#x",
    "Pq7/Wz4",
    "Pq7@Wz4",
    "Pq7:Wz4",
    "Pq7%Wz4",
    "Pq7%41Wz4",
    "Pq7äWz4✓",
    "Pq7 Wz4",
    "Pq7`Wz4",
    "Pq7'Wz4\"",
];

/// Every URI kind with every hostile password, through the commands that print a source
/// or a ledger — errors included (nothing listens at these ports): no byte of a password
/// in stdout, stderr or the ledger.
#[test]
fn no_password_is_printed_or_stored_whatever_the_uri_looks_like() {
    let (cli, src) = env();
    let mut runs = 0;
    for pw in PASSWORDS {
        let uris = [
            (
                "source",
                format!("amqp://guest:{pw}@127.0.0.1:1/%2F?queue=q"),
            ),
            (
                "source",
                format!("amqps://guest:{pw}@127.0.0.1:1/%2F?queue=q"),
            ),
            ("source", format!("kafka://u:{pw}@127.0.0.1:1/t")),
            ("source", format!("zz://u:{pw}@h/x")),
            ("ledger", format!("postgres://alice:{pw}@127.0.0.1:1/dlq")),
            (
                "ledger",
                format!("postgresql://alice:{pw}@127.0.0.1:1/dlq?sslmode=require"),
            ),
            ("registry", format!("http://u:{pw}@registry.invalid:8081")),
            ("registry", format!("https://u:{pw}@127.0.0.1:1")),
            ("management", format!("http://u:{pw}@10.255.255.1:1")),
        ];
        for (kind, uri) in &uris {
            let commands: Vec<Vec<&str>> = match *kind {
                "source" => vec![
                    vec!["summary", uri],
                    vec!["list", uri, "--json"],
                    vec!["discard", uri, "-f", "age>0s", "--reason", "x", "--yes"],
                ],
                "ledger" => vec![
                    vec!["--ledger", uri, "audit", "verify"],
                    vec![
                        "--ledger", uri, "discard", &src, "-f", "age>0s", "--reason", "x", "--yes",
                    ],
                ],
                "registry" => vec![vec!["--schema-registry", uri, "summary", &src]],
                _ => vec![vec![
                    "--management-url",
                    uri,
                    "queues",
                    "amqps://guest:guest@127.0.0.1:1/%2F?queue=q",
                ]],
            };
            for args in commands {
                let out = as_user(&cli, "bob", &args);
                runs += 1;
                let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
                for marker in ["Pq7", "Wz4"] {
                    assert!(!text.contains(marker), "{args:?} printed {marker}:\n{text}");
                }
                assert_ne!(out.status.code(), Some(101), "{args:?} panicked:\n{text}");
            }
        }
    }
    assert!(runs > 150, "{runs}");
    // Refusals and failures were audited in the default ledger: nothing of a password there.
    let state = cli.path().join("state");
    for entry in walk(&state) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        for marker in [&b"Pq7"[..], b"Wz4"] {
            assert!(
                !bytes.windows(3).any(|w| w == marker),
                "{} holds a password",
                entry.display()
            );
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A `watch --exec` hook that prints its environment sees none of the tool's secrets.
#[test]
fn an_exec_hook_gets_no_secret_in_its_environment() {
    let (cli, src) = env();
    let seen = cli.path().join("env.txt");
    let hook = cli.path().join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\nenv > {}\n", seen.display())).expect("hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = cli
        .command(&[
            "watch",
            &src,
            "--once",
            "--rule",
            "count > 0",
            "--exec",
            &hook.display().to_string(),
        ])
        .env("PGPASSWORD", "Pq7pg")
        .env("DLQ_TRIAGE_AMQP_PASSWORD", "Pq7amqp")
        .env("DLQ_TRIAGE_KAFKA_PASSWORD", "Pq7kafka")
        .env("DLQ_TRIAGE_SCHEMA_REGISTRY_TOKEN", "Pq7tok")
        .env(
            "DLQ_TRIAGE_LEDGER",
            format!("{}", cli.path().join("l.db").display()),
        )
        .env("INNOCENT_SETTING", "kept")
        .output()
        .expect("runs");
    let env = std::fs::read_to_string(&seen)
        .unwrap_or_else(|_| panic!("the hook did not run:\n{}", stderr(&out)));
    assert!(env.contains("INNOCENT_SETTING=kept"), "{env}");
    assert!(!env.contains("Pq7"), "{env}");
    assert!(!env.contains("DLQ_TRIAGE_"), "{env}");
}

/// A program that recognises the masked run (its values hold `***` or `[redacted]`) and
/// makes that run constant, then encodes the real letter through whatever a comparison
/// with the real run would let through. `{real}` is the real branch.
fn recognising(real: &str) -> String {
    format!(
        r#"def masked: ([.. | strings] | any(test("\\*\\*\\*|redacted"))); if masked then .k = "on the masked view" else ({real}) end"#
    )
}

/// Real branches that each encode a customer's data in a channel of their own (#56):
/// keys, arrays of booleans, object sizes, number formatting, sort order, string
/// lengths, and the words of a failure.
const REAL_BRANCHES: &[&str] = &[
    r#".k = {} | reduce range(0; 20) as $i (.; .k["\($i)_\(.customer.email[$i:$i+1])"] = 0)"#,
    r#".k = {} | reduce range(0; 20) as $i (.; .k[.customer.email[$i:$i+1]] = $i)"#,
    ".k = [.customer.name | explode[] | range(0; 8) as $j | ((. / ([1,2,4,8,16,32,64,128][$j])) | floor) % 2 == 1]",
    ".k = (.customer.name | explode | map({(tostring): 1}) | add)",
    ".k = (.customer.phone / 1000)",
    r#".k = ([.customer.name, "M"] | sort)"#,
    r#".k = ("x" * (.customer.tax_id[2:3] | tonumber + 1))"#,
    ".k = (.customer.name | length)",
    r#"error(.customer.name | explode | map(if . > 100 then "i" else "o" end) | join(" "))"#,
    r#".k = (.customer.email | @base64)"#,
];

/// What a run shows that depends on its program text only (the text itself is echoed in
/// no dry-run output, but strip it in case), for comparing two programs' outputs.
fn shown_part(out: &str) -> String {
    out.lines()
        .filter(|l| !l.contains("def masked"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// #56: what an operator sees of a program is what it computes on the masked view —
/// nothing of the real run but whether each letter changed or failed. Each recognising
/// program, whatever its real branch encodes, shows exactly what the same program with
/// a harmless real branch shows: dry-run text and JSON, the recorded paths in `audit
/// list` (as a viewer reads them), and `diff --revision`.
#[test]
fn a_program_that_recognises_the_masked_run_shows_only_what_the_masked_view_computes() {
    let baseline_branch = r#".k = "anything else""#;
    let failing_baseline = r#"error("anything else")"#;
    let (cli, src) = env();
    for real in REAL_BRANCHES {
        let fails = real.starts_with("error(");
        let baseline = recognising(if fails {
            failing_baseline
        } else {
            baseline_branch
        });
        let program = recognising(real);
        for extra in [&["--dry-run"][..], &["--dry-run", "--json"][..]] {
            let out = transform(&cli, "bob", &src, &program, extra);
            let found = leaks(&out);
            assert!(found.is_empty(), "{real} {extra:?} shows {found:?}:\n{out}");
            let base = transform(&cli, "bob", &src, &baseline, extra);
            assert_eq!(
                shown_part(&out),
                shown_part(&base),
                "{real} {extra:?}: the output depends on the real run"
            );
        }
    }
    // Recorded: the paths in the audit log and `diff --revision`, read by a viewer.
    let recorded = |real: &str| {
        let (cli, src) = env();
        let out = transform(&cli, "bob", &src, &recognising(real), &["--yes"]);
        assert!(out.contains("recorded 2 revisions"), "{out}");
        let audit = json(&as_user(&cli, "carol", &["audit", "list", "--json"]));
        let changed: Vec<serde_json::Value> = audit["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["action"] == "edit")
            .map(|e| {
                let d: serde_json::Value =
                    serde_json::from_str(e["detail"].as_str().expect("detail")).expect("json");
                d["changed"].clone()
            })
            .collect();
        let list = json(&as_user(&cli, "bob", &["list", &src, "--json"]));
        let mut diffs = Vec::new();
        for l in list["letters"].as_array().expect("letters") {
            let id = l["id"].as_str().expect("id");
            let shown = scrub(
                &cli,
                exited(
                    &as_user(
                        &cli,
                        "bob",
                        &["diff", &src, id, "--revision", "1", "--json"],
                    ),
                    0,
                ),
            );
            assert!(
                leaks(&shown).is_empty(),
                "{real}: {:?}\n{shown}",
                leaks(&shown)
            );
            diffs.push(shown);
        }
        let audit_text = scrub(&cli, audit.to_string());
        (changed, diffs, audit_text)
    };
    let (base_changed, base_diffs, _) = recorded(baseline_branch);
    for real in REAL_BRANCHES.iter().filter(|r| !r.starts_with("error(")) {
        let (changed, diffs, audit_text) = recorded(real);
        assert_eq!(
            changed, base_changed,
            "{real}: recorded paths depend on the real run"
        );
        assert_eq!(
            diffs, base_diffs,
            "{real}: diff --revision depends on the real run"
        );
        let per_char: Vec<String> = leaks(&audit_text);
        assert!(per_char.is_empty(), "{real}: {per_char:?}");
    }
}

/// #56: a credential is never echoed, whatever the shape of the input — a typo'd or
/// malformed `-X`, a credential in a URL's query, a libpq keyword DSN or a one-slash URL
/// as the ledger, a scheme-less registry with userinfo, a management URL whose password
/// an HTTP client re-encodes. Each through the command that takes it, its error path
/// included (nothing listens at these ports).
#[test]
fn no_credential_is_echoed_whatever_the_shape_of_the_input() {
    let (cli, src) = env();
    let secret = "Pq7SeCrEtWz4";
    let cases: Vec<Vec<String>> = vec![
        vec![
            "-X".into(),
            format!("sasl.passwrd={secret}"),
            "summary".into(),
            "kafka://127.0.0.1:1/t".into(),
        ],
        vec![
            "-X".into(),
            format!("sasl.password {secret}"),
            "summary".into(),
            "kafka://127.0.0.1:1/t".into(),
        ],
        vec![
            "-X".into(),
            secret.into(),
            "summary".into(),
            "kafka://127.0.0.1:1/t".into(),
        ],
        vec![
            format!("-Xssl.key.pasword={secret}"),
            "summary".into(),
            "kafka://127.0.0.1:1/t".into(),
        ],
        vec![
            "summary".into(),
            format!("kafka://127.0.0.1:1/t?sasl.password={secret}"),
        ],
        vec![
            "summary".into(),
            format!("amqp://127.0.0.1:1/%2F?queue=q&password={secret}"),
        ],
        vec![
            "--ledger".into(),
            format!("host=127.0.0.1 port=1 password={secret} dbname=x"),
            "audit".into(),
            "verify".into(),
        ],
        vec![
            "--ledger".into(),
            format!("host=127.0.0.1 password='{secret} x' dbname=x"),
            "discard".into(),
            src.clone(),
            "-f".into(),
            "age>0s".into(),
            "--reason".into(),
            "x".into(),
            "--yes".into(),
        ],
        vec![
            "--ledger".into(),
            format!("postgres:/alice:{secret}@127.0.0.1:1/dlq"),
            "audit".into(),
            "verify".into(),
        ],
        vec![
            "--schema-registry".into(),
            format!("u:{secret}@127.0.0.1:1"),
            "summary".into(),
            src.clone(),
        ],
        vec![
            "--management-url".into(),
            format!("http://u:Pq7'{secret} x@127.0.0.1:1"),
            "queues".into(),
            "amqp://guest:guest@127.0.0.1:1/%2F?queue=q".into(),
        ],
    ];
    for args in &cases {
        // The log too (under the state directory walked below).
        let args: Vec<&str> = ["--log-level", "debug"]
            .into_iter()
            .chain(args.iter().map(String::as_str))
            .collect();
        let out = as_user(&cli, "bob", &args);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        for marker in ["SeCrEt", "Wz4", "SeCr", "%20x"] {
            assert!(!text.contains(marker), "{args:?} printed {marker}:\n{text}");
        }
        assert_ne!(out.status.code(), Some(101), "{args:?} panicked:\n{text}");
        assert!(!text.trim().is_empty(), "{args:?} said nothing");
    }
    for entry in walk(&cli.path().join("state")) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !bytes.windows(6).any(|w| w == b"SeCrEt"),
            "{} holds a credential",
            entry.display()
        );
    }
}

/// #56: an edit of a payload keyed by PII (a map keyed by email): a change under the key
/// the operator sees masked is refused without printing it, nothing recorded; a change
/// of a visible value is recorded, and neither stdout nor the audit log an operator or
/// viewer reads shows the key.
#[test]
fn an_edit_under_a_masked_key_is_refused_and_the_audit_names_no_key() {
    let cli = Cli::new(env!("CARGO_BIN_EXE_dlq-triage"));
    let roles = cli.path().join("roles.toml");
    std::fs::write(&roles, "operator = [\"bob\"]\n").expect("roles");
    let cli = cli.with("DLQ_TRIAGE_ROLES_FILE", roles);
    let dump = cli.path().join("keyed.ndjson");
    let payload = serde_json::json!({"by_email": {EMAILS[0]: {"amount": "1,500.00"}}, "n": 1});
    let letter = RawLetter {
        coords: Some(Coords::Kafka {
            topic: "keyed.dlq".into(),
            partition: 0,
            offset: 0,
        }),
        payload: payload.to_string().into_bytes(),
        ..RawLetter::default()
    };
    std::fs::write(&dump, format!("{}\n", to_line(&letter, false))).expect("dump");
    let src = dump.display().to_string();
    let id = json(&as_user(&cli, "bob", &["list", &src, "--json"]))["letters"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    // An "editor" that applies one sed expression to the file it is given.
    let editor = |expr: &str| {
        let path = cli.path().join(format!("ed-{}.sh", expr.len()));
        std::fs::write(&path, format!("#!/bin/sh\nsed -i -e '{expr}' \"$1\"\n")).expect("editor");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        path
    };
    let edit = |ed: &std::path::Path| {
        let out = cli
            .command(&["edit", &src, &id, "--reason", "probe"])
            .env("DLQ_TRIAGE_ACTOR", "bob")
            .env("EDITOR", ed)
            .env_remove("VISUAL")
            .output()
            .expect("edit");
        (
            out.status.code(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out)),
        )
    };
    let (code, said) = edit(&editor(r#"s/"amount": "[^"]*"/"amount": 1500/"#));
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("a key you see masked"), "{said}");
    assert!(
        leaks(&said).is_empty() && !said.contains("quimby"),
        "{said}"
    );
    let (code, said) = edit(&editor(r#"s/"n": 1/"n": 2/"#));
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("/n"), "{said}");
    let audit =
        String::from_utf8_lossy(&as_user(&cli, "carol", &["audit", "list", "--json"]).stdout)
            .to_string();
    assert!(audit.contains(r#"[\"/n\"]"#), "{audit}");
    assert!(
        leaks(&audit).is_empty() && !audit.contains("quimby"),
        "{audit}"
    );
}
