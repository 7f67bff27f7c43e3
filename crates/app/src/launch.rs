//! The program assembled once: from the flags a front end parsed to what every command
//! and the TUI need — config (its precedence), the clock, the ledger's location, the
//! principal (identity from the OS, role from the roles file or the team ledger), the
//! codec, a source's plan (named source or URI, credentials kept off argv) and its
//! `Settings`, and a scan into a catalog. The CLI and the TUI both start from a
//! [`Launch`]; neither decides any of this itself.

use crate::brokers;
use crate::config::Config;
use crate::session::{Principal, Session, SessionEvent, Settings};
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use dlq_core::catalog::Catalog;
use dlq_core::filter::Filter;
use dlq_core::ledger_location::Location;
use dlq_core::masking::Masker;
use dlq_core::model::DeadLetter;
use dlq_core::ports::{SourceError, SourceInfo};
use dlq_core::sanitize;
use dlq_core::source::SourceRef;
use dlq_core::store::RowId;
use std::ops::ControlFlow;
use std::sync::Arc;

/// A usage problem (bad source, bad filter, unsupported kind): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The options every front end takes (the CLI's global flags, filled by clap there):
/// plain data, so the application layer knows nothing of argument parsing.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--config`.
    pub config: Option<std::path::PathBuf>,
    pub read_only: bool,
    /// `-X key=value`, as given.
    pub kafka_props: Vec<String>,
    pub roles_file: Option<std::path::PathBuf>,
    /// `--ledger`: a file or a PostgreSQL URL.
    pub ledger: Option<String>,
    pub management_url: Option<String>,
    pub management_plain_http: bool,
    pub max_letters: Option<u64>,
    pub queue_type: Option<String>,
    pub allow_redelivery: bool,
    /// `--since`: a duration (`2h`).
    pub since: Option<String>,
    pub schema_registry: Option<String>,
    pub schema_registry_ca: Option<std::path::PathBuf>,
    pub registry_plain_http: bool,
    pub schemas: Option<std::path::PathBuf>,
    /// `--now`: RFC 3339, a fixed clock.
    pub now: Option<String>,
    /// The source the command names, if any (its config entry may name a ledger).
    pub source: Option<String>,
}

/// A scan's progress, shown by the front end that started it (a bar on the CLI's
/// terminal; the TUI has its own status line).
pub trait ScanProgress {
    /// `n` more letters read.
    fn add(&mut self, n: u64);
    /// The source's count or estimate, when it knows one.
    fn total(&mut self, total: Option<u64>);
    /// The scan ended.
    fn finish(&mut self);
}

/// No progress shown.
pub struct Quiet;

impl ScanProgress for Quiet {
    fn add(&mut self, _: u64) {}
    fn total(&mut self, _: Option<u64>) {}
    fn finish(&mut self) {}
}

/// The assembled program: everything a command or the TUI needs before it opens a source.
pub struct Launch {
    pub config: Config,
    pub now: DateTime<Utc>,
    pub read_only: bool,
    /// How to open a source, from the flags (`-X` properties in order); a named
    /// source's own librdkafka properties go before these (`plan_for`).
    open: brokers::OpenOptions,
    /// The ledger file (flag, environment, config, or the state dir).
    pub ledger: Option<Location>,
    /// The user's role (roles file, capped by --read-only).
    pub role: dlq_core::access::Role,
    /// The team ledger could not be reached at start: why (see `Principal`).
    pub ledger_unreachable: Option<String>,
    /// Decodes schema-encoded payloads (`--schema-registry`, `--schemas`, config).
    pub codec: Option<dlq_core::schema::Codec>,
    /// What the start found worth saying (the team ledger's notes, a config tightened
    /// by the team's policy), sanitized; the front end shows them.
    pub warnings: Vec<String>,
}

