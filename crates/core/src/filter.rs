//! The filter expression language, one parser for the CLI and the TUI.
//!
//! Space-separated terms, all of which must hold:
//! `reason=customer_tax_profile_missing`, `version!=release-2026-09-14`, `event=invoice.*`
//! (glob `*`/`?`), `schema=3`, `age>1h`, `age<15m`, `key=acc-42`, `origin=orders`,
//! `state=open|discarded` (`|` = any of), `attempt>=3`, and bare words matched fuzzily
//! against the letter's summary (id, key, reason, masked preview). Values with spaces are
//! quoted: `reason="Order <n> not found"`. `payload.PATH=…` and header terms
//! (`x-error=…`, `header.NAME=…`) read whole letters (see `letters`).

use crate::model::{BodyKind, TriageState};
use crate::store::{LetterStore, Row, Sym, NO_TIME};
use crate::timefmt::parse_duration_ms;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FilterError {}

fn fail<T>(message: impl Into<String>) -> Result<T, FilterError> {
    Err(FilterError {
        message: message.into(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// Which interned field a text term looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SymField {
    Reason,
    Version,
    Event,
    Schema,
    Origin,
    Consumer,
    Exception,
    Container,
}

impl SymField {
    fn get(self, r: &Row) -> Sym {
        match self {
            SymField::Reason => r.reason,
            SymField::Version => r.version,
            SymField::Event => r.event,
            SymField::Schema => r.schema,
            SymField::Origin => r.origin,
            SymField::Consumer => r.consumer,
            SymField::Exception => r.exception,
            SymField::Container => r.container,
        }
    }
}

#[derive(Debug, Clone)]
enum Term {
    /// Text field against patterns; results cached per symbol (0 = unknown, 1 = yes, 2 = no).
    Sym {
        field: SymField,
        negate: bool,
        patterns: Vec<String>,
        cache: Vec<u8>,
    },
    Key {
        negate: bool,
        patterns: Vec<String>,
    },
    Id {
        negate: bool,
        patterns: Vec<String>,
    },
    Age {
        op: Op,
        ms: i64,
    },
    Attempt {
        op: Op,
        n: u32,
    },
    Replays {
        op: Op,
        n: u32,
    },
    State {
        negate: bool,
        states: Vec<TriageState>,
    },
    Body {
        negate: bool,
        kinds: Vec<BodyKind>,
    },
    Fuzzy(String),
    /// `x-error=timeout*` or `header.x-error=…`: a header's value, matched **as
    /// masked**, judged on whole letters like `payload.…` (the index keeps no headers).
    /// The name is compared without case; a letter without the header matches neither
    /// `=` nor `!=`.
    Header {
        name: String,
        negate: bool,
        patterns: Vec<String>,
        verdicts: std::collections::HashMap<u64, bool>,
    },
    /// `payload.customer.email=*@acme.com`: a field of the payload (the decoded form of
    /// a schema-encoded one), matched **as masked** — a filter never tests a value the
    /// user could not see. Needs whole letters: the verdicts are noted per letter while
    /// a scan hands them over (`Filter::note_letter`), keyed by the row's arena offset.
    Payload {
        path: Vec<String>,
        negate: bool,
        patterns: Vec<String>,
        verdicts: std::collections::HashMap<u64, bool>,
    },
}

/// A compiled filter. `matches` takes `&mut self` to fill its per-symbol caches.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    terms: Vec<Term>,
    source: String,
    /// Letters whose payload holds every bare word (noted on whole letters): what the
    /// filter says when the bare words found nothing where they look.
    in_payloads: letters::PayloadWords,
    /// Handled letters too, without a `state=` term (a replay's selection: its plan says
    /// why a replayed letter is left out, instead of a silent empty match).
    all_states: bool,
}

mod letters;
mod matching;
use matching::{alternatives, any_glob, SPECIAL};
pub use matching::{fuzzy_indices, fuzzy_match, glob, quote_value};

/// Where `payload.…` and header terms cannot be judged (the TUI's index and `watch`
/// keep metadata only), what to say.
pub const PAYLOAD_TERMS_NEED_LETTERS: &str = "payload.… and header terms read whole letters: use them with list, summary, export, discard or replay (the TUI and watch filter what they indexed)";

pub const FIELDS: &str = "reason, version, event, schema, origin, consumer, exception, topic, key, id, age, attempt, replays, state, body, payload.PATH, header.NAME (or a header name with a `-`: x-error)";

impl Filter {
    /// The empty filter, which matches everything.
    pub fn all() -> Self {
        Filter::default()
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Match handled letters too when no `state=` term says otherwise.
    pub fn with_all_states(mut self) -> Self {
        self.all_states = true;
        self
    }

    /// Does any term search the masked preview (bare fuzzy words)?
    /// The bare (fuzzy) words, lowercase, for highlighting what they matched.
    pub fn fuzzy_words(&self) -> Vec<&str> {
        self.terms
            .iter()
            .filter_map(|t| match t {
                Term::Fuzzy(w) => Some(w.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn needs_previews(&self) -> bool {
        self.terms.iter().any(|t| matches!(t, Term::Fuzzy(_)))
    }

    /// The ages (ms) at which an `age` term changes its verdict: the only points in time
    /// where a letter can enter or leave this filter without anything else changing.
    pub fn age_thresholds(&self) -> Vec<i64> {
        self.terms
            .iter()
            .filter_map(|t| match t {
                Term::Age { ms, .. } => Some(*ms),
                _ => None,
            })
            .collect()
    }

    /// The text it was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn parse(expr: &str) -> Result<Filter, FilterError> {
        let mut terms = Vec::new();
        for tok in tokenize(expr)? {
            // Typed from habit, a connective must not become a fuzzy term that matches
            // nothing (`age<5m and reason=x` found 0 letters): `and` is what spaces
            // mean already; `or` and `not` are refused with the way to say them.
            match tok.to_ascii_lowercase().as_str() {
                "and" | "&&" => continue,
                "or" | "||" => {
                    return fail(format!(
                        "`{tok}`: terms separated by spaces must all hold; for any of several values use `|` inside one term (reason=a|b)"
                    ))
                }
                "not" | "!" => {
                    return fail(format!("`{tok}`: negate a term with != (version!=r1)"))
                }
                _ => {}
            }
            terms.push(parse_term(&tok)?);
        }
        Ok(Filter {
            terms,
            source: expr.trim().to_string(),
            all_states: false,
            in_payloads: Default::default(),
        })
    }

    /// Does the letter match every term? Without a `state=` term, handled letters
    /// (discarded, replayed, resolved) are left out: "what is failing" counts what still
    /// fails, and `state=replayed` (or `state=discarded`, …) shows them.
    pub fn matches(&mut self, store: &LetterStore, r: &Row, now_ms: i64) -> bool {
        if !self.all_states
            && !r.state.unhandled()
            && !self.terms.iter().any(|t| matches!(t, Term::State { .. }))
        {
            return false;
        }
        for t in &mut self.terms {
            let ok = match t {
                Term::Sym {
                    field,
                    negate,
                    patterns,
                    cache,
                } => {
                    let sym = field.get(r) as usize;
                    if cache.len() <= sym {
                        cache.resize(store.syms.len().max(sym + 1), 0);
                    }
                    if cache[sym] == 0 {
                        let v = store.sym(sym as Sym);
                        cache[sym] = if any_glob(patterns, v) { 1 } else { 2 };
                    }
                    (cache[sym] == 1) != *negate
                }
                Term::Key { negate, patterns } => any_glob(patterns, store.key(r)) != *negate,
                Term::Id { negate, patterns } => any_glob(patterns, store.id(r)) != *negate,
                Term::Age { op, ms } => {
                    r.at_ms != NO_TIME && compare(now_ms.saturating_sub(r.at_ms), *op, *ms)
                }
                Term::Attempt { op, n } => compare(i64::from(r.attempt), *op, i64::from(*n)),
                Term::Replays { op, n } => compare(i64::from(r.replay_count), *op, i64::from(*n)),
                Term::State { negate, states } => states.contains(&r.state) != *negate,
                Term::Body { negate, kinds } => kinds.contains(&r.body) != *negate,
                Term::Payload { verdicts, .. } | Term::Header { verdicts, .. } => {
                    verdicts.get(&r.text_at).copied().unwrap_or(false)
                }
                Term::Fuzzy(word) => {
                    fuzzy_match(word, store.id(r)).is_some()
                        || fuzzy_match(word, store.key(r)).is_some()
                        || fuzzy_match(word, store.sym(r.reason)).is_some()
                        || fuzzy_match(word, store.preview(r)).is_some()
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

fn compare(a: i64, op: Op, b: i64) -> bool {
    match op {
        Op::Eq => a == b,
        Op::Ne => a != b,
        Op::Gt => a > b,
        Op::Ge => a >= b,
        Op::Lt => a < b,
        Op::Le => a <= b,
    }
}

/// Split on whitespace outside quotes; quotes are removed. A backslash keeps the
/// character after it as it is (`\"` is a quote inside a value, not its end), and stays
/// in the word for the value's own reading ([`glob`]). Filters and `watch --exec`
/// commands are both split this way (never by a shell). `Err` names an unclosed quote.
pub fn split_quoted(text: &str) -> Result<Vec<String>, char> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            cur.push(c);
            if let Some(next) = chars.next() {
                cur.push(next);
            }
            continue;
        }
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if let Some(q) = quote {
        return Err(q);
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

fn tokenize(expr: &str) -> Result<Vec<String>, FilterError> {
    split_quoted(expr).or_else(|q| fail(format!("unclosed quote {q} in filter")))
}

/// The comparison at the start of `rest`, and what follows it.
fn split_op(rest: &str) -> Option<(Op, &str)> {
    [
        ("!=", Op::Ne),
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("=", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
    ]
    .into_iter()
    .find_map(|(text, op)| rest.strip_prefix(text).map(|v| (op, v)))
}

fn parse_term(tok: &str) -> Result<Term, FilterError> {
    // Find the operator after a field name made of letters, digits, `_`, `-` and `.`
    // (`payload.customer.email`; `x-error` is then an unknown field, said so, not a
    // fuzzy word that silently matches nothing).
    let name_end = tok
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(tok.len());
    let Some((op, value)) = split_op(&tok[name_end..]) else {
        if tok.is_empty() {
            return fail("empty filter term");
        }
        return Ok(Term::Fuzzy(tok.to_lowercase()));
    };
    let name = &tok[..name_end];
    if name_end == 0 {
        return fail(format!(
            "`{tok}`: missing field name before the operator (fields: {FIELDS})"
        ));
    }
    let alts = alternatives(value);
    let negate = match op {
        Op::Eq => false,
        Op::Ne => true,
        _ if matches!(name, "age" | "attempt" | "replays") => false,
        _ => {
            return fail(format!(
            "`{tok}`: `{name}` compares with = or != only; <, > work on age, attempt and replays"
        ))
        }
    };
    field_term(tok, name, op, value, negate, alts)
}

/// The term on field `name` (`tok` whole, for errors): a payload path, a header, one
/// of the letter's fields.
fn field_term(
    tok: &str,
    name: &str,
    op: Op,
    value: &str,
    negate: bool,
    alts: Vec<String>,
) -> Result<Term, FilterError> {
    let sym = |field| {
        Ok(Term::Sym {
            field,
            negate,
            patterns: alts.clone(),
            cache: Vec::new(),
        })
    };
    if let Some(path) = name.strip_prefix("payload.") {
        return payload_term(tok, path, negate, alts);
    }
    // Header names are compared without case: kept lowercase.
    let header = |name: &str| {
        Ok(Term::Header {
            name: name.to_ascii_lowercase(),
            negate,
            patterns: alts.clone(),
            verdicts: std::collections::HashMap::new(),
        })
    };
    if let Some(h) = name.strip_prefix("header.") {
        if h.is_empty() {
            return fail(format!(
                "`{tok}`: header.NAME names a header: header.x-error"
            ));
        }
        return header(h);
    }
    match name {
        "reason" => sym(SymField::Reason),
        "version" => sym(SymField::Version),
        "event" => sym(SymField::Event),
        "schema" => sym(SymField::Schema),
        "origin" => sym(SymField::Origin),
        "consumer" => sym(SymField::Consumer),
        "exception" => sym(SymField::Exception),
        "topic" | "queue" => sym(SymField::Container),
        "key" => Ok(Term::Key {
            negate,
            patterns: alts,
        }),
        "id" => Ok(Term::Id {
            negate,
            patterns: alts,
        }),
        "age" | "attempt" | "replays" => numeric_term(tok, name, op, value),
        "state" => Ok(Term::State {
            negate,
            states: states_of(tok, &alts)?,
        }),
        "body" => Ok(Term::Body {
            negate,
            kinds: kinds_of(tok, &alts)?,
        }),
        // Not a field of ours, and shaped like a header name (`x-error`,
        // `kafka_dlt-exception-message`): that header.
        _ if name.contains('-') => header(name),
        _ => fail(format!(
            "unknown filter field `{name}` in `{tok}` (fields: {FIELDS})"
        )),
    }
}

/// `payload.a.b=…`: a term on a field of the (masked) payload.
fn payload_term(
    tok: &str,
    path: &str,
    negate: bool,
    patterns: Vec<String>,
) -> Result<Term, FilterError> {
    let path: Vec<String> = path.split('.').map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return fail(format!(
            "`{tok}`: a payload path names fields: payload.customer.email"
        ));
    }
    Ok(Term::Payload {
        path,
        negate,
        patterns,
        verdicts: std::collections::HashMap::new(),
    })
}

/// `age<15m`, `attempt>=3`, `replays>0`.
fn numeric_term(tok: &str, name: &str, op: Op, value: &str) -> Result<Term, FilterError> {
    if name == "age" {
        if matches!(op, Op::Eq | Op::Ne) {
            return fail(format!("`{tok}`: age takes < or >, e.g. age>1h or age<15m"));
        }
        let ms = parse_duration_ms(value).ok_or_else(|| FilterError {
            message: format!("`{tok}`: `{value}` is not a duration like 90s, 15m, 1h, 2d"),
        })?;
        return Ok(Term::Age { op, ms });
    }
    let n: u32 = value.parse().map_err(|_| FilterError {
        message: format!("`{tok}`: `{value}` is not a whole number"),
    })?;
    Ok(if name == "attempt" {
        Term::Attempt { op, n }
    } else {
        Term::Replays { op, n }
    })
}

fn states_of(tok: &str, alts: &[String]) -> Result<Vec<TriageState>, FilterError> {
    alts.iter()
        .map(|s| {
            TriageState::parse(s).ok_or_else(|| FilterError {
                message: format!("`{tok}`: unknown state `{s}` (states: open, discarded, replaying, replayed, resolved, failed-again)"),
            })
        })
        .collect()
}

fn kinds_of(tok: &str, alts: &[String]) -> Result<Vec<BodyKind>, FilterError> {
    alts.iter()
        .map(|s| match s.as_str() {
            "json" => Ok(BodyKind::Json),
            "broken-json" => Ok(BodyKind::BrokenJson),
            "text" => Ok(BodyKind::Text),
            "binary" => Ok(BodyKind::Binary),
            "empty" => Ok(BodyKind::Empty),
            _ => fail(format!(
                "`{tok}`: unknown body kind `{s}` (json, broken-json, text, binary, empty)"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests;
