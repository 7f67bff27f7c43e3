//! The scriptable command line: clap definitions and dispatch. Every command loads a
//! source into a core [`Catalog`](dlq_core::catalog::Catalog) and renders it as a
//! human table or stable JSON.

mod approve;
mod args;
mod audit;
mod confirm;
mod context;
mod demo;
mod diff;
mod discard;
mod edit;
mod export;
mod list;
pub mod output;
mod pager;
mod progress;
mod queues;
mod replay;
mod replays;
mod report;
mod show;
mod summary;
mod table;
mod topics;
mod transform;
mod watch;
mod why;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

pub use args::*;
use context::usage;
pub use context::{Exit, Launch, UsageError};
use dlq_app::launch::Flags;

#[derive(Parser, Debug)]
#[command(
    name = "dlq-triage",
    subcommand_negates_reqs = true,
    version,
    about = "Dead-letter-queue triage for Kafka and RabbitMQ",
    long_about = "Dead-letter-queue triage for Kafka and RabbitMQ: see what is failing, grouped by reason, consumer version and age; inspect masked payloads; discard or replay with a tamper-evident ledger.",
    after_help = "Sources: kafka://host:9092/topic[,topic2]  amqp://user:pass@host:5672/vhost?queue=q  file://dump.ndjson (or a .ndjson path)  demo  or a name from [sources] in config.toml.\nFilters: reason=… version=… event=invoice.* schema=3 age>1h age<15m key=… origin=… state=open|discarded attempt>=3 and bare words (fuzzy)."
)]
pub struct Cli {
    /// Config file [default: $XDG_CONFIG_HOME/dlq-triage/config.toml]
    #[arg(long, global = true, env = "DLQ_TRIAGE_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Disable every write (ledger, broker); caps any role at viewing.
    #[arg(long, global = true, env = "DLQ_TRIAGE_READ_ONLY", value_parser = clap::builder::FalseyValueParser::new())]
    pub read_only: bool,

    /// librdkafka property for kafka:// sources, as kcat takes it (repeatable).
    #[arg(short = 'X', global = true, value_name = "KEY=VALUE")]
    pub kafka_props: Vec<String>,