/// A source scanned into a catalog, with the session that scanned it. The source stays
/// open as long as this lives (RabbitMQ: the browsed deliveries stay held, so a discard
/// can settle them).
pub struct Loaded {
    pub catalog: Catalog,
    pub session: Session,
    pub info: SourceInfo,
    /// The source's key in the ledger (its URI without credentials).
    pub source_key: String,
    /// What the scan found worth saying (notices, partly browsed containers, decisions
    /// a crash left pending and now applied), sanitized, one line each.
    pub notes: Vec<String>,
}

impl Launch {
    pub fn new(cli: &Flags) -> anyhow::Result<Self> {
        let mut config = Config::load(cli.config.as_deref())
            .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
        let now = match &cli.now {
            Some(t) => DateTime::parse_from_rfc3339(t)
                .map_err(|e| UsageError(format!("--now / DLQ_TRIAGE_NOW must be RFC 3339: {e}")))?
                .with_timezone(&Utc),
            None => Utc::now(),
        };
        let kafka_props = kafka_props(&cli.kafka_props)?;
        let since = since(cli.since.as_deref(), now)?;
        let ledger = ledger_location(cli, &config)?;
        let mut warnings = Vec::new();
        let (role, ledger_unreachable) = role(cli, &mut config, ledger.as_ref(), &mut warnings)?;
        let codec = crate::schemas::open(
            &crate::schemas::SchemaFlags {
                registry: cli.schema_registry.clone(),
                registry_ca: cli.schema_registry_ca.clone(),
                dir: cli.schemas.clone(),
                registry_plain_http: cli.registry_plain_http,
            },
            &config,
            cli.source.as_deref(),
        )
        .map_err(|e| UsageError(sanitize::clean(&e)))?;
        Ok(Launch {
            warnings,
            config,
            now,
            read_only: cli.read_only,
            open: brokers::OpenOptions {
                kafka_props,
                now: Some(now),
                since,
                management_url: cli.management_url.clone(),
                queue_type: cli.queue_type.clone(),
                allow_redelivery: cli.allow_redelivery,
                management_plain_http: cli.management_plain_http,
                max_letters: cli.max_letters,
            },
            ledger,
            ledger_unreachable,
            role,
            codec,
        })
    }

    /// `--since`, as the time it reaches back to.
    pub fn since(&self) -> Option<DateTime<Utc>> {
        self.open.since
    }

    pub fn now_ms(&self) -> i64 {
        self.now.timestamp_millis()
    }

    /// Resolve a source argument: a named source from config first, then a URI. An
    /// amqp URI with a user but no password gets it from the environment or the
    /// credentials file (see `crate::credentials`), so it never needs to be on argv.
    pub fn resolve_source(&self, arg: &str) -> anyhow::Result<SourceRef> {
        let mut source = match self.config.sources.get(arg) {
            Some(named) => SourceRef::parse(&named.uri)
                .map_err(|e| UsageError(format!("source `{arg}` in config: {e}")))?,
            None => SourceRef::parse(arg).map_err(|e| UsageError(e.0))?,
        };
        if let SourceRef::Amqp {
            user,
            password,
            host,
            ..
        } = &mut source
        {
            if password.is_empty() {
                let found = crate::credentials::lookup(
                    crate::credentials::Kind::Amqp,
                    user,
                    host,
                    crate::credentials::default_path().as_deref(),
                )
                .map_err(|e| UsageError(sanitize::clean(&e)))?;
                if let Some(p) = found {
                    *password = p;
                }
            }
        }
        Ok(source)
    }

    pub fn parse_filter(&self, expr: Option<&str>) -> anyhow::Result<Filter> {
        match expr {
            None => Ok(Filter::all()),
            Some(e) => {
                Filter::parse(e).map_err(|e| UsageError(format!("bad --filter: {e}")).into())
            }
        }
    }

    pub fn masker(&self) -> anyhow::Result<Masker> {
        Masker::new(&self.config.masking, crate::config::mask_hash_key())
            .map_err(|e| UsageError(e).into())
    }

    /// What to open for a source argument (named or URI) and with which options. Both
    /// are `Send`, so a worker thread can open the source itself (the demo's mock cluster
    /// must live on the thread that uses it).
    pub fn source_plan(&self, arg: &str) -> anyhow::Result<(SourceRef, brokers::OpenOptions)> {
        let source = self.resolve_source(arg)?;
        self.plan_for(source, arg)
    }

