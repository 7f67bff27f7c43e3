use super::*;
use proptest::prelude::*;

fn m() -> Masker {
    Masker::with_key(b"test-key".to_vec())
}

#[test]
fn hints_have_the_documented_shape() {
    let m = m();
    assert_eq!(
        m.mask_value(Class::Email, "jane.doe@example.com"),
        "j***@e***.com"
    );
    assert_eq!(
        m.mask_value(Class::Card, "4242 4242 4242 4242"),
        "**** 4242"
    );
    assert_eq!(
        m.mask_value(Class::Iban, "DE89370400440532013000"),
        "DE** **** 3000"
    );
    assert_eq!(m.mask_value(Class::Name, "Jane Doe"), "J*** D***");
    assert_eq!(m.mask_value(Class::Phone, "+49 170 1234567"), "***67");
    assert_eq!(m.mask_value(Class::Secret, "hunter2"), "[redacted]");
}

#[test]
fn keyed_hash_is_comparable_but_keyed() {
    let cfg = MaskConfig {
        default_action: Some(Action::Hash),
        ..MaskConfig::default()
    };
    let a = Masker::new(&cfg, b"k1".to_vec()).expect("valid");
    let b = Masker::new(&cfg, b"k2".to_vec()).expect("valid");
    let x = a.mask_value(Class::Email, "jane@example.com");
    assert_eq!(x, a.mask_value(Class::Email, "jane@example.com"));
    assert_ne!(x, a.mask_value(Class::Email, "john@example.com"));
    assert_ne!(x, b.mask_value(Class::Email, "jane@example.com"));
    assert!(x.starts_with('#') && !x.contains("jane"));
}

#[test]
fn json_field_rules_and_detectors() {
    let m = m();
    let input = br#"{"customer":{"name":"Jane Doe","email":"jane.doe@example.com","address":{"street":"12 Rue de Rivoli","city":"Paris"},"tax_id":"FR12345678901"},
        "topic_name":"invoices","amount":"1,500.00","note":"call +49 170 1234567 or mail bob@corp.example.net",
        "card":{"number":4242424242424242,"holder_name":"Jane Doe"},"password":"hunter2","Authorization":"Bearer abc.def.ghi",
        "iban":"GB82WEST12345698765432","ok":true,"n":null,"list":[1,2,3]}"#;
    let (out, cut) = m
        .mask_json(input, Layout::Compact, usize::MAX)
        .expect("valid json");
    assert!(!cut);
    for secret in [
        "Jane",
        "jane.doe",
        "Rivoli",
        "Paris",
        "FR12345678901",
        "1234567",
        "bob@",
        "4242424242424242",
        "hunter2",
        "abc.def",
        "GB82WEST",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    for kept in [
        "\"topic_name\":\"invoices\"",
        "\"amount\":\"1,500.00\"",
        "\"ok\":true",
        "\"n\":null",
        "[1,2,3]",
    ] {
        assert!(out.contains(kept), "{kept} missing: {out}");
    }
    let v: serde_json::Value = serde_json::from_str(&out).expect("masked output is JSON");
    assert_eq!(v["customer"]["email"], "j***@e***.com");
    assert_eq!(v["card"]["number"], "**** 4242");
}

