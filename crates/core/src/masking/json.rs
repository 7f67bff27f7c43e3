//! The JSON walker: masks on the token structure and re-emits, iteratively.

use super::*;

/// Iterative JSON token walker that masks and re-emits.
pub(crate) struct JsonMasker<'a> {
    pub(crate) m: &'a Masker,
    pub(crate) layout: Layout,
    pub(crate) max_out: usize,
    /// Class inherited by the root value.
    pub(crate) root_class: Option<Class>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Just opened: a key (objects) or a value (arrays), or the closer.
    FirstOrEnd,
    Key,
    Colon,
    Value,
    CommaOrEnd,
}

/// What a container made of the next byte.
pub(crate) enum Step {
    /// Punctuation or a key, emitted; the walk goes on at `next`.
    Consumed { next: usize, closed_root: bool },
    /// A value follows, with the class its key or container gives it.
    Value(Option<Class>),
}

/// A syntax error at byte `i`.
fn at<T>(i: usize, what: &str) -> Result<T, String> {
    Err(format!("{what} at byte {i}"))
}

pub(crate) struct Frame {
    is_object: bool,
    /// A sensitive class inherited from an enclosing key: mask every scalar below.
    inherited: Option<Class>,
    /// The class of the key just read (objects), for the next value.
    pending: Option<Class>,
    expect: Expect,
}

