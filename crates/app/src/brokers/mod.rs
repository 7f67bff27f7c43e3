//! Opening a source: the adapter crates behind core's ports, chosen by the source's URI.
//! Front ends name a `SourceRef`; only this module knows which crate serves it.

pub mod demo_schemas;
pub mod discovery;
pub mod file;

use dlq_amqp as rabbitmq;
use dlq_amqp::mgmt as rabbitmq_mgmt;
use dlq_kafka as kafka;
use dlq_kafka::demo;

/// The embedded demo (a seeded mock cluster, its simulated consumer) for `demo --serve`.
pub use dlq_kafka::demo::{scenario::Scale, Demo, Simulator};
/// librdkafka echoes property values in its errors: the binary scrubs secret ones.
pub use dlq_kafka::scrub_secrets;

use chrono::{DateTime, Utc};
use dlq_core::ports::{DlqSource, SourceError};
use dlq_core::source::SourceRef;

/// What opening a source may need besides its URI.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// librdkafka properties (`-X key=value`, named-source `kafka` tables).
    pub kafka_props: Vec<(String, String)>,
    /// The clock, for the demo's relative ages.
    pub now: Option<DateTime<Utc>>,
    /// Only letters dead-lettered at or after this time (Kafka: offsets_for_times).
    pub since: Option<DateTime<Utc>>,
    /// RabbitMQ management API base URL; default `http://HOST:15672` when reachable.
    pub management_url: Option<String>,
    /// RabbitMQ queue type stated by the operator (classic, quorum, stream).
    pub queue_type: Option<String>,
    /// Browse quorum queues with a delivery limit anyway.
    pub allow_redelivery: bool,
    /// Accept plain HTTP to a remote management API for an amqps:// source.
    pub management_plain_http: bool,
    /// RabbitMQ: browse at most this many messages per queue (the whole queue if unset).
    pub max_letters: Option<u64>,
}

/// Where an `amqp://` source's broker is, with its credentials.
pub fn amqp_target(source: &SourceRef) -> Option<rabbitmq::AmqpTarget> {
    match source {
        SourceRef::Amqp {
            tls,
            user,
            password,
            host,
            port,
            vhost,
            tls_files,
            ..
        } => Some(rabbitmq::AmqpTarget {
            tls: *tls,
            user: user.clone(),
            password: password.clone(),
            host: host.clone(),
            port: *port,
            vhost: vhost.clone(),
            tls_files: tls_files.clone(),
        }),
        _ => None,
    }
}

/// Open a source for scanning.
pub fn open(source: &SourceRef, opts: &OpenOptions) -> Result<Box<dyn DlqSource>, SourceError> {
    match source {
        SourceRef::File { path } => Ok(Box::new(file::FileSource::open(path)?)),
        SourceRef::Kafka { brokers, topics } => Ok(Box::new(
            kafka::KafkaSource::new(brokers.clone(), topics.clone(), opts.kafka_props.clone())
                .with_since(opts.since),
        )),
        SourceRef::Demo => {
            let now = opts.now.unwrap_or_else(Utc::now);
            Ok(Box::new(demo::DemoSource::start(
                now,
                demo_schemas::extra(42, now)?,
            )?))
        }
        SourceRef::Amqp {
            tls, host, queues, ..
        } => {
            let target = amqp_target(source)
                .ok_or_else(|| SourceError::failed("an amqp:// source without its address"))?;
            let mgmt = rabbitmq_mgmt::plan_url(
                opts.management_url.as_deref(),
                *tls,
                host,
                opts.management_plain_http,
            )
            .map_err(SourceError::Unsupported)?;
            Ok(Box::new(
                rabbitmq::RabbitSource::new(target, queues.clone())?
                    .with_management(&mgmt)
                    .with_queue_policy(opts.queue_type.clone(), opts.allow_redelivery)
                    .with_max_letters(opts.max_letters),
            ))
        }
    }
}
