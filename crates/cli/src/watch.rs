//! `dlq-triage watch SOURCE`: keep the source open (Kafka tail, RabbitMQ held browse plus
//! arrivals) and evaluate alert rules every `--every` over the letters — one line per
//! breach and per recovery, a command per breach (`--exec`, the breach as JSON on
//! stdin), Prometheus metrics (`--metrics`). `--once` evaluates once: exit 0 quiet,
//! 3 breach, 1 error — for cron and CI.

use super::context::{usage, Exit, Launch, Scan};
use super::WatchArgs;
use dlq_app::browse::Browse;
use dlq_app::session::{dry_runs, latest_replay_figures, Principal, SessionEvent};
use dlq_core::catalog::Catalog;
use dlq_core::grouping::Dim;
use dlq_core::sanitize::clean;
use dlq_core::store::{LetterStore, NO_TIME};
use dlq_core::watch::{Breach, Evaluation, ReplayFigures, Rule, Watch};
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most label sets per metric family: a DLQ with a million distinct reason codes must
/// not become a million series.
const MAX_SERIES: usize = 200;

/// Where every evaluation's results go.
struct Outputs {
    json: bool,
    label: String,
    exec: Option<Vec<String>>,
    exec_timeout: Duration,
    metrics: Option<Arc<Mutex<String>>>,
    dim: Dim,
}

impl Outputs {
    fn new(a: &WatchArgs, dim: Dim) -> anyhow::Result<Outputs> {
        Ok(Outputs {
            json: a.json,
            label: String::new(),
            exec: a.exec.as_deref().map(split_command).transpose()?,
            exec_timeout: duration(&a.exec_timeout, "--exec-timeout")?,
            metrics: match &a.metrics {
                Some(addr) => Some(serve_metrics(addr, a.metrics_any_interface)?),
                None => None,
            },
            dim,
        })
    }
}

pub fn run(ctx: &Launch, a: &WatchArgs) -> anyhow::Result<()> {
    let rules = rules(ctx, a)?;
    let dim = match Dim::parse_list(&a.group_by) {
        Ok(d) if d.len() == 1 && d[0] != Dim::Age => d[0],
        _ => {
            return usage(
                "--group-by takes one dimension: reason, version, event, origin, consumer, …",
            )
        }
    };
    let every = duration(&a.every, "--every")?;
    let baseline = a.baseline.as_deref().map(read_baseline).transpose()?;
    let mut out = Outputs::new(a, dim)?;
    let started = Instant::now();
    let loaded = ctx.scan(&a.source, false)?;
    out.label = clean(&loaded.info.label);
    let mut watch = Watch::new(rules, dim, ctx.config.owners.clone(), baseline);
    let crate::context::Loaded {
        catalog,
        mut session,
        source_key,
        ..
    } = loaded;
    // Where dead letters can be held upstream (RabbitMQ at-least-once dead-lettering),
    // a broken route is watched unless a rule of the operator's already does.
    let backlog = session.backlog();
    if backlog.is_some() && !watch.watches_held() {
        watch.rules.push(
            Rule::parse(
                dlq_core::watch::HELD_RULE,
                Some("dead letters held upstream"),
                Some("warning"),
            )
            .map_err(super::UsageError)?,
        );
    }
    let mut w = Watching {
        ctx,
        started,
        principal: session.principal().clone(),
        source_key,
        watch,
        browse: Browse::letters_only(catalog, ctx.now_ms()),
        out,
        ledger: None,
        backlog,
        backlog_error: None,
    };
    w.watch.set_retention(dlq_core::retention::by_symbol(
        &mut w.browse.catalog.store,
        session.retention(),
    ));
    // Dry-runs are read from the ledger only when a rule asks about them.
    w.watch.set_dry_runs(w.dry_runs());
    let at = w.now_ms();
    let first = w.evaluate(at);
    if a.once {
        for b in &first.breaches {
            w.out.emit(at, "breach", b);
        }
        return match first.breaches.is_empty() {
            true => Ok(()),
            false => Err(Exit {
                code: 3,
                message: String::new(),
            }
            .into()),
        };
    }
    w.out.changes(at, &first);
    eprintln!(
        "watching {}: {} rule(s) every {}s over {} letters (Ctrl-C stops)",
        w.out.label,
        w.watch.rules.len(),
        every.as_secs(),
        w.browse.catalog.store.len()
    );
    w.follow(&mut session, every)
}

