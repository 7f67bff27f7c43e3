//! Length-prefixed frames between the caller and its worker: a little-endian u32 length,
//! then the bytes. Replies start with a tag byte: [`OK`] or [`ERR`].

use std::io::{self, Read, Write};

pub const OK: u8 = b'O';
pub const ERR: u8 = b'E';

/// Frames above this are refused on read (a corrupted length must not allocate 4 GiB).
pub const MAX_FRAME: usize = 1 << 30;

pub fn write(w: &mut impl Write, tag: Option<u8>, body: &[u8]) -> io::Result<()> {
    put(w, tag, body)?;
    w.flush()
}

/// [`write`] without the flush: frames sent together leave in as few writes as the
/// buffer allows.
pub fn put(w: &mut impl Write, tag: Option<u8>, body: &[u8]) -> io::Result<()> {
    let len = body.len() + usize::from(tag.is_some());
    let len = u32::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    if let Some(t) = tag {
        w.write_all(&[t])?;
    }
    w.write_all(body)
}

/// The next frame, or `None` at a clean end of stream.
pub fn read(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_clean_end_is_none() {
        let mut buf = Vec::new();
        write(&mut buf, Some(OK), b"{}").unwrap();
        write(&mut buf, None, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(read(&mut r).unwrap(), Some(b"O{}".to_vec()));
        assert_eq!(read(&mut r).unwrap(), Some(Vec::new()));
        assert_eq!(read(&mut r).unwrap(), None);
    }

    #[test]
    fn a_huge_length_is_refused_not_allocated() {
        let buf = u32::MAX.to_le_bytes();
        assert!(read(&mut &buf[..]).is_err());
    }
}
