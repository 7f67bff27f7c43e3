//! Credentials in URIs, found one way for every kind the tool takes (Kafka, AMQP(S),
//! PostgreSQL, the schema registry, the management API).
//!
//! People paste passwords as they are, so a password may hold `/ ? # : %` and even `@`.
//! The userinfo therefore ends at the **last** `@` of the URI, not at the first `/`, `?`
//! or `#` (RFC 3986's reading, which would put the rest of such a password in the host
//! and show it in an error). The price: an `@` in a path or query value (a queue name)
//! must be written `%40`.

/// A URI split at its userinfo. `rest` is the host and all after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// The scheme with its `://`.
    pub scheme: &'a str,
    pub user: Option<&'a str>,
    pub password: Option<&'a str>,
    pub rest: &'a str,
}

/// Split `s` (`scheme://[user[:password]@]rest`); `None` without `://`.
pub fn split(s: &str) -> Option<Parts<'_>> {
    let at = s.find("://")? + 3;
    let (scheme, tail) = s.split_at(at);
    Some(match tail.rfind('@') {
        Some(i) => {
            let userinfo = &tail[..i];
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            Parts {
                scheme,
                user: Some(user),
                password,
                rest: &tail[i + 1..],
            }
        }
        None => Parts {
            scheme,
            user: None,
            password: None,
            rest: tail,
        },
    })
}

/// Percent-decode a user name or password; `None` when the escapes are not UTF-8 (the
/// caller says so without echoing the text).
pub fn decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// `s` as it may be shown: the password is `***`; userinfo without a `:` (a token) is
/// replaced whole. The user name stays (it helps, and is not a secret).
pub fn redact(s: &str) -> String {
    match split(s) {
        None => s.to_string(),
        Some(p) => match (p.user, p.password) {
            (None, _) => s.to_string(),
            (Some(u), Some(_)) => format!("{}{u}:***@{}", p.scheme, p.rest),
            (Some(_), None) => format!("{}***@{}", p.scheme, p.rest),
        },
    }
}

/// Remove credentials from every `scheme://userinfo@` in a text — a URI that did not
/// parse, an error message that echoes one, a management URL. A URI runs to the next
/// white space or quote, and its userinfo to its last `@` (this module): a password
/// holding `/ ? #` is removed whole. The user name stays; the password becomes `***`.
pub fn redact_uri_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("://") {
        // Back to the start of the scheme, so `crate::uri` sees the whole URI.
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '`' | '\'' | '"'))
            .unwrap_or(tail.len());
        out.push_str(&redact(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `text` (an error that may echo `uri`) without `uri`'s password, raw or decoded,
/// wherever it stands, then without any other URI's (`redact_uri_text`).
pub fn scrub(text: &str, uri: &str) -> String {
    let mut out = text.to_string();
    if let Some(pw) = split(uri)
        .and_then(|p| p.password)
        .filter(|p| !p.is_empty())
    {
        out = out.replace(pw, "***");
        if let Some(plain) = decode(pw).filter(|d| !d.is_empty()) {
            out = out.replace(&plain, "***");
        }
    }
    redact_uri_text(&out)
}

/// Whether the URI's host is this machine (plain http is then no one else's to read).
pub fn is_loopback(s: &str) -> bool {
    let Some(p) = split(s) else {
        return false;
    };
    let host = p.rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passwords as people paste them, in every kind of URI the tool takes.
    pub const HOSTILE: &[&str] = &[
        "hunter2#x",
        "s3cr?t#x",
        "se/cret",
        "p@ss@word",
        "a:b:c",
        "100%sure",
        "%zz",
        "pä§wörd✓",
        "x y",
        "`;$(id)`",
    ];

    #[test]
    fn the_userinfo_ends_at_the_last_at_and_redaction_keeps_none_of_the_password() {
        for pw in HOSTILE {
            for scheme in [
                "postgres",
                "postgresql",
                "amqp",
                "amqps",
                "http",
                "https",
                "kafka",
            ] {
                let uri = format!("{scheme}://alice:{pw}@db.example:5432/x?y=1");
                let p = split(&uri).expect("a uri");
                assert_eq!(p.user, Some("alice"), "{uri}");
                assert_eq!(p.password, Some(*pw), "{uri}");
                assert_eq!(p.rest, "db.example:5432/x?y=1", "{uri}");
                let shown = redact(&uri);
                assert_eq!(shown, format!("{scheme}://alice:***@db.example:5432/x?y=1"));
            }
        }
        assert_eq!(redact("https://tok3n@h/x"), "https://***@h/x");
        assert_eq!(redact("http://h:1/x"), "http://h:1/x");
    }

    #[test]
    fn loopback_hosts_are_told_apart() {
        assert!(is_loopback("http://u:p@localhost:8081"));
        assert!(is_loopback("http://127.0.0.1:8081/x"));
        assert!(is_loopback("http://[::1]:8081"));
        assert!(!is_loopback("http://registry.example:8081"));
        assert!(!is_loopback("http://u:p@127.0.0.1.evil:80"));
    }
}
