//! NDJSON dump files: offline investigation of an exported DLQ. Read-only.

use dlq_core::dump::{DumpError, DumpLineText, DumpReader};
use dlq_core::model::RawLetter;
use dlq_core::pipeline::Pipeline;
use dlq_core::ports::{DlqSource, ScanEvent, SourceError, SourceInfo};
use std::fs::File;
use std::io::BufReader;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// A line as read: its text, a line too long to keep, or the I/O error that ended it.
type LineRead = Result<DumpLineText, DumpError>;

/// Lines per parsing batch, and bytes, whichever comes first (a dump may hold 10 MiB
/// letters: a batch stays a few MiB, and at most two per worker are in flight).
const CHUNK_LINES: usize = 1024;
const CHUNK_BYTES: usize = 4 << 20;

pub struct FileSource {
    path: PathBuf,
}

impl FileSource {
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let meta = std::fs::metadata(path).map_err(|e| {
            SourceError::unavailable(format!(
                "cannot read dump {}: {e}",
                dlq_core::sanitize::clean(&path.display().to_string())
            ))
        })?;
        if meta.is_dir() {
            return Err(SourceError::unavailable(format!(
                "{} is a directory, not a dump file",
                path.display()
            )));
        }
        Ok(FileSource {
            path: path.to_path_buf(),
        })
    }
}

impl DlqSource for FileSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            label: format!("file://{}", self.path.display()),
            browse_effect: "File: read-only, the dump is never modified".into(),
        }
    }

    fn scan(
        &mut self,
        sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    ) -> Result<(), SourceError> {
        let f = File::open(&self.path).map_err(|e| {
            SourceError::unavailable(format!("cannot open {}: {e}", self.path.display()))
        })?;
        let mut reader = DumpReader::new(BufReader::with_capacity(1 << 16, f));
        let path = self.path.display().to_string();
        let mut out = Emit {
            sink,
            done: 0,
            io_error: None,
        };
        // Lines are read here and parsed on worker threads, in order: parsing is most of
        // a dump's cost, and a 10,000,000-letter dump read on one thread took ~2 minutes.
        let flow = std::thread::scope(|scope| -> Result<ControlFlow<()>, SourceError> {
            let mut parsing = Pipeline::start(scope, |lines: Vec<LineRead>| {
                lines
                    .into_iter()
                    .map(|l| l.and_then(DumpLineText::parse))
                    .collect::<Vec<_>>()
            });
            let mut emit = |records| out.records(records);
            let broken = |_| SourceError::failed(format!("a reader of {path} stopped"));
            let mut chunk: Vec<LineRead> = Vec::with_capacity(CHUNK_LINES);
            let mut bytes = 0usize;
            let mut go = true;
            while go {
                let Some(next) = reader.next_line() else {
                    break;
                };
                // An I/O error ends the read; it still goes through in order.
                let last = matches!(next, Err(DumpError::Io(_)));
                bytes += next.as_ref().map_or(0, |l| l.text.len());
                chunk.push(next);
                if last || chunk.len() >= CHUNK_LINES || bytes >= CHUNK_BYTES {
                    go = parsing
                        .send(std::mem::take(&mut chunk), &mut emit)
                        .map_err(broken)?
                        && !last;
                    bytes = 0;
                }
            }
            if go && !chunk.is_empty() {
                go = parsing.send(chunk, &mut emit).map_err(broken)?;
            }
            if go {
                go = parsing.collect(true, &mut emit).map_err(broken)?;
            }
            if let Some(e) = out.io_error.take() {
                return Err(SourceError::failed(format!("reading {path}: {e}")));
            }
            Ok(if go {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            })
        })?;
        if flow.is_break() {
            return Ok(());
        }
        let done = out.done;
        let _ = (out.sink)(ScanEvent::Progress {
            done,
            total: Some(done),
        });
        Ok(())
    }
}

