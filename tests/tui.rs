//! The TUI on a fixed dump and a fixed clock: whole screens driven by key sequences
//! (insta snapshots of `TestBackend`), hostile payloads, and what reaches the terminal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

use chrono::DateTime;
use crossterm::event::KeyCode;
use dlq_app::brokers::file::FileSource;
use dlq_core::catalog::{prepare_letter, Catalog};
use dlq_core::dump::to_line;
use dlq_core::masking::Masker;
use dlq_core::model::{Coords, Header, HeaderValue, RawLetter};
use dlq_core::ports::{DlqSource, ScanEvent, SourceInfo};
use dlq_testkit::tui::{key, press, screen};
use dlq_tui::action::{Act, BrowseEvent, LedgerEvent, Nav, Typing};
use dlq_tui::action::{Action, Request};
use dlq_tui::state::AppState;
use dlq_tui::theme::Theme;
use dlq_tui::update::update;
use dlq_tui::{action_for_event, run_loop, views, AppEvent};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const NOW: &str = "2026-11-29T18:00:00Z";

fn now_ms() -> i64 {
    DateTime::parse_from_rfc3339(NOW)
        .expect("valid")
        .timestamp_millis()
}

/// A state loaded from a dump the way the worker would feed it.
fn state_from(path: &Path, size: (u16, u16)) -> AppState {
    let masker = Masker::with_key(b"tui-test".to_vec());
    let mut src = FileSource::open(path).expect("dump");
    let mut batch = Vec::new();
    src.scan(&mut |ev| {
        if let ScanEvent::Letters(raws) = ev {
            batch.extend(
                raws.into_iter()
                    .map(|raw| prepare_letter(&masker, &[], raw)),
            );
        }
        ControlFlow::Continue(())
    })
    .expect("scan");
    let info = SourceInfo {
        label: format!(
            "file://{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("")
        ),
        browse_effect: "File: read-only, the dump is never modified".into(),
    };
    let mut s = AppState::new(info, Catalog::new(masker, Vec::new()), now_ms(), 64 << 20);
    update(
        &mut s,
        Action::from(BrowseEvent::Letters(
            batch.into_iter().map(Into::into).collect(),
        )),
        size,
    );
    update(&mut s, Action::from(BrowseEvent::ScanDone), size);
    s
}

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/incident.ndjson")
}

#[test]
fn first_screen_tells_the_incident_at_200x60() {
    let size = (200, 60);
    let s = state_from(&example(), size);
    let text = screen(&s, size);
    insta::assert_snapshot!("first_screen_200x60", text);
    assert!(text.contains("▾ customer_tax_profile_missing"));
    assert!(text.contains("429 letters"));
}

/// Under `--since` the title says the count is of the window, not of the whole DLQ.
#[test]
fn the_title_says_when_since_left_older_letters_out() {
    let size = (200, 60);
    let mut s = state_from(&example(), size);
    s.since_ms = Some(now_ms() - 2 * 3_600_000);
    assert!(screen(&s, size).contains("429 letters in the last 2h ·"));
}

#[test]
fn first_screen_at_80x24() {
    let size = (80, 24);
    let s = state_from(&example(), size);
    insta::assert_snapshot!("first_screen_80x24", screen(&s, size));
}

/// `z` at 80×24: the focused pane fills the body (the payload of a letter gets the
/// whole screen instead of 44×10), the other panes are gone, `z` again restores them.
#[test]
fn z_zooms_the_focused_pane_at_80x24_and_restores_it() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(
        &mut s,
        &["j", "j", "j", "j", "j", "j", "Enter", "Tab", "Tab", "3"],
        size,
    );
    let before = screen(&s, size);
    press(&mut s, &["z"], size);
    let zoomed = screen(&s, size);
    assert!(!zoomed.contains("Groups"), "{zoomed}");
    assert!(zoomed.contains("3 Payload"), "{zoomed}");
    let payload_lines = |t: &str| t.lines().filter(|l| l.contains("\": ")).count();
    assert!(
        payload_lines(&zoomed) > payload_lines(&before) + 5,
        "before:\n{before}\nzoomed:\n{zoomed}"
    );
    assert!(!zoomed.contains("@example.com"), "{zoomed}");
    for pane in ["BackTab", "BackTab"] {
        press(&mut s, &[pane], size);
        screen(&s, size);
    }
    press(&mut s, &["z"], size);
    assert!(screen(&s, size).contains("Groups"));
}

/// Ctrl-Z in the TUI is a key (raw mode), not job control: suspending would freeze a
/// replay with letters in flight. It says what to use instead, whole, at 80×24, and the
/// TUI stays.
#[test]
fn ctrl_z_says_what_to_use_instead_and_the_tui_stays() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(&mut s, &["Ctrl-z"], size);
    let shown = screen(&s, size);
    assert!(
        shown.contains("Ctrl-Z does not suspend the TUI: p pauses a replay, q quits"),
        "{shown}"
    );
    assert!(shown.contains("Groups"), "{shown}");
}

/// `?` at 80×24: one column, each binding's text wrapped whole; the end of the list is
/// reached by scrolling (j, PgDn), and any other key closes it.
#[test]
fn help_at_80x24_wraps_and_scrolls_to_its_end() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(&mut s, &["?"], size);
    let first = screen(&s, size);
    assert!(first.contains("j/k PgDn/PgUp scroll"), "{first}");
    assert!(
        !first.contains("quit (the broker is left as it was)"),
        "{first}"
    );
    press(
        &mut s,
        &["PageDown", "PageDown", "PageDown", "PageDown", "PageDown"],
        size,
    );
    let end = screen(&s, size);
    assert!(end.contains("quit (the broker is left as it was)"), "{end}");
    assert!(
        end.contains("group DIMS"),
        "the palette's line, last: {end}"
    );
    press(&mut s, &["x"], size);
    assert!(!screen(&s, size).contains("j/k PgDn/PgUp scroll"));
}

