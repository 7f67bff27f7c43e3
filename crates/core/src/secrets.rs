//! The secrets of this invocation, redacted at the edge: whatever echoes them — a usage
//! error quoting an argument, librdkafka quoting a property, an HTTP client printing a
//! URL it re-encoded — every message the tool shows goes through the sanitizer
//! (`sanitize::clean`, `sanitize::line`), and the sanitizer replaces each secret found in
//! the command line and the environment, in every encoding a library prints, by `***`.
//!
//! Found, whatever the shape of the input: the password of any URL's userinfo (with or
//! without a scheme, one slash or two: `u:pw@host`, `postgres:/u:pw@h`), query
//! parameters and `KEY=VALUE` pairs whose key resembles a secret (`*pass*`, `*pwd*`,
//! `*secret*`, `*token*`, `*key*`, `sasl.*`, `*cred*`, `*auth*`, `*jaas*`, typos of
//! them), libpq keyword DSNs (`host=… password=…`), an `-X` argument without `=` (all of
//! it), and environment variables named like a password or token. Values shorter than
//! three characters are not redacted (they would blank out ordinary words).

use std::sync::OnceLock;

/// Every form of every secret to redact (set once, at start).
static FORMS: OnceLock<Vec<String>> = OnceLock::new();

/// What stands in for a secret.
pub const REDACTED: &str = "***";

/// Register the secrets found in `args` and `env` (name, value) for every later
/// message; the first call wins.
pub fn register(args: &[String], env: &[(String, String)]) {
    let mut found = in_args(args);
    found.extend(
        env.iter()
            .filter(|(k, _)| {
                let k = k.to_ascii_lowercase();
                ["password", "passwd", "secret", "token"]
                    .iter()
                    .any(|w| k.contains(w))
            })
            .map(|(_, v)| v.clone()),
    );
    let _ = FORMS.set(forms(&found));
}

/// `s` with every registered secret replaced by `***`.
pub fn scrub(s: &str) -> std::borrow::Cow<'_, str> {
    let Some(forms) = FORMS.get().filter(|f| !f.is_empty()) else {
        return std::borrow::Cow::Borrowed(s);
    };
    if !forms.iter().any(|f| s.contains(f.as_str())) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = s.to_string();
    for f in forms {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), REDACTED);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a property or parameter name resembles a secret's (typos included). A name
