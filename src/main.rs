//! Entry point: parse, dispatch, map errors to exit codes (0 ok, 1 operational, 2 usage).

use clap::Parser;
use dlq_triage::cli::{self, Cli, UsageError};
use dlq_triage::core::sanitize;
use std::process::ExitCode;

/// Scans allocate and free millions of small buffers across threads (the Kafka poller
/// allocates, the indexer frees); mimalloc handles that far better than glibc malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = dlq_triage::logging::init(&cli.log_level) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `| head` closing the pipe is not a failure.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            let msg: Vec<String> = e.chain().map(|c| sanitize::clean(&c.to_string())).collect();
            eprintln!("error: {}", msg.join(": "));
            if e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