/// A watch under way: the letters as a browse, the rules, where results go.
struct Watching<'a> {
    ctx: &'a Launch,
    /// The clock moves on from the launch's (which `DLQ_TRIAGE_NOW` can pin).
    started: Instant,
    principal: Principal,
    source_key: String,
    watch: Watch,
    browse: Browse,
    out: Outputs,
    /// The ledger, once there is one (the first decision on this host creates it).
    ledger: Option<Box<dyn dlq_core::journal::Journal>>,
    /// Asked before each evaluation: dead letters held upstream (`held > N`).
    backlog: Option<Box<dyn dlq_core::ports::Backlog>>,
    /// The last failure to ask it, said once until it changes.
    backlog_error: Option<String>,
}

impl Watching<'_> {
    fn now_ms(&self) -> i64 {
        self.ctx.now_ms() + i64::try_from(self.started.elapsed().as_millis()).unwrap_or(0)
    }

    fn dry_runs(&self) -> Vec<(String, i64)> {
        let asked = self
            .watch
            .rules
            .iter()
            .any(|r| matches!(r.condition, dlq_core::watch::Condition::DryRuns { .. }));
        if asked {
            dry_runs(&self.principal, &self.source_key).unwrap_or_default()
        } else {
            Vec::new()
        }
    }

    fn evaluate(&mut self, now: i64) -> Evaluation {
        if let Some(b) = &mut self.backlog {
            // A failed read keeps the last figures: a management API that blinks is no
            // recovery.
            match b.awaiting() {
                Ok(held) => {
                    self.watch.set_held(held);
                    self.backlog_error = None;
                }
                Err(e) => {
                    let e = e.to_string();
                    if self.backlog_error.as_ref() != Some(&e) {
                        eprintln!("{}", dlq_core::awaiting::unknown(&e));
                        self.backlog_error = Some(e);
                    }
                }
            }
        }
        let replay = latest_replay_figures(&self.principal, &self.source_key)
            .ok()
            .flatten();
        evaluate(
            &mut self.watch,
            &self.browse.catalog,
            now,
            replay.as_ref(),
            &self.out,
        )
    }

    /// Tail the source; every `every`, follow the ledger and evaluate again.
    fn follow(
        &mut self,
        session: &mut dlq_app::session::Session,
        every: Duration,
    ) -> anyhow::Result<()> {
        let mut last = Instant::now();
        let result = session.tail(&mut |ev| {
            if let SessionEvent::Letters(batch) = ev {
                for p in batch {
                    self.browse.add(&p);
                }
            }
            if last.elapsed() >= every {
                last = Instant::now();
                self.tick();
            }
            ControlFlow::Continue(())
        });
        match result {
            // A dump cannot be tailed: nothing new arrives, but ages still grow.
            Err(dlq_app::session::SessionError::Source(
                dlq_core::ports::SourceError::Unsupported(_),
            )) => loop {
                std::thread::sleep(every);
                self.tick();
            },
            Err(e) => Err(anyhow::anyhow!("watching {} stopped: {e}", self.out.label)),
            Ok(()) => Ok(()),
        }
    }

    /// Decisions made elsewhere (another engineer, a replay in another terminal) leave
    /// the counts without a restart; then the rules again.
    fn tick(&mut self) {
        if self.ledger.is_none() {
            self.ledger = self.principal.existing_ledger().ok().flatten();
        }
        if let Some(l) = &self.ledger {
            if let Ok(ds) = l.decisions(&self.source_key) {
                self.browse.follow(ds);
            }
        }
        self.watch.set_dry_runs(self.dry_runs());
        let at = self.now_ms();
        let e = self.evaluate(at);
        self.out.changes(at, &e);
    }
}

