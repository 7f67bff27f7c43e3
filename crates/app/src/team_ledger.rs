//! Moving to the team's ledger: `dlq-triage ledger migrate --to postgres://…` copies one
//! engineer's file ledger into the server, so a one-bastion start becomes the team's
//! record mid-incident.

use crate::session::{Principal, SessionError};
use dlq_core::access::{Permission, Role};
use dlq_core::journal::{Approval, JournalError};
use dlq_core::ledger_location::Location;
use dlq_ledger::{Ledger, Migrated};

/// Seconds without a heartbeat after which `--take-over` may end a sender.
pub const TAKE_OVER_AFTER_S: u32 = dlq_ledger::TAKE_OVER_AFTER_S;

/// Copy the file ledger `from` into the server ledger `to` (see `Ledger::migrate_to`);
/// what happened, in a line.
pub fn migrate(from: &Location, to: &Location, actor: &str) -> Result<String, JournalError> {
    let other = |message: String| JournalError::Other {
        path: from.to_string(),
        message,
    };
    if !matches!(from, Location::File(p) if p.exists()) {
        return Err(other(
            "no file ledger here to migrate (nothing recorded yet, or --ledger names a server)"
                .into(),
        ));
    }
    if !matches!(to, Location::Server(_)) {
        return Err(other(format!(
            "--to {to}: the team ledger is a server, postgres://user@host/db"
        )));
    }
    let source = Ledger::open_at(from, actor)?;
    let target = Ledger::open_at(to, actor)?;
    Ok(match source.migrate_to(&target)? {
        Migrated::Copied {
            entries,
            rows,
            head,
        } => format!(
            "copied {entries} audit entries and {rows} rows from {from} into {to}; both verify. The file's head {head} is recorded there (`ledger-migrated`); record further decisions with --ledger {to}"
        ),
        Migrated::AlreadyThere { head } => {
            format!("{to} already holds this ledger (head {head}): nothing to do")
        }
    })
}

/// `dlq-triage approve ID` / `:approve ID`: the plan as its author saw it, and — when
/// `decide` — the approval or rejection recorded (an operator other than its author).
pub fn approve(
    principal: &Principal,
    id: &str,
    decide: Option<(bool, &str)>,
) -> Result<Approval, SessionError> {
    principal.require(Permission::Replay, id)?;
    let mut ledger = principal.ledger_to_write()?;
    let Some(a) = ledger.approval(id)? else {
        return Err(SessionError::Invalid(format!(
            "no approval `{}` in the ledger",
            dlq_core::sanitize::clean(id)
        )));
    };
    match decide {
        None => Ok(a),
        Some((yes, note)) => Ok(ledger.decide_approval(id, yes, note)?),
    }
}

