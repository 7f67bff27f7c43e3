//! `dlq-triage transform SOURCE --filter EXPR --expr JQ --reason TEXT`: one jq program
//! over the matching letters (`dlq_app::transform`), each changed letter a revision.
//! Dry-run counts and shows a masked sample; otherwise the same count is confirmed like
//! a discard (typed, or `--expect N` beside `--yes`) and recorded in batches.

use super::context::{usage, Launch, Scan};
use super::TransformArgs;
use dlq_app::transform::{Limits, Tally, Transform};
use dlq_core::access::WriteOp;
use dlq_core::sanitize;
use std::io::{IsTerminal, Write};
use std::time::Duration;

pub fn run(ctx: &Launch, a: &TransformArgs) -> anyhow::Result<()> {
    ctx.require_write(WriteOp::Transform, &a.source)?;
    let mut filter = ctx.parse_filter(Some(&a.filter))?;
    if filter.is_empty() {
        return usage("--filter must select letters, e.g. --filter 'reason=amount_not_a_number'");
    }
    let limits = Limits {
        time: time_limit(&a.time_limit)?,
        ..Limits::default()
    };
    let (source_ref, _) = ctx.source_plan(&a.source)?;
    let settings = ctx.session_settings(&source_ref.to_string())?;
    let mut transform = match Transform::start(&settings, &a.expr, &a.reason, !a.dry_run, limits) {
        Ok(t) => t,
        Err(e @ dlq_app::session::SessionError::Invalid(_)) => return usage(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    if a.unmask {
        transform.unmask(&a.reason)?;
    }
    let now = ctx.now_ms();
    let needs_letters = filter.wants_letters();
    let loaded = ctx.scan_with(&a.source, filter.needs_previews(), |cat, row, dl| {
        let Some(r) = cat.store.row(row) else {
            return Ok(());
        };
        if needs_letters {
            filter.note_letter(r, &dl, cat.masker());
        }
        if r.state.unhandled() && filter.matches(&cat.store, r, now) {
            transform.offer(dl)?;
        }
        Ok(())
    })?;
    let label = sanitize::clean(&loaded.info.label);
    // Audited before anything of it is shown.
    let tally = transform.dry_run_shown(&a.filter)?.clone();
    if a.json && a.dry_run {
        return print_json(&tally, true, 0);
    }
    if !a.json {
        print_tally(a, &label, &tally)?;
    }
    let n = tally.changed as usize;
    if a.dry_run {
        return say_dry_run(n, ctx.config.replay.confirm_above);
    }
    if n == 0 {
        if a.json {
            print_json(&tally, false, 0)?;
        } else {
            writeln!(std::io::stdout(), "nothing to record")?;
        }
        return Ok(());
    }
    let guard = crate::confirm::Guard {
        verb: "revise",
        n,
        above: ctx.config.replay.confirm_above,
        yes: a.yes,
        expect: a.expect,
        nothing: "nothing was recorded",
    };
    if !guard.confirmed(&format!(
        "Record {} in {label} (reason: {})? The originals stay; `replay --use-revisions` sends the revisions.",
        revisions(n),
        sanitize::clean(a.reason.trim())
    ))? {
        writeln!(std::io::stdout(), "nothing recorded")?;
        return Ok(());
    }
    record(ctx, a, transform, n)
}

/// Record the revisions (progress on a terminal), then say how to replay them.
fn record(ctx: &Launch, a: &TransformArgs, transform: Transform, n: usize) -> anyhow::Result<()> {
    let show_progress = std::io::stderr().is_terminal() && n > dlq_app::transform::BATCH;
    let recorded = transform.record(&mut |done, total| {
        if show_progress {
            eprint!("\rrecorded {done}/{total}");
        }
    })?;
    if show_progress {
        eprintln!();
    }
    if a.json {
        return print_json(&recorded.tally, false, recorded.revisions);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "recorded {} (the originals are unchanged)",
        revisions(recorded.revisions)
    )?;
    writeln!(
        out,
        "replay them with: dlq-triage replay {} --filter '{}' --use-revisions --dry-run",
        sanitize::clean(&a.source),
        sanitize::clean(&a.filter)
    )?;
    if let Some(at) = &ctx.ledger {
        writeln!(out, "ledger: {}", sanitize::clean(&at.to_string()))?;
    }
    Ok(())
}

/// `--time-limit`: a duration (`2s`) or milliseconds (`500ms`), above zero.
fn time_limit(given: &str) -> anyhow::Result<Duration> {
    let limit = given.trim();
    let ms = match limit.strip_suffix("ms") {
        Some(ms) => ms.parse::<i64>().ok(),
        None => dlq_core::timefmt::parse_duration_ms(limit),
    };
    match ms.filter(|ms| *ms > 0) {
        Some(ms) => Ok(Duration::from_millis(ms.unsigned_abs())),
        None => usage(format!(
            "--time-limit {}: expected a duration such as 2s or 500ms",
            sanitize::clean(given)
        )),
    }
}

/// A dry-run's last words: nothing recorded, and how to record.
fn say_dry_run(n: usize, confirm_above: usize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "dry run: nothing was recorded. Letters that arrive later are not in this count."
    )?;
    if n > 0 {
        writeln!(
            out,
            "to record {}: the same command without --dry-run{}",
            revisions(n),
            if n > confirm_above {
                format!(" and --expect {n}")
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// The tally with whether it was a dry-run and how many revisions were recorded, through
/// the project's JSON writer (it escapes what a terminal would act on).
fn print_json(tally: &Tally, dry_run: bool, recorded: usize) -> anyhow::Result<()> {
    let mut v = tally.to_json();
    v["dry_run"] = dry_run.into();
    v["recorded"] = recorded.into();
    super::output::print_json(&v)
}

fn revisions(n: usize) -> String {
    if n == 1 {
        "1 revision".into()
    } else {
        format!("{n} revisions")
    }
}

fn print_tally(a: &TransformArgs, label: &str, t: &Tally) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "transform {}: {} match `{}`",
        label,
        dlq_core::words::letters(t.matched as usize),
        sanitize::clean(&a.filter)
    )?;
    writeln!(out, "program: {}", sanitize::line(a.expr.trim(), 200))?;
    for line in t.lines(160) {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}