#[test]
fn navigate_to_a_letter_and_its_masked_payload() {
    let size = (140, 44);
    let mut s = state_from(&example(), size);
    // Down to amount_not_a_number, open it, into the letters, payload tab.
    // Tree: tax ▾, r2 ▾, <5m, 5m-1h, 1h-24h, r1 ▸, amount ▸ — six rows down.
    press(
        &mut s,
        &["j", "j", "j", "j", "j", "j", "Enter", "Tab", "3"],
        size,
    );
    let text = screen(&s, size);
    insta::assert_snapshot!("amount_payload", text);
    assert!(text.contains("Letters  amount_not_a_number"), "{text}");
    assert!(text.contains("\"amount\": \""), "{text}");
    assert!(
        !text.contains("@example.com")
            && !text.contains("@corp.example.net")
            && !text.contains("@mail.example.org"),
        "unmasked email on screen:\n{text}"
    );
    // `y` copies the masked view and claims nothing until the copy says what it did.
    let before = s.message.clone();
    let cmds = press(&mut s, &["y"], size);
    let copied = cmds.iter().find_map(|c| match c {
        dlq_tui::action::Command::Copy(t) => Some(t.clone()),
        _ => None,
    });
    let copied = copied.expect("y asks for a copy");
    assert!(copied.contains("\"amount\": \"") && !copied.contains("@example.com"));
    assert_eq!(s.message, before, "no claim before the copy reports");
    let failed = Err("nothing copied: no clipboard here".to_string());
    update(&mut s, Action::from(BrowseEvent::Copied(failed)), size);
    assert!(screen(&s, size).contains("nothing copied: no clipboard here"));
}

#[test]
fn filter_grouping_help_and_diff() {
    let size = (140, 44);
    let mut s = state_from(&example(), size);
    press(&mut s, &["f"], size);
    // The expression input starts with the current filter (empty); type a new one.
    press(
        &mut s,
        &[":reason=attempt_budget_exhausted version=v3.4.0", "Enter"],
        size,
    );
    let filtered = screen(&s, size);
    assert!(
        filtered.contains("26 match · filter: reason=attempt_budget"),
        "{filtered}"
    );
    press(&mut s, &["Esc", "b"], size);
    let regrouped = screen(&s, size);
    assert!(regrouped.contains("Groups  reason › age"), "{regrouped}");
    press(&mut s, &["?"], size);
    let help = screen(&s, size);
    assert!(
        help.contains("fuzzy filter") && help.contains("why the group fails"),
        "{help}"
    );
    press(&mut s, &["PageDown"], size);
    assert!(screen(&s, size).contains("quit"), "help scrolls to its end");
    press(&mut s, &["Esc", "Tab", " ", "Down", "D"], size);
    let diff = screen(&s, size);
    assert!(
        diff.contains("marked pm_") && diff.contains("→ selected pm_") && !diff.contains("row "),
        "{diff}"
    );
    insta::assert_snapshot!("diff_tab", diff);
}

#[test]
fn bad_filter_says_why_and_keeps_the_view() {
    let size = (120, 30);
    let mut s = state_from(&example(), size);
    press(&mut s, &["f", ":colour=red", "Enter"], size);
    let text = screen(&s, size);
    assert!(
        text.contains("bad filter: unknown filter field `colour`"),
        "{text}"
    );
    assert!(text.contains("429 letters"));
    // At 80 columns the message does not fit: it says where it is whole.
    let size = (80, 24);
    press(&mut s, &["f", ":colour=red", "Enter"], size);
    let text = screen(&s, size);
    let last = text.lines().last().expect("footer");
    assert!(last.ends_with("(:notes)"), "{last}");
    press(&mut s, &[":", ":notes", "Enter"], size);
    let notes = screen(&s, (200, 40));
    assert!(notes.contains("(fields: reason"), "{notes}");
}

#[test]
fn hostile_payload_renders_as_visible_escapes() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("evil.ndjson");
    let evil = RawLetter {
        coords: Some(Coords::Kafka {
            topic: "evil.dlq".into(),
            partition: 0,
            offset: 1,
        }),
        key: Some(b"k\x1b[31mred".to_vec()),
        headers: vec![Header::new(
            "x-error",
            HeaderValue::text("Boom: \u{1b}]0;pwned\u{7} \u{202e}gnp.exe"),
        )],
        properties: vec![],
        payload: b"{\"note\":\"\\u001b]52;c;cm0gLXJmIH4=\\u0007\\u001b[2J\"}".to_vec(),
        timestamp: DateTime::from_timestamp_millis(now_ms() - 60_000),
    };
    let mut f = std::fs::File::create(&path).expect("create");
    writeln!(f, "{}", to_line(&evil, false)).expect("write");
    let size = (120, 30);
    let mut s = state_from(&path, size);
    for tab in ["1", "2", "3"] {
        press(&mut s, &[tab], size);
        let text = screen(&s, size);
        assert!(
            !text
                .chars()
                .any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{202e}'),
            "raw control on screen:\n{text}"
        );
        if tab == "3" {
            assert!(text.contains("\\u001b]52;c;"), "{text}");
        }
        if tab == "2" {
            assert!(
                text.contains("\\x1b]0;pwned\\x07") && text.contains("\\u{202e}"),
                "{text}"
            );
        }
    }
}

/// A writer that counts what reaches the "terminal".
#[derive(Clone, Default)]
struct Counting(Arc<Mutex<Vec<u8>>>);

impl Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn idle_writes_nothing_and_a_move_writes_only_changed_cells() {
    let size = (120, 40);
    let mut state = state_from(&example(), size);
    let out = Counting::default();
    let bytes = out.0.clone();
    let len = move || bytes.lock().map(|b| b.len()).unwrap_or(0);
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let backend = ratatui::backend::CrosstermBackend::new(out);
        let mut terminal = Terminal::with_options(
            backend,
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(
                    0, 0, size.0, size.1,
                )),
            },
        )
        .expect("terminal");
        let theme = Theme::load(Some("default")).expect("theme");
        run_loop(
            &mut terminal,
            &mut state,
            &theme,
            &rx,
            |_| {},
            now_ms,
            Duration::from_millis(20),
        )
        .expect("loop");
    });
    let first_frame = written_past(&len, 0);
    assert!(
        first_frame > 1000,
        "the first frame draws the screen ({first_frame} bytes)"
    );
    std::thread::sleep(Duration::from_millis(400)); // ~20 idle ticks
    assert_eq!(
        len(),
        first_frame,
        "an idle TUI must not write to the terminal"
    );
    tx.send(AppEvent::Term(key(KeyCode::Char('j'))))
        .expect("loop alive");
    let moved = written_past(&len, first_frame) - first_frame;
    assert!(
        moved > 0 && moved * 4 < first_frame,
        "a selection move wrote {moved} bytes (full frame {first_frame})"
    );
    tx.send(AppEvent::Term(key(KeyCode::Char('q'))))
        .expect("loop alive");
    handle.join().expect("loop ends on q");
}

/// What the loop has written once it wrote past `past` bytes and then nothing for 100 ms
/// (a frame goes out in many writes): waited for, however slow the machine, not slept
/// on. After 30 s, whatever there is, for the caller's assertion to show.
fn written_past(len: &impl Fn() -> usize, past: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (mut last, mut still) = (len(), 0);
    while (last <= past || still < 5) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = len();
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    last
}

