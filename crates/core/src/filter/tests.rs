use super::*;
use crate::conventions::extract;
use crate::model::{Header, HeaderValue, RawLetter};
use chrono::DateTime;
use proptest::prelude::*;

const NOW: i64 = 1_790_000_000_000;

fn store() -> LetterStore {
    let mut s = LetterStore::new();
    for (id, reason, version, event, age_min, key, attempt) in [
        (
            "m1",
            "customer_tax_profile_missing",
            "release-2026-09-21",
            "invoice.issue.requested",
            10,
            "cus-8812",
            "4",
        ),
        (
            "m2",
            "customer_tax_profile_missing",
            "release-2026-09-14",
            "invoice.issue.requested",
            3000,
            "cus-9120",
            "4",
        ),
        (
            "m3",
            "amount_not_a_number",
            "release-2026-09-21",
            "invoice.cancel.requested",
            70,
            "cus-1",
            "1",
        ),
        (
            "m4",
            "Order <n> not found",
            "2.7.0.0",
            "payment.capture.requested",
            2,
            "acc-42",
            "7",
        ),
    ] {
        let raw = RawLetter {
            headers: vec![
                Header::new("x-message-id", HeaderValue::text(id)),
                Header::new("x-reason-code", HeaderValue::text(reason)),
                Header::new("x-consumer-version", HeaderValue::text(version)),
                Header::new("x-event-type", HeaderValue::text(event)),
                Header::new("x-schema-version", HeaderValue::text("3")),
                Header::new("x-attempt", HeaderValue::text(attempt)),
                Header::new("x-original-topic", HeaderValue::text("invoices")),
            ],
            key: Some(key.as_bytes().to_vec()),
            timestamp: DateTime::from_timestamp_millis(NOW - age_min * 60_000),
            ..RawLetter::default()
        };
        s.push(
            &extract(raw, &[]),
            "{\"customer\":{\"email\":\"j***@e***.com\"}}",
        );
    }
    s
}

fn ids(expr: &str) -> Vec<String> {
    let s = store();
    let mut f = Filter::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    s.rows()
        .iter()
        .filter(|r| f.matches(&s, r, NOW))
        .map(|r| s.id(r).to_string())
        .collect()
}

/// Connectives typed from habit: `and` means what spaces mean; `or` and `not` are
/// refused with the way to say them, never read as fuzzy words that match nothing.
#[test]
fn connectives_are_understood_or_refused_never_fuzzy() {
    assert_eq!(
        ids("reason=customer_tax_profile_missing AND version=release-2026-09-21"),
        ["m1"]
    );
    assert_eq!(
        ids("reason=customer_tax_profile_missing and age<1h"),
        ["m1"]
    );
    for (expr, hint) in [
        ("reason=a or reason=b", "reason=a|b"),
        ("reason=a || reason=b", "reason=a|b"),
        ("not version=r1", "version!=r1"),
    ] {
        let e = Filter::parse(expr).expect_err(expr);
        assert!(e.to_string().contains(hint), "{expr}: {e}");
    }
}

#[test]
fn documented_terms() {
    assert_eq!(ids("reason=customer_tax_profile_missing"), ["m1", "m2"]);
    assert_eq!(
        ids("reason=customer_tax_profile_missing version=release-2026-09-21"),
        ["m1"]
    );
    assert_eq!(ids("event=invoice.*"), ["m1", "m2", "m3"]);
    assert_eq!(ids("event=*.cancel.*|payment.*"), ["m3", "m4"]);
    assert_eq!(ids("schema=3"), ["m1", "m2", "m3", "m4"]);
    assert_eq!(ids("age>1h"), ["m2", "m3"]);
    assert_eq!(ids("age<15m"), ["m1", "m4"]);
    assert_eq!(ids("key=acc-42"), ["m4"]);
    assert_eq!(ids("key=cus-*"), ["m1", "m2", "m3"]);
    assert_eq!(ids("origin=invoices"), ["m1", "m2", "m3", "m4"]);
    assert_eq!(ids("state=open|discarded"), ["m1", "m2", "m3", "m4"]);
    assert_eq!(ids("state=failed-again"), Vec::<String>::new());
    assert_eq!(ids("version!=release-2026-09-21"), ["m2", "m4"]);
    assert_eq!(ids("attempt>=4"), ["m1", "m2", "m4"]);
    assert_eq!(ids("id=m3"), ["m3"]);
    assert_eq!(ids("reason=\"Order <n> not found\""), ["m4"]);
    assert_eq!(ids("body=empty"), ["m1", "m2", "m3", "m4"]);
}

