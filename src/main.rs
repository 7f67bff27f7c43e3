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
    // librdkafka echoes property values in its errors: secret ones are scrubbed below.
    let props: Vec<(String, String)> = cli
        .kafka_props
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
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
                let text = dlq_triage::brokers::kafka::scrub_secrets(
                    &dlq_triage::core::source::redact_uri_text(&c.to_string()),
                    &props,
                );
                let text = sanitize::clean(&text);
                if !msg.last().is_some_and(|m| m.ends_with(&text)) {
                    msg.push(text);
                }
            }
            eprintln!("error: {}", msg.join(": "));
            if e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
