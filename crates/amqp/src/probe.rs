//! What a queue is before anything is consumed from it, learned without a delivery, and
//! the guard that keeps a browse from pushing a quorum queue's messages past their
//! delivery limit.

use super::*;

/// A queue type no server has: a declare with it can fail the equivalence check of an
/// existing queue (whose refusal names the real type) and can never create a queue.
const PROBE_TYPE: &str = "x-dlq-triage-probe";

/// What the declare probe learned of a queue whose type nobody stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Not probed: the type is stated or reported by the management API.
    NotAsked,
    /// `classic`, `quorum` or `stream`, as the broker named it.
    Type(String),
    /// The broker's refusal did not say (permissions, an exclusive queue): why.
    Unknown(String),
}

impl Probe {
    pub(crate) fn kind(&self) -> Option<String> {
        match self {
            Probe::Type(t) => Some(t.clone()),
            Probe::NotAsked | Probe::Unknown(_) => None,
        }
    }
}

/// A quorum queue's delivery limit as far as this browse knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    Known(i64),
    /// The management API reports none.
    Unlimited,
    /// No management API to ask: a queue argument or a policy may set any limit.
    Unknown,
}

/// Whether a message handed back unprocessed keeps its quorum delivery count on a
/// broker of this version. Before 4.3 every return counted (a `basic.nack`, a
/// `basic.reject`, a closed channel); from 4.3 only `basic.reject` does, and the
/// returns are counted apart as `x-acquired-count` (RabbitMQ's "Negative
/// Acknowledgements" page for 4.3). An unknown or unreadable version is taken to count.
pub(crate) fn returns_uncounted(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (4, 3),
        _ => false,
    }
}

impl RabbitSource {
    /// Asked once of the management API (the overview's version); without it, counted.
    pub(crate) fn returns_uncounted(&mut self) -> bool {
        if let Some(u) = self.uncounted {
            return u;
        }
        let u = self
            .management
            .as_ref()
            .and_then(|m| m.version().ok())
            .is_some_and(|v| returns_uncounted(&v));
        self.uncounted = Some(u);
        u
    }
}

/// What one refused declare said about the queue.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// The queue's type (`None`: no `x-queue-type` argument, a classic queue).
    Type(Option<String>),
    /// The queue's `durable` or `auto_delete` differs from what was sent: ask again
    /// with it flipped (the broker checks those before the arguments).
    Flag(&'static str),
    Other,
}