/// The clock moves while events stream in (the demo's trickle never lets the loop idle
/// for its tick): two simulated minutes later, the ages are two minutes older.
#[test]
fn the_clock_moves_while_events_keep_arriving() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let size = (120, 40);
    let state = state_from(&example(), size);
    let clock = Arc::new(AtomicI64::new(now_ms()));
    let (tx, rx) = mpsc::channel();
    let read = clock.clone();
    let handle = std::thread::spawn(move || {
        let mut state = state;
        let mut terminal = Terminal::new(TestBackend::new(size.0, size.1)).expect("terminal");
        let theme = Theme::load(Some("mono")).expect("theme");
        run_loop(
            &mut terminal,
            &mut state,
            &theme,
            &rx,
            |_| {},
            move || read.load(Ordering::Relaxed),
            Duration::from_secs(5),
        )
        .expect("loop");
        state
    });
    // Events every 10 ms, far more often than the 5 s tick; the clock jumps 2 minutes.
    for i in 0..60 {
        if i == 10 {
            clock.fetch_add(120_000, Ordering::Relaxed);
        }
        tx.send(AppEvent::Action(Action::from(Nav::Down)))
            .expect("loop alive");
        std::thread::sleep(Duration::from_millis(10));
    }
    tx.send(AppEvent::Term(key(KeyCode::Char('q'))))
        .expect("loop alive");
    let state = handle.join().expect("loop ends on q");
    assert_eq!(state.now_ms, now_ms() + 120_000, "the clock stood still");
}

/// A state fed `raws` as one scan, with a payload cache of `budget` bytes.
fn state_of(label: &str, raws: Vec<RawLetter>, budget: usize, size: (u16, u16)) -> AppState {
    let masker = Masker::with_key(vec![1]);
    let batch = raws
        .into_iter()
        .map(|raw| prepare_letter(&masker, &[], raw).into())
        .collect();
    let info = SourceInfo {
        label: label.into(),
        browse_effect: String::new(),
    };
    let mut s = AppState::new(info, Catalog::new(masker, Vec::new()), now_ms(), budget);
    update(&mut s, Action::from(BrowseEvent::Letters(batch)), size);
    update(&mut s, Action::from(BrowseEvent::ScanDone), size);
    s
}

/// A held RabbitMQ letter whose bytes the payload budget pushed out cannot be fetched
/// again: the detail pane says "payload not kept" and shows what the index still holds
/// (id, where it sits, reason, version), not "no letter selected".
#[test]
fn a_letter_past_the_payload_budget_says_payload_not_kept() {
    let base = now_ms();
    let raws = (0..40u64)
        .map(|i| RawLetter {
            coords: Some(Coords::Amqp {
                vhost: "/".into(),
                queue: "orders.dlq".into(),
                position: i + 1,
                stream_offset: None,
            }),
            headers: vec![
                Header::new("x-reason-code", HeaderValue::text("amount_not_a_number")),
                Header::new("x-consumer-version", HeaderValue::text("v2.3.0")),
            ],
            properties: vec![("message_id".into(), format!("m-{i}"))],
            payload: format!("{{\"pad\":\"{}\"}}", "x".repeat(4000)).into_bytes(),
            // The first delivered is the oldest: last in the list, first out of the cache.
            timestamp: DateTime::from_timestamp_millis(base - (40 - i as i64) * 1000),
            ..RawLetter::default()
        })
        .collect();
    let size = (120, 40);
    // Room for a few letters of 4 KiB, not forty.
    let label = "amqp://guest:***@rabbit/%2f?queue=orders.dlq";
    let mut s = state_of(label, raws, 32 << 10, size);
    press(&mut s, &["Tab", "j"], size);
    let kept = screen(&s, size);
    assert!(
        kept.contains("m-38") && !kept.contains("payload not kept"),
        "{kept}"
    );
    press(&mut s, &["G"], size);
    let gone = screen(&s, size);
    assert!(gone.contains("payload not kept"), "{gone}");
    assert!(!gone.contains("no letter selected"), "{gone}");
    for fact in [
        "m-0",
        "orders.dlq#1",
        "amount_not_a_number",
        "v2.3.0",
        "open",
    ] {
        assert!(gone.contains(fact), "{fact}: {gone}");
    }
    // Back on a letter the cache holds, the whole detail returns.
    update(&mut s, Action::from(Nav::Top), size);
    let back = screen(&s, size);
    assert!(!back.contains("payload not kept"), "{back}");
}

#[test]
fn big_groups_show_the_newest_first_and_finish_sorting_when_paged() {
    let base = now_ms();
    // 30,000 letters of one reason with scrambled times.
    let raws = (0..30_000u64)
        .map(|i| {
            let age_s = (i * 7919) % 30_000;
            RawLetter {
                coords: Some(Coords::Kafka {
                    topic: "big.dlq".into(),
                    partition: 0,
                    offset: i as i64,
                }),
                headers: vec![Header::new("x-reason-code", HeaderValue::text("same"))],
                payload: b"{}".to_vec(),
                timestamp: DateTime::from_timestamp_millis(base - age_s as i64 * 1000),
                ..RawLetter::default()
            }
        })
        .collect();
    let size = (120, 40);
    let mut s = state_of("big", raws, 1 << 20, size);
    let at = |s: &AppState, i: usize| {
        s.browse
            .catalog
            .store
            .row(s.letters.rows()[i])
            .map(|r| r.at_ms)
            .unwrap_or(0)
    };
    assert_eq!(s.letters.rows().len(), 30_000);
    assert!(s.letters.sorted() < 30_000, "big groups are sorted lazily");
    assert_eq!(at(&s, 0), base, "the newest letter is first");
    assert!((1..s.letters.sorted()).all(|i| at(&s, i - 1) >= at(&s, i)));
    press(&mut s, &["Tab"], size);
    for _ in 0..2 {
        update(&mut s, Action::from(Nav::Bottom), size);
    }
    assert_eq!(
        s.letters.sorted(),
        30_000,
        "paging to the end sorts the rest"
    );
    assert!((1..30_000).all(|i| at(&s, i - 1) >= at(&s, i)));
    assert_eq!(at(&s, 29_999), base - 29_999_000);
}

