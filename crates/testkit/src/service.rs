//! Servers the tests talk to: there, required (CI sets `DLQ_TRIAGE_REQUIRE_BROKERS=1`,
//! and a missing one fails the test), or skipped with a message saying how to start it.

use std::time::Duration;

/// Whether CI demands every server: a missing one is a failure, not a skip.
pub fn required() -> bool {
    std::env::var("DLQ_TRIAGE_REQUIRE_BROKERS").as_deref() == Ok("1")
}

/// Whether `what` is there (`up`); when it is not, fail under [`required`], else say
/// how to get it (`hint`) and let the test skip.
pub fn present(up: bool, what: &str, hint: &str) -> bool {
    if !up {
        assert!(
            !required(),
            "{what} is required (DLQ_TRIAGE_REQUIRE_BROKERS=1) but is not there: {hint}"
        );
        eprintln!("SKIPPED: {what} is not there ({hint})");
    }
    up
}

/// Something listens on `addr` (within two seconds).
pub fn listening(addr: &str) -> bool {
    addr.parse()
        .ok()
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

/// RabbitMQ on 127.0.0.1:5672.
pub fn rabbit_available() -> bool {
    present(
        listening("127.0.0.1:5672"),
        "RabbitMQ on 127.0.0.1:5672",
        "start it with `rabbitmq-server -detached`",
    )
}

/// The management API (optional for users, required in CI: it detects quorum delivery
/// limits and streams).
pub fn management_available() -> bool {
    present(
        listening("127.0.0.1:15672"),
        "the RabbitMQ management API on :15672",
        "rabbitmq-plugins enable rabbitmq_management",
    )
}

/// `rabbitmqctl`, to close a connection from the server side (it ships with the server;
/// a RabbitMQ in a container has none on the host).
pub fn rabbitmqctl_available() -> bool {
    let ok = std::process::Command::new("rabbitmqctl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    present(
        ok,
        "rabbitmqctl",
        "it closes a connection from the server side",
    )
}