/// Read a `PRECONDITION_FAILED - inequivalent arg 'K' for queue … but current is 'V'`
/// refusal (RabbitMQ 3.8 to 4.x word it so; `current is the value 'V' of type …` and
/// `current is none` too).
fn refusal(text: &str) -> Refusal {
    let Some(rest) = text.split("inequivalent arg '").nth(1) else {
        return Refusal::Other;
    };
    let key = rest.split('\'').next().unwrap_or("");
    let current = rest.rsplit("current is ").next().unwrap_or("");
    let value = current
        .strip_prefix("the value '")
        .or_else(|| current.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .map(str::to_string);
    match key {
        "x-queue-type" => Refusal::Type(value),
        "durable" => Refusal::Flag("durable"),
        "auto_delete" => Refusal::Flag("auto_delete"),
        _ => Refusal::Other,
    }
}

impl RabbitSource {
    /// The type of a queue nobody named, from a declare the broker must refuse (see
    /// [`PROBE_TYPE`]), on a short-lived channel each try. Nothing is delivered: the
    /// `basic.get` this replaces returned the head message, and on a quorum queue with
    /// `x-delivery-limit 1` that return was the delivery that dropped it.
    pub(crate) fn probe(&mut self, queue: &str) -> Result<Probe, SourceError> {
        let (mut durable, mut auto_delete) = (true, false);
        for _ in 0..3 {
            let ch = self.fresh_channel()?;
            let mut args = FieldTable::default();
            args.insert(
                ShortString::from("x-queue-type"),
                AMQPValue::LongString(LongString::from(PROBE_TYPE.as_bytes().to_vec())),
            );
            let opts = lapin::options::QueueDeclareOptions {
                durable,
                auto_delete,
                ..Default::default()
            };
            let answer = self
                .rt
                .block_on(ch.queue_declare(ShortString::from(queue), opts, args));
            let text = match answer {
                // No broker takes a made-up type; if one did, nothing is known.
                Ok(_) => {
                    self.rt.block_on(async {
                        let _ = ch.close(200, ShortString::from("probe done")).await;
                    });
                    return Ok(Probe::Unknown("the broker took a probe declare".into()));
                }
                Err(e) => e.to_string(),
            };
            match refusal(&text) {
                Refusal::Type(t) => return Ok(Probe::Type(t.unwrap_or_else(|| "classic".into()))),
                Refusal::Flag("durable") => durable = !durable,
                Refusal::Flag(_) => auto_delete = !auto_delete,
                Refusal::Other => return Ok(Probe::Unknown(text)),
            }
        }
        Ok(Probe::Unknown(
            "the broker's refusals did not name the queue type".into(),
        ))
    }

    /// Never push a message past its delivery limit. Quorum queues count every return of
    /// a browsed message as a delivery and dead-letter (or drop) a message returned more
    /// than `delivery-limit` times, so a quorum queue is browsed only when its limit is
    /// known to leave room or the operator allows it (`--allow-redelivery`), and a queue
    /// whose type could not be learned only when the operator allows it.
    /// Returns a line for the user when browsing goes ahead with a limit.
    pub(crate) fn quorum_guard(
        &mut self,
        queue: &str,
        kind: Option<&str>,
        limit: Limit,
        probed: &Probe,
    ) -> Result<Option<String>, SourceError> {
        let allowed = self.allow_redelivery;
        if kind == Some("quorum") && self.returns_uncounted() {
            return Ok(Some(
                "quorum queue on RabbitMQ 4.3 or later: the browse hands messages back with basic.nack, which leaves their delivery count as it was (x-acquired-count still rises)".into(),
            ));
        }
        match (kind, limit) {
            (Some("quorum"), Limit::Known(limit)) => {
                if !allowed {
                    return Err(SourceError::failed(format!(
                        "refusing to browse quorum queue `{queue}`: it has delivery-limit {limit}, every browse returns each message once (counted as a delivery), and a message returned more than {limit} times is dead-lettered or dropped. Browse anyway with --allow-redelivery (each message takes at most {} browse(s) if nothing else redelivered it)",
                        (limit - 1).max(0)
                    )));
                }
                // The counts are read from this browse and reported after it.
                Ok(Some(format!(
                    "quorum queue with delivery-limit {limit}: this browse counts one delivery per message (--allow-redelivery)"
                )))
            }
            (Some("quorum"), Limit::Unlimited) => Ok(Some(
                "quorum queue without a delivery limit: each browse counts one redelivery per message".into(),
            )),
            (Some("quorum"), Limit::Unknown) if !allowed => Err(SourceError::failed(format!(
                "refusing to browse quorum queue `{queue}`: its delivery limit is unknown without the management API (a queue argument or policy may set it as low as 1; RabbitMQ 4 sets 20 by default), and every browse returns each message once, counted as a delivery. Give --management-url, or check the limit and pass --allow-redelivery"
            ))),
            (Some("quorum"), Limit::Unknown) => Ok(Some(
                "quorum queue with a delivery limit unknown here: this browse counts one delivery per message (--allow-redelivery)".into(),
            )),
            (None, _) if !allowed => {
                let why = match probed {
                    Probe::Unknown(why) => format!(" ({why})"),
                    _ => String::new(),
                };
                Err(SourceError::failed(format!(
                    "refusing to browse `{queue}`: its queue type could not be learned without delivering a message{why}, and a quorum queue counts every browse as a delivery. Give --management-url, or --queue-type classic|quorum"
                )))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #57: from 4.3 a nack leaves the quorum delivery count as it was; before, and
    /// where the version cannot be read, every return counts.
    #[test]
    fn only_rabbitmq_4_3_and_later_hand_back_uncounted() {
        for (v, uncounted) in [
            ("3.10.8", false),
            ("3.13.7", false),
            ("4.0.5", false),
            ("4.2.4", false),
            ("4.3.0", true),
            ("4.3.1-rc.1", true),
            ("5.0.0", true),
            ("", false),
            ("garbage", false),
        ] {
            assert_eq!(returns_uncounted(v), uncounted, "{v}");
        }
    }

    /// The refusals RabbitMQ 3.10 gave the probe (captured from the real server).
    #[test]
    fn refusals_name_the_type_or_the_flag_to_flip() {
        let t = |s: &str| refusal(s);
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'x-dlq-triage-probe' but current is 'quorum'"),
            Refusal::Type(Some("quorum".into()))
        );
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'x-dlq-triage-probe' but current is 'stream'"),
            Refusal::Type(Some("stream".into()))
        );
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received the value 'x-dlq-triage-probe' of type 'longstr' but current is none"),
            Refusal::Type(None)
        );
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
            Refusal::Flag("durable")
        );
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'false' but current is 'true'"),
            Refusal::Flag("auto_delete")
        );
        assert_eq!(
            t("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'q'"),
            Refusal::Other
        );
        // A queue whose name holds the words: the key is read where the broker put it.
        assert_eq!(
            t("PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'current is none' in vhost '/': received 'x-dlq-triage-probe' but current is 'quorum'"),
            Refusal::Type(Some("quorum".into()))
        );
    }
}