    /// Topic/queue name patterns taken for DLQs: `dlq_patterns` in config, else the
    /// defaults.
    pub fn dlq_patterns(&self) -> Vec<String> {
        if self.config.dlq_patterns.is_empty() {
            crate::brokers::discovery::DEFAULT_PATTERNS
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            self.config.dlq_patterns.clone()
        }
    }

    /// A source argument that names a broker but no queue or topic
    /// (`amqp://host/vhost`, `kafka://host:9092`): the broker, for discovery.
    /// `Ok(None)` when `arg` has its queue or topic; an error names what is wrong with a
    /// broker URI (a bad port, a bad escape), not the missing queue.
    pub fn broker_only(&self, arg: &str) -> anyhow::Result<Option<SourceRef>> {
        let a = arg.trim();
        let probe = if a.starts_with("kafka://") && !a["kafka://".len()..].contains('/') {
            format!("{}/_", a.trim_end_matches('/'))
        } else if (a.starts_with("amqp://") || a.starts_with("amqps://")) && !a.contains("queue=") {
            // Other parameters (amqps' certificate files) keep their place.
            match a.trim_end_matches(['?', '&']) {
                t if t.contains('?') => format!("{t}&queue=_"),
                t => format!("{t}?queue=_"),
            }
        } else {
            return Ok(None);
        };
        self.resolve_source(&probe).map(Some)
    }

