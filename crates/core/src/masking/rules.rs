//! Field-name rules: which names are sensitive, and of what class.

/// What kind of value it is, which decides the shape of the hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    Email,
    Phone,
    Name,
    Address,
    Card,
    Iban,
    NationalId,
    Secret,
    Digits,
    Generic,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Email => "email",
            Class::Phone => "phone",
            Class::Name => "name",
            Class::Address => "address",
            Class::Card => "card",
            Class::Iban => "iban",
            Class::NationalId => "national_id",
            Class::Secret => "secret",
            Class::Digits => "digits",
            Class::Generic => "generic",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Class> {
        [
            Class::Email,
            Class::Phone,
            Class::Name,
            Class::Address,
            Class::Card,
            Class::Iban,
            Class::NationalId,
            Class::Secret,
            Class::Digits,
            Class::Generic,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// Field names (normalised: lowercase, no `_-. `) that are sensitive when they *contain*
/// the token.
pub(crate) const CONTAINS_RULES: &[(&str, Class)] = &[
    ("password", Class::Secret),
    ("passwd", Class::Secret),
    ("secret", Class::Secret),
    ("token", Class::Secret),
    ("authorization", Class::Secret),
    ("cookie", Class::Secret),
    ("apikey", Class::Secret),
    ("privatekey", Class::Secret),
    ("accesskey", Class::Secret),
    ("credential", Class::Secret),
    ("sessionid", Class::Secret),
    ("cvv", Class::Secret),
    ("cvc", Class::Secret),
    ("email", Class::Email),
    ("phone", Class::Phone),
    ("mobile", Class::Phone),
    ("msisdn", Class::Phone),
    ("iban", Class::Iban),
    ("cardnumber", Class::Card),
    ("creditcard", Class::Card),
    ("ssn", Class::NationalId),
    ("taxid", Class::NationalId),
    ("taxnumber", Class::NationalId),
    ("nationalid", Class::NationalId),
    ("passport", Class::NationalId),
    ("socialsecurity", Class::NationalId),
    ("dateofbirth", Class::NationalId),
    ("birthdate", Class::NationalId),
    ("address", Class::Address),
    ("street", Class::Address),
    ("postcode", Class::Address),
    ("postalcode", Class::Address),
];

/// Field names sensitive only when they are *exactly* the token (`name` yes, `topic_name` no).
pub(crate) const EXACT_RULES: &[(&str, Class)] = &[
    ("name", Class::Name),
    ("firstname", Class::Name),
    ("lastname", Class::Name),
    ("fullname", Class::Name),
    ("givenname", Class::Name),
    ("familyname", Class::Name),
    ("surname", Class::Name),
    ("middlename", Class::Name),
    ("displayname", Class::Name),
    ("customername", Class::Name),
    ("contactname", Class::Name),
    ("holdername", Class::Name),
    ("cardholder", Class::Name),
    ("cardholdername", Class::Name),
    ("accountholder", Class::Name),
    ("billingname", Class::Name),
    ("shippingname", Class::Name),
    ("recipientname", Class::Name),
    ("username", Class::Name),
    ("pan", Class::Card),
    ("card", Class::Card),
    ("dob", Class::NationalId),
    ("zip", Class::Address),
    ("zipcode", Class::Address),
    ("city", Class::Address),
    ("auth", Class::Secret),
    ("pin", Class::Secret),
    ("pwd", Class::Secret),
    ("pass", Class::Secret),
];

/// The built-in rules for a normalised name: exact names first, then the first
/// `CONTAINS_RULES` token (in table order) the name contains. This runs for every key of
/// every previewed payload and every `name=` candidate in free text, so it is one hash
/// lookup and one Aho-Corasick pass instead of ~60 string comparisons.
pub(crate) fn static_class(n: &str) -> Option<Class> {
    use aho_corasick::AhoCorasick;
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static EXACT: OnceLock<HashMap<&'static str, Class>> = OnceLock::new();
    static CONTAINS: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    let exact = EXACT.get_or_init(|| EXACT_RULES.iter().copied().collect());
    if let Some(c) = exact.get(n) {
        return Some(*c);
    }
    let first_rule = match CONTAINS
        .get_or_init(|| AhoCorasick::new(CONTAINS_RULES.iter().map(|(t, _)| t)).ok())
    {
        Some(ac) => ac
            .find_overlapping_iter(n)
            .map(|m| m.pattern().as_usize())
            .min(),
        // Cannot happen with these fixed tokens; fall back to the plain scan.
        None => CONTAINS_RULES.iter().position(|(t, _)| n.contains(t)),
    };
    first_rule
        .and_then(|i| CONTAINS_RULES.get(i))
        .map(|(_, c)| *c)
}