    /// Roles file (viewer/operator/privileged by user or group:NAME)
    /// [default: config `roles_file`, else /etc/dlq-triage/roles.toml if it exists]
    #[arg(
        long,
        global = true,
        env = "DLQ_TRIAGE_ROLES_FILE",
        value_name = "PATH"
    )]
    pub roles_file: Option<PathBuf>,

    /// Log to $XDG_STATE_HOME/dlq-triage/dlq-triage.log: off, error, warn, info, debug
    /// (never payload bytes).
    #[arg(
        long,
        global = true,
        env = "DLQ_TRIAGE_LOG_LEVEL",
        default_value = "warn",
        value_name = "LEVEL"
    )]
    pub log_level: String,

    /// The ledger: a SQLite file, or a team's PostgreSQL (`postgres://user@host/db`,
    /// password from PGPASSWORD or ~/.pgpass) [default: $XDG_STATE_HOME/dlq-triage/ledger.db]
    #[arg(
        long,
        global = true,
        env = "DLQ_TRIAGE_LEDGER",
        value_name = "PATH|URL"
    )]
    pub ledger: Option<String>,

    /// RabbitMQ management API, for queue types, quorum delivery limits, streams and
    /// `queues` [default: http://HOST:15672 when reachable]
    #[arg(
        long,
        global = true,
        env = "DLQ_TRIAGE_MANAGEMENT_URL",
        value_name = "URL"
    )]
    pub management_url: Option<String>,

    /// RabbitMQ: accept plain HTTP to a remote management API although the AMQP
    /// connection is TLS (the API gets the broker password on every call).
    #[arg(long, global = true)]
    pub management_plain_http: bool,

    /// RabbitMQ: browse at most N messages per queue [default: the whole queue]; what
    /// is left is reported as "browsed N of M".
    #[arg(long, global = true, value_name = "N")]
    pub max_letters: Option<u64>,

    /// RabbitMQ: the queues' type when the management API cannot say (classic, quorum,
    /// stream). Decides how they are browsed.
    #[arg(long, global = true, value_name = "TYPE", value_parser = ["classic", "quorum", "stream"])]
    pub queue_type: Option<String>,

    /// RabbitMQ: browse a quorum queue that has a delivery limit although each browse
    /// counts a delivery per message (never when the first message has none to spare).
    #[arg(long, global = true)]
    pub allow_redelivery: bool,

    /// Kafka: read only letters dead-lettered within this long (e.g. 2h, 1d), found with
    /// offsets_for_times instead of reading whole topics.
    #[arg(long, global = true, value_name = "DURATION")]
    pub since: Option<String>,

    /// A Confluent-compatible schema registry: Avro, Protobuf and JSON Schema payloads
    /// are decoded with its schemas (credentials: DLQ_TRIAGE_SCHEMA_REGISTRY_USER and
    /// _PASSWORD, or _TOKEN; never shown).
    #[arg(
        long,
        global = true,
        env = "DLQ_TRIAGE_SCHEMA_REGISTRY",
        value_name = "URL"
    )]
    pub schema_registry: Option<String>,

    /// A PEM CA file for a schema registry behind a private CA.
    #[arg(long, global = true, value_name = "PATH")]
    pub schema_registry_ca: Option<PathBuf>,

    /// Send the schema registry's credentials over plain http:// to a remote host
    /// (refused by default: anyone on the path reads them).
    #[arg(long, global = true)]
    pub registry_plain_http: bool,

    /// A directory of schemas (.avsc, .proto, .json, descriptor sets; schemas.toml maps
    /// ids and topics), for hosts without registry access.
    #[arg(long, global = true, env = "DLQ_TRIAGE_SCHEMAS", value_name = "DIR")]
    pub schemas: Option<PathBuf>,

    /// Fix the clock (RFC 3339), for reproducible ages in tests and demos.
    #[arg(long, global = true, env = "DLQ_TRIAGE_NOW", hide = true)]
    pub now: Option<String>,

    /// TUI theme: default, light, high-contrast, mono, or NAME.toml in the config dir's
    /// themes/ [default: config `theme`, or mono when NO_COLOR is set]
    #[arg(long, global = true, env = "DLQ_TRIAGE_THEME", value_name = "NAME")]
    pub theme: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// Open the TUI on this source (same as `dlq-triage tui SOURCE`).
    #[arg(value_name = "SOURCE")]
    pub source: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The triage TUI on a source.
    Tui(TuiArgs),
    /// The embedded demo: an in-process Kafka cluster seeded with a live-looking incident.
    Demo(DemoArgs),
    /// Groups of dead letters with counts, oldest/newest age and inflow.
    Summary(SummaryArgs),
    /// The letters themselves: id, age, key, attempt, state, reason, masked preview.
    List(ListArgs),
    /// One letter: failure fields with provenance, headers, masked payload.
    Show(ShowArgs),
    /// Compare two letters' payloads and headers (masked).
    Diff(DiffArgs),
    /// Masked NDJSON dump of the (filtered) letters, readable back as a file source.
    Export(ExportArgs),
    /// RabbitMQ: list a vhost's queues (management API) and flag likely DLQs.
    Queues(QueuesArgs),
    /// Discard letters with a recorded reason: ledger first, then the broker (RabbitMQ
    /// ack; Kafka and files are ledger-only).
    Discard(DiscardArgs),
    /// Replay letters to where they came from: dry-run, canary, watch, ramp, auto-stop,
    /// kill switch (Ctrl-C), journaled in the ledger (`--resume ID` after a crash).
    Replay(ReplayArgs),
    /// Replays in the ledger (`replays show ID` for one's letters).
    Replays(ReplaysArgs),
    /// The incident as Markdown for a postmortem: what failed since when, each decision
    /// and replay with who, when and how it ended, what is still open (masked;
    /// `--since 6h` for the window).
    Report(ReportArgs),
    /// Why the letters a filter selects fail: since when and with which release, what
    /// sets their payloads apart (masked; operators and up), and a jq program where a
    /// difference has a mechanical fix (the TUI's `w`).
    Why(WhyArgs),
    /// The tamper-evident audit log: `list` or `verify`.
    Audit(AuditArgs),
    /// A Kafka cluster's DLQ topics with their counts (`--all` for every topic).
    Topics(TopicsArgs),
    /// A payload revision, edited on the masked payload in $EDITOR (the original stays).
    Edit(EditArgs),
    /// One jq program over the matching letters, each changed letter recorded as a
    /// revision (dry-run first; replay them with `replay --use-revisions`).
    Transform(TransformArgs),
    /// Alert on dead-letter rate, oldest age, counts, new failure modes and replays that
    /// fail again — per group, with owners (`--once` for cron and CI: exit 3 on breach).
    Watch(WatchArgs),
    /// The ledger itself: `migrate --to postgres://…` copies this file ledger into the
    /// team's server (verified before and after; again is a no-op).
    Ledger(LedgerArgs),
    /// Four eyes (team ledger): show a replay plan awaiting approval; `--yes` approves
    /// it (`--reject` refuses it). Never its author's own.
    Approve(ApproveArgs),
    /// The team's roles on its ledger: `roles` lists them, `roles set ACTOR ROLE` changes
    /// one (privileged; audited on the server).
    Roles(RolesArgs),
    /// The team's policy on its ledger (approval_above, discard_approval_above,
    /// confirm_above, allowed_targets): `policy` lists it, `policy set KEY VALUE` or
    /// `policy clear KEY` changes it (privileged; audited on the server). Each engineer's
    /// config can tighten it, never loosen it.
    Policy(PolicyArgs),
    /// Shell completions for bash, zsh, fish, elvish or powershell, on stdout
    /// (`dlq-triage completions bash > /etc/bash_completion.d/dlq-triage`).
    Completions(CompletionsArgs),
    /// The manual page (roff) on stdout (`dlq-triage man | man -l -`).
    Man,
}