#[test]
fn command_palette_groups_filters_and_explains_mistakes() {
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    press(&mut s, &["::", ":group origin,reason", "Enter"], size);
    let grouped = screen(&s, size);
    assert!(grouped.contains("Groups  origin › reason"), "{grouped}");
    assert!(grouped.contains("grouped by origin › reason"), "{grouped}");
    press(
        &mut s,
        &["::", ":filter reason=expired|rejected", "Enter"],
        size,
    );
    assert!(screen(&s, size).contains("6 match · filter: reason=expired|rejected"));
    press(&mut s, &["::", ":sort oldest", "Enter"], size);
    assert!(!s.letters.newest_first());
    press(&mut s, &["::", ":frobnicate", "Enter"], size);
    assert!(screen(&s, size).contains("unknown command `frobnicate`"));
    press(&mut s, &["::", ":group colour", "Enter"], size);
    assert!(screen(&s, size).contains("unknown group dimension `colour`"));
    press(&mut s, &["::", ":quit", "Enter"], size);
    assert!(s.quit);
}

#[test]
fn discard_needs_a_reason_and_the_letter_leaves_the_open_groups() {
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    press(&mut s, &["Tab"], size);
    let row = s.selected_row().expect("a letter");
    let open_before = s.browse.index().total();
    // Enter without a reason: refused.
    press(&mut s, &["d", "Enter"], size);
    assert!(screen(&s, size).contains("a discard needs a reason"));
    // With a reason: a Discard command for the worker.
    press(&mut s, &["d"], size);
    let prompt = screen(&s, size);
    assert!(
        prompt.contains("discard letter msg_") && prompt.contains("— reason:"),
        "{prompt}"
    );
    let mut cmds = Vec::new();
    for c in ":dup of INV-1".chars().skip(1) {
        if let Some(a) = action_for_event(&s, &key(KeyCode::Char(c))) {
            cmds.extend(update(&mut s, a, size));
        }
    }
    cmds.extend(update(&mut s, Action::from(Typing::InputSubmit), size));
    assert!(
        cmds.iter().any(|c| matches!(c, dlq_tui::action::Command::Session(Request::Discard { rows, reason }) if rows[0].0 == row && reason == "dup of INV-1")),
        "{cmds:?}"
    );
    update(
        &mut s,
        Action::from(LedgerEvent::DiscardDone {
            rows: vec![row],
            message: "discarded 1".into(),
            ok: true,
        }),
        size,
    );
    assert_eq!(
        s.browse.index().total(),
        open_before - 1,
        "the discarded letter left the open groups"
    );
    press(&mut s, &["f", ":state=discarded", "Enter"], size);
    assert_eq!(s.browse.index().total(), 1);
}

#[test]
fn roles_in_the_tui_viewer_sees_no_payloads_privileged_unmasks_after_audit() {
    use dlq_core::access::Role;
    use dlq_tui::action::Command as Cmd;
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    s.role = Role::Viewer;
    press(&mut s, &["Tab", "3"], size);
    let text = screen(&s, size);
    assert!(
        text.contains("(hidden: viewer)") && text.contains("payloads are hidden"),
        "{text}"
    );
    assert!(!text.contains("\"amount\""), "{text}");
    let cmds = update(&mut s, Action::from(Act::StartDiscard), size);
    assert!(
        cmds.iter().any(
            |c| matches!(c, Cmd::Session(Request::Refused { permission, .. }) if *permission == dlq_core::access::Permission::Discard)
        ),
        "{cmds:?}"
    );
    assert!(
        screen(&s, size).contains("refused: discarding needs the operator role; you are viewer")
    );

    // Operators cannot unmask; privileged users can, after a reason and an audit entry.
    s.role = Role::Operator;
    let cmds = update(&mut s, Action::from(Act::StartUnmask), size);
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Cmd::Session(Request::Refused { permission, .. }) if *permission == dlq_core::access::Permission::Unmask)));
    s.role = Role::Privileged;
    update(&mut s, Action::from(Act::StartUnmask), size);
    let mut cmds = Vec::new();
    for c in "ticket 991".chars() {
        cmds.extend(update(&mut s, Action::from(Typing::InputChar(c)), size));
    }
    cmds.extend(update(&mut s, Action::from(Typing::InputSubmit), size));
    let row = cmds
        .iter()
        .find_map(|c| match c {
            Cmd::Session(Request::Unmask { row, reason, .. }) if reason == "ticket 991" => {
                Some(*row)
            }
            _ => None,
        })
        .expect("an unmask request (the app audits it)");
    assert!(
        !screen(&s, size).contains("UNMASKED"),
        "nothing is shown before the audit is written"
    );
    update(
        &mut s,
        Action::from(LedgerEvent::Unmasked(row, Ok(()))),
        size,
    );
    let text = screen(&s, size);
    assert!(
        text.contains("UNMASKED (audited, this session only)"),
        "{text}"
    );
    let shown = s
        .detail
        .shown()
        .map(|d| d.payload.text.clone())
        .unwrap_or_default();
    assert!(
        shown.contains("@") && !shown.contains("***"),
        "the raw payload: {shown}"
    );
}

#[test]
fn edit_asks_for_a_reason_and_hands_the_payload_to_the_editor_command() {
    use dlq_tui::action::Command as Cmd;
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    press(&mut s, &["Tab"], size);
    update(&mut s, Action::from(Act::StartEdit), size);
    assert!(screen(&s, size).contains("edit (revision) — reason:"));
    let mut cmds = Vec::new();
    for c in "amount fix".chars() {
        cmds.extend(update(&mut s, Action::from(Typing::InputChar(c)), size));
    }
    cmds.extend(update(&mut s, Action::from(Typing::InputSubmit), size));
    assert!(cmds.iter().any(|c| matches!(c, Cmd::Edit { reason, letter, .. } if reason == "amount fix" && !letter.raw.payload.is_empty())), "{cmds:?}");
    update(
        &mut s,
        Action::from(LedgerEvent::Edited(Ok(
            "revision 1 saved: changed /payload/amount".into(),
        ))),
        size,
    );
    assert!(s.force_redraw, "the editor used the screen: repaint it");
    assert!(screen(&s, size).contains("revision 1 saved"));
}

#[test]
fn every_palette_command_the_hint_names_is_understood() {
    let size = (120, 40);
    for c in dlq_tui::keymap::PALETTE {
        let mut s = state_from(&example(), size);
        let arg = c.args.split('|').next().unwrap_or("");
        let arg = match arg {
            "DIMS" => "reason,age",
            "EXPR" => "age>1h",
            other => other,
        };
        let line = format!(":{} {}", c.name, arg);
        press(&mut s, &[":", &line, "Enter"], size);
        let msg = s.message.as_ref().map(|m| m.0.clone()).unwrap_or_default();
        assert!(
            !msg.contains("unknown command") && !msg.contains("takes"),
            "{}: {msg}",
            c.name
        );
    }
}

