//! A replay journaled as the engine writes it, for tests and benchmarks of the ledger.

use dlq_core::journal::{ConfirmedLetter, Journal, ReplayState};

/// Replay `id` of `letters` letters on `source`, journaled in batches of `batch` (marked
/// sending, then confirmed; ledger-only as on Kafka), then completed.
pub fn finished_replay(l: &mut dyn Journal, id: &str, source: &str, letters: u32, batch: usize) {
    let named: Vec<(String, String)> = (0..letters)
        .map(|i| (format!("{id}-m{i}"), format!("at:{id}/{i}")))
        .collect();
    let items: Vec<(u32, &str, &str, &str)> = (0u32..)
        .zip(&named)
        .map(|(seq, (letter, binding))| (seq, letter.as_str(), binding.as_str(), "orders.dlq/0/1"))
        .collect();
    l.replay_start(id, source, "orders", &serde_json::json!({}), &items)
        .expect("start");
    for chunk in items.chunks(batch.max(1)) {
        let seqs: Vec<u32> = chunk.iter().map(|i| i.0).collect();
        l.replay_sending(id, &seqs).expect("sending");
        let confirmed: Vec<ConfirmedLetter<'_>> = chunk
            .iter()
            .map(|&(seq, letter_id, binding, location)| ConfirmedLetter {
                seq,
                letter_id,
                binding,
                location,
                published: Some("orders/0/1"),
                ledger_only: true,
            })
            .collect();
        l.replay_confirmed(id, source, &confirmed)
            .expect("confirmed");
    }
    l.replay_finish(id, ReplayState::Completed, &serde_json::json!({}))
        .expect("finish");
}