#[test]
fn pretty_output_is_valid_json() {
    let (out, _) = m()
        .mask_json(
            br#"{"a":[{"b":{}},[]],"email":"x@y.org"}"#,
            Layout::Pretty,
            usize::MAX,
        )
        .expect("json");
    assert!(out.contains("\n  \"a\": ["), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("pretty output parses");
    assert_eq!(v["email"], "x***@y***.org");
}

#[test]
fn preview_stops_early() {
    let big = format!("{{\"a\":\"{}\",\"b\":1}}", "x".repeat(1000));
    let (out, cut) = m()
        .mask_json(big.as_bytes(), Layout::Compact, 40)
        .expect("json");
    assert!(cut);
    assert!(out.len() <= 40);
}

#[test]
fn broken_json_is_rejected_and_text_fallback_masks_pairs() {
    let m = m();
    for bad in [
        &b"{\"a\":}"[..],
        b"{\"a\" 1}",
        b"{\"a\":1,}",
        b"[1 2]",
        b"{\"a\":1}}",
        b"{'a':1}",
        b"{\"a\":tru}",
    ] {
        assert!(
            m.mask_json(bad, Layout::Compact, usize::MAX).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let broken =
        br#"{"customer":{"email":"jane@example.com","name":"Jane Doe","password": "hunter2""#;
    let (out, _) = m.mask_payload(broken, Layout::Compact, usize::MAX);
    for secret in ["jane@", "Jane Doe", "hunter2"] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
}

#[test]
fn text_detectors_and_pairs() {
    let m = m();
    let out = m.mask_text("password=hunter2&user=bob token: s3cr3t-t0ken Authorization: Bearer eyJhbGciOi.eyJzdWIiOi.sig123456 card 4000 0566 5566 5556 acct 123456789012 order 8812 at 2026-09-21");
    for secret in [
        "hunter2",
        "s3cr3t",
        "eyJhbGciOi",
        "4000 0566",
        "123456789012",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert!(out.contains("order 8812 at 2026-09-21"), "{out}");
    // Non-Luhn 16 digits grouped: not a card, not a run; left alone.
    assert!(m.mask_text("ref 1234 5678 9012 3456").contains("1234 5678"));
}

#[test]
fn headers_by_name_then_detectors() {
    let m = m();
    assert_eq!(
        m.mask_header("Authorization", &HeaderValue::text("Bearer abc")),
        "[redacted]"
    );
    assert_eq!(
        m.mask_header("x-user-email", &HeaderValue::text("a.b@c.com")),
        "a***@c***.com"
    );
    assert_eq!(
        m.mask_header(
            "x-error",
            &HeaderValue::text("no profile for jane@example.com")
        ),
        "no profile for j***@e***.com"
    );
    assert_eq!(m.mask_header("x-attempt", &HeaderValue::Int(4)), "4");
    let death = HeaderValue::Array(vec![HeaderValue::Table(vec![(
        "time".into(),
        HeaderValue::Timestamp(1_790_000_000),
    )])]);
    assert_eq!(
        m.mask_header("x-death", &death),
        "[{time=2026-09-21T14:13:20Z}]"
    );
}

#[test]
fn config_extra_allow_and_actions() {
    let cfg = MaskConfig {
        extra_fields: vec!["internal_note".into()],
        allow_fields: vec!["name".into()],
        actions: [("email".to_string(), Action::Redact)]
            .into_iter()
            .collect(),
        ..MaskConfig::default()
    };
    let m = Masker::new(&cfg, vec![1]).expect("valid");
    let (out, _) = m
        .mask_json(
            br#"{"internal_note":"VIP customer","name":"Widget","email":"a@b.com"}"#,
            Layout::Compact,
            usize::MAX,
        )
        .expect("json");
    assert_eq!(
        out,
        r#"{"internal_note":"V***","name":"Widget","email":"[redacted]"}"#
    );
    assert!(Masker::new(
        &MaskConfig {
            actions: [("emial".to_string(), Action::Hash)].into_iter().collect(),
            ..MaskConfig::default()
        },
        vec![]
    )
    .is_err());
}

#[test]
fn hostile_nesting_and_size() {
    let m = m();
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let (out, _) = m
        .mask_json(deep.as_bytes(), Layout::Pretty, 10_000)
        .expect("deep but valid");
    assert!(out.len() <= 10_000);
    let (out, _) = m.mask_payload(&vec![b'{'; 1_000_000], Layout::Compact, 100);
    assert!(out.len() <= 100);
}

fn secret_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            "[a-z]{1,8}(\\.[a-z]{1,6})?",
            "[a-z]{2,8}",
            "(com|org|net|io|de)"
        )
            .prop_map(|(u, d, t)| format!("{u}@{d}.{t}")),
        prop::sample::select(vec![
            "4242424242424242",
            "4000 0566 5566 5556",
            "5555-5555-5555-4444",
            "378282246310005"
        ])
        .prop_map(String::from),
        prop::sample::select(vec![
            "DE89370400440532013000",
            "GB82 WEST 1234 5698 7654 32",
            "FR1420041010050500013M02606"
        ])
        .prop_map(String::from),
        (
            "[A-Za-z0-9_-]{10,20}",
            "[A-Za-z0-9_-]{10,20}",
            "[A-Za-z0-9_-]{8,16}"
        )
            .prop_map(|(a, b, c)| format!("eyJ{a}.{b}.{c}")),
        "[0-9]{9,15}".prop_map(|d| format!("9{d}")),
        "[0-9]{8,12}".prop_map(|d| format!("+49 {d}")),
    ]
}

/// Text around a secret, ending in a delimiter so the secret stays a separate token.
fn filler() -> impl Strategy<Value = String> {
    "[a-zA-Z ,.:()]{0,12}".prop_map(|s| format!(" {s} "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_detectable_value_survives_text_masking(a in filler(), secret in secret_value(), b in filler()) {
        let out = m().mask_text(&format!("{a}{secret}{b}"));
        prop_assert!(!out.contains(&secret), "{} leaked in {}", secret, out);
    }

    #[test]
    fn no_detectable_value_survives_json_masking(
        keys in prop::collection::vec("[a-z]{1,8}", 1..5),
        secret in secret_value(),
        depth in 0usize..6,
        filler in filler(),
    ) {
        let mut v = serde_json::json!({ keys[0].clone(): format!("{filler}{secret}{filler}") });
        for k in keys.iter().skip(1).take(depth) {
            v = serde_json::json!({ k.clone(): [v, 1, "x"] });
        }
        let text = v.to_string();
        for layout in [Layout::Compact, Layout::Pretty] {
            let (out, _) = m().mask_json(text.as_bytes(), layout, usize::MAX).expect("generated JSON is valid");
            prop_assert!(!out.contains(&secret), "{} leaked in {}", secret, out);
            prop_assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
        }
    }

    #[test]
    fn sensitive_fields_never_show_their_value(key in prop::sample::select(vec!["email", "customer_name", "Password", "api_key", "cardNumber", "iban", "phone_number", "street"]), value in "[a-zA-Z0-9]{6,20}") {
        let doc = serde_json::json!({ "data": { key: value.clone() } }).to_string();
        let (out, _) = m().mask_json(doc.as_bytes(), Layout::Compact, usize::MAX).expect("valid");
        prop_assert!(!out.contains(&value), "{} leaked in {}", value, out);
        let hdr = m().mask_header(key, &HeaderValue::text(&value));
        prop_assert!(!hdr.contains(&value));
        let txt = m().mask_text(&format!("{key}={value} rest"));
        prop_assert!(!txt.contains(&value), "{} leaked in {}", value, txt);
    }

    #[test]
    fn masking_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = m().mask_payload(&bytes, Layout::Pretty, 200);
        let _ = m().mask_text(&String::from_utf8_lossy(&bytes));
    }
}

/// The detector corpus: values that must never survive any output, each with the part
/// that must not be visible, and near-misses that must stay readable. Shared with the
/// end-to-end test over every output format (tests/pii.rs keeps its own copy of the
/// letters it builds from these).
pub const POSITIVES: &[(&str, &str)] = &[
    ("contact jane.doe@example.com today", "jane.doe@example.com"),
    ("JANE@EXAMPLE.CO.UK", "JANE@EXAMPLE"),
    ("card 4111111111111111", "4111111111111111"),
    ("card 4111 1111 1111 1111", "1111 1111 1111"),
    ("card 4111-1111-1111-1111", "1111-1111-1111"),
    ("card 4111.1111.1111.1111", "1111.1111.1111"),
    ("card 4111/1111/1111/1111", "1111/1111/1111"),
    ("card 4111\u{a0}1111\u{a0}1111\u{a0}1111", "1111\u{a0}1111\u{a0}1111"),
    ("ref_4111111111111111", "4111111111111111"),
    ("amex 378282246310005", "378282246310005"),
    ("iban DE89370400440532013000", "370400440532013000"),
    ("iban de89370400440532013000", "370400440532013000"),
    ("xDE89370400440532013000", "370400440532013000"),
    ("GB82 WEST 1234 5698 7654 32", "WEST 1234 5698"),
    ("call +49 30 1234567", "30 1234567"),
    ("call +1 (555) 123-4567", "123-4567"),
    ("call (555) 123-4567", "123-4567"),
    ("call 555-123-4567", "555-123-4567"),
    ("call 030 1234 5678", "1234 5678"),
    ("ssn 123-45-6789", "123-45-6789"),
    ("key AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("key AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "1234567890abcdefghijklmnopqrstuvwxyzAB"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"),
    ("glpat-abcdefghij1234567890", "abcdefghij1234567890"),
    ("xoxb-1234567890-abcdefghij", "1234567890-abcdefghij"),
    ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("bearer 0123456789abcdef", "0123456789abcdef"),
    ("token=Zm9vYmFyYmF6", "Zm9vYmFyYmF6"),
    ("password=hunter2 next", "hunter2"),
    ("pwd=hunter2 next", "hunter2"),
    ("PASSWD: hunter2", "hunter2"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJzdWIiOiIxIn0"),
    ("data eyJlbWFpbCI6ImphbmVAZXhhbXBsZS5jb20ifQ== end", "ImphbmVAZXhhbXBsZS5jb20"),
    ("acct 123456789012", "123456789012"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----", "MIIBOgIBAAJBAKj34"),
];

pub const NEAR_MISSES: &[&str] = &[
    "order 8812 shipped",
    "2026-11-30",
    "2026-11-30T12:00:00Z",
    "host 10.0.0.1 port 5672",
    "version 1.2.3",
    "ref 1234 5678 9012 3456",
    "amount 1,500.00 EUR",
    "qty 12",
    "user@localhost",
    "sk_live",
    "AKIA123",
    "eyJ",
    "the bearer of bad news",
    "123-45-678",
    "000-12-3456",
    "call 555-1234",
    "+12",
    "release-2026-09-21",
    "customer_tax_profile_missing",
    "invoice.issue.requested",
    "java.net.SocketTimeoutException: Read timed out after 30000 ms",
    "msg_01K5TDGG44B67QZ8R2M4X9WJ0N",
    "01K5D03VEAQ1VGB82WEST12345698",
    "sha256:9f86d081884c7d65",
];

#[test]
fn detector_corpus_positives_never_survive_and_near_misses_stay() {
    assert!(super::detectors::all_compiled());
    let m = m();
    for (input, secret) in POSITIVES {
        let text = m.mask_text(input);
        assert!(
            !text.contains(secret),
            "text: {secret:?} survived in {text:?}"
        );
        let doc = serde_json::json!({ "note": input }).to_string();
        for layout in [Layout::Compact, Layout::Pretty] {
            let (json, _) = m
                .mask_json(doc.as_bytes(), layout, usize::MAX)
                .expect("json");
            let decoded: serde_json::Value = serde_json::from_str(&json).expect("valid");
            let note = decoded["note"].as_str().unwrap_or_default();
            assert!(
                !note.contains(secret),
                "json: {secret:?} survived in {note:?}"
            );
        }
        let hdr = m.mask_header("x-note", &HeaderValue::text(input));
        assert!(
            !hdr.contains(secret),
            "header: {secret:?} survived in {hdr:?}"
        );
        let hex = m.mask_binary(input.as_bytes());
        assert!(
            !String::from_utf8_lossy(&hex).contains(secret),
            "binary: {secret:?} survived"
        );
    }
    for near in NEAR_MISSES {
        assert_eq!(m.mask_text(near), *near, "near-miss was masked");
    }
    assert!(super::detectors::rule_count() >= 16);
}

/// The cheap check before the detectors (`Needs`) skips only texts with nothing to
/// find: every corpus text, and random texts with and without a secret in them.
#[test]
fn every_detection_meets_its_rules_condition() {
    assert!(super::detectors::iban_table_matches_the_list());
    // An IBAN with no run of digits (the others also meet the digit-run condition).
    let iban_only = "acct de85a1b2c3d4e5f6g7h8i9 ok";
    let iban_last = "acct DE85A1B2C3D4E5F6G7H8I9";
    for text in [iban_only, iban_last] {
        assert!(
            !super::detectors::detect(text.as_bytes()).is_empty(),
            "{text}"
        );
    }
    for text in POSITIVES
        .iter()
        .map(|(t, _)| *t)
        .chain(NEAR_MISSES.iter().copied())
        .chain([iban_only, iban_last])
    {
        assert!(super::detectors::gate_is_sound(text.as_bytes()), "{text:?}");
        assert!(
            !super::detectors::detect(text.as_bytes()).is_empty()
                || NEAR_MISSES.contains(&text)
                || text.contains('=')
                || text.contains(':'),
            "{text:?} found nothing"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn the_check_before_the_detectors_never_skips_a_detection(
        a in "[a-zA-Z0-9 \\-./()+@_]{0,40}",
        secret in secret_value(),
        digits in "[0-9]{1,4}([ .\\-/()]{0,3}[0-9]{1,4}){0,6}",
        b in "[a-zA-Z0-9 \\-./()+@_]{0,40}",
        which in 0u8..3,
    ) {
        let text = match which {
            0 => format!("{a}{secret}{b}"),
            1 => format!("{a}{digits}{b}"),
            _ => format!("{a}{b}"),
        };
        prop_assert!(super::detectors::gate_is_sound(text.as_bytes()), "{:?}", text);
    }
}

#[test]
fn adversarial_inputs_are_masked_in_one_pass() {
    // These were quadratic with the hand-written scanners ("1 " × 150,000 took over a
    // minute). Not a timing assertion: the test runs in milliseconds now, and a
    // regression would make the suite visibly slow rather than flaky.
    let m = m();
    for input in [
        "1 ".repeat(150_000),
        "a.".repeat(150_000),
        "eyJ.".repeat(100_000),
        "+1 ".repeat(100_000),
        "DE00".repeat(100_000),
        "x@".repeat(150_000),
    ] {
        let out = m.mask_text(&input);
        assert!(!out.is_empty());
    }
}

#[test]
fn bounded_masking_never_shows_a_token_split_by_the_cut() {
    let m = m();
    // A card straddling every possible cut point near the budget.
    for shift in 0..40 {
        // The cut falls at 100 + 2 × 1024 bytes: put the card across it.
        let text = format!("{}4111 1111 1111 1111 tail", "x".repeat(2148 - 20 + shift));
        let (out, cut) = m.mask_text_bounded(&text, 100);
        assert!(cut);
        assert!(!out.contains("4111"), "split card shown: {out}");
    }
    let big = "note jane@example.com ".repeat(100_000);
    let (out, cut) = m.mask_payload(big.as_bytes(), Layout::Pretty, 4096);
    assert!(cut && out.len() <= 4096 && !out.contains("jane@"));
}

#[test]
fn overlapping_spans_never_show_a_byte_of_either() {
    let m = m();
    // A pair whose value runs into a detected token past its end, and a detected token
    // that runs into a pair: the union is hidden.
    let out = m.mask_text("token=abc4111111111111111 rest");
    assert!(!out.contains("4111") && !out.contains("abc"), "{out}");
    let out = m.mask_text("x Bearer pin=1234)5678xyz tail");
    assert!(!out.contains("5678xyz"), "{out}");
    // A span inside another keeps the outer one's readable form.
    assert!(m
        .mask_text("Authorization: Bearer abc.def-ghi_jkl")
        .starts_with("Authorization: "));
}

/// A token before a colon reads as a field name; the pair's mask must not show it.
#[test]
fn a_secret_that_looks_like_a_field_name_is_hidden_with_its_value() {
    let secret = "eyJ0-A0_-aaa0.C-VC_a-0A-.0__A0AaA";
    let out = m().mask_text(&format!(" :a {secret} :a "));
    assert!(!out.contains(secret), "{out}");
    assert!(!out.contains("eyJ0"), "{out}");
}

/// The table-order semantics the one-pass lookup must keep: exact names first, then the
/// first `CONTAINS_RULES` token (in table order) the name contains.
fn class_by_scanning(n: &str) -> Option<Class> {
    if let Some((_, c)) = EXACT_RULES.iter().find(|(t, _)| *t == n) {
        return Some(*c);
    }
    CONTAINS_RULES
        .iter()
        .find(|(t, _)| n.contains(t))
        .map(|(_, c)| *c)
}

#[test]
fn the_one_pass_field_lookup_agrees_with_the_tables_in_order() {
    let tokens: Vec<&str> = EXACT_RULES
        .iter()
        .chain(CONTAINS_RULES)
        .map(|(t, _)| *t)
        .chain(["", "x", "order", "topic", "amount", "id"])
        .collect();
    let mut checked = 0;
    for a in &tokens {
        for b in &tokens {
            // Overlaps across the seam (`emailpassword`, `passwordemail`, `xtokenx`).
            for n in [format!("{a}{b}"), format!("x{a}{b}x")] {
                assert_eq!(static_class(&n), class_by_scanning(&n), "`{n}`");
                checked += 1;
            }
        }
    }
    assert!(checked > 5_000);
    assert_eq!(static_class("passwordemail"), Some(Class::Secret));
    assert_eq!(static_class("emailaddress"), Some(Class::Email));
    assert_eq!(static_class("name"), Some(Class::Name));
    assert_eq!(static_class("topicname"), None);
}

proptest! {
    #[test]
    fn the_one_pass_field_lookup_agrees_on_any_name(n in "[a-z]{0,40}") {
        prop_assert_eq!(static_class(&n), class_by_scanning(&n));
    }
}

#[test]
fn remembered_masks_are_the_masks_of_their_own_policy() {
    let hint = m();
    let hash = Masker::new(
        &MaskConfig {
            default_action: Some(Action::Hash),
            ..MaskConfig::default()
        },
        b"test-key".to_vec(),
    )
    .expect("valid config");
    let text = "customer jane.doe@example.com not found";
    // Twice each, interleaved on one thread: the second call is the memo's.
    for _ in 0..2 {
        assert_eq!(hint.mask_text(text), "customer j***@e***.com not found");
        assert!(
            hash.mask_text(text).starts_with("customer #"),
            "{}",
            hash.mask_text(text)
        );
        assert_eq!(hint.mask_if_needed("customer_tax_profile_missing"), None);
    }
    // A clone is the same policy; it gets the same answers.
    assert_eq!(hint.clone().mask_text(text), hint.mask_text(text));
}

#[test]
fn the_memo_is_bounded_and_long_texts_bypass_it() {
    let m = m();
    for i in 0..(MEMO_ENTRIES + 10) {
        assert_eq!(m.mask_if_needed(&format!("reason-{i}")), None);
    }
    assert!(MEMO.with(|memo| memo.borrow().seen.len()) <= MEMO_ENTRIES);
    let long = format!("{} jane.doe@example.com", "x".repeat(MEMO_TEXT));
    assert!(m.mask_text(&long).ends_with("j***@e***.com"));
    assert!(MEMO.with(|memo| !memo.borrow().seen.contains_key(long.as_str())));
}
