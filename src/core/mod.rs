//! The broker-agnostic domain. Imports no terminal, Kafka or AMQP crate (a test in
//! `tests/architecture.rs` enforces it).

pub mod access;
pub mod catalog;
pub mod conventions;
pub mod decisions;
pub mod diff;
pub mod dump;
pub mod filter;
pub mod fingerprint;
pub mod grouping;
pub(crate) mod header_text;
pub(crate) mod held;
pub mod ledger;
pub mod letter_view;
pub mod masking;
pub mod model;
pub mod owners;
pub mod payload_cache;
pub mod payload_view;
pub(crate) mod pipeline;
pub mod ports;
pub mod replay;
pub mod revision;
pub mod sanitize;
pub mod session;
pub mod source;
pub mod store;
pub mod timefmt;
pub mod watch;
pub mod words;
