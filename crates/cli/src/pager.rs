//! Long human output on a terminal goes through a pager, as git's does: `$PAGER`, else
//! `less -FRX` (it exits at once when the text fits one screen, and leaves it on the
//! screen). Output to a pipe or a file is never paged; `PAGER=` or `PAGER=cat` turns
//! paging off. The pager is started directly (its words split like a shell line would
//! be, never run by a shell); if it cannot start, the text goes to stdout.

use std::io::{IsTerminal, Write};
use std::process::{Child, Command, Stdio};

pub(crate) struct Pager {
    child: Option<Child>,
    sink: Option<Box<dyn Write>>,
}

impl Pager {
    pub(crate) fn start() -> Pager {
        let stdout = || Pager {
            child: None,
            sink: Some(Box::new(std::io::stdout())),
        };
        if !std::io::stdout().is_terminal() {
            return stdout();
        }
        let spec = std::env::var("PAGER").unwrap_or_else(|_| "less -FRX".into());
        let words: Vec<&str> = spec.split_whitespace().collect();
        let Some((program, args)) = words.split_first() else {
            return stdout();
        };
        if *program == "cat" {
            return stdout();
        }
        let mut cmd = Command::new(program);
        dlq_app::credentials::scrub_env(&mut cmd)
            .args(args)
            .stdin(Stdio::piped());
        // less: keep sanitized text as it is, but do not need a LESS setting to do so.
        if std::env::var_os("LESS").is_none() {
            cmd.env("LESS", "FRX");
        }
        match cmd.spawn() {
            Ok(mut child) => match child.stdin.take() {
                Some(stdin) => Pager {
                    child: Some(child),
                    sink: Some(Box::new(stdin)),
                },
                None => stdout(),
            },
            Err(_) => stdout(),
        }
    }
}

impl Write for Pager {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.sink.as_mut() {
            Some(s) => s.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.sink.as_mut() {
            Some(s) => s.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for Pager {
    /// Close the pager's input and wait for the reader to quit it.
    fn drop(&mut self) {
        if let Some(mut s) = self.sink.take() {
            let _ = s.flush();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}