/// Parsed chunks to the sink, in line order: a chunk goes on as one batch of letters; a
/// bad line in it first sends the letters before it, so letters and problems stay in
/// line order. An I/O error ends the read (kept, said after the letters before it).
struct Emit<'s> {
    sink: &'s mut dyn FnMut(ScanEvent) -> ControlFlow<()>,
    done: u64,
    io_error: Option<std::io::Error>,
}

impl Emit<'_> {
    /// Whether to go on.
    fn records(&mut self, records: Vec<Result<(u64, RawLetter), DumpError>>) -> bool {
        let before = self.done;
        let mut letters = Vec::with_capacity(records.len());
        for rec in records {
            match rec {
                Ok((_, raw)) => {
                    self.done += 1;
                    letters.push(raw);
                }
                Err(DumpError::BadLine { line, message }) => {
                    let problem = ScanEvent::Problem {
                        location: format!("line {line}"),
                        message,
                    };
                    if !send(self.sink, &mut letters) || (self.sink)(problem).is_break() {
                        return false;
                    }
                }
                Err(DumpError::Io(e)) => {
                    self.io_error = Some(e);
                    let _ = send(self.sink, &mut letters);
                    return false;
                }
            }
        }
        let done = self.done;
        send(self.sink, &mut letters)
            && (done / 65_536 == before / 65_536
                || (self.sink)(ScanEvent::Progress { done, total: None }).is_continue())
    }
}

/// Hand the letters collected so far to the sink (none: nothing to say).
fn send(sink: &mut dyn FnMut(ScanEvent) -> ControlFlow<()>, letters: &mut Vec<RawLetter>) -> bool {
    letters.is_empty() || sink(ScanEvent::Letters(std::mem::take(letters))).is_continue()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::dump::to_line;
    use dlq_core::model::Coords;
    use std::io::Write;

    /// Many parsing batches, bad and blank lines among them: letters and problems come
    /// out exactly in file order, each problem with its own line number.
    #[test]
    fn a_dump_parsed_on_workers_reads_in_file_order() {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        let mut want = Vec::new();
        for line in 1..=5_000i64 {
            if line % 701 == 0 {
                writeln!(f, "{{not json").expect("write");
                want.push(format!("problem line {line}"));
            } else if line % 999 == 0 {
                writeln!(f).expect("write");
            } else {
                let raw = RawLetter {
                    coords: Some(Coords::Kafka {
                        topic: "t".into(),
                        partition: 0,
                        offset: line,
                    }),
                    payload: format!("{{\"n\":{line}}}").into_bytes(),
                    ..RawLetter::default()
                };
                writeln!(f, "{}", to_line(&raw, false)).expect("write");
                want.push(format!("letter {line}"));
            }
        }
        f.flush().expect("flush");
        let mut seen = Vec::new();
        let mut src = FileSource::open(f.path()).expect("open");
        src.scan(&mut |ev| {
            match ev {
                ScanEvent::Letters(batch) => {
                    for raw in batch {
                        match raw.coords {
                            Some(Coords::Kafka { offset, .. }) => {
                                seen.push(format!("letter {offset}"))
                            }
                            other => panic!("coords {other:?}"),
                        }
                    }
                }
                ScanEvent::Problem { location, .. } => seen.push(format!("problem {location}")),
                _ => {}
            }
            ControlFlow::Continue(())
        })
        .expect("scan");
        assert_eq!(seen, want);
    }

    /// A sink that stops gets nothing more.
    #[test]
    fn a_stop_ends_the_read() {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        for line in 0..3_000 {
            let raw = RawLetter {
                payload: format!("{{\"n\":{line}}}").into_bytes(),
                ..RawLetter::default()
            };
            writeln!(f, "{}", to_line(&raw, false)).expect("write");
        }
        f.flush().expect("flush");
        let (mut batches, mut letters) = (0, 0);
        FileSource::open(f.path())
            .expect("open")
            .scan(&mut |ev| match ev {
                ScanEvent::Letters(b) => {
                    batches += 1;
                    letters += b.len();
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            })
            .expect("scan");
        assert_eq!(batches, 1, "nothing after the sink said stop");
        assert!(letters > 0 && letters <= CHUNK_LINES, "{letters}");
    }
}
