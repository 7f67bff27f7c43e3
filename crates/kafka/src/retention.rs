//! A DLQ topic's retention, read with DescribeConfigs (`retention.ms`,
//! `retention.bytes`, `cleanup.policy`). A broker that does not answer, or refuses
//! (no DescribeConfigs permission), gives `Unknown` with its words — never a default.

use dlq_core::retention::Retention;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use std::time::Duration;

/// Each topic's rule; one request for all of them, bounded in time.
pub fn read(cfg: &ClientConfig, topics: &[String]) -> Vec<(String, Retention)> {
    let unknown = |why: String| -> Vec<(String, Retention)> {
        topics
            .iter()
            .map(|t| (t.clone(), Retention::Unknown(why.clone())))
            .collect()
    };
    let admin: AdminClient<DefaultClientContext> = match cfg.create() {
        Ok(a) => a,
        Err(e) => return unknown(format!("cannot ask the broker: {e}")),
    };
    let specs: Vec<ResourceSpecifier> = topics
        .iter()
        .map(|t| ResourceSpecifier::Topic(t.as_str()))
        .collect();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(3)));
    match futures_lite::future::block_on(admin.describe_configs(&specs, &opts)) {
        Err(e) => unknown(format!("the broker did not answer DescribeConfigs ({e})")),
        Ok(results) => topics
            .iter()
            .zip(results)
            .map(|(t, r)| {
                let rule = match r {
                    Ok(res) => {
                        let get = |k: &str| res.get(k).and_then(|e| e.value.clone());
                        rule(
                            get("cleanup.policy").as_deref(),
                            get("retention.ms").as_deref(),
                            get("retention.bytes").as_deref(),
                        )
                    }
                    Err(code) => Retention::Unknown(format!("DescribeConfigs refused: {code}")),
                };
                (t.clone(), rule)
            })
            .collect(),
    }
}

/// The rule a topic's settings make.
pub fn rule(cleanup: Option<&str>, ms: Option<&str>, bytes: Option<&str>) -> Retention {
    let cleanup = cleanup.unwrap_or("delete");
    if !cleanup.split(',').any(|p| p.trim() == "delete") {
        return Retention::Kept(format!(
            "cleanup.policy={cleanup}: not deleted by age (compaction keeps the newest letter per key)"
        ));
    }
    let bytes_note = match bytes.and_then(|b| b.parse::<i64>().ok()) {
        Some(b) if b >= 0 => {
            format!("; retention.bytes={b} also deletes the oldest when a partition grows past it")
        }
        _ => String::new(),
    };
    match ms.map(str::parse::<i64>) {
        Some(Ok(ms)) if ms > 0 => Retention::After {
            ms,
            basis: format!("retention.ms={ms}{bytes_note}"),
        },
        Some(Ok(_)) => Retention::Kept(format!(
            "retention.ms={}{bytes_note}",
            ms.unwrap_or_default()
        )),
        _ => Retention::Unknown("the broker did not report retention.ms".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_make_a_rule_and_missing_ones_are_never_guessed() {
        assert_eq!(
            rule(Some("delete"), Some("604800000"), Some("-1")).ms(),
            Some(604_800_000)
        );
        assert!(matches!(
            rule(Some("compact"), Some("1000"), None),
            Retention::Kept(_)
        ));
        assert_eq!(
            rule(Some("compact,delete"), Some("1000"), None).ms(),
            Some(1000)
        );
        assert!(matches!(rule(None, Some("-1"), None), Retention::Kept(_)));
        assert!(matches!(rule(None, None, None), Retention::Unknown(_)));
        let r = rule(None, Some("1000"), Some("1048576"));
        assert!(
            r.describe().contains("retention.bytes=1048576"),
            "{}",
            r.describe()
        );
    }
}
