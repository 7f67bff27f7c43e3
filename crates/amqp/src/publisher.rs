//! Replays: publishing with publisher confirms and `mandatory`.

use super::*;

/// Publishes with publisher confirms and `mandatory`; confirms are awaited on the
/// runtime and reported by ticket, so several publishes can be in flight.
pub struct RabbitPublisher {
    rt: tokio::runtime::Runtime,
    _conn: Connection,
    channel: Channel,
    tx: tokio::sync::mpsc::UnboundedSender<dlq_core::ports::Outcome>,
    rx: tokio::sync::mpsc::UnboundedReceiver<dlq_core::ports::Outcome>,
}

impl RabbitPublisher {
    pub fn new(target: &AmqpTarget) -> Result<Self, SourceError> {
        let rt = runtime()?;
        let conn = connect(
            &rt,
            target,
            &format!("dlq-triage replay (pid {})", std::process::id()),
        )?;
        let channel = rt.block_on(async {
            let ch = conn
                .create_channel()
                .await
                .map_err(|e| SourceError::failed_by("opening a channel", e))?;
            ch.confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| SourceError::failed_by("confirm.select", e))?;
            Ok::<_, SourceError>(ch)
        })?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Ok(RabbitPublisher {
            rt,
            _conn: conn,
            channel,
            tx,
            rx,
        })
    }
}

/// AMQP basic properties from their names (as `to_raw` reads them). Delivery facts of
/// the DLQ copy (`exchange`, `routing_key`) are not properties and are left out.
pub(crate) fn properties_of(props: &[(String, String)]) -> BasicProperties {
    let mut p = BasicProperties::default().with_delivery_mode(2);
    for (k, v) in props {
        let sv = || ShortString::from(v.as_str());
        p = match k.as_str() {
            "message_id" => p.with_message_id(sv()),
            "correlation_id" => p.with_correlation_id(sv()),
            "type" => p.with_type(sv()),
            "app_id" => p.with_app_id(sv()),
            "content_type" => p.with_content_type(sv()),
            "content_encoding" => p.with_content_encoding(sv()),
            "reply_to" => p.with_reply_to(sv()),
            "timestamp" => match v.parse::<u64>() {
                Ok(t) => p.with_timestamp(t),
                Err(_) => p,
            },
            _ => p,
        };
    }
    p
}

impl Publisher for RabbitPublisher {
    fn send(&mut self, ticket: u64, msg: &Outgoing) -> Result<(), SourceError> {
        let Target::Amqp {
            exchange,
            routing_key,
        } = &msg.target
        else {
            return Err(SourceError::Unsupported(
                "a RabbitMQ publisher publishes to exchanges only".into(),
            ));
        };
        let mut props = properties_of(&msg.properties);
        if !msg.headers.is_empty() {
            props = props.with_headers(table(msg.headers.iter().map(|h| (&*h.name, &h.value))));
        }
        let where_ = if exchange.is_empty() {
            "the default exchange".to_string()
        } else {
            format!("exchange `{exchange}`")
        };
        let confirm = self
            .rt
            .block_on(self.channel.basic_publish(
                ShortString::from(exchange.as_str()),
                ShortString::from(routing_key.as_str()),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &msg.payload,
                props,
            ))
            .map_err(|e| SourceError::failed_by(format!("publishing to {where_}"), e))?;
        let (tx, location, rk) = (
            self.tx.clone(),
            format!("{exchange}/{routing_key}"),
            routing_key.clone(),
        );
        self.rt.spawn(async move {
            let outcome = match confirm.await {
                Ok(Confirmation::Ack(None)) => Ok(Confirmed { location: Some(location) }),
                Ok(Confirmation::Ack(Some(_))) => Err(SourceError::failed(format!(
                    "unroutable: no queue is bound to {where_} for routing key `{rk}` (returned by the broker)"
                ))),
                Ok(Confirmation::Nack(_)) => Err(SourceError::failed(format!("the broker refused (nack) the publish to {where_}"))),
                Ok(Confirmation::NotRequested) => Err(SourceError::failed("publisher confirms are not enabled")),
                // The channel or connection went before the confirm: it may have been
                // routed all the same.
                Err(e) => Err(SourceError::InDoubt(format!("publishing to {where_}: no confirm came ({e})"))),
            };
            let _ = tx.send((ticket, outcome));
        });
        Ok(())
    }

    fn confirmations(&mut self, wait: Duration) -> Vec<dlq_core::ports::Outcome> {
        let mut out = Vec::new();
        while let Ok(o) = self.rx.try_recv() {
            out.push(o);
        }
        if out.is_empty() && !wait.is_zero() {
            let rx = &mut self.rx;
            if let Ok(Some(o)) = self
                .rt
                .block_on(async { tokio::time::timeout(wait, rx.recv()).await })
            {
                out.push(o);
                while let Ok(o) = self.rx.try_recv() {
                    out.push(o);
                }
            }
        }
        out
    }
}
