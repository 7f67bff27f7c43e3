//! A scanned DLQ: the letter store plus what could not be read, fed letter by letter.

use crate::core::conventions::{extract, UserMapping};
use crate::core::masking::{Layout, Masker};
use crate::core::model::DeadLetter;
use crate::core::store::{LetterStore, RowId};

/// Length of the masked one-line preview kept per letter, in bytes.
pub const PREVIEW_BYTES: usize = 48;
/// How much of a payload the preview looks at.
const PREVIEW_INPUT: usize = 4096;
/// How many unreadable records are kept for reporting (all are counted).
const MAX_KEPT_PROBLEMS: usize = 100;

/// A record that could not be turned into a letter, with where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub location: String,
    pub message: String,
}

pub struct Catalog {
    pub store: LetterStore,
    masker: Masker,
    mappings: Vec<UserMapping>,
    problems: Vec<Problem>,
    problem_count: u64,
}

impl Catalog {
    pub fn new(masker: Masker, mappings: Vec<UserMapping>) -> Self {
        Catalog {
            store: LetterStore::new(),
            masker,
            mappings,
            problems: Vec::new(),
            problem_count: 0,
        }
    }

    pub fn masker(&self) -> &Masker {
        &self.masker
    }

    pub fn mappings(&self) -> &[UserMapping] {
        &self.mappings
    }

    /// Extract, mask a preview, index. Returns the row and the full letter.
    pub fn ingest(&mut self, raw: crate::core::model::RawLetter) -> (RowId, DeadLetter) {
        let dl = extract(raw, &self.mappings);
        let focus = dl
            .payload_span
            .clone()
            .and_then(|r| dl.raw.payload.get(r))
            .unwrap_or(&dl.raw.payload);
        let preview = preview(&self.masker, focus);
        let id = self.store.push(&dl, &preview);
        (id, dl)
    }

    pub fn record_problem(&mut self, location: String, message: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_KEPT_PROBLEMS {
            self.problems.push(Problem { location, message });
        }
    }

    /// Release growth slack once a scan is complete.
    pub fn shrink_to_fit(&mut self) {
        self.store.shrink_to_fit();
    }

    /// The first problems (up to 100) and how many there were in all.
    pub fn problems(&self) -> (&[Problem], u64) {
        (&self.problems, self.problem_count)
    }
}

/// A masked single-line preview of a payload, from its first few KiB only.
pub fn preview(masker: &Masker, payload: &[u8]) -> String {
    let input = if payload.len() > PREVIEW_INPUT {
        // Cut at a delimiter so no half-token (a partial email) escapes the detectors.
        let cut = payload[..PREVIEW_INPUT]
            .iter()
            .rposition(|b| b.is_ascii_whitespace() || matches!(b, b',' | b'{' | b'}' | b'[' | b']'))
            .unwrap_or(0);
        &payload[..cut]
    } else {
        payload
    };
    let (text, _) = masker.mask_payload(input, Layout::Compact, PREVIEW_BYTES);
    let mut one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.len() > PREVIEW_BYTES {
        let mut at = PREVIEW_BYTES;
        while !one_line.is_char_boundary(at) {
            at -= 1;
        }
        one_line.truncate(at);
    }
    one_line
}
