//! Browsing a stream queue by offset, non-destructively.

use super::*;

impl RabbitSource {
    /// Streams are read by offset from the start, without consuming: acks on a stream
    /// only grant credit, the messages stay. Nothing is held.
    pub(crate) fn browse_stream(
        &mut self,
        queue: &str,
        count: u32,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SourceError> {
        let vhost = self.target.vhost.clone();
        let ch = self.fresh_channel()?;
        let want = count;
        let (deliveries, consumer) = self.rt.block_on(async {
            ch.basic_qos(500, BasicQosOptions::default())
                .await
                .map_err(|e| SourceError::failed_by(format!("basic.qos on `{queue}`"), e))?;
            let mut args = FieldTable::default();
            args.insert(
                ShortString::from("x-stream-offset"),
                AMQPValue::LongString(LongString::from(b"first".to_vec())),
            );
            let mut consumer = ch
                .basic_consume(
                    ShortString::from(queue),
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    args,
                )
                .await
                .map_err(|e| SourceError::failed_by(format!("reading stream `{queue}`"), e))?;
            let mut got = Vec::new();
            while (got.len() as u32) < want {
                match tokio::time::timeout(IDLE, consumer.next()).await {
                    Ok(Some(Ok(d))) => {
                        let _ = d.ack(BasicAckOptions::default()).await;
                        got.push(d);
                    }
                    Ok(Some(Err(e))) => {
                        return Err(SourceError::failed_by(
                            format!("reading stream `{queue}`"),
                            e,
                        ))
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            Ok::<_, SourceError>((got, consumer))
        })?;
        if deliveries.len() as u64 >= u64::from(want) {
            // Stopped by --max-letters: what follows is the rest of the stream, not new
            // letters, so the consumer is not kept to be tailed.
            self.rt.block_on(async {
                let _ = ch.close(200, ShortString::from("stream read")).await;
            });
        } else {
            // The consumer stays open, positioned after what was read: letters appended
            // later (new dead letters, replayed letters failing again) arrive on it —
            // the tail, as on a queue. Nothing is held: a stream's acks only grant credit.
            self.keep_open(queue, ch, consumer, deliveries.len() as u64, true);
        }
        // The whole read goes on as one batch: the session prepares it in its own sizes.
        let letters: Vec<RawLetter> = deliveries
            .into_iter()
            .enumerate()
            .map(|(i, d)| stream_letter(d, &vhost, queue, i as u64 + 1))
            .collect();
        if !letters.is_empty() && sink(ScanEvent::Letters(letters)).is_break() {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// A stream message as a letter: addressed by its offset, which is stable (positions are
/// only the order of this browse).
pub(crate) fn stream_letter(d: Delivery, vhost: &str, queue: &str, position: u64) -> RawLetter {
    let mut raw = to_raw(d, vhost, queue, position);
    let offset = raw
        .header("x-stream-offset")
        .and_then(HeaderValue::as_i64_lenient);
    if let Some(Coords::Amqp { stream_offset, .. }) = raw.coords.as_mut() {
        *stream_offset = offset;
    }
    raw
}