/// `replay --resume ID --take-over`: end replay `id`'s sender once its heartbeat, on the
/// server's clock, is older than the lease allows — frozen by Ctrl-Z, its network cut,
/// its bastion gone — so the resume that follows takes it over (the server ends the
/// sender's session and voids its lease; an entry names both). While the heartbeat is
/// fresh this waits, asking the server once a second and saying so through `waiting`,
/// up to a few seconds past the lease; a sender that goes on renewing is `LeaseHeld`.
pub fn take_over(
    principal: &Principal,
    id: &str,
    mut waiting: impl FnMut(&str),
) -> Result<String, SessionError> {
    principal.require_write(dlq_core::access::WriteOp::Resume, id)?;
    let mut ledger = principal.ledger_to_write()?;
    let patience = std::time::Duration::from_secs(u64::from(TAKE_OVER_AFTER_S) + 5);
    let until = std::time::Instant::now() + patience;
    loop {
        match ledger.replay_take_over(id) {
            Err(JournalError::LeaseHeld { holder, .. }) if std::time::Instant::now() < until => {
                waiting(&holder);
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            other => return Ok(other?),
        }
    }
}

/// What a team ledger decides for this client: its role and the team's policy.
#[derive(Debug, Default)]
pub struct TeamView {
    pub role: Option<Role>,
    /// What to show: why the role is less than it would be (the server unreachable, its
    /// roles unreadable), a setup that leaves the team open to a planted function.
    pub notes: Vec<String>,
    /// The team's policy (`approval_above`, …), set on the server by a privileged role.
    pub policy: Vec<(String, String)>,
    /// Why the server could not be reached: the role above is a stand-in, and a write
    /// is refused for this reason, not for the role.
    pub unreachable: Option<String>,
}

/// The role on a team ledger: the server's for the role this client authenticates as,
/// once the team manages roles there (`dlq-triage roles set`); until then the local one
/// (`local`, from the roles file). **Fail closed**: a server that cannot be reached, or
/// roles or policy that cannot be read, leave the viewer role, said (browsing works;
/// nothing can be recorded without the ledger anyway). `None` role: not a team ledger.
pub fn team_view(at: &Location, local: Role, read_only: bool) -> TeamView {
    if !matches!(at, Location::Server(_)) {
        return TeamView::default();
    }
    let viewer = |why: String| TeamView {
        role: Some(Role::Viewer),
        notes: vec![why],
        policy: Vec::new(),
        unreachable: None,
    };
    let ledger = match Ledger::open_at(at, "") {
        Ok(l) => l,
        Err(e) => {
            let why = dlq_core::uri::redact(&e.to_string());
            return TeamView {
                unreachable: Some(why.clone()),
                ..viewer(format!(
                    "the team ledger cannot be reached ({why}): browsing works, decisions are shown as unknown, and nothing can be recorded until it answers"
                ))
            };
        }
    };
    let (roles, policy) = match (ledger.team_roles(), ledger.team_policy()) {
        (Ok(r), Ok(p)) => (r.unwrap_or_default(), p.unwrap_or_default()),
        (Err(e), _) | (_, Err(e)) => {
            return viewer(format!(
                "the team's roles or policy cannot be read from the team ledger ({e}): viewer until they can"
            ))
        }
    };
    let role = if roles.is_empty() {
        local
    } else {
        let me = ledger.actor().to_string();
        roles
            .iter()
            .find(|(a, _)| *a == me)
            .map_or(Role::Viewer, |(_, r)| match r.as_str() {
                "privileged" => Role::Privileged,
                "operator" => Role::Operator,
                _ => Role::Viewer,
            })
    };
    let notes = match ledger.public_writable() {
        Ok(true) => vec![format!(
            "the schema `public` of the team ledger's database is writable by {}: a teammate can plant a function there that a session searching it would run (the ledger's own functions never do); its admin should `REVOKE CREATE ON SCHEMA public FROM PUBLIC`",
            dlq_core::sanitize::clean(ledger.actor())
        )],
        _ => Vec::new(),
    };
    TeamView {
        role: Some(if read_only { Role::Viewer } else { role }),
        notes,
        policy,
        unreachable: None,
    }
}

/// `dlq-triage roles`: the team's roles; with `set`, one changed (privileged only).
pub fn roles(
    principal: &Principal,
    set: Option<(&str, &str)>,
) -> Result<Vec<(String, String)>, SessionError> {
    let mut ledger = team_ledger(
        principal,
        set.is_some(),
        "roles are kept on the team's ledger (--ledger postgres://…); on one host they come from /etc/dlq-triage/roles.toml",
    )?;
    if let Some((actor, role)) = set {
        ledger.set_team_role(actor, role)?;
    }
    Ok(ledger.team_roles()?.unwrap_or_default())
}

/// `dlq-triage policy`: the team's policy; with `set`, one key set or (`None`) cleared
/// (privileged; audited on the server). A client's config tightens it, never loosens it.
pub fn policy(
    principal: &Principal,
    set: Option<(&str, Option<&str>)>,
) -> Result<Vec<(String, String)>, SessionError> {
    let mut ledger = team_ledger(
        principal,
        set.is_some(),
        "the team's policy is kept on the team's ledger (--ledger postgres://…); on one host the config file decides",
    )?;
    if let Some((key, value)) = set {
        ledger.set_team_policy(key, value)?;
    }
    Ok(ledger.team_policy()?.unwrap_or_default())
}

/// The team's ledger, to read or (`write`) to change; `not_team` where it is a file.
fn team_ledger(
    principal: &Principal,
    write: bool,
    not_team: &str,
) -> Result<Box<dyn dlq_core::journal::Journal>, SessionError> {
    let at = principal.ledger.as_ref().ok_or(SessionError::NoLedger)?;
    if !matches!(at, Location::Server(_)) {
        return Err(SessionError::Invalid(not_team.into()));
    }
    if write {
        principal.ledger_to_write()
    } else {
        principal.ledger()
    }
}

/// Replays of `source` being sent by other live processes, a line each (`r-… by alice ·
/// 212 of 540 confirmed · pid 4121 on bastion-2`), for a teammate's view.
pub fn running_elsewhere(ledger: &dyn dlq_core::journal::Journal, source: &str) -> Vec<String> {
    let Ok(rows) = ledger.replays() else {
        return Vec::new();
    };
    rows.into_iter()
        .filter(|r| r.source == source)
        .filter_map(|r| {
            r.held_by.as_ref()?;
            let held = r.running_on.clone()?;
            let (_, items) = ledger.replay(&r.id).ok().flatten()?;
            let confirmed = items.iter().filter(|i| i.state.delivered()).count();
            Some(dlq_core::sanitize::clean(&format!(
                "{} by {} · {confirmed} of {} confirmed · {held}",
                r.id,
                r.actor,
                items.len()
            )))
        })
        .collect()
}
