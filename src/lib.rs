//! dlq-triage: dead-letter-queue triage for Kafka and RabbitMQ.
//!
//! Layers (imports only go downwards): `cli`/`tui` front ends → `core` (broker-agnostic
//! domain) → `brokers` adapters implementing core's ports.

pub mod brokers;
pub mod cli;
pub mod config;
pub mod core;
pub mod credentials;
pub mod editor;
pub mod logging;
pub mod tui;