impl Cli {
    /// The source the command names (for a named source's own ledger), if any.
    pub fn source_arg(&self) -> Option<&str> {
        let s = match &self.command {
            None => return self.source.as_deref(),
            Some(c) => match c {
                Command::Tui(a) => &a.source,
                Command::Summary(a) => &a.source,
                Command::List(a) => &a.source,
                Command::Show(a) => &a.source,
                Command::Diff(a) => &a.source,
                Command::Export(a) => &a.source,
                Command::Discard(a) => &a.source,
                Command::Replay(a) => &a.source,
                Command::Edit(a) => &a.source,
                Command::Transform(a) => &a.source,
                Command::Watch(a) => &a.source,
                Command::Report(a) => &a.source,
                Command::Why(a) => &a.source,
                // The demo TUI reads the demo source (and its schema registry).
                Command::Demo(a) if !a.serve => return Some("demo"),
                _ => return None,
            },
        };
        Some(s)
    }

    /// The global options as the application layer takes them.
    pub fn flags(&self) -> Flags {
        Flags {
            config: self.config.clone(),
            read_only: self.read_only,
            kafka_props: self.kafka_props.clone(),
            roles_file: self.roles_file.clone(),
            ledger: self.ledger.clone(),
            management_url: self.management_url.clone(),
            management_plain_http: self.management_plain_http,
            max_letters: self.max_letters,
            queue_type: self.queue_type.clone(),
            allow_redelivery: self.allow_redelivery,
            since: self.since.clone(),
            schema_registry: self.schema_registry.clone(),
            schema_registry_ca: self.schema_registry_ca.clone(),
            registry_plain_http: self.registry_plain_http,
            schemas: self.schemas.clone(),
            now: self.now.clone(),
            source: self.source_arg().map(str::to_string),
        }
    }
}

/// What a command line asks for. The binary starts the TUI itself: this crate and the
/// TUI's are siblings on the application layer, neither knowing the other.
pub enum Route {
    /// The TUI on this source (a named source, a URI, `demo`, or a broker to pick from).
    Tui(String),
    /// The TUI's picker over the config's named sources.
    PickNamed,
    /// A command of this crate.
    Command(Box<Command>),
}

fn command_names() -> Vec<String> {
    <Cli as clap::CommandFactory>::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// The command `word` is probably a typo of (`sumary` → `summary`).
fn nearest_command(word: &str) -> Option<String> {
    command_names()
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, &c), c))
        .filter(|(d, c)| *d <= 2 && *d <= c.len() / 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A bare first word followed by a command (`sumary demo`, `replya demo --filter x`)
/// would parse as a source and that command: what to say instead. Sources (URIs,
/// paths) are never taken for one.
pub fn misspelt_command(args: &[String]) -> Option<String> {
    // Only the very first word: after an option it may be that option's value.
    let first = args.first().filter(|a| !a.starts_with('-'))?;
    let commands = command_names();
    if first.contains(['/', ':', '.']) || commands.contains(first) {
        return None;
    }
    let next = args.get(1)?;
    if !commands.contains(next) {
        return None;
    }
    Some(match nearest_command(first) {
        Some(c) => format!(
            "`{first}` is not a command: did you mean `{c}`? (dlq-triage --help lists them)"
        ),
        None => format!("`{first}` is not a command (dlq-triage --help lists them)"),
    })
}

/// Run a parsed command line.
/// Completions and the man page: generated from the definitions alone (no config, no
/// ledger), so a packager runs them on a build host. `None` for every other command.
pub fn generated(cli: &Cli) -> Option<anyhow::Result<()>> {
    match &cli.command {
        Some(Command::Completions(a)) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cmd, "dlq-triage", &mut std::io::stdout());
            Some(Ok(()))
        }
        Some(Command::Man) => {
            let cmd = <Cli as clap::CommandFactory>::command();
            Some(
                clap_mangen::Man::new(cmd)
                    .render(&mut std::io::stdout())
                    .map_err(anyhow::Error::from),
            )
        }
        _ => None,
    }
}

