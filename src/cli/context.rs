//! What every command needs: config, the clock, the masker, and loading a source.

use super::Cli;
use crate::brokers;
use crate::config::Config;
use crate::core::catalog::Catalog;
use crate::core::filter::Filter;
use crate::core::masking::Masker;
use crate::core::model::DeadLetter;
use crate::core::ports::{ScanEvent, SourceError, SourceInfo};
use crate::core::sanitize;
use crate::core::source::SourceRef;
use crate::core::store::RowId;
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use std::ops::ControlFlow;

/// Letters per ingest batch.
const BATCH: usize = 4096;

/// A usage problem (bad source, bad filter, unsupported kind): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

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
    /// The ledger file (flag, environment, config, or the state dir).
    pub ledger_path: Option<std::path::PathBuf>,
    /// The user's role (roles file, capped by --read-only).
    pub role: crate::core::access::Role,
}

/// A source scanned into a catalog. The source stays open as long as this lives
/// (RabbitMQ: the browsed deliveries stay held, so a discard can settle them).
pub struct Loaded {
    pub catalog: Catalog,
    pub info: SourceInfo,
    pub source: Option<Box<dyn crate::core::ports::DlqSource>>,
    /// The source's key in the ledger (its URI without the password).
    pub source_key: String,
    /// Coordinates per row, for settling (kept for RabbitMQ sources only).
    pub coords: Vec<Option<crate::core::model::Coords>>,
}