/// The config's rules, then `--rule`s; at least one.
fn rules(ctx: &Launch, a: &WatchArgs) -> anyhow::Result<Vec<Rule>> {
    let mut rules = Vec::new();
    for r in &ctx.config.watch.rules {
        rules.push(
            Rule::parse(&r.rule, r.name.as_deref(), r.severity.as_deref())
                .map_err(super::UsageError)?,
        );
    }
    for r in &a.rule {
        rules.push(Rule::parse(r, None, Some(&a.severity)).map_err(super::UsageError)?);
    }
    if rules.is_empty() {
        return usage(
            "no rules: --rule 'reason=amount_* rate > 5/min for 5m' (repeatable), or [[watch.rules]] in the config",
        );
    }
    Ok(rules)
}

fn evaluate(
    watch: &mut Watch,
    catalog: &Catalog,
    now: i64,
    replay: Option<&ReplayFigures>,
    out: &Outputs,
) -> Evaluation {
    let masker = catalog.masker();
    let e = watch.evaluate(&catalog.store, now, replay, &|id: &str| {
        masker.mask_text(id)
    });
    if let Some(m) = &out.metrics {
        let text = metrics_text(
            &catalog.store,
            out.dim,
            now,
            &e,
            catalog.problems().1,
            replay,
        );
        if let Ok(mut slot) = m.lock() {
            *slot = text;
        }
    }
    e
}

impl Outputs {
    fn changes(&self, at_ms: i64, e: &Evaluation) {
        for b in &e.new {
            self.emit(at_ms, "breach", b);
        }
        for b in &e.recovered {
            self.emit(at_ms, "recovered", b);
        }
    }

    /// One line (human or JSON), and for a breach the `--exec` command.
    fn emit(&self, at_ms: i64, event: &str, b: &Breach) {
        let at = chrono::DateTime::from_timestamp_millis(at_ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let doc = serde_json::json!({
            "at": at,
            "event": event,
            "source": self.label,
            "rule": b.rule,
            "severity": b.severity,
            "group": b.group,
            "value": b.value,
            "threshold": b.threshold,
            "count": b.count,
            "oldest_s": b.oldest_s,
            "owner": b.owner,
            "example": b.example,
        });
        let mut stdout = std::io::stdout().lock();
        let line = if self.json {
            doc.to_string()
        } else if event == "breach" {
            format!(
                "{at} BREACH {} · {} · {} · {} ({}) · {} letters{}{}",
                clean(&b.severity),
                clean(&b.rule),
                b.group,
                b.value,
                b.threshold,
                b.count,
                // Breaches of no group (a replay, a route) have no owner to name.
                match b.owner.as_str() {
                    "" => String::new(),
                    o => format!(" · owner {o}"),
                },
                b.example
                    .as_deref()
                    .map(|x| format!(" · e.g. {x}"))
                    .unwrap_or_default()
            )
        } else {
            format!("{at} RECOVERED · {} · {}", clean(&b.rule), b.group)
        };
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
        if event == "breach" {
            if let Some(cmd) = &self.exec {
                run_hook(cmd, &doc.to_string(), self.exec_timeout);
            }
        }
    }
}

/// Run the breach hook: the operator's argv (never a shell), the breach as JSON on stdin
/// — letter data reaches the command only there, never in its arguments or environment —
/// killed after `timeout`. The tool's secrets are not in its environment.
fn run_hook(cmd: &[String], json: &str, timeout: Duration) {
    let Some((prog, args)) = cmd.split_first() else {
        return;
    };
    let mut command = std::process::Command::new(prog);
    let child = dlq_app::credentials::scrub_env(&mut command)
        .args(args)
        .stdin(std::process::Stdio::piped())
        // Its output goes to stderr: stdout stays ours (one line per event).
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .stderr(std::process::Stdio::inherit())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warning: --exec {}: {e}", clean(prog));
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(json.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if !status.success() => {
                eprintln!("warning: --exec {} exited with {status}", clean(prog));
                return;
            }
            Ok(Some(_)) => return,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "warning: --exec {} took more than {}s and was killed",
                    clean(prog),
                    timeout.as_secs()
                );
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                eprintln!("warning: --exec {}: {e}", clean(prog));
                return;
            }
        }
    }
}

