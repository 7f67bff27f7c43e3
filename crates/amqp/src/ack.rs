//! Settling a held delivery (ack with a confirming round trip) and handing every
//! held message back on exit.

use super::*;

impl RabbitSource {
    /// Ack exactly the held delivery of this letter.
    pub(crate) fn ack_letter(&mut self, coords: &Coords) -> Result<(), SourceError> {
        if let Coords::Amqp {
            stream_offset: Some(_),
            ..
        } = coords
        {
            return Err(SourceError::Unsupported(
                "a stream cannot delete one message (it is append-only): a discard is recorded in the ledger only".into(),
            ));
        }
        let Coords::Amqp {
            queue, position, ..
        } = coords
        else {
            return Err(SourceError::Unsupported(format!(
                "{coords} is not a RabbitMQ letter"
            )));
        };
        let tag = self.tags.get(queue, *position).ok_or_else(|| {
            SourceError::unavailable(format!(
                "{coords} is not held by this browse (re-browse first)"
            ))
        })?;
        let ch = self.held.get(queue).ok_or_else(|| {
            SourceError::unavailable(format!("queue `{queue}` is not being browsed"))
        })?;
        // basic.ack has no reply: on a dead channel it would "succeed" while the broker
        // has already requeued the message. Refuse unless the delivery is still ours.
        let alive =
            self.conn.as_ref().is_some_and(|c| c.status().connected()) && ch.status().connected();
        if !alive {
            return Err(SourceError::unavailable(format!(
                "{coords}: the browse holding it was closed (by the broker, a timeout or a restart); the letter is back in the queue — re-browse, nothing was acked"
            )));
        }
        self.rt
            .block_on(ch.basic_ack(tag, BasicAckOptions::default()))
            .map_err(|e| {
                SourceError::failed(format!(
                    "acking {coords}: {e} (the letter stays in the DLQ)"
                ))
            })?;
        // The check above can pass while the broker's close is still on its way (the
        // server closed the connection and requeued; our client has not read that yet):
        // the ack then went nowhere. A round trip on the same channel after it proves
        // the broker's channel took the ack — frames are handled in order. basic.qos
        // is harmless here: on RabbitMQ it applies to consumers started after it.
        let confirmed = self.rt.block_on(async {
            tokio::time::timeout(
                ACK_CONFIRM_TIMEOUT,
                ch.basic_qos(0, BasicQosOptions::default()),
            )
            .await
        });
        match confirmed {
            Ok(Ok(())) => {
                self.tags.set(queue, *position, 0);
                Ok(())
            }
            Ok(Err(e)) => Err(SourceError::unavailable(format!(
                "{coords}: the ack was not confirmed — the browse holding it was closed ({e}); the decision stays pending and is applied on the next browse if the letter is still in the queue"
            ))),
            Err(_) => Err(SourceError::unavailable(format!(
                "{coords}: the broker did not answer within {}s after the ack; the decision stays pending and is applied on the next browse if the letter is still in the queue",
                ACK_CONFIRM_TIMEOUT.as_secs()
            ))),
        }
    }
}

impl Drop for RabbitSource {
    /// Leaving releases everything held: consumers are cancelled first, then the
    /// connection is closed, and the broker requeues the unacked deliveries as for any
    /// client that leaves (what pika does on close). Cancelling first matters: with a
    /// consumer still attached the broker answers the close only once the requeue is
    /// done (0.9-1.1 s at 100,000 held); after a cancel it answers in milliseconds and
    /// requeues after. Nothing is exposed by not waiting: the queue serves a count or a
    /// consumer after the requeue (a count taken right after exit waited for it and
    /// said 100000). Bounded, so a broker that stops answering cannot hold the exit.
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let (held, consumers) = (&self.held, &self.consumers);
        self.rt.block_on(async {
            let leave = async {
                for (queue, ch) in held {
                    if let Some(c) = consumers.get(queue) {
                        let _ = ch
                            .basic_cancel(c.tag(), BasicCancelOptions::default())
                            .await;
                    }
                    hand_back(ch).await;
                }
                let _ = conn.close(200, ShortString::from("bye")).await;
            };
            let _ = tokio::time::timeout(LEAVE_TIMEOUT, leave).await;
        });
    }
}

/// Hand every delivery a channel holds back to its queue with one `basic.nack`
/// (delivery tag 0, multiple, requeue) before the channel closes: on RabbitMQ 4.3 and
/// later a nack leaves a quorum queue's delivery count as it was, where a close may
/// not be taken so; before 4.3 both count, so nothing is lost by asking. Best effort:
/// the close that follows returns anything the nack did not.
pub(crate) async fn hand_back(ch: &Channel) {
    let _ = ch
        .basic_nack(
            0,
            lapin::options::BasicNackOptions {
                multiple: true,
                requeue: true,
            },
        )
        .await;
}

/// Longest wait for the round trip that confirms an ack (see `ack_letter`).
pub(crate) const ACK_CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for the broker on exit; the socket's close releases everything anyway.
pub(crate) const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);
