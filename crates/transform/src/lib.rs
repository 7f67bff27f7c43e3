//! jq programs on dead-letter payloads, for `transform` (one program, a whole group of
//! letters turned into revisions).
//!
//! A jq program can loop forever (`def f: f; f`), build a value of any size or recurse
//! until the stack overflows, and the jaq interpreter cannot be interrupted. So programs
//! never run in the caller's process: a worker process (this same binary, started with
//! [`WORKER_ARG`]) compiles the program once and runs it letter by letter under an
//! address-space limit, and the caller ([`Sandbox`]) kills and restarts it when a letter
//! runs past its time limit or the worker dies. One bad letter fails alone; the run goes
//! on. The only crate that names jaq (checked by `tests/architecture.rs`).

mod frame;
mod program;
mod sandbox;
pub mod worker;

pub use program::{CompileError, Program, RunError};
pub use sandbox::{Applied, Limits, Sandbox, SandboxError, WorkerCommand};

/// The first argument that makes the binary a transform worker (see [`worker::serve`]).
pub const WORKER_ARG: &str = "__transform-worker";