    /// What to open for a resolved source; `arg` names its config entry, if any.
    pub fn plan_for(
        &self,
        source: SourceRef,
        arg: &str,
    ) -> anyhow::Result<(SourceRef, brokers::OpenOptions)> {
        // Named sources bring their own librdkafka properties; -X wins over them.
        let mut kafka_props: Vec<(String, String)> = self
            .config
            .sources
            .get(arg)
            .map(|s| {
                s.kafka
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        kafka_props.extend(self.open.kafka_props.iter().cloned());
        // SASL password from the environment or the credentials file when only the
        // user name is given (keeps it off argv).
        let has = |k: &str| kafka_props.iter().any(|(key, _)| key == k);
        if let (SourceRef::Kafka { brokers, .. }, false) = (&source, has("sasl.password")) {
            let user = kafka_props
                .iter()
                .find(|(k, _)| k == "sasl.username")
                .map(|(_, v)| v.clone());
            if let (Some(user), Some(first)) = (user, brokers.first()) {
                let found = crate::credentials::lookup(
                    crate::credentials::Kind::Kafka,
                    &user,
                    first,
                    crate::credentials::default_path().as_deref(),
                )
                .map_err(|e| UsageError(sanitize::clean(&e)))?;
                if let Some(p) = found {
                    kafka_props.push(("sasl.password".into(), p));
                }
            }
        }
        let opts = brokers::OpenOptions {
            kafka_props,
            ..self.open.clone()
        };
        Ok((source, opts))
    }

    /// Open a source (named or URI) with the options of this run.
    pub fn open(&self, arg: &str) -> anyhow::Result<Box<dyn dlq_core::ports::DlqSource>> {
        let (source, opts) = self.source_plan(arg)?;
        open_planned(&source, &opts)
    }

    /// Scan the whole source into a catalog.
    pub fn load(
        &self,
        arg: &str,
        previews: bool,
        progress: &mut dyn ScanProgress,
    ) -> anyhow::Result<Loaded> {
        self.load_with(arg, previews, progress, |_, _, _| Ok(()))
    }

    /// Scan for `filter`: its `payload.…` and header terms are judged on each whole
    /// letter as the scan hands it over (only metadata is kept afterwards), and its bare
    /// words are looked for in payloads too, to say so if they find nothing else.
    pub fn load_filtered(
        &self,
        arg: &str,
        previews: bool,
        filter: &mut dlq_core::filter::Filter,
        progress: &mut dyn ScanProgress,
    ) -> anyhow::Result<Loaded> {
        if !filter.wants_letters() {
            return self.load(arg, previews, progress);
        }
        self.load_with(arg, previews, progress, |cat, row, dl| {
            if let Some(r) = cat.store.row(row) {
                filter.note_letter(r, &dl, cat.masker());
            }
            Ok(())
        })
    }

    /// Scan the whole source, handing every full letter (payload included) to `visit`
    /// right after it is indexed; only metadata is kept afterwards. `visit` failing
    /// stops the scan with that error. Decisions a crash left pending are applied after
    /// the scan (notes on stderr).
    pub fn load_with(
        &self,
        arg: &str,
        previews: bool,
        bar: &mut dyn ScanProgress,
        mut visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        let (source_ref, opts) = self.source_plan(arg)?;
        let source_key = source_ref.to_string();
        let src = open_planned(&source_ref, &opts)?;
        let mut session = Session::new(src, self.session_settings(&source_key)?)?;
        let info = session.info().clone();
        let mut catalog =
            Catalog::new(self.masker()?, self.config.conventions.clone()).with_previews(previews);
        let mut failed: Option<anyhow::Error> = None;
        session
            .scan(previews, &mut |ev| {
                match ev {
                    SessionEvent::Letters(batch) => {
                        bar.add(batch.len() as u64);
                        for p in batch {
                            let row = catalog.push_prepared(&p);
                            if let Err(e) = visit(&catalog, row, p.letter) {
                                failed = Some(e);
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    SessionEvent::Problem(p) => catalog.record_problem(p.location, p.message),
                    // Kept by the session; said after the scan and in JSON.
                    SessionEvent::Partial(_) | SessionEvent::Notice(_) => {}
                    SessionEvent::Progress { total, .. } => {
                        if let Some(t) = total {
                            catalog.store.reserve(t);
                        }
                        bar.total(total)
                    }
                }
                ControlFlow::Continue(())
            })
            .with_context(|| format!("scanning {}", sanitize::clean(&info.label)))?;
        bar.finish();
        if let Some(e) = failed {
            return Err(e);
        }
        catalog.shrink_to_fit();
        let mut notes: Vec<String> = session
            .notices()
            .iter()
            .map(|n| {
                format!(
                    "note: {}: {}",
                    sanitize::clean(&n.location),
                    sanitize::line(&n.message, 300)
                )
            })
            .collect();
        notes.extend(session.partial().iter().map(|c| {
            format!(
                "note: browsed {} of {} in {} — the rest was not read: {}",
                c.browsed,
                c.total,
                sanitize::clean(&c.location),
                sanitize::line(&c.why, 300)
            )
        }));
        notes.extend(session.reconcile().iter().map(|n| sanitize::clean(n)));
        Ok(Loaded {
            catalog,
            session,
            info,
            source_key,
            notes,
        })
    }

    /// Who acts and where it is recorded, for this run.
    pub fn principal(&self) -> Principal {
        Principal {
            actor: crate::identity::current_actor(),
            role: self.role,
            read_only: self.read_only,
            ledger: self.ledger.clone(),
            ledger_unreachable: self.ledger_unreachable.clone(),
        }
    }

    pub fn session_settings(&self, source_key: &str) -> anyhow::Result<Settings> {
        Ok(Settings {
            source_key: source_key.to_string(),
            principal: self.principal(),
            masker: self.masker()?,
            mappings: self.config.conventions.clone(),
            codec: self.codec.clone(),
            since: self.since(),
            approval_above: self.config.replay.approval_above,
            discard_approval_above: self.config.discard.approval_above,
            allowed_targets: self.config.replay.allowed_targets.clone(),
        })
    }

    /// Check a permission; a refusal says which role it needs and is audited (unless
    /// --read-only, which writes nothing).
    pub fn require(&self, p: dlq_core::access::Permission, target: &str) -> anyhow::Result<()> {
        Ok(self.principal().require(p, &redact_target(target))?)
    }

    /// Check a write before it is made (see `Principal::require_write`); a `--read-only`
    /// refusal is a usage error (exit 2), a role's is audited.
    pub fn require_write(&self, w: dlq_core::access::WriteOp, target: &str) -> anyhow::Result<()> {
        self.principal()
            .require_write(w, &redact_target(target))
            .map_err(|e| match e {
                crate::session::SessionError::ReadOnly(r) => UsageError(r.to_string()).into(),
                other => anyhow::Error::new(other),
            })
    }

    /// Whether payloads (masked) may be shown at all.
    pub fn may_view_payloads(&self) -> bool {
        self.principal()
            .may(dlq_core::access::Permission::ViewPayload)
    }

    /// Open the ledger for writing (created on first use).
    pub fn ledger(&self) -> anyhow::Result<Box<dyn dlq_core::journal::Journal>> {
        Ok(self.principal().ledger()?)
    }
}

/// `-X key=value` pairs, in order.
fn kafka_props(given: &[String]) -> Result<Vec<(String, String)>, UsageError> {
    given
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(UsageError(format!(
                "-X takes key=value, got `{}`",
                sanitize::clean(kv)
            ))),
        })
        .collect()
}

/// `--since DURATION` as the time it reaches back to.
fn since(given: Option<&str>, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, UsageError> {
    let Some(d) = given else {
        return Ok(None);
    };
    let ms = dlq_core::timefmt::parse_duration_ms(d).ok_or_else(|| {
        UsageError(format!(
            "--since takes a duration like 90s, 15m, 2h, 1d; got `{}`",
            sanitize::clean(d)
        ))
    })?;
    Ok(Some(now - chrono::Duration::milliseconds(ms)))
}

/// The ledger: `--ledger`, else the named source's own, else the config's, else the
/// state dir's file.
fn ledger_location(cli: &Flags, config: &Config) -> Result<Option<Location>, UsageError> {
    let named = cli
        .source
        .as_deref()
        .and_then(|s| config.sources.get(s))
        .and_then(|n| n.ledger.as_deref());
    Ok(
        match cli.ledger.as_deref().or(named).or(config.ledger.as_deref()) {
            Some(given) => Some(Location::parse(given).map_err(UsageError)?),
            None => crate::config::state_dir().map(|d| Location::File(d.join("ledger.db"))),
        },
    )
}

/// The user's role: the roles file's (capped by `--read-only`), then — on a team ledger
/// whose team manages roles there — the server's; the team's policy becomes the floor of
/// this config's (what that tightened is said in `warnings`).
fn role(
    cli: &Flags,
    config: &mut Config,
    ledger: Option<&Location>,
    warnings: &mut Vec<String>,
) -> Result<(dlq_core::access::Role, Option<String>), UsageError> {
    let os = crate::identity::System;
    let actor = crate::identity::current_actor();
    let roles_file = dlq_core::access::roles_file_for(
        &os,
        cli.roles_file.as_deref().or(config.roles_file.as_deref()),
        cfg!(feature = "test-hooks"),
    )
    .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
    let role = dlq_core::access::resolve(&os, roles_file.as_deref(), &actor, cli.read_only)
        .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
    let Some(at) = ledger else {
        return Ok((role, None));
    };
    let team = crate::team_ledger::team_view(at, role, cli.read_only);
    for n in team.notes.iter().chain(&config.tighten_with(&team.policy)) {
        warnings.push(sanitize::clean(n));
    }
    Ok((team.role.unwrap_or(role), team.unreachable))
}

/// A source argument as it may be recorded: credentials removed.
fn redact_target(target: &str) -> String {
    match SourceRef::parse(target) {
        Ok(s) => s.to_string(),
        Err(_) => dlq_core::uri::redact(target),
    }
}

/// Open a planned source, mapping "unsupported" to a usage error (exit code 2).
pub fn open_planned(
    source: &SourceRef,
    opts: &brokers::OpenOptions,
) -> anyhow::Result<Box<dyn dlq_core::ports::DlqSource>> {
    brokers::open(source, opts).map_err(|e| match e {
        SourceError::Unsupported(m) => anyhow::Error::new(UsageError(m)),
        other => anyhow::Error::new(other),
    })
}
