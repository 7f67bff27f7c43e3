//! Dead letters on their way to a DLQ but not in it. A RabbitMQ quorum queue with
//! at-least-once dead-lettering (`x-dead-letter-strategy: at-least-once`) keeps what it
//! dead-letters in *itself* until the dead-letter route confirms it: when the route is
//! broken (the exchange deleted, its binding gone, the DLQ full with `reject-publish`)
//! they pile up there, and the DLQ's depth says nothing. This is what the broker says of
//! them, per source queue, read again on every refresh (the management API's
//! `messages_dlx`).

use serde::Serialize;

/// Letters one source queue holds, dead-lettered and waiting for the route to confirm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Awaiting {
    /// The source queue that holds them.
    pub queue: String,
    pub messages: u64,
    pub bytes: Option<u64>,
    /// Its dead-letter exchange (`""`: the default exchange).
    pub exchange: String,
    pub route: Route,
}

/// Where the source queue's dead-letter exchange sends them, from the broker's
/// exchanges and bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// To this DLQ, which is not confirming them (full with `reject-publish`, a member
    /// down).
    Here,
    /// The exchange does not exist.
    NoExchange,
    /// The exchange routes them to no queue.
    Nowhere,
}

impl Awaiting {
    /// `3 in orders (at-least-once), its dead-letter exchange dlx.orders routes them
    /// nowhere` — names sanitized.
    pub fn describe(&self) -> String {
        let ex = match self.exchange.as_str() {
            "" => "the default exchange".to_string(),
            e => format!("exchange {}", crate::sanitize::clean(e)),
        };
        let why = match self.route {
            Route::Here => format!("{ex} routes here and this queue has not confirmed them"),
            Route::NoExchange => format!("its dead-letter {ex} does not exist"),
            Route::Nowhere => format!("its dead-letter {ex} routes them to no queue"),
        };
        format!(
            "{} dead letter(s) held in {} awaiting at-least-once dead-lettering: {why}",
            self.messages,
            crate::sanitize::clean(&self.queue)
        )
    }
}

/// What is said when the broker could not be asked (`why`, sanitized to one line).
pub fn unknown(why: &str) -> String {
    format!(
        "dead letters held upstream unknown: {}",
        crate::sanitize::line(why, 200)
    )
}

/// The letters of `list` together.
pub fn total(list: &[Awaiting]) -> u64 {
    list.iter().map(|a| a.messages).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_says_why_in_words_and_names_are_sanitized() {
        let mut a = Awaiting {
            queue: "orders\x1b[2J".into(),
            messages: 3,
            bytes: Some(6),
            exchange: "dlx.orders".into(),
            route: Route::Nowhere,
        };
        assert_eq!(
            a.describe(),
            "3 dead letter(s) held in orders\\x1b[2J awaiting at-least-once dead-lettering: its dead-letter exchange dlx.orders routes them to no queue"
        );
        a.route = Route::NoExchange;
        assert!(a.describe().ends_with("exchange dlx.orders does not exist"));
        a.route = Route::Here;
        a.exchange.clear();
        assert!(a
            .describe()
            .ends_with("the default exchange routes here and this queue has not confirmed them"));
        assert_eq!(total(&[a.clone(), a]), 6);
    }
}
