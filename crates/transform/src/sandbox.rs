//! The caller's side: a worker process per program, fed one letter at a time, killed and
//! restarted when a letter runs past its time limit or the worker dies (memory, stack).

use crate::frame::{self, ERR, OK};
use crate::program::{CompileError, Program};
use crate::worker::{hello, PROGRAM};
use std::ffi::OsString;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// How to start a worker: normally this binary with [`crate::WORKER_ARG`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl WorkerCommand {
    /// The running binary as a worker.
    pub fn this_binary() -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: vec![crate::WORKER_ARG.into()],
        })
    }
}

/// What one letter may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time per letter; past it the worker is killed.
    pub time: Duration,
    /// The worker's address space (its stack and allocator reservations included).
    pub memory: u64,
    /// Bytes of compact JSON one output may have.
    pub output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(2),
            memory: 2 << 30,
            output: 16 << 20,
        }
    }
}

/// What the program made of one letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Its output, compact JSON as jaq writes it (not necessarily valid JSON: `nan`).
    Output(Vec<u8>),
    /// The program raised an error: jaq's message, which quotes the letter's values
    /// (callers mask them, and leave them out to group letters by cause).
    Raised(String),
    /// A rule stopped it: time, memory, output size, no output or several.
    Stopped(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("cannot start the transform worker {}: {why}", .program.display())]
    Spawn { program: PathBuf, why: String },
}

struct Worker {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    replies: Receiver<std::io::Result<Option<Vec<u8>>>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A program ready to run on letters.
pub struct Sandbox {
    cmd: WorkerCommand,
    code: String,
    limits: Limits,
    worker: Option<Worker>,
}

impl Sandbox {
    /// Compile `code` (here, to report what is wrong before anything starts) and start a
    /// worker for it.
    pub fn start(cmd: WorkerCommand, code: &str, limits: Limits) -> Result<Sandbox, SandboxError> {
        Program::compile(code)?;
        let mut s = Sandbox {
            cmd,
            code: code.to_string(),
            limits,
            worker: None,
        };
        s.worker = Some(s.spawn()?);
        Ok(s)
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn spawn(&self) -> Result<Worker, SandboxError> {
        let fail = |why: String| SandboxError::Spawn {
            program: self.cmd.program.clone(),
            why,
        };
        // No environment (nothing for a program to read), no terminal (a crash message
        // must not draw over the TUI).
        let mut child = Command::new(&self.cmd.program)
            .args(&self.cmd.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| fail(e.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(fail("no pipes to the worker".into()));
        };
        // Unbounded: letters are sent ahead (see `apply_all`), and a reader that could
        // block would stop the worker writing, the worker reading, and the sender.
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("transform-replies".into())
            .spawn(move || {
                let mut r = BufReader::new(stdout);
                loop {
                    let reply = frame::read(&mut r);
                    let end = !matches!(reply, Ok(Some(_)));
                    if tx.send(reply).is_err() || end {
                        return;
                    }
                }
            })
            .map_err(|e| fail(e.to_string()))?;
        let mut w = Worker {
            child,
            stdin: BufWriter::new(stdin),
            replies,
        };
        let first = hello(self.limits.memory, self.limits.output, &self.code);
        frame::write(&mut w.stdin, None, &first).map_err(|e| fail(e.to_string()))?;
        // Compiling takes milliseconds; a worker that does not answer in 10 s is not one.
        match w.replies.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(Some(r))) if r.first() == Some(&OK) => Ok(w),
            Ok(Ok(Some(r))) if r.first() == Some(&ERR) => {
                Err(fail(String::from_utf8_lossy(&r[1..]).into_owned()))
            }
            Ok(Ok(_)) => Err(fail("it is not a transform worker".into())),
            Ok(Err(e)) => Err(fail(e.to_string())),
            Err(_) => Err(fail("it did not answer".into())),
        }
    }