impl JsonMasker<'_> {
    pub(crate) fn run(&self, input: &[u8]) -> Result<(String, bool), String> {
        let mut out = String::with_capacity(input.len().min(self.max_out.saturating_add(64)));
        let mut stack: Vec<Frame> = Vec::new();
        let mut i = skip_ws(input, 0);
        let mut root_done = false;
        while !root_done {
            i = skip_ws(input, i);
            if out.len() > self.max_out {
                return Ok((truncate_at(out, self.max_out), true));
            }
            let Some(&c) = input.get(i) else {
                return at(i, "unexpected end of JSON");
            };
            let class = match self.in_container(&mut stack, &mut out, input, i, c)? {
                Step::Consumed { next, closed_root } => {
                    i = next;
                    root_done = closed_root;
                    continue;
                }
                Step::Value(class) => class,
            };
            i = self.value(&mut stack, &mut out, input, i, class)?;
            root_done = stack.is_empty();
        }
        if skip_ws(input, i) < input.len() {
            return at(i, "trailing characters after JSON");
        }
        if out.len() > self.max_out {
            return Ok((truncate_at(out, self.max_out), true));
        }
        Ok((out, false))
    }

    /// What the innermost container expects of byte `c` at `i`: punctuation and keys
    /// are consumed here; a value is left to [`Self::value`] with the class it inherits.
    fn in_container(
        &self,
        stack: &mut Vec<Frame>,
        out: &mut String,
        input: &[u8],
        i: usize,
        c: u8,
    ) -> Result<Step, String> {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            return Ok(Step::Value(self.root_class));
        };
        let consumed = |next: usize| Step::Consumed {
            next,
            closed_root: false,
        };
        match (top.expect, c) {
            (Expect::FirstOrEnd | Expect::CommaOrEnd, b'}' | b']') => {
                if c != if top.is_object { b'}' } else { b']' } {
                    return at(i, "mismatched bracket");
                }
                let was_empty = top.expect == Expect::FirstOrEnd;
                stack.pop();
                if !was_empty {
                    self.newline(out, stack.len());
                }
                out.push(c as char);
                Ok(Step::Consumed {
                    next: i + 1,
                    closed_root: stack.is_empty(),
                })
            }
            (Expect::CommaOrEnd, b',') => {
                out.push(',');
                top.expect = if top.is_object {
                    Expect::Key
                } else {
                    Expect::Value
                };
                self.newline(out, depth);
                Ok(consumed(i + 1))
            }
            (Expect::Colon, b':') => {
                out.push(':');
                if self.layout == Layout::Pretty {
                    out.push(' ');
                }
                top.expect = Expect::Value;
                Ok(consumed(i + 1))
            }
            (Expect::FirstOrEnd | Expect::Key, b'"') if top.is_object => {
                let Some((key, end)) = read_string(input, i) else {
                    return at(i, "bad string");
                };
                top.pending = top.inherited.or_else(|| self.m.field_class(&key));
                top.expect = Expect::Colon;
                // Keys can be PII too (maps keyed by email): detectors only.
                push_json_string(out, &self.m.mask_text(&key));
                Ok(consumed(end))
            }
            (Expect::FirstOrEnd | Expect::Value, _)
                if !top.is_object || top.expect == Expect::Value =>
            {
                let class = if top.is_object {
                    top.pending.take()
                } else {
                    top.inherited
                };
                top.expect = Expect::CommaOrEnd;
                Ok(Step::Value(class))
            }
            _ => at(i, "unexpected character"),
        }
    }

    /// A value at `i` under `class`: a container opens (pushed on the stack), a string
    /// or scalar is masked and emitted. Returns where the next token starts.
    fn value(
        &self,
        stack: &mut Vec<Frame>,
        out: &mut String,
        input: &[u8],
        i: usize,
        class: Option<Class>,
    ) -> Result<usize, String> {
        match input.get(i).copied() {
            Some(c @ (b'{' | b'[')) => {
                out.push(c as char);
                stack.push(Frame {
                    is_object: c == b'{',
                    inherited: class,
                    pending: None,
                    expect: Expect::FirstOrEnd,
                });
                let j = skip_ws(input, i + 1);
                if !matches!(input.get(j), Some(b'}') | Some(b']')) {
                    self.newline(out, stack.len());
                }
                Ok(i + 1)
            }
            Some(b'"') => {
                let Some((s, end)) = read_string(input, i) else {
                    return at(i, "bad string");
                };
                let budget = self.max_out.saturating_sub(out.len());
                let masked = match class {
                    Some(cl) => self.m.mask_value(cl, &s),
                    None => self.m.mask_text_bounded(&s, budget).0,
                };
                push_json_string(out, &masked);
                Ok(end)
            }
            _ => self.scalar(out, input, i, class),
        }
    }

    /// `true`, `false`, `null` or a number; masked as text when it looks like a card
    /// number or a long id, or as its class when the field is sensitive.
    fn scalar(
        &self,
        out: &mut String,
        input: &[u8],
        i: usize,
        class: Option<Class>,
    ) -> Result<usize, String> {
        let end = scalar_end(input, i);
        let Some(tok) = input.get(i..end).and_then(|t| std::str::from_utf8(t).ok()) else {
            return at(i, "bad token");
        };
        let valid = matches!(tok, "true" | "false" | "null")
            || (!tok.is_empty() && serde_json::from_str::<serde_json::Number>(tok).is_ok());
        if !valid {
            return at(i, "bad literal");
        }
        match class {
            Some(cl) if tok != "null" => push_json_string(out, &self.m.mask_value(cl, tok)),
            _ => {
                // Card numbers and long ids stored as JSON numbers.
                let masked = self.m.mask_text(tok);
                if masked == tok {
                    out.push_str(tok);
                } else {
                    push_json_string(out, &masked);
                }
            }
        }
        Ok(end)
    }

    fn newline(&self, out: &mut String, depth: usize) {
        if self.layout == Layout::Pretty {
            out.push('\n');
            for _ in 0..depth.min(MAX_INDENT_LEVELS) {
                out.push_str("  ");
            }
        }
    }
}

pub(crate) fn truncate_at(mut s: String, max: usize) -> String {
    let mut at = max.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    s
}

pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
}

pub(crate) fn scalar_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'+' | b'.')) {
        i += 1;
    }
    i
}

/// Read a JSON string starting at the opening quote; returns the decoded text and the
/// index after the closing quote. Strings without escapes are sliced directly.
pub(crate) fn read_string(b: &[u8], i: usize) -> Option<(String, usize)> {
    let mut j = i + 1;
    let mut escaped = false;
    while j < b.len() {
        match b[j] {
            b'"' => {
                if !escaped {
                    let s = std::str::from_utf8(&b[i + 1..j]).ok()?;
                    if s.bytes().any(|c| c < 0x20) {
                        return None; // raw control characters are not valid JSON
                    }
                    return Some((s.to_string(), j + 1));
                }
                let s: String = serde_json::from_slice(&b[i..=j]).ok()?;
                return Some((s, j + 1));
            }
            b'\\' => {
                escaped = true;
                j += 2;
            }
            _ => j += 1,
        }
    }
    None
}

/// Append `s` as a JSON string literal.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = std::fmt::Write::write_fmt(out, format_args!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
