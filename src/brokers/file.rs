//! NDJSON dump files: offline investigation of an exported DLQ. Read-only.

use crate::core::dump::{DumpError, DumpReader};
use crate::core::ports::{DlqSource, ScanEvent, SourceError, SourceInfo};
use std::fs::File;
use std::io::BufReader;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

pub struct FileSource {
    path: PathBuf,
}

impl FileSource {
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let meta = std::fs::metadata(path).map_err(|e| {
            SourceError::unavailable(format!(
                "cannot read dump {}: {e}",
                crate::core::sanitize::clean(&path.display().to_string())
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
        let mut done = 0u64;
        while let Some(rec) = reader.next_record() {
            let ev = match rec {
                Ok((_, raw)) => {
                    done += 1;
                    ScanEvent::Letter(raw)
                }
                Err(DumpError::BadLine { line, message }) => ScanEvent::Problem {
                    location: format!("line {line}"),
                    message,
                },
                Err(DumpError::Io(e)) => {
                    return Err(SourceError::failed(format!(
                        "reading {}: {e}",
                        self.path.display()
                    )));
                }
            };
            if sink(ev).is_break() {
                return Ok(());
            }
            if done % 65_536 == 0 && sink(ScanEvent::Progress { done, total: None }).is_break() {
                return Ok(());
            }
        }
        let _ = sink(ScanEvent::Progress {
            done,
            total: Some(done),
        });
        Ok(())
    }
}
