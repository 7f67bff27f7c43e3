//! Letters for unit tests across the crates (feature `fixtures`, tests only): `n`
//! Kafka letters on `t/0`, reason `even` or `odd` by offset, one second apart going back
//! from `now_ms`, prepared as a scan prepares them.

use crate::catalog::prepare_letter;
use crate::masking::Masker;
use crate::model::{Coords, Header, HeaderValue, RawLetter};
use crate::prepared::Prepared;

/// The masker the fixtures are prepared with.
pub fn masker() -> Masker {
    Masker::with_key(vec![1])
}

/// `n` even/odd letters, each with `payload(i)`.
pub fn even_odd(n: usize, now_ms: i64, payload: &dyn Fn(usize) -> Vec<u8>) -> Vec<Prepared> {
    let masker = masker();
    (0..n)
        .map(|i| {
            let raw = RawLetter {
                coords: Some(Coords::Kafka {
                    topic: "t".into(),
                    partition: 0,
                    offset: i as i64,
                }),
                headers: vec![Header::new(
                    "x-reason-code",
                    HeaderValue::text(if i % 2 == 0 { "even" } else { "odd" }),
                )],
                payload: payload(i),
                timestamp: chrono::DateTime::from_timestamp_millis(now_ms - i as i64 * 1000),
                ..RawLetter::default()
            };
            prepare_letter(&masker, &[], raw).into()
        })
        .collect()
}
