//! Fixtures the integration tests share: a server that is required in CI or skipped
//! with a message elsewhere ([`service`]), the built binary in a scratch home with its
//! exit code and output checked ([`cli`]), RabbitMQ topologies that dead-letter for
//! real ([`rabbit`]), an operator's session settings ([`session`]), and the TUI on
//! `TestBackend` driven by keys ([`tui`]), a PostgreSQL database per test ([`pg`]), a process frozen and let go ([`process`]), TLS in front of a local server ([`tls`]). Dev-only: `tests/architecture.rs` fails if a production crate
//! depends on it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fixture may stop on a broken fixture

pub mod cli;
pub mod journal;
pub mod pg;
pub mod process;
pub mod rabbit;
pub mod service;
pub mod session;
pub mod tls;
pub mod tui;
