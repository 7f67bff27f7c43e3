//! Compiling and running one jq program with the jaq crates, in this process. Only the
//! worker calls [`Program::run`] (see the crate docs); the caller compiles too, to say
//! what is wrong with a program before any worker starts.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars};
use jaq_json::Val;
use std::io::Write;

/// Native filters a transform may not call: `env` would copy the environment (registry
/// credentials) into a revision, `halt` ends the worker, and `debug`/`stderr` write to a
/// terminal the TUI owns. (`input`/`inputs` are not offered: letters are not a stream.)
const DENIED: &[&str] = &["env", "halt", "debug_empty", "stderr_empty"];

/// A program that does not compile: each problem, as jaq names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the jq program does not compile: {}", .0.join("; "))]
pub struct CompileError(pub Vec<String>);

/// Why a program gave no usable output for one letter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("the payload is not JSON: {0}")]
    Input(String),
    /// jaq's own message (it quotes values from the letter: callers mask it).
    #[error("{0}")]
    Program(String),
    #[error("the program produced no output (a transform gives exactly one)")]
    NoOutput,
    #[error("the program gave more than one output (a transform gives exactly one)")]
    ManyOutputs,
    #[error("the output is over {} MiB", .0 >> 20)]
    TooBig(usize),
}

type Data = data::JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

fn refused<'a>(_: jaq_core::Cv<'a, Data>) -> jaq_core::ValXs<'a, Val> {
    jaq_core::native::bome(Err(jaq_core::Error::str(
        "env, halt, debug and stderr are not available in a transform",
    )))
}

/// A compiled program.
pub struct Program {
    filter: Filter,
}

impl Program {
    pub fn compile(code: &str) -> Result<Program, CompileError> {
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        // The standard definitions call the denied filters (`debug` is `debug_empty, .`),
        // so they stay defined and fail when run.
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs())
            .map(|(name, binds, native)| {
                if DENIED.contains(&name) {
                    (name, binds, jaq_core::Native::<Data>::new(refused))
                } else {
                    (name, binds, native)
                }
            });
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| {
                CompileError(errs.into_iter().flat_map(|(_, e)| load_error(e)).collect())
            })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                CompileError(
                    errs.into_iter()
                        .flat_map(|(_, es)| es)
                        .map(|(name, undefined)| undefined_message(name, &undefined))
                        .collect(),
                )
            })?;
        Ok(Program { filter })
    }

    /// Run on one JSON document: its only output, as compact JSON of at most `max_out`
    /// bytes.
    pub fn run(&self, input: &[u8], max_out: usize) -> Result<Vec<u8>, RunError> {
        let input =
            jaq_json::read::parse_single(input).map_err(|e| RunError::Input(e.to_string()))?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let mut outputs = self.filter.id.run((ctx, input)).map(unwrap_valr);
        let first = match outputs.next() {
            None => return Err(RunError::NoOutput),
            Some(Err(e)) => return Err(RunError::Program(e.to_string())),
            Some(Ok(v)) => v,
        };
        // A second output (even an error) means the program is not a transform; the
        // rest are never computed.
        if outputs.next().is_some() {
            return Err(RunError::ManyOutputs);
        }
        let mut out = Capped {
            buf: Vec::new(),
            max: max_out,
        };
        write!(out, "{first}").map_err(|_| RunError::TooBig(max_out))?;
        Ok(out.buf)
    }
}

/// A writer that refuses to grow past `max` (a 100 MB string is reported, not copied).
struct Capped {
    buf: Vec<u8>,
    max: usize,
}

impl Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + b.len() > self.max {
            return Err(std::io::Error::other("output over its limit"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn load_error(e: jaq_core::load::Error<&str>) -> Vec<String> {
    use jaq_core::load::Error;
    let at = |s: &str| {
        if s.is_empty() {
            "at the end".to_string()
        } else {
            format!("at `{}`", s.chars().take(24).collect::<String>())
        }
    };
    match e {
        Error::Io(errs) => errs
            .into_iter()
            .map(|(path, why)| format!("cannot load module {path}: {why}"))
            .collect(),
        Error::Lex(errs) => errs
            .into_iter()
            .map(|(expect, found)| format!("expected {} {}", expect.as_str(), at(found)))
            .collect(),
        Error::Parse(errs) => errs
            .into_iter()
            .map(|(expect, found)| format!("expected {} {}", expect.as_str(), at(found)))
            .collect(),
    }
}

fn undefined_message(name: &str, u: &jaq_core::compile::Undefined) -> String {
    use jaq_core::compile::Undefined;
    match u {
        Undefined::Filter(arity) => format!("undefined filter `{name}/{arity}`"),
        Undefined::Var => format!("undefined variable `${name}`"),
        Undefined::Mod => format!("undefined module `{name}`"),
        Undefined::Label => format!("undefined label `{name}`"),
        _ => format!("undefined `{name}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: &str, input: &str) -> Result<String, RunError> {
        let p = Program::compile(code).expect("compiles");
        p.run(input.as_bytes(), 1 << 20)
            .map(|o| String::from_utf8(o).expect("utf8"))
    }

    #[test]
    fn the_amount_program_turns_a_string_amount_into_a_number() {
        let out = run(
            r#".payload.amount |= (gsub(",";"") | tonumber)"#,
            r#"{"payload":{"amount":"1,500.00","currency":"EUR"}}"#,
        )
        .expect("runs");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["payload"]["amount"], 1500.0);
        assert_eq!(v["payload"]["currency"], "EUR");
    }

    #[test]
    fn errors_no_output_and_many_outputs_are_told_apart() {
        let e = run(".a | tonumber", r#"{"a":[1]}"#).expect_err("type error");
        assert!(
            matches!(e, RunError::Program(ref m) if m.contains("[1]")),
            "{e}"
        );
        assert_eq!(run("empty", "{}"), Err(RunError::NoOutput));
        assert_eq!(run(".[]", "[1,2]"), Err(RunError::ManyOutputs));
        assert!(matches!(run(".", "{"), Err(RunError::Input(_))));
    }

    #[test]
    fn an_output_over_the_limit_is_refused() {
        let p = Program::compile(r#"[range(100000)] | map(tostring) | join(",")"#).expect("ok");
        assert_eq!(p.run(b"null", 1000), Err(RunError::TooBig(1000)));
    }

    #[test]
    fn compile_errors_say_what_is_wrong_and_env_is_not_offered() {
        let e = Program::compile(".a +").err().expect("syntax error");
        assert!(e.to_string().contains("expected term"), "{e}");
        let e = Program::compile("foo").err().expect("undefined");
        assert!(e.to_string().contains("undefined filter `foo/0`"), "{e}");
        assert!(Program::compile("$ENV").is_err());
        for code in ["env", "halt", "debug", "stderr", "halt_error"] {
            let p = Program::compile(code).expect("defined");
            let e = p.run(b"{}", 100).expect_err("refused when run");
            assert!(
                e.to_string().contains("not available in a transform"),
                "{code}: {e}"
            );
        }
    }
}
