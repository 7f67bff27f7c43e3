//! Each command's arguments, as clap reads them (their doc comments are the help text).

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct WatchArgs {
    pub source: String,
    /// A rule: `[FILTER] CONDITION`, e.g. 'reason=amount_* rate > 5/min for 5m',
    /// 'oldest > 30m', 'count > 100', 'new reason', 'replay failed-again > 20%'
    /// (repeatable; `[[watch.rules]]` in the config adds more).
    #[arg(long)]
    pub rule: Vec<String>,
    /// Severity of the --rule rules.
    #[arg(long, default_value = "warning")]
    pub severity: String,
    /// How often to evaluate while watching.
    #[arg(long, default_value = "30s")]
    pub every: String,
    /// Evaluate once and exit: 0 quiet, 3 breach, 1 error.
    #[arg(long)]
    pub once: bool,
    /// JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// The dimension letters are grouped by for every rule.
    #[arg(long, default_value = "reason")]
    pub group_by: String,
    /// Known group labels (one per line): `new reason` is any other.
    #[arg(long)]
    pub baseline: Option<std::path::PathBuf>,
    /// Run this command per breach, the breach as JSON on stdin (split like a shell
    /// line, never run by one).
    #[arg(long)]
    pub exec: Option<String>,
    #[arg(long, default_value = "10s")]
    pub exec_timeout: String,
    /// Serve Prometheus metrics on HOST:PORT (loopback only, unless
    /// --metrics-any-interface).
    #[arg(long)]
    pub metrics: Option<String>,
    #[arg(long)]
    pub metrics_any_interface: bool,
}

#[derive(Args, Debug)]
pub struct EditArgs {
    pub source: String,
    pub id: String,
    /// Why (recorded with the revision and in the audit log).
    #[arg(long)]
    pub reason: String,
    /// Edit the raw payload (privileged; audited as an edit).
    #[arg(long)]
    pub unmasked: bool,
}

#[derive(Args, Debug)]
pub struct TransformArgs {
    pub source: String,
    /// Which letters (required, as for discard).
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: String,
    /// The jq program, run on each letter's payload (its decoded form where a schema
    /// decodes it), e.g. '.payload.amount |= (gsub(",";"") | tonumber)'.
    #[arg(long, short = 'e', value_name = "JQ")]
    pub expr: String,
    /// Why (recorded with every revision and in the audit log).
    #[arg(long)]
    pub reason: String,
    /// Count what would change and show a masked sample; record nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Show the sample's real values (needs the unmask right; audited with --reason).
    /// Failure causes and the paths recorded stay masked.
    #[arg(long)]
    pub unmask: bool,
    #[arg(long)]
    pub json: bool,
    /// Do not ask (scripts). Above 100 revisions (`[replay] confirm_above`), --expect N
    /// is needed too.
    #[arg(long)]
    pub yes: bool,
    /// Refuse if more than N letters would be revised.
    #[arg(long, value_name = "N")]
    pub expect: Option<usize>,
    /// Wall time a program may take on one letter before it is stopped (that letter
    /// fails, the rest go on).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub time_limit: String,
}

