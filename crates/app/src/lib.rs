//! The application layer both front ends drive: the `Session` over an open source
//! (scan, preparation, discard, replay, unmask and edit with their permission checks
//! and audit), opening sources and the ledger, config, credentials, identity, the
//! editor round trip and logging. The CLI and the TUI only translate input and render.

pub mod brokers;
pub mod browse;
pub mod config;
pub mod credentials;
pub mod editor;
pub mod identity;
pub mod insight;
pub mod launch;
pub mod logging;
pub mod report;
pub mod revise;
pub mod schemas;
pub mod session;
pub mod team_ledger;
pub mod transform;