impl Context {
    pub fn new(cli: &Cli) -> anyhow::Result<Self> {
        let config = Config::load(cli.config.as_deref())
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
                let ms = crate::core::timefmt::parse_duration_ms(d).ok_or_else(|| {
                    UsageError(format!(
                        "--since takes a duration like 90s, 15m, 2h, 1d; got `{}`",
                        sanitize::clean(d)
                    ))
                })?;
                Some(now - chrono::Duration::milliseconds(ms))
            }
        };
        let ledger_path = cli
            .ledger
            .clone()
            .or_else(|| config.ledger.clone())
            .or_else(|| crate::config::state_dir().map(|d| d.join("ledger.db")));
        let actor = crate::core::ledger::current_actor();
        let roles_file = cli.roles_file.clone().or_else(|| config.roles_file.clone());
        let role = crate::core::access::resolve(
            roles_file.as_deref(),
            &actor,
            &crate::core::access::os_groups(&actor),
            cli.read_only,
        )
        .map_err(|e| UsageError(sanitize::clean(&e)))?;
        Ok(Context {
            config,
            now,
            read_only: cli.read_only,
            kafka_props,
            since,
            management_url: cli.management_url.clone(),
            ledger_path,
            role,
        })
    }

    pub fn now_ms(&self) -> i64 {
        self.now.timestamp_millis()
    }

    /// Resolve a source argument: a named source from config first, then a URI.
    pub fn resolve_source(&self, arg: &str) -> anyhow::Result<SourceRef> {
        if let Some(named) = self.config.sources.get(arg) {
            return SourceRef::parse(&named.uri)
                .map_err(|e| UsageError(format!("source `{arg}` in config: {e}")).into());
        }
        SourceRef::parse(arg).map_err(|e| UsageError(e).into())
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
        let opts = brokers::OpenOptions {
            kafka_props,
            now: Some(self.now),
            since: self.since,
            management_url: self.management_url.clone(),
        };
        Ok((source, opts))
    }

    /// Open a source (named or URI) with the options of this run.
    pub fn open(&self, arg: &str) -> anyhow::Result<Box<dyn crate::core::ports::DlqSource>> {
        let (source, opts) = self.source_plan(arg)?;
        open_planned(&source, &opts)
    }

    /// Scan the whole source into a catalog.
    pub fn load(&self, arg: &str, previews: bool) -> anyhow::Result<Loaded> {
        self.load_with(arg, previews, |_, _, _| Ok(()))
    }

    /// Scan with previews, visiting every full letter (see `load_with`).
    pub fn load_visit(
        &self,
        arg: &str,
        visit: impl FnMut(&Catalog, RowId, DeadLetter) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        self.load_with(arg, true, visit)
    }

    /// Scan the whole source, handing every full letter (payload included) to `visit`
    /// right after it is indexed; only metadata is kept afterwards. `visit` failing
    /// stops the scan with that error.
    pub fn load_with(
        &self,
        arg: &str,
        previews: bool,
        mut visit: impl FnMut(&Catalog, RowId, DeadLetter) -> anyhow::Result<()>,
    ) -> anyhow::Result<Loaded> {
        let (source_ref, opts) = self.source_plan(arg)?;
        let source_key = source_ref.to_string();
        let mut src = open_planned(&source_ref, &opts)?;
        // Only RabbitMQ settles by coordinates (an ack of a held delivery); elsewhere the
        // store's coordinate label is enough, and 1M Kafka letters should not pay for it.
        let keep_coords = matches!(source_ref, SourceRef::Amqp { .. });
        let mut coords: Vec<Option<crate::core::model::Coords>> = Vec::new();
        let info = src.info();
        let mut catalog =
            Catalog::new(self.masker()?, self.config.conventions.clone()).with_previews(previews);
        let mut failed: Option<anyhow::Error> = None;
        // Letters are ingested in batches so conventions and previews use every core.
        let mut batch: Vec<crate::core::model::RawLetter> = Vec::with_capacity(BATCH);
        let mut flush = |catalog: &mut Catalog,
                         batch: &mut Vec<crate::core::model::RawLetter>|
         -> anyhow::Result<()> {
            for (row, dl) in catalog.ingest_batch(std::mem::take(batch)) {
                if keep_coords {
                    if coords.len() <= row as usize {
                        coords.resize(row as usize + 1, None);
                    }
                    coords[row as usize] = dl.raw.coords.clone();
                }
                visit(catalog, row, dl)?;
            }
            Ok(())
        };
        src.scan(&mut |ev| {
            match ev {
                ScanEvent::Letter(raw) => {
                    batch.push(raw);
                    if batch.len() >= BATCH {
                        if let Err(e) = flush(&mut catalog, &mut batch) {
                            failed = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                }
                ScanEvent::Problem { location, message } => {
                    catalog.record_problem(location, message)
                }
                ScanEvent::Progress { .. } => {}
            }
            ControlFlow::Continue(())
        })
        .with_context(|| format!("scanning {}", info.label))?;
        if let Some(e) = failed {
            return Err(e);
        }
        flush(&mut catalog, &mut batch)?;
        catalog.shrink_to_fit();
        let mut loaded = Loaded {
            catalog,
            info,
            source: Some(src),
            source_key,
            coords,
        };
        self.apply_ledger(&mut loaded)?;
        Ok(loaded)
    }
}

impl Context {
    /// Check a permission; a refusal says which role it needs and is audited (unless
    /// --read-only, which writes nothing).
    pub fn require(&self, p: crate::core::access::Permission, target: &str) -> anyhow::Result<()> {
        match crate::core::access::check(self.role, p) {
            Ok(()) => Ok(()),
            Err(denied) => {
                if !self.read_only {
                    if let Ok(mut l) = self.ledger() {
                        let detail = serde_json::json!({"refused": denied.to_string()}).to_string();
                        let _ = l.audit("denied", target, &detail);
                    }
                }
                Err(anyhow::anyhow!(
                    "refused: {denied}{}",
                    if self.read_only {
                        " (--read-only caps everyone at viewer)"
                    } else {
                        ""
                    }
                ))
            }
        }
    }

    /// Whether payloads (masked) may be shown at all.
    pub fn may_view_payloads(&self) -> bool {
        crate::core::access::check(self.role, crate::core::access::Permission::ViewPayload).is_ok()
    }

    /// Open the ledger for writing (created on first use).
    pub fn ledger(&self) -> anyhow::Result<crate::core::ledger::Ledger> {
        let path = self.ledger_path.clone().ok_or_else(|| {
            UsageError("no ledger location: set --ledger or XDG_STATE_HOME/HOME".into())
        })?;
        Ok(crate::core::ledger::Ledger::open(
            &path,
            &crate::core::ledger::current_actor(),
        )?)
    }

    /// Bring the ledger's decisions to a scanned source: recorded states on the letters,
    /// and decisions recorded but never confirmed by the broker (a crash, a dropped
    /// connection) applied now — once. Read-only runs and runs without a ledger file only
    /// show states.
    fn apply_ledger(&self, loaded: &mut Loaded) -> anyhow::Result<()> {
        let Some(path) = self.ledger_path.as_ref().filter(|p| p.exists()) else {
            return Ok(());
        };
        let mut ledger =
            crate::core::ledger::Ledger::open(path, &crate::core::ledger::current_actor())?;
        let decisions = ledger.decisions(&loaded.source_key)?;
        if decisions.is_empty() {
            return Ok(());
        }
        // Rows of the decided letters only (few), keyed by owned ids so the store can
        // then be updated and the same map serves reconciliation.
        let decided: std::collections::HashSet<&str> =
            decisions.iter().map(|d| d.letter_id.as_str()).collect();
        let mut rows_by_id: std::collections::HashMap<String, Vec<RowId>> =
            std::collections::HashMap::new();
        let store = &loaded.catalog.store;
        for (i, r) in store.rows().iter().enumerate() {
            if decided.contains(store.id(r)) {
                rows_by_id
                    .entry(store.id(r).to_string())
                    .or_default()
                    .push(i as RowId);
            }
        }
        for r in rows_by_id.values().flatten() {
            loaded
                .catalog
                .store
                .set_state(*r, crate::core::model::TriageState::Discarded);
        }
        if self.read_only {
            return Ok(());
        }
        let Some(src) = loaded.source.as_mut() else {
            return Ok(());
        };
        let coords = &loaded.coords;
        let coords_of = |id: &str| -> Vec<crate::core::model::Coords> {
            rows_by_id
                .get(id)
                .into_iter()
                .flatten()
                .filter_map(|r| coords.get(*r as usize).cloned().flatten())
                .collect()
        };
        for note in crate::core::decisions::reconcile(
            &mut ledger,
            src.as_mut(),
            &loaded.source_key,
            &coords_of,
        )? {
            eprintln!("{}", sanitize::clean(&note));
        }
        Ok(())
    }
}

/// Open a planned source, mapping "unsupported" to a usage error (exit code 2).
pub fn open_planned(
    source: &SourceRef,
    opts: &brokers::OpenOptions,
) -> anyhow::Result<Box<dyn crate::core::ports::DlqSource>> {
    brokers::open(source, opts).map_err(|e| match e {
        SourceError::Unsupported(m) => anyhow::Error::new(UsageError(m)),
        other => anyhow::Error::new(other),
    })
}

/// Report unreadable records on stderr (human output only; JSON carries them inline).
pub fn report_problems(catalog: &Catalog) {
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

/// Problems as JSON: `{"count": N, "first": [{"location", "message"}]}`.
pub fn problems_json(catalog: &Catalog) -> serde_json::Value {
    let (problems, count) = catalog.problems();
    serde_json::json!({
        "count": count,
        "first": problems.iter().take(20).map(|p| serde_json::json!({
            "location": p.location,
            "message": sanitize::line(&p.message, 500),
        })).collect::<Vec<_>>(),
    })
}