#[derive(Args, Debug)]
pub struct DiscardArgs {
    pub source: String,
    /// Which letters (required: there is no "discard everything" by accident).
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: String,
    /// Why, for the ledger and whoever reads it later.
    #[arg(long)]
    pub reason: String,
    /// Do not ask (scripts). Above 100 letters (`[replay] confirm_above`), --expect N is
    /// needed too.
    #[arg(long)]
    pub yes: bool,
    /// Refuse if more than N letters match (a filter matching more than meant).
    #[arg(long, value_name = "N")]
    pub expect: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    pub source: String,
    /// Which letters (required, as for discard).
    #[arg(
        long,
        short = 'f',
        value_name = "EXPR",
        required_unless_present = "resume"
    )]
    pub filter: Option<String>,
    /// Publish here instead of each letter's origin: `kafka:TOPIC`, `amqp:EXCHANGE/ROUTING_KEY`
    /// or `queue:NAME` (RabbitMQ default exchange).
    #[arg(long, value_name = "TARGET")]
    pub to: Option<String>,
    /// Show the plan and stop.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
    /// Pause while this file exists (create it to hold the replay where it is, remove it
    /// to go on). On a terminal, `p` then Enter also pauses and resumes.
    #[arg(long, value_name = "PATH")]
    pub pause_file: Option<std::path::PathBuf>,
    /// Letters sent first, at --canary-rate, then watched [default: 5]. The pace flags
    /// also apply with --resume, over the replay's stored ones.
    #[arg(long, value_name = "N")]
    pub canary: Option<usize>,
    /// [default: 1]
    #[arg(long, value_name = "PER_S")]
    pub canary_rate: Option<f64>,
    /// How long the DLQ is watched after the canary (and after the last letter)
    /// [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub watch: Option<String>,
    /// Letters per second after the canary [default: 10].
    #[arg(long, value_name = "PER_S")]
    pub rate: Option<f64>,
    /// Stop when more than this share of the latest replayed letters fail again
    /// [default: 0.2].
    #[arg(long, value_name = "RATIO")]
    pub max_failed_ratio: Option<f64>,
    /// Send each letter's latest revision (see `edit`) instead of its original payload.
    #[arg(long)]
    pub use_revisions: bool,
    /// RabbitMQ: each letter to the queue it failed in (its `x-death` queue, through
    /// the default exchange), not to its exchange: no other bound queue gets it again.
    #[arg(long, conflicts_with = "to")]
    pub to_failed_queue: bool,
    /// Send letters whose key has a newer record in the origin partition (Kafka).
    #[arg(long)]
    pub include_stale: bool,
    /// Replay to target topics that do not exist (refused otherwise): a broker that
    /// auto-creates topics creates them, with its defaults.
    #[arg(long)]
    pub create_topics: bool,
    /// Letters replayed this many times already are refused...
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub max_replay_count: u32,
    /// ...unless this is given.
    #[arg(long)]
    pub force_replay_count: bool,
    /// Do not ask (scripts). Above 100 letters, --expect N is needed too.
    #[arg(long)]
    pub yes: bool,
    /// Refuse if the plan has more than N letters (a filter matching more than meant).
    #[arg(long, value_name = "N")]
    pub expect: Option<usize>,
    /// Continue an interrupted replay: letters it confirmed are never sent again; letters
    /// it was sending when it stopped are looked up in their Kafka target first.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// With --resume on a team ledger: end the replay's sender first when its heartbeat,
    /// on the server's clock, is older than 10 s (frozen, cut off, its bastion gone),
    /// waiting that long if it has to. The server ends its session; an entry names both.
    #[arg(long, requires = "resume")]
    pub take_over: bool,
    /// On RabbitMQ (whose target cannot be read back): send again the letters that were
    /// in flight when a replay stopped and may have been sent — that replay's with
    /// --resume, any stopped replay's in a new one. A consumer may see them twice.
    #[arg(long)]
    pub resend_unconfirmed: bool,
}