#[test]
fn bare_words_are_fuzzy() {
    assert_eq!(ids("taxprofile"), ["m1", "m2"]);
    assert_eq!(ids("AMOUNT"), ["m3"]);
    assert_eq!(ids("9120"), ["m2"]);
    assert_eq!(ids("tax 8812"), ["m1"]);
    // The preview is masked, so raw PII cannot be searched for.
    assert_eq!(ids("jane"), Vec::<String>::new());
}

#[test]
fn errors_say_what_to_do() {
    for (expr, needle) in [
        ("colour=red", "unknown filter field `colour`"),
        ("age=1h", "age takes < or >"),
        ("age>soon", "not a duration"),
        ("reason>3", "compares with = or !="),
        ("state=lost", "unknown state `lost`"),
        ("reason=\"unclosed", "unclosed quote"),
        ("=x", "missing field name"),
        ("attempt>x", "not a whole number"),
    ] {
        let e = Filter::parse(expr).expect_err(expr).to_string();
        assert!(e.contains(needle), "{expr}: {e}");
    }
}

#[test]
fn glob_and_fuzzy_primitives() {
    assert!(glob("invoice.*", "invoice.issue.requested"));
    assert!(glob("*.requested", "invoice.issue.requested"));
    assert!(glob("a?c", "abc"));
    assert!(!glob("a?c", "abbc"));
    assert!(glob("*", ""));
    assert!(!glob("x*", ""));
    assert_eq!(fuzzy_match("tax", "customer_tax_profile"), Some(0));
    assert!(fuzzy_match("taxprof", "customer_tax_profile").is_some());
    assert!(fuzzy_match("ab", "a long text b").is_none());
    assert!(fuzzy_match("czx", "c..........z.........x").is_none());
}

proptest! {
    #[test]
    fn parser_never_panics(s in "\\PC{0,60}") {
        let _ = Filter::parse(&s);
    }

    #[test]
    fn glob_star_matches_everything(s in "\\PC{0,40}") {
        prop_assert!(glob("*", &s));
        prop_assert!(glob(&s.replace(['*', '?', '\\'], ""), &s.replace(['*', '?', '\\'], "")));
    }

    /// Whatever the text, its quoted form matches it (and the filter parses).
    #[test]
    fn any_text_quoted_matches_itself(s in "\\PC{0,40}") {
        let words = split_quoted(&format!("reason={}", quote_value(&s))).expect("splits");
        prop_assert_eq!(words.len(), 1);
        let alts = alternatives(&words[0]["reason=".len()..]);
        prop_assert_eq!(alts.len(), 1);
        prop_assert!(glob(&alts[0], &s));
        let expr = format!("reason={}", quote_value(&s));
        prop_assert!(Filter::parse(&expr).is_ok(), "{}", expr);
    }
}

