//! The keyed hash chain: the canonical form of an entry, its MAC, and the key beside the ledger.

use super::*;

/// The canonical form that is hashed (fixed field order).
#[derive(Serialize)]
pub(crate) struct Canonical<'a> {
    pub(crate) seq: i64,
    pub(crate) at: &'a str,
    pub(crate) actor: &'a str,
    pub(crate) action: &'a str,
    pub(crate) target: &'a str,
    pub(crate) detail: &'a str,
}

/// The chain's MAC: HMAC-SHA256 under the ledger's key.
pub(crate) fn entry_hash(key: &[u8], prev_hash: &str, c: &Canonical<'_>) -> String {
    EntryMac::new(key).map_or_else(String::new, |mut m| hex(&m.of(prev_hash, c)))
}

/// The chain's MAC over many entries (a full walk): the key's pads are computed once and
/// one buffer is reused, so an entry costs its own bytes only.
pub(crate) struct EntryMac {
    keyed: Hmac<Sha256>,
    buf: Vec<u8>,
}

impl EntryMac {
    /// HMAC takes keys of any length: `None` cannot happen in practice.
    pub(crate) fn new(key: &[u8]) -> Option<Self> {
        Some(EntryMac {
            keyed: Hmac::<Sha256>::new_from_slice(key).ok()?,
            buf: Vec::with_capacity(512),
        })
    }

    fn of(&mut self, prev_hash: &str, c: &Canonical<'_>) -> [u8; 32] {
        let mut h = self.keyed.clone();
        h.update(prev_hash.as_bytes());
        h.update(b"\n");
        self.buf.clear();
        // Writing to a Vec cannot fail; an entry that could not be written would be
        // hashed as empty and so fail its check.
        let _ = serde_json::to_writer(&mut self.buf, c);
        h.update(&self.buf);
        h.finalize().into_bytes().into()
    }

    /// Whether `e`'s stored hash is its MAC.
    fn holds(&mut self, e: &AuditEntry) -> bool {
        let mac = self.of(&e.prev_hash, &canonical(e));
        hex_eq(&mac, &e.hash)
    }

    /// The seq of the first of `entries` whose MAC does not hold.
    pub(crate) fn first_bad(&mut self, entries: &[AuditEntry]) -> Option<i64> {
        entries.iter().find(|e| !self.holds(e)).map(|e| e.seq)
    }
}

/// `text` is `bytes` in lower-case hex (what `hex` writes), compared without allocating.
fn hex_eq(bytes: &[u8], text: &str) -> bool {
    let t = text.as_bytes();
    t.len() == bytes.len() * 2
        && bytes.iter().zip(t.chunks_exact(2)).all(|(b, pair)| {
            pair[0] == HEX_DIGITS[usize::from(b >> 4)]
                && pair[1] == HEX_DIGITS[usize::from(b & 0xf)]
        })
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The unkeyed chain of schema version 1, verified once before it is re-keyed.
pub(crate) fn legacy_entry_hash(prev_hash: &str, c: &Canonical<'_>) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_vec(c).unwrap_or_default());
    hex(&h.finalize())
}

pub(crate) fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(char::from(HEX_DIGITS[usize::from(x >> 4)]));
        s.push(char::from(HEX_DIGITS[usize::from(x & 0xf)]));
    }
    s
}

/// sha256 of bytes, hex.
pub fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// The chain's anchor: the `prev_hash` of entry 1.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain's key lives: beside the ledger, never inside it.
pub fn key_path(ledger: &Path) -> PathBuf {
    let mut p = ledger.as_os_str().to_owned();
    p.push(".key");
    PathBuf::from(p)
}

/// The hashed form of an entry.
pub(crate) fn canonical(e: &AuditEntry) -> Canonical<'_> {
    Canonical {
        seq: e.seq,
        at: &e.at,
        actor: &e.actor,
        action: &e.action,
        target: &e.target,
        detail: &e.detail,
    }
}