#[test]
fn fuzzy_matches_are_highlighted_in_the_letters_list() {
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    press(&mut s, &["/", ":cus-88", "Enter", "Tab"], size);
    let theme = Theme::load(Some("mono")).expect("theme");
    let mut t = Terminal::new(TestBackend::new(size.0, size.1)).expect("terminal");
    t.draw(|f| views::render(f, &s, &theme)).expect("draw");
    let buf = t.backend().buffer().clone();
    let underlined: String = (0..buf.area.height)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            buf[(x, y)]
                .modifier
                .contains(ratatui::style::Modifier::UNDERLINED)
        })
        .map(|(x, y)| buf[(x, y)].symbol().to_string())
        .collect();
    assert!(underlined.contains("cus-88"), "highlighted: {underlined:?}");
}

fn discarded_rows(cmds: &[dlq_tui::action::Command]) -> Option<Vec<u32>> {
    cmds.iter().find_map(|c| match c {
        dlq_tui::action::Command::Session(Request::Discard { rows, .. }) => {
            Some(rows.iter().map(|r| r.0).collect())
        }
        _ => None,
    })
}

/// One rule for `d` and `r`: marks in view, else the cursor — a group row is the whole
/// group (after the typed count above `confirm_above`), a letter is that letter; marks
/// elsewhere are said, never used, and `Esc` clears them.
#[test]
fn d_on_a_group_row_discards_the_group_and_marks_elsewhere_are_announced() {
    let size = (140, 40);
    let mut s = state_from(&example(), size);
    s.replay.set_confirm_above(2);
    let group = s
        .browse
        .index()
        .members_under(&s.selected_node().expect("a group").path.clone());
    assert!(
        group.len() > 2,
        "the first group has {} letters",
        group.len()
    );
    // On the group row: the whole group, with the typed count.
    press(&mut s, &["d"], size);
    assert!(
        screen(&s, size).contains("discard group "),
        "{}",
        screen(&s, size)
    );
    assert!(press(&mut s, &[":dup", "Enter"], size).is_empty());
    assert!(
        screen(&s, size).contains(&format!("type {} to confirm", group.len())),
        "{}",
        screen(&s, size)
    );
    // A wrong count discards nothing; the right one the whole group.
    assert!(press(&mut s, &[":1", "Enter"], size).is_empty());
    assert!(screen(&s, size).contains("nothing discarded"));
    press(&mut s, &["d", ":dup", "Enter"], size);
    // Two letters of the group arrive while the count is asked: typing the new count
    // says what changed and asks again; the discard still covers what was asked about.
    let reason = s.selected_node().expect("a group").label.clone();
    let live: Vec<_> = (0..2)
        .map(|i| {
            let raw = RawLetter {
                coords: Some(Coords::Kafka {
                    topic: "invoices.dlq".into(),
                    partition: 9,
                    offset: 9_000 + i,
                }),
                headers: vec![
                    Header::new("x-reason-code", HeaderValue::text(&reason)),
                    Header::new("x-message-id", HeaderValue::text(&format!("late-{i}"))),
                ],
                payload: b"{}".to_vec(),
                timestamp: DateTime::parse_from_rfc3339("2026-11-29T17:59:00Z")
                    .ok()
                    .map(|t| t.to_utc()),
                ..RawLetter::default()
            };
            prepare_letter(s.browse.catalog.masker(), &[], raw).into()
        })
        .collect();
    update(&mut s, Action::from(BrowseEvent::Live(live)), size);
    let now = group.len() + 2;
    assert!(press(&mut s, &[&format!(":{now}"), "Enter"], size).is_empty());
    let said = screen(&s, size);
    assert!(
        said.contains(&format!("{now} match now: 2 arrived since")),
        "{said}"
    );
    let cmds = press(&mut s, &[&format!(":{}", group.len()), "Enter"], size);
    let mut rows = discarded_rows(&cmds).expect("a discard");
    rows.sort_unstable();
    let mut want = group.clone();
    want.sort_unstable();
    assert_eq!(rows, want);
    // On a letter: that letter.
    press(&mut s, &["Tab"], size);
    let letter = s.selected_row().expect("a letter");
    let cmds = press(&mut s, &["d", ":dup", "Enter"], size);
    assert_eq!(discarded_rows(&cmds), Some(vec![letter]));
    // A mark in this group, then another group: the mark is not in view, so `d` takes
    // the other group and says the mark was left out; the title counts it.
    press(&mut s, &[" ", "BackTab", "G"], size);
    assert_eq!(s.letters.marks().len(), 1);
    press(&mut s, &["d"], size);
    let shown = screen(&s, size);
    assert!(shown.contains("1 marked elsewhere not included"), "{shown}");
    assert!(shown.contains("· 1 marked"), "{shown}");
    let other = s
        .browse
        .index()
        .members_under(&s.selected_node().expect("group").path.clone());
    let cmds = press(&mut s, &[":dup", "Enter"], size);
    let cmds = if other.len() > 2 {
        press(&mut s, &[&format!(":{}", other.len()), "Enter"], size)
    } else {
        cmds
    };
    let rows = discarded_rows(&cmds).expect("a discard");
    assert!(!rows.contains(&letter), "the mark elsewhere was used");
    // Esc clears the marks; `A` marks every letter in view, again unmarks them.
    press(&mut s, &["Esc"], size);
    assert!(s.letters.marks().is_empty());
    press(&mut s, &["A"], size);
    assert_eq!(s.letters.marks().len(), s.letters.rows().len());
    press(&mut s, &["A"], size);
    assert!(s.letters.marks().is_empty());
}