/// `notify-pager --team "on call"` → argv, with single and double quotes; no shell.
fn split_command(s: &str) -> anyhow::Result<Vec<String>> {
    match dlq_core::filter::split_quoted(s) {
        Err(_) => usage("--exec: an unclosed quote"),
        Ok(argv) if argv.is_empty() => usage("--exec needs a command"),
        Ok(argv) => Ok(argv),
    }
}

fn duration(s: &str, what: &str) -> anyhow::Result<Duration> {
    match dlq_core::timefmt::parse_duration_ms(s) {
        Some(ms) if ms > 0 => Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        _ => usage(format!("{what} `{}`: use e.g. 30s, 5m", clean(s))),
    }
}

/// A baseline: one group label (a reason code, by default) per line; `#` comments.
fn read_baseline(path: &std::path::Path) -> anyhow::Result<HashSet<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(clean)
        .collect())
}

/// Serve the latest metrics on `addr` (loopback unless `any` is given: the figures
/// name reason codes and owners).
fn serve_metrics(addr: &str, any: bool) -> anyhow::Result<Arc<Mutex<String>>> {
    let sock: std::net::SocketAddr = addr.parse().map_err(|_| {
        super::UsageError(format!(
            "--metrics `{}`: use HOST:PORT, e.g. 127.0.0.1:9464",
            clean(addr)
        ))
    })?;
    if !sock.ip().is_loopback() && !any {
        return usage(format!(
            "--metrics {sock} is not a loopback address: add --metrics-any-interface to serve it beyond this host"
        ));
    }
    let listener =
        std::net::TcpListener::bind(sock).map_err(|e| anyhow::anyhow!("--metrics {sock}: {e}"))?;
    let sock = listener.local_addr().unwrap_or(sock);
    let text = Arc::new(Mutex::new(String::new()));
    let shared = text.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let body = shared.lock().map(|t| t.clone()).unwrap_or_default();
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    eprintln!("metrics: http://{sock}/metrics");
    Ok(text)
}

