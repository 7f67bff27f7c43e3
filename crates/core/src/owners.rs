//! Who must act on a letter: `[[owners]]` in the config map event types, reason codes,
//! origins, consumers and versions (globs) to an owner (a team, a channel). The first
//! rule whose every given field matches wins; a letter no rule matches is unowned, and
//! unowned letters are reported as such (`summary`, `watch`).

use crate::filter::glob;
use crate::store::{LetterStore, Row};
use serde::Deserialize;

/// One `[[owners]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OwnerRule {
    pub owner: String,
    #[serde(default)]
    pub event: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub origin: Option<String>,
    #[serde(default)]
    pub consumer: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

impl OwnerRule {
    /// A rule for `owner` that matches nothing until a field is given (`..new(owner)`).
    pub fn new(owner: &str) -> Self {
        OwnerRule {
            owner: owner.to_string(),
            event: None,
            reason: None,
            origin: None,
            consumer: None,
            version: None,
        }
    }
}

/// The owner rules, in config order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owners(pub Vec<OwnerRule>);

impl Owners {
    /// The owner of a letter, if a rule matches it.
    pub fn owner_of<'a>(&'a self, store: &LetterStore, r: &Row) -> Option<&'a str> {
        let fits =
            |pat: &Option<String>, sym: u32| pat.as_deref().is_none_or(|p| glob(p, store.sym(sym)));
        self.0
            .iter()
            .find(|o| {
                (o.event.is_some()
                    || o.reason.is_some()
                    || o.origin.is_some()
                    || o.consumer.is_some()
                    || o.version.is_some())
                    && fits(&o.event, r.event)
                    && fits(&o.reason, r.reason)
                    && fits(&o.origin, r.origin)
                    && fits(&o.consumer, r.consumer)
                    && fits(&o.version, r.version)
            })
            .map(|o| o.owner.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Owners of a set of letters in words: `team-billing`, `team-billing +1`, or
/// `(unowned)`; and how many of them have no owner.
pub fn owners_of<'a>(
    owners: &'a Owners,
    store: &LetterStore,
    rows: impl Iterator<Item = &'a Row>,
) -> (String, u64) {
    let mut seen: Vec<&str> = Vec::new();
    let mut unowned = 0u64;
    for r in rows {
        match owners.owner_of(store, r) {
            Some(o) if !seen.contains(&o) => seen.push(o),
            Some(_) => {}
            None => unowned += 1,
        }
    }
    let text = match (seen.first(), seen.len()) {
        (None, _) => "(unowned)".to_string(),
        (Some(o), 1) => (*o).to_string(),
        (Some(o), n) => format!("{o} +{}", n - 1),
    };
    (crate::sanitize::clean(&text), unowned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{prepare_letter, Catalog};
    use crate::masking::Masker;
    use crate::model::RawLetter;

    fn letter(body: &str) -> RawLetter {
        RawLetter {
            payload: body.as_bytes().to_vec(),
            ..RawLetter::default()
        }
    }

    #[test]
    fn the_first_matching_rule_owns_a_letter_and_others_are_unowned() {
        let masker = Masker::with_key(vec![1]);
        let mut c = Catalog::new(masker.clone(), Vec::new());
        for b in [
            r#"{"message_id":"a","event_type":"invoice.issue","failure":{"reason_code":"amount_not_a_number"}}"#,
            r#"{"message_id":"b","event_type":"payment.capture","failure":{"reason_code":"timeout"}}"#,
            r#"{"message_id":"c","event_type":"ledger.post","failure":{"reason_code":"lock"}}"#,
        ] {
            let (dl, preview) = prepare_letter(&masker, &[], letter(b));
            c.store.push(&dl, &preview);
        }
        let owners = Owners(vec![
            OwnerRule {
                event: Some("invoice.*".into()),
                ..OwnerRule::new("team-billing")
            },
            OwnerRule {
                reason: Some("time*".into()),
                ..OwnerRule::new("team-payments")
            },
        ]);
        let rows = c.store.rows();
        assert_eq!(owners.owner_of(&c.store, &rows[0]), Some("team-billing"));
        assert_eq!(owners.owner_of(&c.store, &rows[1]), Some("team-payments"));
        assert_eq!(owners.owner_of(&c.store, &rows[2]), None);
        let (text, unowned) = owners_of(&owners, &c.store, rows.iter());
        assert_eq!(text, "team-billing +1");
        assert_eq!(unowned, 1);
    }
}
