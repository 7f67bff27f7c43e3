//! The broker-agnostic domain: model, conventions, masking, store, grouping, filter,
//! replay plan and engine, and the ports the adapters implement (`ports`, `journal`).
//! Its manifest names no I/O crate (no SQLite, rdkafka, lapin, terminal or HTTP), so
//! a wrong-way import does not compile; `tests/architecture.rs` checks the manifests.

pub mod access;
pub mod awaiting;
pub mod binding;
pub mod browse;
pub mod catalog;
pub mod conventions;
pub mod decisions;
pub mod diff;
pub mod dump;
pub mod filter;
pub mod fingerprint;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod grouping;
pub mod handover;
pub mod header_text;
pub mod held;
pub mod insight;
pub mod journal;
pub mod ledger_location;
pub mod letter_view;
pub mod links;
pub mod masking;
pub mod model;
pub mod owners;
pub mod payload_cache;
pub mod payload_view;
pub mod pipeline;
pub mod ports;
pub mod prepared;
pub mod replay;
pub mod retention;
pub mod revision;
pub mod sanitize;
pub mod schema;
pub mod secrets;
pub mod source;
pub mod store;
pub mod timefmt;
pub mod uri;
pub mod watch;
pub mod words;