/// A Prometheus label value: sanitized, escaped, bounded.
fn lv(s: &str) -> String {
    let s: String = clean(s).chars().take(120).collect();
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Unhandled letters by (reason, version, event) symbols, and by the watch's dimension:
/// count, oldest time, arrivals in the last 5 minutes.
#[allow(clippy::type_complexity)]
fn tallies(
    store: &LetterStore,
    dim: Dim,
    now: i64,
) -> (
    BTreeMap<(u32, u32, u32), u64>,
    BTreeMap<u32, (u64, i64, u64)>,
) {
    let mut letters: BTreeMap<(u32, u32, u32), u64> = BTreeMap::new();
    let mut groups: BTreeMap<u32, (u64, i64, u64)> = BTreeMap::new();
    let since = now - 5 * 60_000;
    for r in store.rows() {
        if !matches!(
            r.state,
            dlq_core::model::TriageState::Open | dlq_core::model::TriageState::FailedAgain
        ) {
            continue;
        }
        *letters.entry((r.reason, r.version, r.event)).or_default() += 1;
        let g = groups.entry(dim.value(r, now)).or_insert((0, NO_TIME, 0));
        g.0 += 1;
        if r.at_ms != NO_TIME {
            if g.1 == NO_TIME || r.at_ms < g.1 {
                g.1 = r.at_ms;
            }
            if r.at_ms > since {
                g.2 += 1;
            }
        }
    }
    (letters, groups)
}

/// The Prometheus text exposition of what the watch sees.
fn metrics_text(
    store: &LetterStore,
    dim: Dim,
    now: i64,
    e: &Evaluation,
    unreadable: u64,
    replay: Option<&ReplayFigures>,
) -> String {
    let (letters, groups) = tallies(store, dim, now);
    let name = dim.name();
    let mut t = String::new();
    t.push_str("# HELP dlq_letters Unhandled dead letters by reason, version and event type.\n# TYPE dlq_letters gauge\n");
    let mut top: Vec<_> = letters.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for ((reason, version, event), n) in top.into_iter().take(MAX_SERIES) {
        t.push_str(&format!(
            "dlq_letters{{reason=\"{}\",version=\"{}\",event_type=\"{}\"}} {n}\n",
            lv(store.sym(reason)),
            lv(store.sym(version)),
            lv(store.sym(event))
        ));
    }
    let mut top: Vec<_> = groups.into_iter().collect();
    top.sort_by_key(|(_, g)| std::cmp::Reverse(g.0));
    top.truncate(MAX_SERIES);
    t.push_str(&format!("# HELP dlq_inflow_per_minute Letters a minute over the last 5 minutes, by {name}.\n# TYPE dlq_inflow_per_minute gauge\n"));
    for (k, g) in &top {
        t.push_str(&format!(
            "dlq_inflow_per_minute{{{name}=\"{}\"}} {:.2}\n",
            lv(&dim.label(store, *k)),
            g.2 as f64 / 5.0
        ));
    }
    t.push_str(&format!("# HELP dlq_oldest_age_seconds Age of the oldest unhandled letter, by {name}.\n# TYPE dlq_oldest_age_seconds gauge\n"));
    for (k, g) in &top {
        if g.1 != NO_TIME {
            t.push_str(&format!(
                "dlq_oldest_age_seconds{{{name}=\"{}\"}} {}\n",
                lv(&dim.label(store, *k)),
                (now - g.1) / 1000
            ));
        }
    }
    t.push_str("# HELP dlq_replay_letters Letters of the latest replay by outcome.\n# TYPE dlq_replay_letters gauge\n");
    if let Some(r) = replay {
        t.push_str(&format!(
            "dlq_replay_letters{{replay=\"{}\",outcome=\"sent\"}} {}\ndlq_replay_letters{{replay=\"{}\",outcome=\"failed_again\"}} {}\n",
            lv(&r.id),
            r.sent,
            lv(&r.id),
            r.failed_again
        ));
    }
    t.push_str("# HELP dlq_watch_breaches Rules in breach now.\n# TYPE dlq_watch_breaches gauge\n");
    let mut by_rule: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for b in &e.breaches {
        *by_rule.entry((&b.rule, &b.severity)).or_default() += 1;
    }
    for ((rule, sev), n) in by_rule {
        t.push_str(&format!(
            "dlq_watch_breaches{{rule=\"{}\",severity=\"{}\"}} {n}\n",
            lv(rule),
            lv(sev)
        ));
    }
    t.push_str(&format!(
        "# HELP dlq_scan_letters Letters held by this watch.\n# TYPE dlq_scan_letters gauge\ndlq_scan_letters {}\n# HELP dlq_scan_unreadable_records Records that could not be read.\n# TYPE dlq_scan_unreadable_records gauge\ndlq_scan_unreadable_records {unreadable}\n",
        store.len()
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_commands_split_like_a_shell_without_one() {
        assert_eq!(
            split_command(r#"notify --team "on call" 'a b' x"#).expect("ok"),
            ["notify", "--team", "on call", "a b", "x"]
        );
        assert_eq!(split_command("a ''").expect("ok"), ["a", ""]);
        assert!(split_command("a 'b").is_err());
        assert!(split_command("  ").is_err());
    }

    #[test]
    fn metric_labels_are_escaped_and_sanitized() {
        assert_eq!(lv("a\"b\\c"), "a\\\"b\\\\c");
        assert!(!lv("x\x1b[31my\n").contains('\x1b'));
        assert!(!lv("x\ny").contains('\n'));
    }
}
