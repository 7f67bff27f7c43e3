//! Session settings as the tests' operators have them.

use dlq_app::session::{Principal, Settings};
use dlq_core::access::Role;
use dlq_core::masking::Masker;

/// An operator `actor` on `source_key` whose decisions go to `ledger`.
pub fn operator(
    source_key: &str,
    actor: &str,
    ledger: impl Into<dlq_core::ledger_location::Location>,
    masker: Masker,
) -> Settings {
    Settings {
        codec: None,
        source_key: source_key.into(),
        principal: Principal {
            actor: actor.into(),
            role: Role::Operator,
            read_only: false,
            ledger_unreachable: None,
            ledger: Some(ledger.into()),
        },
        masker,
        mappings: Vec::new(),
        since: None,
        approval_above: None,
        discard_approval_above: None,
        allowed_targets: Vec::new(),
    }
}
