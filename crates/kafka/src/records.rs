//! Kafka records and dead letters: a consumed message as a raw letter (headers kept in
//! order, bytes as they are), and headers back onto a record for a replay.

use super::*;

/// Our headers as Kafka headers: bytes stay bytes, typed values (from AMQP) become text.
pub fn kafka_headers(headers: &[Header]) -> OwnedHeaders {
    let mut out = OwnedHeaders::new_with_capacity(headers.len());
    for h in headers {
        let value = match &h.value {
            HeaderValue::Null => None,
            HeaderValue::Bytes(b) => Some(b.clone()),
            other => other.as_text().map(|t| t.into_owned().into_bytes()),
        };
        out = out.insert(KHeader {
            key: &h.name,
            value: value.as_ref(),
        });
    }
    out
}

/// An owned letter from a Kafka message. Header values are bytes or null.
pub fn to_raw<M: Message>(msg: &M) -> RawLetter {
    let headers = msg
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    dlq_core::conventions::header(
                        h.key,
                        match h.value {
                            Some(v) => HeaderValue::Bytes(v.to_vec()),
                            None => HeaderValue::Null,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    RawLetter {
        coords: Some(Coords::Kafka {
            topic: msg.topic().to_string(),
            partition: msg.partition(),
            offset: msg.offset(),
        }),
        key: msg.key().map(<[u8]>::to_vec),
        headers,
        properties: Vec::new(),
        payload: msg.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        timestamp: msg
            .timestamp()
            .to_millis()
            .and_then(DateTime::from_timestamp_millis),
    }
}
