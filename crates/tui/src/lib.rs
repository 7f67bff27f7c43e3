//! The triage TUI: terminal setup and restore, and the event loop (drain all pending
//! events → update → draw only if something changed, so an idle TUI writes nothing).

pub mod action;
mod detail_pane;
mod dispatch;
pub mod keymap;
pub mod launch;
pub mod letters_pane;
mod lists;
mod paging;
pub mod picker;
pub mod prompt;
mod refusal;
pub mod replaying;
mod selection;
pub mod state;
mod tab;
pub mod theme;
pub mod update;
pub mod views;
pub mod worker;

use crate::action::{BrowseEvent, LedgerEvent, ViewKey};
use action::{Action, Command};
use crossterm::event::{Event, KeyEventKind, MouseButton, MouseEventKind};
use dlq_core::catalog::Catalog;
use dlq_core::ports::SourceInfo;
use ratatui::backend::Backend;
use ratatui::Terminal;
use state::AppState;
use std::io::Write;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;
use theme::Theme;

/// Everything the loop reacts to.
#[derive(Debug)]
pub enum AppEvent {
    Term(Event),
    Action(Action),
}

/// Memory for whole letters (payloads included) kept for the detail pane, by default:
/// RabbitMQ deliveries cannot be fetched again without a new browse, so more of them are
/// kept; Kafka and file letters are re-read by position when evicted, so a small cache
/// serves: 8 MiB is some 2,500 letters of 3 KB, many screens of them (64 MiB put the TUI
/// over 400 MB at 1,000,000 letters, 32 MiB ~25 MB more than 8). `payload_cache_mib` in
/// the config overrides both.
pub const CACHE_BUDGET_HELD: usize = 256 * 1024 * 1024;
pub const CACHE_BUDGET_REFETCHABLE: usize = 8 * 1024 * 1024;
/// Most events handled before a frame is drawn, so a flood of letters cannot starve input.
const MAX_EVENTS_PER_FRAME: usize = 512;

/// Map a terminal event to an action.
pub fn action_for_event(state: &AppState, ev: &Event) -> Option<Action> {
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => dispatch::action_for(state, k),
        Event::Mouse(m) => match m.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Action::from(ViewKey::Click {
                column: m.column,
                row: m.row,
            })),
            MouseEventKind::ScrollDown => Some(Action::from(ViewKey::Scroll {
                column: m.column,
                row: m.row,
                down: true,
            })),
            MouseEventKind::ScrollUp => Some(Action::from(ViewKey::Scroll {
                column: m.column,
                row: m.row,
                down: false,
            })),
            _ => None,
        },
        Event::Resize(_, _) => Some(Action::from(ViewKey::Resize)),
        _ => None,
    }
}

