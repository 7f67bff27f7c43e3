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
    // HMAC takes keys of any length; the error branch cannot happen.
    let Ok(mut h) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(&serde_json::to_vec(c).unwrap_or_default());
    hex(&h.finalize().into_bytes())
}

/// The unkeyed chain of schema version 1, verified once before it is re-keyed.
pub(crate) fn legacy_entry_hash(prev_hash: &str, c: &Canonical<'_>) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_vec(c).unwrap_or_default());
    hex(&h.finalize())
}

pub(crate) fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
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
                "{} is too short to be an audit key",
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
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    match opts.open(path) {
        Ok(mut f) => f
            .write_all(&key)
            .and_then(|_| f.sync_all())
            .map_err(|e| format!("writing the audit key {}: {e}", path.display()))?,
        // Another process created it first (two commands started on a new ledger):
        // use theirs once it is written.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            for _ in 0..100 {
                match std::fs::read(path) {
                    Ok(k) if k.len() >= 32 => return Ok(k),
                    _ => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
            return Err(format!(
                "the audit key {} was being created by another process and never completed",
                path.display()
            ));
        }
        Err(e) => return Err(format!("writing the audit key {}: {e}", path.display())),
    }
    Ok(key)
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
            Chain::Local(key) => Ok(entries
                .iter()
                .find(|e| entry_hash(key, &e.prev_hash, &canonical(e)) != e.hash)
                .map(|e| e.seq)),
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
