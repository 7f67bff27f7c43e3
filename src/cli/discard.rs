//! `dlq-triage discard SOURCE --filter EXPR --reason TEXT`: ledger first, then the
//! broker. Each letter's decision is committed before its ack; a crash in between leaves
//! a pending decision that the next browse applies, once.

use super::context::{usage, Context};
use super::DiscardArgs;
use crate::core::decisions::{discard, Discarded, Target};
use crate::core::model::TriageState;
use crate::core::sanitize;
use std::io::{BufRead, IsTerminal, Write};

pub fn run(ctx: &Context, a: &DiscardArgs) -> anyhow::Result<()> {
    if ctx.read_only {
        return usage("--read-only: discard is a write; run without --read-only");
    }
    ctx.require(crate::core::access::Permission::Discard, &a.source)?;
    let reason = a.reason.trim();
    if reason.is_empty() {
        return usage("--reason must say why (it is recorded in the ledger)");
    }
    let mut filter = ctx.parse_filter(Some(&a.filter))?;
    if filter.is_empty() {
        return usage(
            "--filter must select letters, e.g. --filter 'reason=amount_not_a_number age>1d'",
        );
    }
    let mut ledger = ctx.ledger()?;
    let mut loaded = ctx.load(&a.source, filter.needs_previews())?;
    let now = ctx.now_ms();
    let store = &loaded.catalog.store;
    let targets: Vec<(u32, String)> = store
        .rows()
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state == TriageState::Open && filter.matches(store, r, now))
        .map(|(i, r)| (i as u32, store.id(r).to_string()))
        .collect();
    let label = sanitize::clean(&loaded.info.label);
    if targets.is_empty() {
        println!(
            "no open letters match `{}` in {label}",
            sanitize::clean(&a.filter)
        );
        return Ok(());
    }
    if !a.yes {
        if !std::io::stdin().is_terminal() {
            return usage(format!(
                "about to discard {} letters: confirm in a terminal, or pass --yes",
                targets.len()
            ));
        }
        eprint!(
            "Discard {} letters from {label} (reason: {})?\n  RabbitMQ: each is acked (removed from the DLQ) after the ledger records it.\n  Kafka, streams, files: recorded in the ledger only (one record cannot be deleted).\nType yes to continue: ",
            targets.len(),
            sanitize::clean(reason)
        );
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            println!("nothing discarded");
            return Ok(());
        }
    }
    let crash_after_ledger =
        std::env::var("DLQ_TRIAGE_TEST_CRASH_AFTER_LEDGER").is_ok_and(|v| v == "1");
    let (mut removed, mut ledger_only, mut failed) = (0u64, 0u64, 0u64);
    for (row, id) in &targets {
        let coords = loaded.coords.get(*row as usize).cloned().flatten();
        // Kafka/files keep no Coords (nothing to settle): record where the letter sits.
        let label = loaded
            .catalog
            .store
            .row(*row)
            .map(|r| loaded.catalog.store.coords_label(r))
            .filter(|l| !l.is_empty());
        // Test hook: die between the ledger write and the broker (see tests/rabbitmq.rs).
        let mut after_record = || {
            if crash_after_ledger {
                std::process::abort();
            }
        };
        let outcome = match loaded.source.as_mut() {
            Some(src) => discard(
                &mut ledger,
                src.as_mut(),
                &loaded.source_key,
                Target {
                    letter_id: id,
                    coords: coords.as_ref(),
                    location: label.as_deref(),
                },
                reason,
                &mut after_record,
            )?,
            None => Discarded::Pending("the source is closed".into()),
        };
        match outcome {
            Discarded::Removed => removed += 1,
            Discarded::LedgerOnly => ledger_only += 1,
            Discarded::Pending(e) => {
                failed += 1;
                eprintln!(
                    "warning: {}: recorded, not yet applied to the broker: {}",
                    sanitize::clean(id),
                    sanitize::clean(&e)
                );
                continue;
            }
        }
        loaded.catalog.store.set_state(*row, TriageState::Discarded);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "discarded {} letters from {label}: {removed} removed from the DLQ, {ledger_only} recorded in the ledger only{}",
        targets.len(),
        if failed > 0 { format!(", {failed} pending (applied on the next browse)") } else { String::new() }
    )?;
    writeln!(out, "ledger: {}", ledger.path().display())?;
    if failed > 0 {
        anyhow::bail!("{failed} discards are recorded but not yet applied to the broker");
    }
    Ok(())
}