/// The event loop, generic over the backend so tests can run it on a `TestBackend` or a
/// byte-counting writer. `clock` gives epoch milliseconds; `tick` is how often the clock
/// is checked (ages only redraw when a minute has passed).
pub fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    state: &mut AppState,
    theme: &Theme,
    rx: &Receiver<AppEvent>,
    mut on_command: impl FnMut(Command),
    clock: impl Fn() -> i64,
    tick: Duration,
) -> anyhow::Result<()> {
    let size = |t: &Terminal<B>| t.size().map(|s| (s.width, s.height)).unwrap_or((80, 24));
    let sz = size(terminal);
    for c in update::update(state, Action::from(ViewKey::Resize), sz) {
        on_command(c);
    }
    terminal
        .draw(|f| views::render(f, state, theme))
        .map_err(|e| anyhow::anyhow!("drawing: {e}"))?;
    loop {
        let first = match rx.recv_timeout(tick) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let mut events: Vec<AppEvent> = Vec::new();
        // The clock is read on every turn, not only when nothing else happens: a source
        // that streams (the demo's trickle, a replay's progress) kept the loop from ever
        // idling, and ages stood still from the moment the TUI opened.
        let now = clock();
        // Every second: ages on screen move; the groups follow by the minute (update).
        if now / 1000 != state.now_ms / 1000 {
            events.push(AppEvent::Action(Action::from(ViewKey::Tick(now))));
        }
        match first {
            None => {}
            Some(ev) => {
                events.push(ev);
                while events.len() < MAX_EVENTS_PER_FRAME {
                    match rx.try_recv() {
                        Ok(ev) => events.push(ev),
                        Err(_) => break,
                    }
                }
            }
        }
        let sz = size(terminal);
        let mut changed = false;
        for ev in events {
            // Map each key against the state as the previous ones left it (typing `/abc`
            // fast must land in the input line).
            let action = match ev {
                AppEvent::Action(a) => Some(a),
                AppEvent::Term(e) => action_for_event(state, &e),
            };
            let Some(action) = action else { continue };
            changed = true;
            for c in update::update(state, action, sz) {
                on_command(c);
            }
            if state.quit {
                return Ok(());
            }
        }
        if !changed {
            continue;
        }
        if state.force_redraw {
            state.force_redraw = false;
            terminal
                .clear()
                .map_err(|e| anyhow::anyhow!("terminal: {e}"))?;
        }
        terminal
            .draw(|f| views::render(f, state, theme))
            .map_err(|e| anyhow::anyhow!("drawing: {e}"))?;
    }
}