/// Where a command line goes: the TUI (a source, `demo` on a terminal, the picker) or a
/// command; a bare word that is neither a command nor a source is a usage error.
pub fn route(cli: Cli, ctx: &Launch) -> anyhow::Result<Route> {
    let command = match (cli.command, cli.source) {
        (Some(c), _) => c,
        (None, Some(source)) => {
            let bare_word = !source.contains(['/', ':', '.']) && source != "demo";
            if bare_word && !ctx.config.sources.contains_key(&source) {
                let meant = nearest_command(&source)
                    .map(|c| format!(" Did you mean `{c}`?"))
                    .unwrap_or_default();
                return Err(UsageError(format!(
                    "`{}` is neither a command nor a source.{meant} Commands: {} (see --help); sources: kafka://host:9092/topic, amqp://host/vhost?queue=q, a .ndjson dump, demo, or a name from [sources] in config.toml",
                    dlq_core::sanitize::clean(&source),
                    <Cli as clap::CommandFactory>::command()
                        .get_subcommands()
                        .map(|c| c.get_name().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            }
            return Ok(Route::Tui(source));
        }
        (None, None)
            if !ctx.config.sources.is_empty()
                && std::io::IsTerminal::is_terminal(&std::io::stdout()) =>
        {
            return Ok(Route::PickNamed);
        }
        (None, None) => {
            return Err(UsageError(
                "nothing to do: try `dlq-triage demo`, `dlq-triage SOURCE`, or `dlq-triage --help`"
                    .into(),
            )
            .into())
        }
    };
    Ok(match command {
        Command::Tui(a) => Route::Tui(a.source),
        Command::Demo(a) if !a.serve && std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            Route::Tui("demo".into())
        }
        other => Route::Command(Box::new(other)),
    })
}

/// Run a command (not the TUI: see [`route`]).
pub fn run(command: Command, ctx: &Launch) -> anyhow::Result<()> {
    match command {
        // Routed to the TUI by the binary; here only if a caller skipped `route`.
        Command::Tui(_) => usage("the TUI is started by the dlq-triage binary"),
        Command::Demo(a) => demo::run(ctx, &a),
        Command::Summary(a) => summary::run(ctx, &a),
        Command::List(a) => list::run(ctx, &a),
        Command::Show(a) => show::run(ctx, &a),
        Command::Diff(a) => diff::run(ctx, &a),
        Command::Export(a) => export::run(ctx, &a),
        Command::Queues(a) => queues::run(ctx, &a),
        Command::Topics(a) => topics::run(ctx, &a),
        Command::Discard(a) => discard::run(ctx, &a),
        Command::Replay(a) => replay::run(ctx, &a),
        Command::Replays(a) => replays::run(ctx, &a),
        Command::Report(a) => report::run(ctx, &a),
        Command::Why(a) => why::run(ctx, &a),
        Command::Audit(a) => audit::run(ctx, &a),
        Command::Approve(a) => approve::run(ctx, &a),
        Command::Roles(a) => approve::roles(ctx, &a),
        Command::Policy(a) => approve::policy(ctx, &a),
        Command::Completions(_) | Command::Man => Ok(()), // `generated`, before the launch
        Command::Ledger(a) => {
            ctx.require_write(dlq_core::access::WriteOp::MigrateLedger, &a.to)?;
            let to = dlq_core::ledger_location::Location::parse(&a.to).map_err(UsageError)?;
            let from = ctx
                .ledger
                .clone()
                .ok_or_else(|| anyhow::anyhow!("no ledger location"))?;
            let said =
                dlq_app::team_ledger::migrate(&from, &to, &dlq_app::identity::current_actor())?;
            std::io::Write::write_all(
                &mut std::io::stdout(),
                format!("{}\n", dlq_core::sanitize::clean(&said)).as_bytes(),
            )?;
            Ok(())
        }
        Command::Edit(a) => edit::run(ctx, &a),
        Command::Transform(a) => transform::run(ctx, &a),
        Command::Watch(a) => watch::run(ctx, &a),
    }
}