/// The chain's key: read it, or create it (0600) for a new ledger. A ledger that exists
/// without its key cannot be appended to or verified: creating a fresh key would let
/// anyone re-chain it.
pub(crate) fn load_or_create_key(path: &Path, keyed_entries: bool) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(k) if k.len() >= 32 => return Ok(k),
        Ok(_) => {
            return Err(format!(
                "{} is too short to be an audit key, and the ledger has entries chained with \
                 the key it held: restore the key from a backup (a new key would let anyone \
                 re-chain the log)",
                path.display()
            ))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("reading the audit key {}: {e}", path.display()))
        }
        Err(_) => {}
    }
    if keyed_entries {
        return Err(format!(
            "the audit key {} is missing: without it the chain cannot be verified or extended (restore it from backup)",
            path.display()
        ));
    }
    let mut key = vec![0u8; 32];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("no randomness for the audit key: {e}"))?;
    }
    // Written whole to a file of this process's, then linked into place: the key is
    // either complete or absent, whatever fails (a full disk, a kill) and whoever races.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".new-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let written = write_new(&tmp, &key);
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => crate::shared::share(path, 0),
        // Another process created it first (two commands started on a new ledger):
        // theirs, complete (it was linked whole).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return match std::fs::read(path) {
                Ok(k) if k.len() >= 32 => Ok(k),
                Ok(_) => Err(format!(
                    "{} is too short to be an audit key",
                    path.display()
                )),
                Err(e) => Err(format!("reading the audit key {}: {e}", path.display())),
            };
        }
        Err(e) => return Err(format!("writing the audit key {}: {e}", path.display())),
    }
    Ok(key)
}

/// The ledger's key: read, or created for a new ledger. A key left short by a crash or
/// a full disk while the ledger was new (no keyed entries: nothing was ever chained with
/// it) is made again — under the ledger's write lock, so two commands opening it at once
/// agree on one key; with keyed entries a short key is an error naming what to do.
pub(crate) fn key_of(
    conn: &rusqlite::Connection,
    path: &Path,
    keyed_entries: bool,
) -> Result<Vec<u8>, String> {
    let kp = key_path(path);
    let short = std::fs::metadata(&kp).is_ok_and(|m| m.len() < 32);
    if !short || keyed_entries {
        return load_or_create_key(&kp, keyed_entries);
    }
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| format!("locking the ledger to make its key again: {e}"))?;
    let made = (|| {
        if std::fs::metadata(&kp).is_ok_and(|m| m.len() < 32) {
            std::fs::remove_file(&kp)
                .map_err(|e| format!("removing the incomplete audit key {}: {e}", kp.display()))?;
        }
        load_or_create_key(&kp, false)
    })();
    let _ = conn.execute_batch(if made.is_ok() { "COMMIT" } else { "ROLLBACK" });
    made
}

/// Who holds the chain's key: this process (a SQLite ledger, the key file beside it), or
/// the server (a team ledger: links are computed inside the insert, MACs checked by a
/// function only the ledger's owner can read the key of).
pub(crate) enum Chain {
    Local(Vec<u8>),
    Server,
}

impl Ledger {
    /// The first of `entries` whose MAC does not hold.
    pub(crate) fn first_bad_mac(&self, entries: &[AuditEntry]) -> Result<Option<i64>, DbError> {
        match &self.chain {
            Chain::Local(key) => {
                let Some(mut mac) = EntryMac::new(key) else {
                    return Ok(entries.first().map(|e| e.seq));
                };
                Ok(mac.first_bad(entries))
            }
            Chain::Server => match (entries.first(), entries.last()) {
                (Some(a), Some(b)) => server::first_bad_mac(&self.db, a.seq, b.seq),
                _ => Ok(None),
            },
        }
    }

    /// A MAC over `text` for another purpose than a link (`label` keeps them apart), on
    /// a file ledger. A team ledger never hands one out (see `checkpoint`).
    pub(crate) fn local_mac(&self, label: &str, text: &str) -> Option<String> {
        let Chain::Local(key) = &self.chain else {
            return None;
        };
        let mut h = Hmac::<Sha256>::new_from_slice(key).ok()?;
        h.update(format!("dlq-triage {label}\n").as_bytes());
        h.update(text.as_bytes());
        Some(hex(&h.finalize().into_bytes()))
    }
}

/// `key` into a new file at `path` (0600), synced.
fn write_new(path: &Path, key: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(key).and_then(|()| f.sync_all())
}