/// Run the editor on a payload and record the revision through the app (permission,
/// ledger first). Returns a line for the status bar.
pub fn edit_and_record(
    settings: &dlq_app::session::Settings,
    letter_id: &str,
    letter: &dlq_core::model::DeadLetter,
    reason: &str,
) -> Result<String, String> {
    use dlq_app::revise::Revised;
    match settings.principal.edit_and_record(
        &settings.masker,
        settings.codec.as_deref(),
        &settings.source_key,
        letter_id,
        letter,
        reason,
        false,
    ) {
        Ok(Revised::Unchanged) => Ok("no changes; nothing saved".into()),
        Ok(Revised::Saved { number, paths }) => Ok(format!(
            "revision {number} saved: changed {} (the original is unchanged)",
            paths.join(", ")
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// What the render thread is asked for: row, payload, body kind, unmasked.
type RenderJob = (
    dlq_core::store::RowId,
    std::sync::Arc<dlq_core::model::DeadLetter>,
    bool,
);

/// A thread that renders big payloads (masking, pretty-printing) so the UI thread never
/// waits on them. Only the newest request matters: older ones still queued are skipped.
fn spawn_renderer(
    masker: dlq_core::masking::Masker,
    events: mpsc::Sender<AppEvent>,
) -> mpsc::Sender<RenderJob> {
    let (tx, rx) = mpsc::channel::<RenderJob>();
    std::thread::spawn(move || {
        while let Ok(mut job) = rx.recv() {
            while let Ok(newer) = rx.try_recv() {
                job = newer;
            }
            let (row, letter, unmasked) = job;
            let view = update::render_payload(&masker, &letter, unmasked);
            if events
                .send(AppEvent::Action(Action::from(BrowseEvent::Rendered(
                    row, unmasked, view,
                ))))
                .is_err()
            {
                return;
            }
        }
    });
    tx
}

/// Put the terminal back: raw mode off, main screen, mouse released.
pub(crate) fn restore() {
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(
        out,
        crossterm::event::DisableMouseCapture,
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = crossterm::terminal::disable_raw_mode();
}

/// Copies go to the system clipboard on a local desktop session, else through the
/// terminal (OSC 52: works over SSH; tmux needs `set-clipboard on`). Only ever masked text.
struct Clipboard {
    /// Kept for the TUI's lifetime: on X11 the copied text lives as long as its owner.
    system: Option<arboard::Clipboard>,
}

impl Clipboard {
    fn new() -> Self {
        let var = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        let local =
            (var("DISPLAY") || var("WAYLAND_DISPLAY")) && !var("SSH_CONNECTION") && !var("SSH_TTY");
        Clipboard {
            system: if local {
                arboard::Clipboard::new().ok()
            } else {
                None
            },
        }
    }

    /// Copy to the system clipboard, else through the terminal (OSC 52): what happened,
    /// in words — OSC 52 cannot be confirmed, so it says where it went and what it needs.
    fn copy(&mut self, text: &str) -> Result<String, String> {
        if let Some(cb) = self.system.as_mut() {
            if cb.set_text(text.to_string()).is_ok() {
                return Ok("masked payload copied to the clipboard".into());
            }
        }
        copy_osc52(text).map(|()| {
            "masked payload sent to the terminal's clipboard (OSC 52: the terminal must allow it; tmux needs `set-clipboard on`)".into()
        }).map_err(|e| format!("nothing copied: no clipboard here, and writing OSC 52 to the terminal failed ({e})"))
    }
}

/// Copy text with OSC 52 (works over SSH; tmux needs `set-clipboard on`). The text is
/// the masked rendering, never raw payload bytes.
fn copy_osc52(text: &str) -> std::io::Result<()> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = std::io::stdout();
    write!(out, "\x1b]52;c;{b64}\x07")?;
    out.flush()
}

/// Everything the TUI starts from.
pub struct Setup {
    pub plan: (dlq_core::source::SourceRef, dlq_app::brokers::OpenOptions),
    /// What the worker's session is started with.
    pub settings: dlq_app::session::Settings,
    pub catalog: Catalog,
    pub label: String,
    pub now_ms: i64,
    pub theme: Theme,
    /// Replays above this many letters ask for the count (config `replay.confirm_above`).
    pub confirm_above: usize,
    /// `[retention] warn_below`, in ms: groups the broker empties sooner show in red.
    pub expiry_warn_ms: i64,
    /// `[[owners]]`: shown on the top-level groups.
    pub owners: dlq_core::owners::Owners,
    /// `[[links]]`: links out from a letter, on its failure tab (`L` copies them).
    pub links: Vec<dlq_core::links::LinkTemplate>,
    /// Bytes of whole letters kept in memory (see `CACHE_BUDGET_HELD`).
    pub cache_budget: usize,
    /// Normal mode's keys (`[keys]` over the defaults), checked before the TUI starts.
    pub keymap: keymap::Keymap,
}

impl AppState {
    /// Keys other than the defaults (tests and embedders; the TUI takes `Setup::keymap`).
    pub fn set_keymap(&mut self, keymap: keymap::Keymap) {
        self.keymap = std::sync::Arc::new(keymap);
    }
}

/// Run the TUI on a source until the user quits.
pub fn run(setup: Setup) -> anyhow::Result<()> {
    let Setup {
        plan,
        settings,
        catalog,
        label,
        now_ms,
        theme,
        confirm_above,
        expiry_warn_ms,
        owners,
        links,
        cache_budget,
        keymap,
    } = setup;
    let (source, opts) = plan;
    // The adapter states what browsing does once the source is open (SourceOpened).
    let info = SourceInfo {
        label,
        browse_effect: "opening the source…".into(),
    };
    let (tx, rx) = mpsc::channel();
    let (req_tx, req_rx) = mpsc::channel();
    let mut state = AppState::new(info, catalog, now_ms, cache_budget);
    state.read_only = settings.principal.read_only;
    state.role = settings.principal.role;
    state.replay.set_confirm_above(confirm_above);
    state.expiry_warn_ms = expiry_warn_ms;
    state.owners = owners;
    state.links = links;
    state.set_keymap(keymap);
    state.since_ms = settings.since.map(|s| s.timestamp_millis());
    let mut outside = Outside {
        requests: req_tx,
        render: spawn_renderer(state.browse.catalog.masker().clone(), tx.clone()),
        events: tx.clone(),
        clipboard: Clipboard::new(),
        settings: settings.clone(),
    };
    worker::spawn(source, opts, settings, tx.clone(), req_rx);
    let terminal = enter_terminal()?;
    spawn_input(tx);
    let result = (|| {
        let mut terminal = terminal?;
        terminal
            .clear()
            .map_err(|e| anyhow::anyhow!("terminal: {e}"))?;
        run_loop(
            &mut terminal,
            &mut state,
            &theme,
            &rx,
            |c| outside.run(c),
            || chrono::Utc::now().timestamp_millis(),
            // Idle, the loop still wakes each second: ages on screen move.
            Duration::from_secs(1),
        )
    })();
    restore();
    result?;
    // Quitting a TUI whose source never opened is a failure, said in full on the
    // terminal it returns to.
    match (
        &state.scan.error,
        state.scan.read_any() || !state.browse.catalog.store.is_empty(),
    ) {
        (Some(e), false) => Err(anyhow::anyhow!(
            "could not open {}: {}",
            dlq_core::sanitize::clean(&state.info.label),
            dlq_core::sanitize::clean(e)
        )),
        _ => Ok(()),
    }
}

/// Raw mode, the alternate screen, mouse capture, and a panic hook that undoes them. The
/// terminal must exist before the input thread starts: creating it reads the cursor
/// position, which a concurrent event reader would swallow.
fn enter_terminal(
) -> anyhow::Result<anyhow::Result<Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>>> {
    crossterm::terminal::enable_raw_mode()
        .map_err(|e| anyhow::anyhow!("this needs a terminal: {e}"))?;
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::event::EnableMouseCapture
    )
    .map_err(|e| anyhow::anyhow!("setting up the terminal: {e}"))?;
    Ok(
        Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
            .map_err(|e| anyhow::anyhow!("terminal: {e}")),
    )
}

/// The input thread. It polls, never blocks in read(): a blocked read holds crossterm's
/// event-reader lock, and every cursor-position query (ratatui clears on resize and on
/// `clear()`) would then time out. Between polls the lock is free; a cursor reply read
/// meanwhile stays in crossterm's queue for the query that asked for it.
fn spawn_input(tx: mpsc::Sender<AppEvent>) {
    std::thread::spawn(move || loop {
        match crossterm::event::poll(Duration::from_millis(100)) {
            Ok(true) => match crossterm::event::read() {
                Ok(ev) => {
                    if tx.send(AppEvent::Term(ev)).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            },
            Ok(false) => {}
            Err(_) => break,
        }
    });
}

/// Where `update`'s commands go: the worker, the render thread, the clipboard, the
/// editor.
struct Outside {
    requests: mpsc::Sender<worker::Request>,
    render: mpsc::Sender<RenderJob>,
    events: mpsc::Sender<AppEvent>,
    clipboard: Clipboard,
    settings: dlq_app::session::Settings,
}

impl Outside {
    fn run(&mut self, c: Command) {
        let c = match worker::Request::for_command(c) {
            Ok(request) => {
                let _ = self.requests.send(request);
                return;
            }
            Err(c) => c,
        };
        match *c {
            Command::Copy(text) => {
                let said = self.clipboard.copy(&text);
                let _ = self
                    .events
                    .send(AppEvent::Action(Action::from(BrowseEvent::Copied(said))));
            }
            Command::RenderPayload {
                row,
                letter,
                unmasked,
            } => {
                let _ = self.render.send((row, letter, unmasked));
            }
            Command::Edit {
                letter_id,
                letter,
                reason,
            } => self.edit(&letter_id, &letter, &reason),
            // The worker's, handed to it above.
            Command::Session(_) => {}
        }
    }

    /// The editor needs the terminal: hand it over, then take it back.
    fn edit(&mut self, letter_id: &str, letter: &dlq_core::model::DeadLetter, reason: &str) {
        restore();
        let result = edit_and_record(&self.settings, letter_id, letter, reason);
        let _ = crossterm::terminal::enable_raw_mode();
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::terminal::EnterAlternateScreen,
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
            crossterm::event::EnableMouseCapture
        );
        let _ = self
            .events
            .send(AppEvent::Action(Action::from(LedgerEvent::Edited(result))));
    }
}