#[derive(Args, Debug)]
pub struct ReplaysArgs {
    /// `show` with an id, or nothing to list them.
    #[arg(value_parser = ["show"])]
    pub what: Option<String>,
    pub id: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// list (default), verify, or head (the newest entry as SEQ:HASH, an anchor to keep
    /// in a ticket)
    #[arg(default_value = "list", value_parser = ["list", "verify", "head"])]
    pub what: String,
    /// With verify: fail unless this anchor (from `audit head`) is still in the log
    /// unchanged — catches entries removed from the end and rewritten logs.
    #[arg(long, value_name = "SEQ:HASH")]
    pub expect_head: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct RolesArgs {
    /// `set` to change one (else the list).
    #[arg(value_parser = ["list", "set"], default_value = "list")]
    pub what: String,
    /// With set: the database role (the actor on the team ledger).
    pub actor: Option<String>,
    /// With set: viewer, operator or privileged.
    #[arg(value_parser = ["viewer", "operator", "privileged"])]
    pub role: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PolicyArgs {
    /// `set` or `clear` to change one key (else the list).
    #[arg(value_parser = ["list", "set", "clear"], default_value = "list")]
    pub what: String,
    /// With set or clear: approval_above, discard_approval_above, confirm_above or
    /// allowed_targets.
    #[arg(value_parser = ["approval_above", "discard_approval_above", "confirm_above", "allowed_targets"])]
    pub key: Option<String>,
    /// With set: a number of letters, or (allowed_targets) a JSON list of names.
    pub value: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// The replay id the plan's author was given.
    pub id: String,
    /// Record the decision (without it: the plan is shown, nothing recorded).
    #[arg(long)]
    pub yes: bool,
    /// Reject instead of approve.
    #[arg(long)]
    pub reject: bool,
    /// Why, for the ledger.
    #[arg(long, default_value = "")]
    pub note: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct LedgerArgs {
    /// What to do: migrate.
    #[arg(value_parser = ["migrate"])]
    pub what: String,
    /// The team's ledger: postgres://user@host/db (password from PGPASSWORD or ~/.pgpass).
    #[arg(long, value_name = "URL")]
    pub to: String,
}

#[derive(Args, Debug)]
pub struct TopicsArgs {
    /// kafka://host:9092 (no topic needed).
    pub source: String,
    /// Every topic, not only those that look like DLQs.
    #[arg(long)]
    pub all: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct QueuesArgs {
    /// amqp://user:pass@host:5672/vhost (no ?queue= needed).
    pub source: String,
    /// Only queues that look like DLQs.
    #[arg(long)]
    pub dlq: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    pub source: String,
    /// Letter id (message id) or coordinates (`topic/partition/offset`).
    pub id: String,
    /// Show the raw payload: needs the privileged role and --reason; audited.
    #[arg(long, requires = "reason")]
    pub unmask: bool,
    /// Why you need to see the raw payload (recorded in the audit log).
    #[arg(long)]
    pub reason: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    pub source: String,
    pub id: String,
    /// Another letter to compare with (or use --revision).
    #[arg(required_unless_present = "revision")]
    pub other_id: Option<String>,
    /// Compare the letter with its payload revision N (from `edit`).
    #[arg(long, conflicts_with = "other_id")]
    pub revision: Option<i64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    pub source: String,
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: Option<String>,
    /// Write here instead of stdout (atomically: a partial file is never left behind
    /// under this name).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct TuiArgs {
    pub source: String,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Only run the seeded broker and print its address, until Ctrl-C.
    #[arg(long)]
    pub serve: bool,
    /// Scenario seed (same seed, same incident).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Benchmarks: also seed `bench.dlq` (256 partitions) with this many letters.
    #[arg(long, hide = true, value_name = "N")]
    pub bench: Option<usize>,
    /// Benchmarks: seed `bench.dlq` with the Avro letters of `payouts.dlq` instead.
    #[arg(long, hide = true, requires = "bench")]
    pub bench_avro: bool,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// kafka://…, amqp://…, a .ndjson dump, demo, or a named source.
    pub source: String,
    /// Dimensions, comma-separated: reason, version, age, event, schema, origin,
    /// consumer, exception, state, topic [default: reason,version,age]
    #[arg(long, short = 'g', env = "DLQ_TRIAGE_GROUP_BY")]
    pub group_by: Option<String>,
    /// Only letters matching this filter expression.
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: Option<String>,
    /// Stable JSON output (documented in the README).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// kafka://…, amqp://…, a .ndjson dump, demo, or a named source.
    pub source: String,
}

#[derive(Args, Debug)]
pub struct WhyArgs {
    /// kafka://…, amqp://…, a .ndjson dump, demo, or a named source.
    pub source: String,
    /// The letters to explain (a group: `reason=amount_not_a_number`); the rest of the
    /// source is the baseline.
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: String,
    /// Stable JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    pub source: String,
    #[arg(long, short = 'f', value_name = "EXPR")]
    pub filter: Option<String>,
    /// At most this many letters (0 = all).
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
    /// Order: newest, oldest, or position (as stored in the DLQ).
    #[arg(long, default_value = "newest", value_parser = ["newest", "oldest", "position"])]
    pub sort: String,
    #[arg(long)]
    pub json: bool,
}
