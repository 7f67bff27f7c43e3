//! Entry point: parse, assemble the program (`dlq_app::launch`), start the TUI or a
//! command, map errors to exit codes (0 ok, 1 operational, 2 usage, 8 the ledger busy;
//! a command's own codes come as `cli::Exit`). The CLI and the TUI are siblings: only
//! this binary knows both.

use clap::Parser;
use dlq_app::launch::Launch;
use dlq_cli::{self as cli, Cli, Route, UsageError};
use dlq_core::sanitize;
use std::process::ExitCode;

/// Scans allocate and free millions of small buffers across threads (the Kafka poller
/// allocates, the indexer frees); mimalloc handles that far better than glibc malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stack for every thread the process starts, and for the command itself. A hostile
/// header nested as deep as RabbitMQ's 128 KiB frame allows (26,000 arrays) takes lapin's
/// recursive parser over 32 MiB, on an I/O thread lapin starts with the default stack:
/// 2 MiB overflowed at ~1,000 levels and aborted the process — one letter made the queue
/// unbrowsable. Reserved address space, not memory: untouched stack pages cost nothing.
const STACK_BYTES: usize = 128 << 20;

fn main() -> ExitCode {
    // std reads RUST_MIN_STACK once, at the first thread spawn (lapin's included), so it
    // is set before any thread starts; an operator's own setting is kept.
    if std::env::var_os("RUST_MIN_STACK").is_none() {
        std::env::set_var("RUST_MIN_STACK", STACK_BYTES.to_string());
    }
    // The command runs on a thread of the same size: the main thread has the 8 MiB of
    // the shell's ulimit.
    let command = std::thread::Builder::new()
        .name("dlq-triage".into())
        .stack_size(STACK_BYTES)
        .spawn(run);
    match command.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // A panic was reported by the hook; 101 is what a panicking main exits with.
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => {
            eprintln!("error: cannot start the command thread: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> ExitCode {
    // `transform` runs jq programs in a child process of this binary (dlq_transform).
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(dlq_transform::WORKER_ARG))
    {
        return ExitCode::from(u8::try_from(dlq_transform::worker::serve()).unwrap_or(1));
    }
    // `dlq-triage sumary demo` would parse as the source `sumary` and the command `demo`:
    // a misspelt command is said, with what was meant, before clap reads the line.
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Every message from here on goes through the sanitizer, which redacts what the
    // command line and the environment hold of secrets (whoever echoes them).
    let env: Vec<(String, String)> = std::env::vars().collect();
    dlq_core::secrets::register(&args, &env);
    if let Some(why) = cli::misspelt_command(&args) {
        eprintln!("error: {}", sanitize::clean(&why));
        return ExitCode::from(2);
    }
    // clap quotes the argument it refused (`-X SECRET`): its text is redacted too.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            let shown = dlq_core::secrets::scrub(&text);
            if e.use_stderr() {
                eprint!("{shown}");
            } else {
                print!("{shown}");
            }
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    if let Err(e) = dlq_app::logging::init(&cli.log_level) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    // librdkafka echoes property values in its errors: secret ones are scrubbed below.
    let props: Vec<(String, String)> = cli
        .kafka_props
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    exit_code(start(cli), &props)
}

/// The program: the launch the application layer assembles, then the TUI or a command.
fn start(cli: Cli) -> anyhow::Result<()> {
    if let Some(done) = cli::generated(&cli) {
        return done;
    }
    let launch = Launch::new(&cli.flags())?;
    for w in &launch.warnings {
        eprintln!("warning: {w}");
    }
    let theme = cli.theme.clone();
    match cli::route(cli, &launch)? {
        Route::Tui(source) => dlq_tui::launch::run(&launch, &source, theme.as_deref()),
        Route::PickNamed => dlq_tui::launch::pick_named(&launch, theme.as_deref()),
        Route::Command(command) => cli::run(*command, &launch),
    }
}

/// How the run ended, said on stderr (sanitized, secrets scrubbed) and as an exit code.
fn exit_code(result: anyhow::Result<()>, props: &[(String, String)]) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `| head` closing the pipe is not a failure.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            if let Some(x) = e.downcast_ref::<cli::Exit>() {
                if !x.message.is_empty() {
                    eprintln!("{}", sanitize::clean(&x.message));
                }
                return ExitCode::from(x.code);
            }
            // Each cause once: messages that already quote their cause (SourceError)
            // are not followed by it again.
            let mut msg: Vec<String> = Vec::new();
            for c in e.chain() {
                let text = dlq_app::brokers::scrub_secrets(
                    &dlq_core::source::redact_uri_text(&c.to_string()),
                    props,
                );
                let text = sanitize::clean(&text);
                if !msg.last().is_some_and(|m| m.ends_with(&text)) {
                    msg.push(text);
                }
            }
            eprintln!("error: {}", msg.join(": "));
            if e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()) {
                ExitCode::from(2)
            } else if ledger_busy(e.chain()) {
                // Another writer holds the ledger: nothing was recorded or sent, and a
                // script can tell this from a failure.
                ExitCode::from(8)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Another writer held the ledger past the bounded wait, wherever in the chain it is said.
fn ledger_busy<'a>(mut chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> bool {
    use dlq_app::session::SessionError;
    use dlq_core::journal::JournalError;
    chain.any(|c| {
        matches!(
            c.downcast_ref::<JournalError>(),
            Some(JournalError::Busy { .. })
        ) || matches!(
            c.downcast_ref::<SessionError>(),
            Some(SessionError::Ledger(JournalError::Busy { .. }))
        )
    })
}
