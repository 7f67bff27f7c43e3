//! Links out: `[[links]]` URL templates in the config, filled from a letter's fields and
//! headers — the trace of `traceparent`, a correlation id, the consumer version — so the
//! engineer goes from a dead letter to its trace, its logs, its release in one step.
//!
//! A value is put in a link only as the role may see it: a value the detectors mask
//! (an email used as a correlation id) leaves the link out and says why, rather than
//! carrying it to another system or onto the screen. Values are percent-encoded, so a
//! letter cannot change where a link points.

use crate::masking::Masker;
use crate::model::DeadLetter;
use serde::Deserialize;

/// `[[links]] name = "trace", url = "https://grafana.example/explore?traceId={trace_id}"`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkTemplate {
    pub name: String,
    pub url: String,
}

/// A link for one letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub url: String,
}

/// The placeholders a template may use (and `{header.NAME}`).
pub const PLACEHOLDERS: [&str; 7] = [
    "trace_id",
    "span_id",
    "correlation_id",
    "id",
    "reason",
    "consumer",
    "consumer_version",
];

impl LinkTemplate {
    /// Checked when the config is read: a name, an http(s) URL without control
    /// characters, only known placeholders.
    pub fn check(&self) -> Result<(), String> {
        let name = crate::sanitize::clean(&self.name);
        if self.name.trim().is_empty() {
            return Err("[[links]] needs a name".into());
        }
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            return Err(format!(
                "link `{name}`: url must start with https:// or http://"
            ));
        }
        if self
            .url
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(format!(
                "link `{name}`: url has a space or a control character"
            ));
        }
        for p in placeholders(&self.url)? {
            let known = PLACEHOLDERS.contains(&p)
                || p.strip_prefix("header.").is_some_and(|h| !h.is_empty());
            if !known {
                return Err(format!(
                    "link `{name}`: unknown placeholder {{{}}} (known: {}, header.NAME)",
                    crate::sanitize::clean(p),
                    PLACEHOLDERS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The link for `dl`, or why it cannot be made (a value missing, or masked).
    pub fn render(&self, dl: &DeadLetter, masker: &Masker) -> Result<Link, String> {
        let mut url = String::new();
        let mut rest = self.url.as_str();
        while let Some(open) = rest.find('{') {
            url.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or("an unclosed {")?;
            let p = &rest[open + 1..close];
            let v = value(p, dl, masker)?;
            url.push_str(&crate::source::pct_encode(&v));
            rest = &rest[close + 1..];
        }
        url.push_str(rest);
        Ok(Link {
            name: self.name.clone(),
            url,
        })
    }
}

/// The names between braces, in order.
fn placeholders(url: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = url;
    while let Some(open) = rest.find('{') {
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or("an unclosed { in the url")?;
        out.push(&rest[open + 1..close]);
        rest = &rest[close + 1..];
    }
    if rest.contains('}') {
        return Err("a } without its { in the url".into());
    }
    Ok(out)
}

/// A placeholder's value for `dl`, if it has one the role may see.
fn value(p: &str, dl: &DeadLetter, masker: &Masker) -> Result<String, String> {
    let field = |v: Option<&crate::model::Sourced<String>>| v.map(|s| s.value.clone());
    let header = |name: &str| dl.raw.header(name).and_then(|h| h.as_nonempty_text());
    let traceparent = || {
        let tp = header("traceparent")?;
        let parts: Vec<&str> = tp.split('-').collect();
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        (parts.len() >= 4 && hex(parts[1], 32) && hex(parts[2], 16))
            .then(|| (parts[1].to_string(), parts[2].to_string()))
    };
    let got = match p {
        "trace_id" => traceparent().map(|t| t.0),
        "span_id" => traceparent().map(|t| t.1),
        "correlation_id" => field(dl.event.correlation_id.as_ref()),
        "id" => Some(dl.id.value.0.clone()),
        "reason" => field(dl.failure.reason_code.as_ref()),
        "consumer" => field(dl.failure.consumer.as_ref()),
        "consumer_version" => field(dl.failure.consumer_version.as_ref()),
        other => match other.strip_prefix("header.") {
            Some(h) => header(h),
            None => None,
        },
    };
    let v = got.ok_or_else(|| format!("the letter has no {p}"))?;
    // Extracted fields come masked already (`j***@e***.com`); a header is masked as the
    // headers tab masks it — by its name first (`x-api-key`), then by the detectors.
    let masked = match p.strip_prefix("header.") {
        Some(h) => masker.mask_header(h, &crate::model::HeaderValue::text(&v)) != v,
        None => masker.mask_text(&v) != v,
    };
    if masked || v.contains("**") {
        return Err(format!("its {p} is masked"));
    }
    Ok(v)
}

/// Every template's link for `dl`, or (name, why not).
pub fn links_for(
    templates: &[LinkTemplate],
    dl: &DeadLetter,
    masker: &Masker,
) -> Vec<Result<Link, (String, String)>> {
    templates
        .iter()
        .map(|t| t.render(dl, masker).map_err(|why| (t.name.clone(), why)))
        .collect()
}

/// The links as lines `name  url` (or `name  (not for this letter: why)`), the same for
/// `show` and the TUI; `hyperlink` wraps each URL (OSC 8 on a terminal).
pub fn link_lines(
    templates: &[LinkTemplate],
    dl: &DeadLetter,
    masker: &Masker,
    hyperlink: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let w = templates
        .iter()
        .map(|t| t.name.chars().count())
        .max()
        .unwrap_or(0)
        .min(24);
    links_for(templates, dl, masker)
        .into_iter()
        .map(|l| match l {
            Ok(l) => format!(
                "{:<w$}  {}",
                crate::sanitize::line(&l.name, 24),
                hyperlink(&l.url)
            ),
            Err((name, why)) => format!(
                "{:<w$}  (not for this letter: {})",
                crate::sanitize::line(&name, 24),
                crate::sanitize::line(&why, 120)
            ),
        })
        .collect()
}

/// A link as an OSC 8 hyperlink for a terminal that shows them (the text is the URL;
/// a terminal without them prints the text alone). The URL is percent-encoded from a
/// checked template: no escape can end the sequence early.
pub fn osc8(url: &str) -> String {
    format!("\x1b]8;;{url}\x1b\\{url}\x1b]8;;\x1b\\")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::prepare_letter;
    use crate::model::{Header, HeaderValue, RawLetter};

    fn letter(headers: &[(&str, &str)]) -> DeadLetter {
        let raw = RawLetter {
            headers: headers
                .iter()
                .map(|(n, v)| Header::new(n.to_string(), HeaderValue::text(v)))
                .collect(),
            payload: b"{}".to_vec(),
            ..RawLetter::default()
        };
        prepare_letter(&Masker::with_key(vec![1]), &[], raw).0
    }

    fn t(url: &str) -> LinkTemplate {
        LinkTemplate {
            name: "x".into(),
            url: url.into(),
        }
    }

    #[test]
    fn a_trace_link_is_built_from_traceparent_and_values_are_encoded() {
        let m = Masker::with_key(vec![1]);
        let dl = letter(&[
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("x-consumer-version", "release 2026/09&x=1"),
        ]);
        let trace = t("https://tempo.example/trace/{trace_id}?span={span_id}");
        assert!(trace.check().is_ok());
        assert_eq!(
            trace.render(&dl, &m).map(|l| l.url),
            Ok("https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?span=00f067aa0ba902b7".into())
        );
        let rel = t("https://ci.example/releases?v={consumer_version}");
        assert_eq!(
            rel.render(&dl, &m).map(|l| l.url),
            Ok("https://ci.example/releases?v=release%202026%2F09%26x%3D1".into())
        );
    }

    #[test]
    fn a_masked_or_missing_value_leaves_the_link_out() {
        let m = Masker::with_key(vec![1]);
        let dl = letter(&[("x-correlation-id", "jane.doe@example.com")]);
        let corr = t("https://logs.example/?q={correlation_id}");
        assert_eq!(
            corr.render(&dl, &m),
            Err("its correlation_id is masked".into())
        );
        let trace = t("https://tempo.example/{trace_id}");
        assert_eq!(
            trace.render(&dl, &m),
            Err("the letter has no trace_id".into())
        );
    }

    /// A header masked by its name (a key, a token) never goes into a URL, whatever its
    /// value looks like.
    #[test]
    fn a_header_masked_by_its_name_is_not_put_in_a_link() {
        let m = Masker::with_key(vec![1]);
        let dl = letter(&[
            ("authorization", "plain-looking-value"),
            ("x-request-id", "r-42"),
        ]);
        assert_eq!(
            t("https://x/{header.authorization}").render(&dl, &m),
            Err("its header.authorization is masked".into())
        );
        assert_eq!(
            t("https://x/{header.x-request-id}")
                .render(&dl, &m)
                .map(|l| l.url),
            Ok("https://x/r-42".into())
        );
    }

    #[test]
    fn templates_are_checked() {
        assert!(t("ftp://x/{id}").check().is_err());
        assert!(t("https://x/{nope}")
            .check()
            .unwrap_err()
            .contains("unknown placeholder {nope}"));
        assert!(t("https://x/{id").check().is_err());
        assert!(t("https://x/ {id}").check().is_err());
        assert!(t("https://x/{header.x-request-id}").check().is_ok());
        assert_eq!(
            osc8("https://x/1"),
            "\u{1b}]8;;https://x/1\u{1b}\\https://x/1\u{1b}]8;;\u{1b}\\"
        );
    }
}