/// that says where a file is (`keyfile`, `ssl.key.location`, `ssl.keystore.path`) holds a
/// path, not the secret: it stays readable, so "no such file: keyfile=…" names the file.
pub fn secret_like(name: &str) -> bool {
    let n: String = name
        .to_ascii_lowercase()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    if ["file", "location", "path", "dir"]
        .iter()
        .any(|w| n.ends_with(w))
    {
        return false;
    }
    [
        "pas", "pwd", "psw", "secr", "token", "tok", "key", "sasl", "cred", "auth", "jaas",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The secret values in a command line.
pub fn in_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_prop_flag = false;
    for arg in args {
        let value = arg
            .strip_prefix("--kafka-prop=")
            .or_else(|| arg.strip_prefix("-X").filter(|v| !v.is_empty()));
        let prop = match value {
            Some(v) => Some(v),
            None if after_prop_flag => Some(arg.as_str()),
            None => None,
        };
        after_prop_flag = matches!(arg.as_str(), "-X" | "--kafka-prop");
        if let Some(p) = prop {
            match p.split_once('=') {
                Some((k, v)) if secret_like(k) => out.push(v.to_string()),
                Some(_) => {}
                // Not KEY=VALUE: it may be a value typed where the pair belonged.
                None => out.push(p.to_string()),
            }
        }
        out.extend(userinfo_password(arg));
        out.extend(pairs(arg));
    }
    out.retain(|s| s.chars().count() >= 3);
    out.sort();
    out.dedup();
    out
}

/// The password in a URL's userinfo, with a scheme or without (`u:pw@host`).
fn userinfo_password(arg: &str) -> Vec<String> {
    // After the scheme and its slashes, if any.
    let rest = match arg.find(':') {
        Some(i)
            if arg[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && arg[i + 1..].starts_with('/') =>
        {
            arg[i + 1..].trim_start_matches('/')
        }
        _ => arg,
    };
    let Some(at) = rest.rfind('@') else {
        return Vec::new();
    };
    let userinfo = &rest[..at];
    // A path before the userinfo is no userinfo (`/tmp/a@b`).
    if userinfo.contains('/') && !userinfo.contains(':') {
        return Vec::new();
    }
    match userinfo.split_once(':') {
        Some((_, pw)) if !pw.is_empty() => {
            let mut v = vec![pw.to_string()];
            if let Some(d) = crate::uri::decode(pw) {
                v.push(d);
            }
            v
        }
        _ => Vec::new(),
    }
}

/// Values of `name=value` pairs whose name resembles a secret, in a query string, a
/// libpq keyword DSN or anything spaced (`password='a b'` quoted as libpq reads it).
fn pairs(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let query = arg.split_once('?').map_or("", |(_, q)| q);
    for kv in query.split(['&', ';']) {
        if let Some((k, v)) = kv.split_once('=') {
            if secret_like(k) && !v.is_empty() {
                out.push(v.to_string());
                if let Some(d) = crate::uri::decode(&v.replace('+', " ")) {
                    out.push(d);
                }
            }
        }
    }
    // Keyword DSN: key = value, value bare or single-quoted.
    let mut rest = arg;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq]
            .trim_end()
            .rsplit(|c: char| c.is_whitespace() || matches!(c, '?' | '&' | ';'))
            .next()
            .unwrap_or("");
        let after = rest[eq + 1..].trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('\'') {
            let end = q.find('\'').unwrap_or(q.len());
            (&q[..end], &q[(end + 1).min(q.len())..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || matches!(c, '&' | ';'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if secret_like(key) && !value.is_empty() {
            out.push(value.to_string());
        }
        rest = next;
    }
    out
}

/// Each secret as libraries print it: raw, percent-encoded (upper and lower hex, every
/// byte but the unreserved ones, or only what a URL's userinfo must encode), form-encoded.
fn forms(secrets: &[String]) -> Vec<String> {
    use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS, NON_ALPHANUMERIC};
    const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    // The WHATWG URL standard's userinfo set (what `url`, and so most HTTP clients, use).
    const USERINFO: &AsciiSet = &CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'`')
        .add(b'{')
        .add(b'}')
        .add(b'/')
        .add(b':')
        .add(b';')
        .add(b'=')
        .add(b'@')
        .add(b'[')
        .add(b'\\')
        .add(b']')
        .add(b'^')
        .add(b'|');
    let mut out = Vec::new();
    for s in secrets.iter().filter(|s| s.chars().count() >= 3) {
        let full = utf8_percent_encode(s, UNRESERVED).to_string();
        out.push(s.clone());
        out.push(full.to_lowercase_hex());
        out.push(full.replace("%20", "+"));
        out.push(full);
        out.push(utf8_percent_encode(s, USERINFO).to_string());
    }
    // Longest first: a secret inside another is replaced after it.
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out.dedup();
    out
}

trait LowerHex {
    fn to_lowercase_hex(&self) -> String;
}

impl LowerHex for String {
    /// `%2F` → `%2f`, the rest as it is.
    fn to_lowercase_hex(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut chars = self.chars();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == '%' {
                for h in chars.by_ref().take(2) {
                    out.push(h.to_ascii_lowercase());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_file_locations_are_not_secrets_but_inline_keys_are() {
        for path in [
            "keyfile",
            "certfile",
            "ssl.key.location",
            "ssl.keystore.path",
        ] {
            assert!(!secret_like(path), "{path}");
        }
        for secret in [
            "ssl.key.password",
            "ssl.key.pem",
            "sasl.password",
            "api_key",
        ] {
            assert!(secret_like(secret), "{secret}");
        }
    }

    fn found(args: &[&str]) -> Vec<String> {
        in_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn secrets_are_found_whatever_the_shape() {
        for (args, secret) in [
            (
                &["--management-url", "http://u:Pq7'Wz4 x@host"][..],
                "Pq7'Wz4 x",
            ),
            (&["-X", "sasl.passwrd=SECRET1"][..], "SECRET1"),
            (
                &["-X", "sasl.password SECRET2"][..],
                "sasl.password SECRET2",
            ),
            (&["-X", "SECRET3"][..], "SECRET3"),
            (&["-Xssl.key.password=SECRET4"][..], "SECRET4"),
            (&["kafka://b:9092/t?sasl.password=SECRET5"][..], "SECRET5"),
            (
                &["amqp://r/%2f?heartbeat=5&password=SECRET6"][..],
                "SECRET6",
            ),
            (
                &["--ledger", "host=db password=SECRET7 dbname=dlq"][..],
                "SECRET7",
            ),
            (
                &["--ledger", "host=db password='SEC RET8' dbname=dlq"][..],
                "SEC RET8",
            ),
            (
                &["--ledger", "postgres:/alice:SECRET9@db/dlq"][..],
                "SECRET9",
            ),
            (
                &["--schema-registry", "u:SECRET10@registry:8081"][..],
                "SECRET10",
            ),
            (&["amqps://u:p%40ss%2Fw0rd@h/v"][..], "p@ss/w0rd"),
        ] {
            let f = found(args);
            assert!(f.iter().any(|s| s == secret), "{args:?}: {f:?}");
        }
        assert!(found(&["demo", "/tmp/a@b.ndjson", "-X", "acks=all"]).is_empty());
    }

    #[test]
    fn every_encoding_a_library_prints_is_redacted() {
        let f = forms(&["Pq7'Wz4 x".to_string()]);
        for printed in ["Pq7'Wz4 x", "Pq7%27Wz4%20x", "Pq7%27Wz4+x", "Pq7'Wz4%20x"] {
            let shown = f.iter().fold(printed.to_string(), |s, form| {
                s.replace(form.as_str(), "***")
            });
            assert!(
                !shown.contains("Wz4") && !shown.contains("wz4"),
                "{printed} → {shown}"
            );
        }
    }
}
