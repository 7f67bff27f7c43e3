//! Where a ledger lives, as the user names it (`--ledger`, `ledger =` in the config): a
//! file, or a server by its URL — parsed once, shown without credentials everywhere.

use std::path::PathBuf;

/// Where a ledger lives: a SQLite file (one engineer) or a PostgreSQL server (the team).
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    File(PathBuf),
    /// The connection string as given (credentials and all: never shown — see `Display`).
    Server(String),
}

impl Location {
    /// `postgres://…` or `postgresql://…` is a server; any other `scheme://` is an error
    /// (never a directory named after it), and so are a libpq keyword DSN (`host=…
    /// password=…`) and a server URL missing a slash (`postgres:/…`) — never a file named
    /// after them, a password and all; anything else is a file path. Errors never quote
    /// the value.
    pub fn parse(s: &str) -> Result<Location, String> {
        let lower = s.to_ascii_lowercase();
        if ["postgres:", "postgresql:"]
            .iter()
            .any(|p| lower.starts_with(p) && !lower[p.len()..].starts_with("//"))
        {
            return Err(
                "a server ledger is a URL with two slashes after `postgres:` (the value is not shown)".into(),
            );
        }
        let keywords = [
            "host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "passfile",
        ];
        let dsn = s.split_whitespace().any(|w| {
            w.split_once('=')
                .is_some_and(|(k, _)| keywords.contains(&k.to_ascii_lowercase().as_str()))
        });
        if dsn && !s.contains('/') {
            return Err(
                "a libpq keyword DSN (`host=… dbname=…`) is not taken as a ledger: write it as a postgres:// URL (user, host, port, database, ?sslmode=…) with the password in ~/.pgpass or PGPASSWORD (the value is not shown)".into(),
            );
        }
        if let Some((scheme, _)) = s.split_once("://") {
            let plain = !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if plain {
                return match scheme.to_ascii_lowercase().as_str() {
                    "postgres" | "postgresql" => Ok(Location::Server(s.to_string())),
                    other => Err(format!(
                        "unknown ledger scheme `{}://`: a ledger is a file path or postgres://user@host/db",
                        crate::sanitize::clean(other)
                    )),
                };
            }
        }
        Ok(Location::File(PathBuf::from(s)))
    }

    /// Whether reads can find one (a file not created yet is not; a server always is).
    pub fn exists(&self) -> bool {
        match self {
            Location::File(p) => p.exists(),
            Location::Server(_) => true,
        }
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Self {
        Location::File(p)
    }
}

impl std::fmt::Display for Location {
    /// The file, or `postgres://user@host:port/db` — never a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Server(url) => f.write_str(&redacted(url)),
        }
    }
}

/// The connection string without its password (and without any query options). The
/// userinfo ends at the last `@` (`crate::uri`), so a password with `#` or `?` goes whole.
pub fn redacted(url: &str) -> String {
    let Some(p) = crate::uri::split(url) else {
        return "postgres://?".into();
    };
    let host = p.rest.split(['?', '#']).next().unwrap_or("");
    let clean = crate::sanitize::clean;
    match p.user {
        Some(u) => format!("{}{}@{}", p.scheme, clean(u), clean(host)),
        None => format!("{}{}", p.scheme, clean(host)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_value_is_a_file_a_server_or_refused() {
        assert_eq!(
            Location::parse("/var/lib/l.db"),
            Ok(Location::File("/var/lib/l.db".into()))
        );
        assert_eq!(
            Location::parse("ledger.db"),
            Ok(Location::File("ledger.db".into()))
        );
        let url = "postgres://alice:s3cret@db.example:5433/dlq?sslmode=require";
        let at = Location::parse(url).expect("server");
        assert_eq!(at, Location::Server(url.into()));
        assert_eq!(at.to_string(), "postgres://alice@db.example:5433/dlq");
        assert!(!at.to_string().contains("s3cret"));
        let err = Location::parse("mysql://root@db/x").expect_err("unknown");
        assert!(err.contains("unknown ledger scheme `mysql://`"), "{err}");
        assert!(Location::parse("postgresql://h/db").is_ok());
        for refused in [
            "host=db password=s3cret dbname=dlq",
            "postgres:/alice:s3cret@db/dlq",
            "PostgreSQL:alice:s3cret@db",
        ] {
            let err = Location::parse(refused).expect_err(refused);
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
