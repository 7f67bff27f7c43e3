//! The worker side: the binary started with [`crate::WORKER_ARG`] compiles the program
//! from the first frame and then answers one frame per letter until its input closes.
//! It limits its own address space and core dumps first: a program that builds a huge
//! value ends this process, not the caller's.

use crate::frame::{self, ERR, OK};
use crate::program::{Program, RunError};

/// After [`ERR`] on a letter's reply: the program raised it (jaq's message, quoting the
/// letter's values) or a rule of ours stopped it (no output, too big, not JSON).
pub(crate) const PROGRAM: u8 = b'P';
pub(crate) const LIMIT: u8 = b'L';
use std::io::{self, Read, Write};

/// Serve on stdin/stdout; the process's exit code.
pub fn serve() -> i32 {
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    match serve_on(&mut input, &mut output) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// The first frame: the address-space limit (u64 LE, 0 for none), the output limit
/// (u64 LE), then the program text.
pub(crate) fn hello(memory: u64, max_out: usize, code: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + code.len());
    b.extend_from_slice(&memory.to_le_bytes());
    b.extend_from_slice(&(max_out as u64).to_le_bytes());
    b.extend_from_slice(code.as_bytes());
    b
}

fn serve_on(r: &mut impl Read, w: &mut impl Write) -> io::Result<()> {
    let Some(first) = frame::read(r)? else {
        return Ok(());
    };
    let (Some(memory), Some(max_out), Some(code)) = (
        first
            .get(0..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes),
        first
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes),
        first.get(16..).map(String::from_utf8_lossy),
    ) else {
        return frame::write(w, Some(ERR), b"malformed first frame");
    };
    let _ = rlimit::setrlimit(rlimit::Resource::CORE, 0, 0);
    if memory > 0 {
        if let Err(e) = rlimit::setrlimit(rlimit::Resource::AS, memory, memory) {
            let msg = format!("cannot limit the worker's memory: {e}");
            return frame::write(w, Some(ERR), msg.as_bytes());
        }
    }
    let program = match Program::compile(&code) {
        Ok(p) => p,
        Err(e) => return frame::write(w, Some(ERR), e.to_string().as_bytes()),
    };
    frame::write(w, Some(OK), b"")?;
    let max_out = usize::try_from(max_out).unwrap_or(usize::MAX);
    while let Some(input) = frame::read(r)? {
        match program.run(&input, max_out) {
            Ok(out) => frame::write(w, Some(OK), &out)?,
            Err(e) => {
                let kind = match e {
                    RunError::Program(_) => PROGRAM,
                    _ => LIMIT,
                };
                let mut body = vec![kind];
                body.extend_from_slice(e.to_string().as_bytes());
                frame::write(w, Some(ERR), &body)?
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_one_frame_per_letter_after_the_compile_reply() {
        let mut input = Vec::new();
        frame::write(&mut input, None, &hello(0, 1 << 20, ".a += 1")).unwrap();
        frame::write(&mut input, None, br#"{"a":1}"#).unwrap();
        frame::write(&mut input, None, br#"{"a":"x"}"#).unwrap();
        let mut out = Vec::new();
        serve_on(&mut &input[..], &mut out).unwrap();
        let mut r = &out[..];
        assert_eq!(frame::read(&mut r).unwrap(), Some(b"O".to_vec()));
        assert_eq!(frame::read(&mut r).unwrap(), Some(br#"O{"a":2}"#.to_vec()));
        let err = frame::read(&mut r).unwrap().unwrap();
        assert_eq!(err[0], ERR);
        assert_eq!(frame::read(&mut r).unwrap(), None);
    }

    #[test]
    fn a_program_that_does_not_compile_is_answered_once() {
        let mut input = Vec::new();
        frame::write(&mut input, None, &hello(0, 10, "foo(")).unwrap();
        let mut out = Vec::new();
        serve_on(&mut &input[..], &mut out).unwrap();
        let reply = frame::read(&mut &out[..]).unwrap().unwrap();
        assert_eq!(reply[0], ERR);
    }
}