/// Ticking by the second over simulated minutes: letters move from `<5m` to `5m-1h`
/// as they turn five minutes old, and leave an `age<1h` filter as they turn an hour —
/// the groups pane, its counts and the title follow, with no regroup typed.
#[test]
fn buckets_and_age_filters_follow_a_clock_ticking_by_the_second() {
    use dlq_tui::action::ViewKey;
    let size = (120, 40);
    let base = now_ms();
    let raws = [290, 280, 55 * 60, 50 * 60]
        .iter()
        .enumerate()
        .map(|(i, age_s)| RawLetter {
            coords: Some(Coords::Kafka {
                topic: "orders.dlq".into(),
                partition: 0,
                offset: i as i64,
            }),
            headers: vec![Header::new("x-reason-code", HeaderValue::text("tax"))],
            payload: b"{}".to_vec(),
            timestamp: DateTime::from_timestamp_millis(base - age_s * 1000),
            ..RawLetter::default()
        })
        .collect();
    let mut s = state_of("kafka://bench/orders.dlq", raws, 1 << 20, size);
    press(&mut s, &["::", ":group age", "Enter"], size);
    press(&mut s, &["::", ":filter age<1h", "Enter"], size);
    // A bucket's count in the groups pane, if it has a row.
    let row = |s: &AppState, label: &str| -> Option<u32> {
        screen(s, size).lines().find_map(|l| {
            let pane = l.split('┃').nth(1)?;
            let mut words = pane.split_whitespace();
            (words.next()? == label).then(|| words.next()?.parse().ok())?
        })
    };
    let counts = |s: &AppState| (row(s, "<5m"), row(s, "5m-1h"));
    assert_eq!(counts(&s), (Some(2), Some(2)), "{}", screen(&s, size));
    let tick = |s: &mut AppState, seconds: i64, from: i64| {
        for t in 1..=seconds {
            update(
                s,
                Action::from(ViewKey::Tick(base + (from + t) * 1000)),
                size,
            );
        }
    };
    tick(&mut s, 9, 0); // 4m59s and 4m49s old
    assert_eq!(counts(&s), (Some(2), Some(2)));
    tick(&mut s, 1, 9); // the first turns five minutes
    assert_eq!(counts(&s), (Some(1), Some(3)));
    tick(&mut s, 10, 10);
    assert_eq!(counts(&s), (None, Some(4)));
    // Five minutes on, the 55-minute letter turns an hour and leaves `age<1h`.
    tick(&mut s, 300, 20);
    assert_eq!(counts(&s), (None, Some(3)));
    let title = screen(&s, size);
    assert!(title.contains("3 match · filter: age<1h"), "{title}");
}

/// A bare word that is only deep in a payload finds nothing in the index, and the
/// footer says the payloads held in memory have it, and how to search there.
#[test]
fn a_bare_word_only_in_payloads_says_so() {
    let size = (200, 40);
    let raws = vec![RawLetter {
        coords: Some(Coords::Kafka {
            topic: "orders.dlq".into(),
            partition: 0,
            offset: 0,
        }),
        headers: vec![Header::new("x-reason-code", HeaderValue::text("sku_unknown"))],
        payload: br#"{"padding":"0123456789012345678901234567890123456789012345678901234567890123456789","lines":[{"sku":"SKU-18"}]}"#.to_vec(),
        timestamp: DateTime::from_timestamp_millis(now_ms() - 60_000),
        ..RawLetter::default()
    }];
    let mut s = state_of("kafka://bench/orders.dlq", raws, 1 << 20, size);
    press(&mut s, &["f", ":SKU-18", "Enter"], size);
    let (said, _) = s.message.clone().expect("a message");
    assert!(
        said.starts_with(
            "0 letters match `SKU-18` — `sku-18`: not in any id, key, reason or preview"
        ),
        "{said}"
    );
    assert!(
        said.contains("in the payload of 1 letter: payload.lines.0.sku=\"*SKU-18*\" finds them"),
        "{said}"
    );
    assert!(said.contains("payload.… terms work in list"), "{said}");
    // A word nothing holds says only the count.
    press(&mut s, &["f", ":zzzz-nothing", "Enter"], size);
    let (said, _) = s.message.clone().expect("a message");
    assert!(
        said.contains("in no letter's id, key, reason, preview or payload"),
        "{said}"
    );
}

/// The help and the replay's progress pane at 80×24, as snapshots: what an engineer on
/// a small terminal sees of them (the progress from fixed figures, no broker).
#[test]
fn help_and_replay_progress_at_80x24() {
    use dlq_core::replay::{Phase, Progress};
    use dlq_tui::action::ReplayEvent;
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(&mut s, &["?"], size);
    insta::assert_snapshot!("help_80x24", screen(&s, size));
    press(&mut s, &["Esc"], size);
    // `r` on the top group, a plan as the worker would send it, Enter to start.
    let planned = plan_expired(&mut s, size);
    assert!(planned > 0 && planned <= 100, "{planned}");
    insta::assert_snapshot!("replay_dry_run_80x24", screen(&s, size));
    press(&mut s, &["Enter"], size);
    assert!(s.replay.running(), "{}", screen(&s, size));
    for second in 1..=6u64 {
        let sent = (second as usize * 2).min(planned);
        update(
            &mut s,
            Action::from(ReplayEvent::ReplayProgress(Box::new(Progress {
                replay_id: "rp-20261129-0001".into(),
                phase: Phase::Ramping,
                planned,
                sent,
                confirmed: sent.saturating_sub(1),
                failed_again: usize::from(second > 4),
                refused: 0,
                held_back: 0,
                withdrawn: 0,
                in_flight: 1,
                remaining: planned - sent,
                rate: 2.0,
                target_rate: 2.0,
                elapsed: Duration::from_secs(second),
                eta: Some(Duration::from_secs(((planned - sent) / 2) as u64)),
                watch_left: None,
                end: None,
                paused: false,
                first_send_start: None,
                last_send_start: None,
            }))),
            size,
        );
    }
    insta::assert_snapshot!("replay_progress_80x24", screen(&s, size));
}

/// `r` on the expired letters, and their plan as the worker would send it: how many.
fn plan_expired(s: &mut AppState, size: (u16, u16)) -> usize {
    use dlq_core::replay::Options;
    use dlq_tui::action::{PlanView, ReplayEvent};
    press(s, &["::", ":filter reason=expired", "Enter", "r"], size);
    let planned = s.browse.index().total() as usize;
    update(
        s,
        Action::from(ReplayEvent::ReplayPlanned(PlanView {
            id: "rp-20261129-0001".into(),
            planned,
            options: Options::default(),
            lines: vec![format!("{planned} letters to send, in dead-letter order")],
            resuming: false,
            refusal: None,
        })),
        size,
    );
    planned
}

/// A click selects the row it lands on, on the page the list shows. It used to count
/// from the top of the list: past the first page a click picked another letter than the
/// one under the pointer.
#[test]
fn a_click_selects_the_letter_under_it_past_the_first_page() {
    use dlq_tui::action::ViewKey;
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(&mut s, &["Tab"], size);
    let a = views::layout::layout_for(&s, size.0, size.1);
    let page = usize::from(a.letters.height - 3);
    for _ in 0..page + 2 {
        press(&mut s, &["Down"], size);
    }
    assert_eq!(s.letters.cursor(), page + 2, "{}", screen(&s, size));
    let second_shown = s.letters.rows()[page + 1];
    // The second row shown: the page's second letter.
    let (column, row) = (a.letters.x + 4, a.letters.y + 3);
    update(&mut s, Action::from(ViewKey::Click { column, row }), size);
    assert_eq!(s.letters.cursor(), page + 1, "{}", screen(&s, size));
    assert_eq!(s.letters.selected(), Some(second_shown));
}

