//! AMQP values and deliveries as our header values and raw letters, and back.

use super::*;

/// Typed AMQP field value → our header value, faithfully (tables stay tables).
pub fn from_amqp(v: &AMQPValue) -> HeaderValue {
    match v {
        AMQPValue::Boolean(b) => HeaderValue::Bool(*b),
        AMQPValue::ShortShortInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortShortUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::ShortUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongUInt(i) => HeaderValue::Int(i64::from(*i)),
        AMQPValue::LongLongInt(i) => HeaderValue::Int(*i),
        AMQPValue::Float(f) => HeaderValue::Float(f64::from(*f)),
        AMQPValue::Double(f) => HeaderValue::Float(*f),
        AMQPValue::DecimalValue(d) => HeaderValue::Bytes(format!("{d:?}").into_bytes()),
        AMQPValue::ShortString(s) => HeaderValue::Bytes(s.as_str().as_bytes().to_vec()),
        AMQPValue::LongString(s) => HeaderValue::Bytes(s.as_bytes().to_vec()),
        AMQPValue::FieldArray(a) => {
            HeaderValue::Array(a.as_slice().iter().map(from_amqp).collect())
        }
        AMQPValue::Timestamp(t) => HeaderValue::Timestamp(*t),
        AMQPValue::FieldTable(t) => HeaderValue::Table(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), from_amqp(v)))
                .collect(),
        ),
        AMQPValue::ByteArray(b) => HeaderValue::Bytes(b.as_slice().to_vec()),
        AMQPValue::Void => HeaderValue::Null,
    }
}

/// Our header value → AMQP (for publishing replays).
pub fn to_amqp(v: &HeaderValue) -> AMQPValue {
    match v {
        HeaderValue::Null => AMQPValue::Void,
        HeaderValue::Bytes(b) => AMQPValue::LongString(LongString::from(b.clone())),
        HeaderValue::Int(i) => AMQPValue::LongLongInt(*i),
        HeaderValue::Float(f) => AMQPValue::Double(*f),
        HeaderValue::Bool(b) => AMQPValue::Boolean(*b),
        HeaderValue::Timestamp(t) => AMQPValue::Timestamp(*t),
        HeaderValue::Array(items) => AMQPValue::FieldArray(FieldArray::from(
            items.iter().map(to_amqp).collect::<Vec<_>>(),
        )),
        HeaderValue::Table(fields) => {
            AMQPValue::FieldTable(table(fields.iter().map(|(k, v)| (k.as_str(), v))))
        }
    }
}

pub(crate) fn table<'a>(fields: impl Iterator<Item = (&'a str, &'a HeaderValue)>) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in fields {
        t.insert(ShortString::from(k), to_amqp(v));
    }
    t
}

/// A delivery as a raw letter at `position` in our browse of `queue`. The delivery is
/// taken: its body becomes the letter's payload without a copy.
pub(crate) fn to_raw(d: Delivery, vhost: &str, queue: &str, position: u64) -> RawLetter {
    let p = &d.properties;
    let mut properties = Vec::new();
    let mut prop = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            properties.push((name.to_string(), v));
        }
    };
    prop(
        "message_id",
        p.message_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop(
        "correlation_id",
        p.correlation_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop("type", p.kind().as_ref().map(|s| s.as_str().to_string()));
    prop(
        "app_id",
        p.app_id().as_ref().map(|s| s.as_str().to_string()),
    );
    prop(
        "content_type",
        p.content_type().as_ref().map(|s| s.as_str().to_string()),
    );
    prop("timestamp", p.timestamp().map(|t| t.to_string()));
    prop("exchange", Some(d.exchange.as_str().to_string()));
    prop("routing_key", Some(d.routing_key.as_str().to_string()));
    let headers = p
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(k, v)| dlq_core::conventions::header(k.as_str(), from_amqp(v)))
                .collect()
        })
        .unwrap_or_default();
    RawLetter {
        coords: Some(Coords::Amqp {
            vhost: vhost.to_string(),
            queue: queue.to_string(),
            position,
            stream_offset: None,
        }),
        key: None,
        headers,
        properties,
        payload: d.data,
        // AMQP has no broker timestamp of the DLQ record: the dead-lettering time comes
        // from x-death (the publish-time property is kept above as `timestamp`).
        timestamp: None,
    }
}