#[test]
fn payload_terms_match_fields_as_masked_and_dashed_fields_are_headers() {
    use crate::masking::Masker;
    let m = Masker::with_key(b"k".to_vec());
    let raw = crate::model::RawLetter {
        payload:
            br#"{"customer":{"email":"jane@example.com","tier":"gold"},"lines":[{"sku":"SKU-18"}]}"#
                .to_vec(),
        ..Default::default()
    };
    let dl = crate::catalog::extract_masked(&m, &[], None, raw);
    let mut store = crate::store::LetterStore::new();
    let id = store.push(&dl, "");
    let row = *store.row(id).unwrap();
    let hit = |expr: &str| {
        let mut f = Filter::parse(expr).unwrap();
        assert!(f.needs_letters());
        f.note_letter(&row, &dl, &m);
        f.matches(&store, &row, 0)
    };
    assert!(hit("payload.customer.tier=gold"));
    assert!(hit("payload.customer.tier!=silver"));
    assert!(hit("payload.lines.0.sku=SKU-*"));
    assert!(!hit("payload.customer.email=jane*"), "matched as masked");
    assert!(!hit("payload.nope=*"), "a missing field matches nothing");
    assert!(!hit("payload.nope!=x"));
    // Not judged (no letter seen): no match.
    let mut f = Filter::parse("payload.customer.tier=gold").unwrap();
    assert!(!f.matches(&store, &row, 0));
    for bad in ["header.=x", "payload.=x", "payload.a..b=x"] {
        assert!(Filter::parse(bad).is_err(), "{bad}");
    }
    assert!(
        !Filter::parse("SKU-18").unwrap().needs_letters(),
        "a bare word stays fuzzy"
    );
    assert!(
        Filter::parse("x-error=foo").unwrap().needs_letters(),
        "a header"
    );
}

/// Any value quoted by `quote_value` matches exactly that value and nothing broader:
/// glob characters, `|`, quotes, backslashes, spaces and controls included.
#[test]
fn a_quoted_value_matches_itself_exactly() {
    for label in [
        "SyntaxError: Unexpected token , in JSON at position <n>",
        "a|b",
        "* wildcard? no",
        r#"say "hi" and 'bye'"#,
        r"C:\temp\x1f",
        "token \u{1f} here",
        "",
        "trailing backslash \\",
    ] {
        let q = quote_value(label);
        let words = split_quoted(&format!("reason={q}")).expect("splits");
        assert_eq!(words.len(), 1, "{label:?} → {words:?}");
        let value = &words[0]["reason=".len()..];
        let alts = alternatives(value);
        assert_eq!(alts.len(), 1, "{label:?}: {alts:?}");
        assert!(
            glob(&alts[0], label),
            "{label:?} does not match itself via {q}"
        );
        for other in [
            "x",
            "a",
            "b",
            "SyntaxError: Unexpected token",
            "* wildcard! no",
        ] {
            if other != label {
                assert!(!glob(&alts[0], other), "{q} also matches {other:?}");
            }
        }
    }
    assert!(glob("a*", "abc") && glob(r"a\*", "a*") && !glob(r"a\*", "abc"));
}

/// Bare words are looked for in payloads as masked: a word that is only inside a masked
/// value is "in no payload" (no oracle for what masking hides); one in plain text is
/// found, with a term that selects it.
#[test]
fn bare_words_in_payloads_are_judged_as_masked() {
    use crate::masking::Masker;
    let m = Masker::with_key(b"k".to_vec());
    let raw = crate::model::RawLetter {
        payload: br#"{"customer":{"email":"jane.doe@example.com"},"note":"padding padding padding padding padding","sku":"SKU-18"}"#.to_vec(),
        ..Default::default()
    };
    let dl = crate::catalog::extract_masked(&m, &[], None, raw);
    let mut store = crate::store::LetterStore::new();
    let id = store.push(&dl, "");
    let row = *store.row(id).unwrap();
    let notes = |expr: &str| {
        let mut f = Filter::parse(expr).unwrap();
        assert!(f.wants_letters() && !f.needs_letters(), "{expr}");
        f.note_letter(&row, &dl, &m);
        f.unmatched_notes(0).join("\n")
    };
    let hidden = notes("jane.doe");
    assert!(
        hidden.contains("in no letter's id, key, reason, preview or payload"),
        "{hidden}"
    );
    let found = notes("sku-18");
    assert!(
        found.contains(r#"payload.sku="*SKU-18*" finds them"#),
        "{found}"
    );
    assert!(notes("sku-18").contains("1 letter"));
    // Matched something: nothing to add.
    let mut f = Filter::parse("sku-18").unwrap();
    f.note_letter(&row, &dl, &m);
    assert!(f.unmatched_notes(3).is_empty());
}
