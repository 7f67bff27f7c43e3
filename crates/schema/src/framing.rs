//! Confluent's wire format: a zero byte, a big-endian 4-byte schema id, then (Protobuf
//! only) the message indexes, then the encoded record.
//! <https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/index.html#wire-format>

/// The magic byte of the Confluent wire format.
pub const MAGIC: u8 = 0;

/// A framed payload: the schema id and the bytes after the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed<'a> {
    pub id: u32,
    pub rest: &'a [u8],
}

/// The id and the rest, or `None` when the bytes are not Confluent-framed.
pub fn parse(bytes: &[u8]) -> Option<Framed<'_>> {
    match bytes {
        [MAGIC, a, b, c, d, rest @ ..] => Some(Framed {
            id: u32::from_be_bytes([*a, *b, *c, *d]),
            rest,
        }),
        _ => None,
    }
}

/// The header for `id`.
pub fn header(id: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
    out
}

/// Protobuf message indexes (zig-zag varints: a count, then the indexes; a lone `0`
/// means `[0]`, the first message), and the bytes after them.
pub fn message_indexes(bytes: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let mut buf = bytes;
    let count = zigzag(&mut buf)?;
    if count == 0 {
        return Ok((vec![0], buf));
    }
    if !(1..=100).contains(&count) {
        return Err(format!(
            "{count} Protobuf message indexes (not framed as Protobuf?)"
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        out.push(zigzag(&mut buf)?);
    }
    Ok((out, buf))
}

/// The message indexes as the framing writes them (`[0]` as a lone zero).
pub fn write_message_indexes(indexes: &[i32], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    put_zigzag(indexes.len() as i32, out);
    for i in indexes {
        put_zigzag(*i, out);
    }
}

fn zigzag(buf: &mut &[u8]) -> Result<i32, String> {
    let raw = prost::encoding::decode_varint(buf)
        .map_err(|_| "the Protobuf message indexes are cut short".to_string())?;
    let n = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
    i32::try_from(n).map_err(|_| "a Protobuf message index out of range".to_string())
}

fn put_zigzag(n: i32, out: &mut Vec<u8>) {
    let z = ((n << 1) ^ (n >> 31)) as u32;
    prost::encoding::encode_varint(u64::from(z), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_indexes_round_trip() {
        let mut b = header(4711);
        write_message_indexes(&[1, 0], &mut b);
        b.extend_from_slice(b"rest");
        let f = parse(&b).unwrap();
        assert_eq!(f.id, 4711);
        let (idx, rest) = message_indexes(f.rest).unwrap();
        assert_eq!((idx, rest), (vec![1, 0], &b"rest"[..]));
        let mut first = Vec::new();
        write_message_indexes(&[0], &mut first);
        assert_eq!(first, [0]);
        assert_eq!(message_indexes(&[0, 9]).unwrap(), (vec![0], &[9u8][..]));
        assert!(parse(b"{\"a\":1}").is_none());
        assert!(parse(&[0, 0, 0]).is_none());
        assert!(message_indexes(&[0xff]).is_err());
    }
}