/// The example's state with the keys of `config` (a config file's text).
fn keyed(config: &str, size: (u16, u16)) -> AppState {
    let config = dlq_app::config::Config::parse(config, Path::new("config.toml")).expect("config");
    let keymap = dlq_tui::keymap::Keymap::with(&config.keys).expect("keys");
    let mut s = state_from(&example(), size);
    s.set_keymap(keymap);
    s
}

/// `[keys.dry-run]` rebinds the replay dry-run screen: its hint line names the new key,
/// the old one no longer starts anything, the new one does; help lists the screen's keys
/// in force.
#[test]
fn keys_from_the_config_rebind_the_dry_run_screen() {
    let size = (80, 24);
    let mut s = keyed(
        "[keys.dry-run]\nstart = \"s\"\nclose = [\"Esc\", \"x\"]\n",
        size,
    );
    press(&mut s, &["?"], size);
    press(
        &mut s,
        &["PageDown", "PageDown", "PageDown", "PageDown", "PageDown"],
        size,
    );
    let help = screen(&s, size);
    assert!(help.contains("On the replay dry-run screen"), "{help}");
    assert!(
        help.contains(" s ") && help.contains("start the replay"),
        "{help}"
    );
    press(&mut s, &["Esc"], size);
    plan_expired(&mut s, size);
    let dry = screen(&s, size);
    assert!(
        dry.contains("s starts") && dry.contains("Esc cancel"),
        "{dry}"
    );
    press(&mut s, &["Enter"], size);
    assert!(
        !s.replay.running(),
        "Enter no longer starts:\n{}",
        screen(&s, size)
    );
    assert!(
        s.replay.dry_run().is_some(),
        "and the dry run is still open"
    );
    press(&mut s, &["s"], size);
    assert!(s.replay.running(), "s starts it:\n{}", screen(&s, size));
}

/// `[keys]` in the config rebinds an action: the new key does it, the old one no longer
/// does, and help and the footer say the new key.
#[test]
fn keys_from_the_config_rebind_actions_in_help_and_footer() {
    let size = (120, 40);
    let mut s = keyed(
        "[keys]\ndiscard = \"X\"\nnext-pane = [\"Tab\", \"v\"]\n",
        size,
    );
    press(&mut s, &["d"], size);
    let after_d = screen(&s, size);
    assert!(
        !after_d.contains("— reason:"),
        "d no longer discards:\n{after_d}"
    );
    assert!(after_d.contains("X discard"), "{after_d}");
    press(&mut s, &["X"], size);
    let asked = screen(&s, size);
    assert!(
        asked.contains(" discard group ") && asked.contains("— reason:"),
        "{asked}"
    );
    press(&mut s, &["Esc", "?"], size);
    let help = screen(&s, size);
    assert!(help.contains("Tab v"), "{help}");
}

/// `w` on the amount group at 80×24 and 160×45: since when, what changed in its
/// payloads and the program that repairs it, all on screen (wrapped, nothing cut); `T`
/// opens that program in the transform prompt, never recording it. A viewer sees when,
/// never what the payloads hold, and no program.
#[test]
fn why_names_the_change_and_t_opens_the_suggested_fix() {
    for size in [(80, 24), (160, 45)] {
        let mut s = state_from(&example(), size);
        // Tree: tax ▾, r2 ▾, <5m, 5m-1h, 1h-24h, r1 ▸, amount ▸ — six rows down.
        press(&mut s, &["j", "j", "j", "j", "j", "j", "w"], size);
        let text = screen(&s, size);
        let (title, lines) = s.prompt.overlay().cloned().expect("the why overlay");
        let said = lines.join("\n");
        assert!(title.starts_with("Why: amount_not_a_number"), "{title}");
        for want in [
            "/payload/amount: string \"1,500.00\"- or \"12.50\"-like in 90 of 90; number in",
            ".payload.amount |= (if type == \"string\" then (split(\",\") | join(\"\") | tonumber) else . end)",
            "was already failing other letters",
        ] {
            assert!(said.contains(want), "{want}:\n{said}");
        }
        // On screen, wrapped, nothing cut: the program's last words and the key to use.
        for want in [
            "/payload/amount: string \"1,500.00\"-",
            "tonumber) else . end)",
            "T: edit and dry-run the suggested fix",
        ] {
            assert!(text.contains(want), "{want} at {size:?}:\n{text}");
        }
        press(&mut s, &["T"], size);
        assert!(
            s.prompt.overlay().is_none(),
            "the transform prompt replaces it"
        );
        match s.prompt.input() {
            dlq_tui::state::Input::TransformProgram(p, t) => {
                assert!(p.starts_with(".payload.amount |= "), "{p}");
                assert!(t.what.contains("amount_not_a_number"), "{}", t.what);
            }
            other => panic!("not the transform prompt: {other:?}"),
        }
        // Esc: nothing was recorded or asked of the session.
        let cmds = press(&mut s, &["Esc"], size);
        assert!(cmds.is_empty(), "{cmds:?}");
    }
    // The tax-profile group names the release it started with.
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    press(&mut s, &["w"], size);
    let said = s
        .prompt
        .overlay()
        .map(|o| o.1.join("\n"))
        .unwrap_or_default();
    assert!(
        said.contains("ago with release-2026-09-21; no letter of release-2026-09-14 since"),
        "{said}"
    );
    // Any other key than T closes it; with no suggestion T closes it too.
    press(&mut s, &["T"], size);
    assert!(s.prompt.overlay().is_none() && !s.prompt.typing());
    // A viewer.
    let mut s = state_from(&example(), size);
    s.role = dlq_core::access::Role::Viewer;
    press(&mut s, &["j", "j", "j", "j", "j", "j", "w"], size);
    let text = screen(&s, size);
    assert!(
        text.contains("payload differences need the operator role"),
        "{text}"
    );
    assert!(
        !text.contains("/payload") && !text.contains("tonumber"),
        "{text}"
    );
}