    /// Run the program on one letter's JSON. Only starting a worker can fail the run;
    /// anything one letter does fails that letter.
    pub fn apply(&mut self, input: &[u8]) -> Result<Applied, SandboxError> {
        let mut out = self.apply_all(&[input])?;
        Ok(out
            .pop()
            .unwrap_or_else(|| Applied::Stopped("the worker answered nothing".into())))
    }

    /// Run the program on each input, answers in order. The inputs are sent ahead and
    /// the answers read as they come (one round trip per letter made the process switch
    /// cost ~90% of a transform). The time limit holds per letter: from the answer
    /// before it. A letter that passes it, or that the worker dies of, is stopped; the
    /// letters after it go to a new worker. Only starting a worker fails the call.
    pub fn apply_all(&mut self, inputs: &[&[u8]]) -> Result<Vec<Applied>, SandboxError> {
        let mut out = Vec::with_capacity(inputs.len());
        while out.len() < inputs.len() {
            let mut worker = match self.worker.take() {
                Some(w) => w,
                None => self.spawn()?,
            };
            // A window the pipe holds whole: a worker stuck on one letter must not leave
            // the sender blocked in a write, where its time limit cannot reach it.
            let rest = window(&inputs[out.len()..]);
            // A failed write is the worker gone: the answers say where it stopped.
            let mut sent = 0;
            for input in rest {
                if frame::put(&mut worker.stdin, None, input).is_err() {
                    break;
                }
                sent += 1;
            }
            let flushed = std::io::Write::flush(&mut worker.stdin).is_ok();
            let mut alive = true;
            for _ in 0..sent.max(1) {
                match worker.replies.recv_timeout(self.limits.time) {
                    Ok(Ok(Some(reply))) => out.push(answer(&reply)),
                    Ok(Ok(None)) | Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                        out.push(Applied::Stopped(died(&mut worker, "it closed its output")));
                        alive = false;
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        // Dropping the worker kills it; the next letter starts a new one.
                        out.push(Applied::Stopped(format!(
                            "stopped after {} (the time limit per letter)",
                            crate::sandbox::seconds(self.limits.time)
                        )));
                        alive = false;
                        break;
                    }
                }
            }
            if alive && flushed && sent == rest.len() {
                self.worker = Some(worker);
            }
        }
        Ok(out)
    }
}

/// Bytes of letters sent ahead of their answers: under the 64 KiB a Linux pipe holds.
const AHEAD: usize = 32 << 10;

/// The first letters of `inputs` whose frames fit in [`AHEAD`] (always one).
fn window<'a, 'b>(inputs: &'a [&'b [u8]]) -> &'a [&'b [u8]] {
    let mut bytes = 0;
    let n = inputs
        .iter()
        .take_while(|i| {
            bytes += i.len() + 4;
            bytes <= AHEAD
        })
        .count();
    &inputs[..n.max(1).min(inputs.len())]
}

/// A worker's answer to one letter.
fn answer(reply: &[u8]) -> Applied {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match reply.split_first() {
        Some((&OK, out)) => Applied::Output(out.to_vec()),
        Some((_, [PROGRAM, msg @ ..])) => Applied::Raised(text(msg)),
        Some((_, [_, msg @ ..])) => Applied::Stopped(text(msg)),
        _ => Applied::Stopped("the worker answered nothing".into()),
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Why a worker stopped mid-letter, from how it exited.
fn died(worker: &mut Worker, what: &str) -> String {
    let status = (0..50).find_map(|_| match worker.child.try_wait() {
        Ok(Some(s)) => Some(s),
        _ => {
            std::thread::sleep(Duration::from_millis(10));
            None
        }
    });
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.and_then(|s| s.signal()) {
            return format!(
                "the program ran out of memory or stack (the worker stopped with signal {sig})"
            );
        }
    }
    match status {
        Some(s) => format!("the worker stopped ({s}): {what}"),
        None => format!("the worker stopped answering: {what}"),
    }
}
