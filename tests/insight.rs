//! "Why" on the example incident (the demo's story as a dump): the amount group says
//! what changed in its payloads and the program it suggests repairs every letter of the
//! group as the demo's consumer judges them; the tax-profile group names the release it
//! started with; a viewer learns when, never what the payloads hold.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test stops on a broken fixture

use dlq_app::brokers::file::FileSource;
use dlq_app::insight::{group_insight, Insight};
use dlq_core::access::Role;
use dlq_core::catalog::{prepare_letter, Catalog};
use dlq_core::masking::Masker;
use dlq_core::model::DeadLetter;
use dlq_core::ports::{DlqSource, ScanEvent};
use dlq_core::store::RowId;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

const NOW: &str = "2026-11-29T18:00:00Z";

fn now_ms() -> i64 {
    chrono::DateTime::parse_from_rfc3339(NOW)
        .expect("valid")
        .timestamp_millis()
}

/// The example incident as a catalog, with every letter's bytes at hand.
fn incident() -> (Catalog, HashMap<RowId, Arc<DeadLetter>>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson");
    let masker = Masker::with_key(b"insight-test".to_vec());
    let mut catalog = Catalog::new(masker.clone(), Vec::new());
    let mut letters = HashMap::new();
    let mut src = FileSource::open(&path).expect("dump");
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(raws) = ev {
            for raw in raws {
                let (dl, preview) = prepare_letter(&masker, &[], raw);
                let row = catalog.store.push(&dl, &preview);
                letters.insert(row, Arc::new(dl));
            }
        }
        ControlFlow::Continue(())
    })
    .expect("scan");
    (catalog, letters)
}

fn of_reason(c: &Catalog, reason: &str) -> Vec<RowId> {
    let s = &c.store;
    (0..s.len() as RowId)
        .filter(|&i| s.row(i).is_some_and(|r| s.sym(r.reason) == reason))
        .collect()
}

fn why(
    c: &Catalog,
    letters: &HashMap<RowId, Arc<DeadLetter>>,
    reason: &str,
    role: Role,
) -> Insight {
    let rows = of_reason(c, reason);
    assert!(!rows.is_empty(), "the example has {reason} letters");
    group_insight(c, &rows, &|r| letters.get(&r).cloned(), role, now_ms(), 24)
}

#[test]
fn the_amount_group_names_its_change_and_the_fix_repairs_every_letter() {
    let (c, letters) = incident();
    let w = why(&c, &letters, "amount_not_a_number", Role::Operator);
    let p = w
        .payloads
        .as_ref()
        .expect("an operator sees the differences");
    let n = of_reason(&c, "amount_not_a_number").len();
    let first = &p.differences[0];
    assert!(
        first.line.starts_with(&format!(
            "/payload/amount: string \"1,500.00\"- or \"12.50\"-like in {n} of {n}; number in "
        )),
        "{:#?}",
        p.differences
    );
    assert_eq!(first.group, (n, n));
    assert!(
        w.since
            .sentence
            .contains("was already failing other letters"),
        "{}",
        w.since.sentence
    );
    let fix = p.suggestion.as_ref().expect("a suggested program");
    // The program, run as the transform runs it, on every letter of the group.
    let program = dlq_transform::Program::compile(&fix.program).expect("the program compiles");
    for row in of_reason(&c, "amount_not_a_number") {
        let dl = &letters[&row];
        let out = program.run(dl.readable_payload(), 1 << 20).expect("runs");
        let before: serde_json::Value =
            serde_json::from_slice(dl.readable_payload()).expect("json");
        let after: serde_json::Value = serde_json::from_slice(&out).expect("json out");
        let was = before["payload"]["amount"]
            .as_str()
            .expect("a string amount");
        let want: f64 = was.replace(',', "").parse().expect("a number in text");
        assert_eq!(after["payload"]["amount"].as_f64(), Some(want), "{was}");
        // Nothing else changes.
        let mut rest = after.clone();
        rest["payload"]["amount"] = before["payload"]["amount"].clone();
        assert_eq!(rest, before);
    }
}

#[test]
fn the_tax_group_names_the_release_it_started_with() {
    let (c, letters) = incident();
    let w = why(&c, &letters, "customer_tax_profile_missing", Role::Operator);
    assert!(
        w.since.sentence.starts_with("started ")
            && w.since
                .sentence
                .contains(" ago with release-2026-09-21; no letter of release-2026-09-14 since "),
        "{}",
        w.since.sentence
    );
    assert_eq!(w.since.versions.len(), 2);
    assert_eq!(
        w.since.versions.iter().map(|v| v.count).sum::<usize>(),
        of_reason(&c, "customer_tax_profile_missing").len()
    );
    // Its payloads have the shape of the other invoices: no fix to suggest.
    let p = w.payloads.as_ref().expect("differences");
    assert!(p.suggestion.is_none(), "{:#?}", p.differences);
}

/// A viewer sees no payloads, so nothing derived from them: when and with which
/// release, yes; shapes, values and programs, no.
#[test]
fn a_viewer_learns_when_but_nothing_of_the_payloads() {
    let (c, letters) = incident();
    let w = why(&c, &letters, "amount_not_a_number", Role::Viewer);
    let said = w
        .payloads
        .as_ref()
        .expect_err("no payload differences for a viewer");
    assert!(said.contains("operator role"), "{said}");
    let text = w.lines(now_ms()).join("\n");
    assert!(
        !text.contains("/payload") && !text.contains("tonumber"),
        "{text}"
    );
    assert!(text.contains("release-2026-09-21"), "{text}");
}

/// The shapes are read from the masked view: no line of the insight holds a value the
/// masked view hides (the example's emails, names and tax ids).
#[test]
fn no_unmasked_value_reaches_the_insight() {
    let (c, letters) = incident();
    for reason in [
        "amount_not_a_number",
        "customer_tax_profile_missing",
        "gateway_timeout",
    ] {
        let rows = of_reason(&c, reason);
        if rows.is_empty() {
            continue;
        }
        let w = why(&c, &letters, reason, Role::Operator);
        let text = w.lines(now_ms()).join("\n");
        for row in rows.iter().take(50) {
            let raw: serde_json::Value =
                serde_json::from_slice(letters[row].readable_payload()).unwrap_or_default();
            for secret in [
                raw.pointer("/payload/customer/email"),
                raw.pointer("/payload/customer/name"),
                raw.pointer("/payload/customer/tax_id"),
            ]
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            {
                assert!(!text.contains(secret), "{secret} in:\n{text}");
            }
        }
    }
}
