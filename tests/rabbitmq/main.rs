//! The RabbitMQ adapter against the real server on 127.0.0.1:5672 (guest/guest). Each
//! test declares its own uniquely named queues with real dead-lettering (consumer reject,
//! TTL expiry, max-length), so `x-death` is the broker's own, and deletes them after.
//! Without a server these tests skip with a message, unless DLQ_TRIAGE_REQUIRE_BROKERS=1.
//!
//! One test binary, a module per topic: browsing, queue types, discovery, decisions,
//! replay, the TUI on RabbitMQ, TLS. Fixtures other tests share too are in
//! `dlq-testkit`; the helpers only these tests use are in `support`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test, bench or example may stop on a broken fixture

mod prelude {
    //! What every topic module uses.
    #![allow(unused_imports)]
    pub(crate) use crate::support::*;
    pub(crate) use dlq_amqp::{AmqpTarget, RabbitPublisher, RabbitSource};
    pub(crate) use dlq_core::conventions::extract;
    pub(crate) use dlq_core::model::{DeadLetter, Origin, RawLetter};
    pub(crate) use dlq_core::ports::{DlqSource, Outgoing, Publisher, ScanEvent, Settled, Target};
    pub(crate) use dlq_testkit::cli::exited;
    pub(crate) use dlq_testkit::process::{signal, wait_stopped};
    pub(crate) use dlq_testkit::rabbit::*;
    pub(crate) use dlq_testkit::service::{
        management_available, rabbit_available, rabbitmqctl_available,
    };
    pub(crate) use dlq_tui::action::{BrowseEvent, Event as UiEvent, LedgerEvent, ReplayEvent};
    pub(crate) use futures_lite::StreamExt;
    pub(crate) use lapin::options::*;
    pub(crate) use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
    pub(crate) use lapin::{BasicProperties, Connection, ConnectionProperties, ExchangeKind};
    pub(crate) use std::ops::ControlFlow;
    pub(crate) use std::time::{Duration, Instant};
}

mod browse;
mod decisions;
mod discovery;
mod queue_types;
mod replay;
mod retention;
mod support;
mod tls;
mod tui;