/// `[[links]]` on the failure tab, and `L` copies the ones this letter can fill.
#[test]
fn the_failure_tab_shows_links_and_l_copies_them() {
    let size = (160, 45);
    let mut s = state_from(&example(), size);
    s.links = vec![
        dlq_core::links::LinkTemplate {
            name: "release".into(),
            url: "https://ci.example/r?v={consumer_version}".into(),
        },
        dlq_core::links::LinkTemplate {
            name: "trace".into(),
            url: "https://tempo.example/{header.no-such-header}".into(),
        },
    ];
    press(&mut s, &["Tab"], size);
    let text = screen(&s, size);
    assert!(text.contains("links (L copies them)"), "{text}");
    assert!(
        text.contains("release  https://ci.example/r?v=release-2026-09-21"),
        "{text}"
    );
    assert!(
        text.contains("trace    (not for this letter: the letter has no header.no-such-header)"),
        "{text}"
    );
    let cmds = press(&mut s, &["L"], size);
    let copied = cmds.iter().find_map(|c| match c {
        dlq_tui::action::Command::Copy(t) => Some(t.clone()),
        _ => None,
    });
    assert_eq!(
        copied.as_deref(),
        Some("https://ci.example/r?v=release-2026-09-21")
    );
}

/// #57: the letters the 2026 brokers and libraries write (the conventions' fixtures,
/// header for header) in the TUI at 80×24: each under its own reason; and dead letters
/// held upstream (a broken at-least-once route) counted in the title, the status line
/// saying so and `:notes` saying where and why.
#[test]
fn the_2026_conventions_and_letters_held_upstream_at_80x24() {
    use dlq_core::awaiting::{Awaiting, Route};
    let size = (80, 24);
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("brokers-2026.ndjson");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conventions");
    let mut dump = String::new();
    for f in [
        "kafka-share-group.ndjson",
        "kafka-share-group-rejected.ndjson",
        "kafka-streams.ndjson",
        "karafka.ndjson",
        "watermill.ndjson",
    ] {
        dump.push_str(&std::fs::read_to_string(fixtures.join(f)).expect("fixture"));
    }
    std::fs::write(&path, dump).expect("dump");
    let mut s = state_from(&path, size);
    let held = Awaiting {
        queue: "orders".into(),
        messages: 3,
        bytes: Some(96),
        exchange: "dlx.orders".into(),
        route: Route::Nowhere,
    };
    update(
        &mut s,
        Action::from(BrowseEvent::Awaiting(Ok(vec![held]))),
        size,
    );
    let text = screen(&s, size);
    insta::assert_snapshot!("brokers_2026_80x24", text);
    for reason in [
        "delivery-limit-reached",
        "rejected-by-consumer",
        "SerializationException",
        "could not handle mess",
        "unknown",
    ] {
        assert!(text.contains(reason), "{reason} not on screen:\n{text}");
    }
    assert!(text.contains("3 held upstream"), "{text}");
    assert!(
        s.notes.iter().any(|n| n.contains("held in orders")
            && n.contains("exchange dlx.orders routes them to no queue")),
        "{:?}",
        s.notes
    );
    // The same figure again is not news; drained, the title says nothing more.
    s.message = None;
    update(
        &mut s,
        Action::from(BrowseEvent::Awaiting(Ok(Vec::new()))),
        size,
    );
    assert!(s.message.is_none());
    assert!(!screen(&s, size).contains("held upstream"));
}

/// #68: `d` (and `r`) on a browse the broker closed is refused, saying why and what to do
/// (docs/faults.md): its letters went back to the queue, and nothing is asked or sent.
#[test]
fn discard_and_replay_on_a_browse_the_broker_closed_are_refused() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    update(
        &mut s,
        BrowseEvent::BrowseLost("connection closed by the broker".into()),
        size,
    );
    for k in ["d", "r"] {
        let cmds = press(&mut s, &[k], size);
        let shown = screen(&s, size);
        assert!(cmds.is_empty(), "{k}: nothing sent: {cmds:?}");
        assert!(
            shown.contains("refused: this browse was closed"),
            "{k}: {shown}"
        );
        assert!(!shown.contains("reason:"), "{k}: no prompt opened: {shown}");
    }
}

/// #68, 4: with the ledger unreachable (the worker says so once its session opened), the
/// TUI browses as usual at 80×24, its second line says the decisions are unknown, and
/// every letter's state reads `unknown` — in the list and in the detail — never `open`.
#[test]
fn with_the_ledger_unreachable_the_tui_browses_and_says_decisions_are_unknown() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    update(
        &mut s,
        LedgerEvent::Unreachable("ledger postgres://***@db:5432/ledger: cannot connect".into()),
        size,
    );
    let shown = screen(&s, size);
    assert!(
        shown.contains("ledger unreachable: decisions unknown"),
        "{shown}"
    );
    assert!(shown.contains("unknown"), "{shown}");
    assert!(!shown.contains(" open "), "no letter reads open: {shown}");
    press(&mut s, &["Tab", "Tab"], size);
    let detail = screen(&s, size);
    assert!(detail.contains("unknown (ledger"), "{detail}");
}

/// #70, 1: at 80×24 what is typed at a prompt is always seen — its end and the cursor —
/// however long the label: a discard reason of 120 characters (it goes into the ledger)
/// and a jq program of 200. The label gives way first, then the key hint.
#[test]
fn a_long_reason_and_a_long_program_are_typed_in_sight_at_80x24() {
    let size = (80, 24);
    let mut s = state_from(&example(), size);
    let reason = format!(
        "{}END-OF-REASON",
        "duplicate of INC-4242 after the fix ".repeat(3)
    );
    assert!(reason.chars().count() > 110);
    press(&mut s, &["G", "k", "k", "d", &format!(":{reason}")], size);
    let shown = screen(&s, size);
    let last = shown.lines().last().unwrap_or_default();
    assert!(
        last.contains("END-OF-REASON▏"),
        "the end of the reason: {last}"
    );
    assert!(last.contains("discard"), "what is asked stays: {last}");
    insta::assert_snapshot!("discard_reason_120_at_80x24", shown);
    press(&mut s, &["Esc", "Esc"], size);
    let program = format!(
        ".payload.amount |= (gsub(\",\";\"\") | tonumber) | {}.end_marker = 1",
        ".payload.note |= ascii_downcase | ".repeat(4)
    );
    assert!(program.chars().count() > 190);
    press(&mut s, &["T", &format!(":{program}")], size);
    let shown = screen(&s, size);
    let last = shown.lines().last().unwrap_or_default();
    assert!(
        last.contains(".end_marker = 1▏"),
        "the end of the program: {last}"
    );
    assert!(last.contains('…'), "the start scrolled away, said: {last}");
}
