//! What every command needs: config, the clock, the masker, and loading a source.

use super::Cli;
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use dlq_app::brokers;
use dlq_app::config::Config;
use dlq_app::session::{Principal, Session, SessionEvent, Settings};
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

/// A run that ended in a state scripts must tell apart (replay: auto-stopped 3, killed
/// 4, refused 5); the message is printed as the error line.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

pub fn usage<T>(msg: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(msg.into()).into())
}

pub struct Context {
    pub config: Config,
    pub now: DateTime<Utc>,
    pub read_only: bool,
    /// `-X key=value` properties, in order.
    pub kafka_props: Vec<(String, String)>,
    pub since: Option<DateTime<Utc>>,
    pub management_url: Option<String>,
    pub queue_type: Option<String>,
    pub allow_redelivery: bool,
    pub management_plain_http: bool,
    pub max_letters: Option<u64>,
    /// The ledger file (flag, environment, config, or the state dir).
    pub ledger: Option<Location>,
    /// The user's role (roles file, capped by --read-only).
    pub role: dlq_core::access::Role,
    /// Decodes schema-encoded payloads (`--schema-registry`, `--schemas`, config).
    pub codec: Option<dlq_core::schema::Codec>,
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
}

impl Context {
    pub fn new(cli: &Cli) -> anyhow::Result<Self> {
        let mut config = Config::load(cli.config.as_deref())
            .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
        let now = match &cli.now {
            Some(t) => DateTime::parse_from_rfc3339(t)
                .map_err(|e| UsageError(format!("--now / DLQ_TRIAGE_NOW must be RFC 3339: {e}")))?
                .with_timezone(&Utc),
            None => Utc::now(),
        };
        let kafka_props = cli
            .kafka_props
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(UsageError(format!(
                    "-X takes key=value, got `{}`",
                    sanitize::clean(kv)
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let since = match &cli.since {
            None => None,
            Some(d) => {
                let ms = dlq_core::timefmt::parse_duration_ms(d).ok_or_else(|| {
                    UsageError(format!(
                        "--since takes a duration like 90s, 15m, 2h, 1d; got `{}`",
                        sanitize::clean(d)
                    ))
                })?;
                Some(now - chrono::Duration::milliseconds(ms))
            }
        };
        // --ledger, else the named source's own, else the config's, else the default.
        let named = cli
            .source_arg()
            .and_then(|s| config.sources.get(s))
            .and_then(|n| n.ledger.as_deref());
        let ledger = match cli.ledger.as_deref().or(named).or(config.ledger.as_deref()) {
            Some(given) => Some(Location::parse(given).map_err(UsageError)?),
            None => dlq_app::config::state_dir().map(|d| Location::File(d.join("ledger.db"))),
        };
        let actor = dlq_app::identity::current_actor();
        let roles_file = dlq_core::access::roles_file_for(
            cli.roles_file.as_deref().or(config.roles_file.as_deref()),
            dlq_core::access::real_uid(),
            cfg!(feature = "test-hooks"),
        )
        .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
        let role = dlq_core::access::resolve(
            roles_file.as_deref(),
            &actor,
            &dlq_core::access::os_groups(&actor),
            cli.read_only,
        )
        .map_err(|e| UsageError(sanitize::clean(&e.to_string())))?;
        // On a team ledger the server's roles decide, once the team manages them there,
        // and the team's policy is the floor of this config's.
        let role = match &ledger {
            Some(at) => {
                let team = dlq_app::team_ledger::team_view(at, role, cli.read_only);
                for n in team.notes.iter().chain(&config.tighten_with(&team.policy)) {
                    eprintln!("warning: {}", sanitize::clean(n));
                }
                team.role.unwrap_or(role)
            }
            None => role,
        };
        let codec = dlq_app::schemas::open(
            &dlq_app::schemas::SchemaFlags {
                registry: cli.schema_registry.clone(),
                registry_ca: cli.schema_registry_ca.clone(),
                dir: cli.schemas.clone(),
                registry_plain_http: cli.registry_plain_http,
            },
            &config,
            cli.source_arg(),
        )
        .map_err(|e| UsageError(sanitize::clean(&e)))?;
        Ok(Context {
            config,
            now,
            read_only: cli.read_only,
            kafka_props,
            since,
            management_url: cli.management_url.clone(),
            queue_type: cli.queue_type.clone(),
            allow_redelivery: cli.allow_redelivery,
            management_plain_http: cli.management_plain_http,
            max_letters: cli.max_letters,
            ledger,
            role,
            codec,
        })
    }

    pub fn now_ms(&self) -> i64 {
        self.now.timestamp_millis()
    }

    /// Resolve a source argument: a named source from config first, then a URI. An
    /// amqp URI with a user but no password gets it from the environment or the
    /// credentials file (see `crate::credentials`), so it never needs to be on argv.
    pub(crate) fn resolve_source(&self, arg: &str) -> anyhow::Result<SourceRef> {
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
                let found = dlq_app::credentials::lookup(
                    dlq_app::credentials::Kind::Amqp,
                    user,
                    host,
                    dlq_app::credentials::default_path().as_deref(),
                )
                .map_err(|e| UsageError(sanitize::clean(&e)))?;
                if let Some(p) = found {
                    *password = p;
                }
            }
        }
        Ok(source)
    }

    pub(crate) fn parse_filter(&self, expr: Option<&str>) -> anyhow::Result<Filter> {
        match expr {
            None => Ok(Filter::all()),
            Some(e) => {
                Filter::parse(e).map_err(|e| UsageError(format!("bad --filter: {e}")).into())
            }
        }
    }

    pub fn masker(&self) -> anyhow::Result<Masker> {
        Masker::new(&self.config.masking, dlq_app::config::mask_hash_key())
            .map_err(|e| UsageError(e).into())
    }

    /// What to open for a source argument (named or URI) and with which options. Both
    /// are `Send`, so a worker thread can open the source itself (the demo's mock cluster
    /// must live on the thread that uses it).
    pub(crate) fn source_plan(
        &self,
        arg: &str,
    ) -> anyhow::Result<(SourceRef, brokers::OpenOptions)> {
        let source = self.resolve_source(arg)?;
        self.plan_for(source, arg)
    }

    /// Topic/queue name patterns taken for DLQs: `dlq_patterns` in config, else the
    /// defaults.
    pub(crate) fn dlq_patterns(&self) -> Vec<String> {
        if self.config.dlq_patterns.is_empty() {
            dlq_app::brokers::discovery::DEFAULT_PATTERNS
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
    pub(crate) fn broker_only(&self, arg: &str) -> anyhow::Result<Option<SourceRef>> {
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
    pub(crate) fn plan_for(
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
        kafka_props.extend(self.kafka_props.iter().cloned());
        // SASL password from the environment or the credentials file when only the
        // user name is given (keeps it off argv).
        let has = |k: &str| kafka_props.iter().any(|(key, _)| key == k);
        if let (SourceRef::Kafka { brokers, .. }, false) = (&source, has("sasl.password")) {
            let user = kafka_props
                .iter()
                .find(|(k, _)| k == "sasl.username")
                .map(|(_, v)| v.clone());
            if let (Some(user), Some(first)) = (user, brokers.first()) {
                let found = dlq_app::credentials::lookup(
                    dlq_app::credentials::Kind::Kafka,
                    &user,
                    first,
                    dlq_app::credentials::default_path().as_deref(),
                )
                .map_err(|e| UsageError(sanitize::clean(&e)))?;
                if let Some(p) = found {
                    kafka_props.push(("sasl.password".into(), p));
                }
            }
        }
        let opts = brokers::OpenOptions {
            kafka_props,
            now: Some(self.now),
            since: self.since,
            management_url: self.management_url.clone(),
            queue_type: self.queue_type.clone(),
            allow_redelivery: self.allow_redelivery,
            management_plain_http: self.management_plain_http,
            max_letters: self.max_letters,
        };
        Ok((source, opts))
    }

    /// Open a source (named or URI) with the options of this run.
    pub fn open(&self, arg: &str) -> anyhow::Result<Box<dyn dlq_core::ports::DlqSource>> {
        let (source, opts) = self.source_plan(arg)?;
        open_planned(&source, &opts)
    }

    /// Scan the whole source into a catalog.
    pub fn load(&self, arg: &str, previews: bool) -> anyhow::Result<Loaded> {
        self.load_with(arg, previews, |_, _, _| Ok(()))
    }

    /// Scan for `filter`: its `payload.…` and header terms are judged on each whole
    /// letter as the scan hands it over (only metadata is kept afterwards), and its bare
    /// words are looked for in payloads too, to say so if they find nothing else.
    pub(crate) fn load_filtered(
        &self,
        arg: &str,
        previews: bool,
        filter: &mut dlq_core::filter::Filter,
    ) -> anyhow::Result<Loaded> {
        if !filter.wants_letters() {
            return self.load(arg, previews);
        }
        self.load_with(arg, previews, |cat, row, dl| {
            if let Some(r) = cat.store.row(row) {
                filter.note_letter(r, &dl, cat.masker());
            }
            Ok(())
        })
    }

    /// A filter that matched nothing says why on stderr, when whole letters tell: bare
    /// words that are only in payloads, header names no letter carries.
    pub(crate) fn note_unmatched(filter: &dlq_core::filter::Filter, matched: usize) {
        for note in filter.unmatched_notes(matched as u64) {
            eprintln!("note: {note}");
        }
    }

    /// Scan with previews, visiting every full letter (see `load_with`).
    pub(crate) fn load_visit(
        &self,
        arg: &str,
        visit: impl FnMut(&Catalog, RowId, Arc<DeadLetter>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        self.load_with(arg, true, visit)
    }

    /// Scan the whole source, handing every full letter (payload included) to `visit`
    /// right after it is indexed; only metadata is kept afterwards. `visit` failing
    /// stops the scan with that error. Decisions a crash left pending are applied after
    /// the scan (notes on stderr).
    pub(crate) fn load_with(
        &self,
        arg: &str,
        previews: bool,
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
        let mut bar = super::progress::ScanBar::new();
        session
            .scan(previews, &mut |ev| {
                match ev {
                    SessionEvent::Letters(batch) => {
                        bar.add(batch.len() as u64);
                        for p in batch {
                            let row = catalog.push_prepared(&p);
                            if p.state != dlq_core::model::TriageState::Open {
                                catalog.store.set_state(row, p.state);
                            }
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
        for n in session.notices() {
            eprintln!(
                "note: {}: {}",
                sanitize::clean(&n.location),
                sanitize::line(&n.message, 300)
            );
        }
        for c in session.partial() {
            eprintln!(
                "note: browsed {} of {} in {} — the rest was not read: {}",
                c.browsed,
                c.total,
                sanitize::clean(&c.location),
                sanitize::line(&c.why, 300)
            );
        }
        for note in session.reconcile() {
            eprintln!("{}", sanitize::clean(&note));
        }
        Ok(Loaded {
            catalog,
            session,
            info,
            source_key,
        })
    }

    /// Who acts and where it is recorded, for this run.
    pub fn principal(&self) -> Principal {
        Principal {
            actor: dlq_app::identity::current_actor(),
            role: self.role,
            read_only: self.read_only,
            ledger: self.ledger.clone(),
        }
    }

    pub(crate) fn session_settings(&self, source_key: &str) -> anyhow::Result<Settings> {
        Ok(Settings {
            source_key: source_key.to_string(),
            principal: self.principal(),
            masker: self.masker()?,
            mappings: self.config.conventions.clone(),
            codec: self.codec.clone(),
            since: self.since,
            approval_above: self.config.replay.approval_above,
            discard_approval_above: self.config.discard.approval_above,
            allowed_targets: self.config.replay.allowed_targets.clone(),
        })
    }

    /// Check a permission; a refusal says which role it needs and is audited (unless
    /// --read-only, which writes nothing).
    pub(crate) fn require(
        &self,
        p: dlq_core::access::Permission,
        target: &str,
    ) -> anyhow::Result<()> {
        Ok(self.principal().require(p, &redact_target(target))?)
    }

    /// Whether payloads (masked) may be shown at all.
    pub(crate) fn may_view_payloads(&self) -> bool {
        self.principal()
            .may(dlq_core::access::Permission::ViewPayload)
    }

    /// Open the ledger for writing (created on first use).
    pub fn ledger(&self) -> anyhow::Result<Box<dyn dlq_core::journal::Journal>> {
        Ok(self.principal().ledger()?)
    }
}

/// A source argument as it may be recorded: credentials removed.
fn redact_target(target: &str) -> String {
    match SourceRef::parse(target) {
        Ok(s) => s.to_string(),
        Err(_) => dlq_core::uri::redact(target),
    }
}

/// Open a planned source, mapping "unsupported" to a usage error (exit code 2).
pub(crate) fn open_planned(
    source: &SourceRef,
    opts: &brokers::OpenOptions,
) -> anyhow::Result<Box<dyn dlq_core::ports::DlqSource>> {
    brokers::open(source, opts).map_err(|e| match e {
        SourceError::Unsupported(m) => anyhow::Error::new(UsageError(m)),
        other => anyhow::Error::new(other),
    })
}

/// Report unreadable records on stderr (human output only; JSON carries them inline).
pub(crate) fn report_problems(catalog: &Catalog) {
    let (problems, count) = catalog.problems();
    if count == 0 {
        return;
    }
    eprintln!("warning: {count} record(s) could not be read and are not counted:");
    for p in problems.iter().take(5) {
        eprintln!(
            "  {}: {}",
            sanitize::clean(&p.location),
            sanitize::line(&p.message, 200)
        );
    }
    if count > 5 {
        eprintln!("  … and {} more", count - 5);
    }
}

/// Coverage as JSON: `{"complete": bool, "partial": [{"location", "browsed", "total",
/// "why"}], "notices": [{"location", "message"}]}` — `complete` is false when any
/// container was browsed in part.
pub fn coverage_json(session: &dlq_app::session::Session) -> serde_json::Value {
    let partial = session.partial();
    serde_json::json!({
        "complete": partial.is_empty(),
        "partial": partial.iter().map(|c| serde_json::json!({
            "location": sanitize::clean(&c.location),
            "browsed": c.browsed,
            "total": c.total,
            "why": sanitize::line(&c.why, 300),
        })).collect::<Vec<_>>(),
        "notices": session.notices().iter().map(|n| serde_json::json!({
            "location": sanitize::clean(&n.location),
            "message": sanitize::line(&n.message, 500),
        })).collect::<Vec<_>>(),
    })
}

/// Problems as JSON: `{"count": N, "first": [{"location", "message"}]}`.
pub(crate) fn problems_json(catalog: &Catalog) -> serde_json::Value {
    let (problems, count) = catalog.problems();
    serde_json::json!({
        "count": count,
        "first": problems.iter().take(20).map(|p| serde_json::json!({
            "location": p.location,
            "message": sanitize::line(&p.message, 500),
        })).collect::<Vec<_>>(),
    })
}
