//! `read-via-stream`, `write-via-stream` and `append-via-stream` over a served file: what
//! wasi-libc's `read`/`write` on a file descriptor use. Every stream write is recorded as the
//! write it is (at its offset, or at the end for an append stream).

use crate::served::{Kind, Shared};
use bytes::Bytes;
use seqstore_core::fs::FsFile;
use seqstore_fault_fs::FaultFile;
use seqstore_trace::ops::{Ofd, WriteAt};
use std::sync::Arc;
use wasmtime_wasi::p2::{InputStream, OutputStream, Pollable, StreamError, StreamResult};

/// Most bytes one `check-write` admits (the guest splits larger writes).
const WRITE_BUDGET: usize = 1 << 20;

/// Reads a file from a position on.
pub(crate) struct FileInput {
    pub(crate) file: Arc<FaultFile>,
    pub(crate) pos: u64,
}

#[wasmtime_wasi::async_trait]
impl Pollable for FileInput {
    async fn ready(&mut self) {}
}

impl InputStream for FileInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let len = self
            .file
            .len()
            .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
        if self.pos >= len {
            return Err(StreamError::Closed);
        }
        let n = size.min(usize::try_from(len - self.pos).unwrap_or(usize::MAX));
        let mut buf = vec![0; n.min(WRITE_BUDGET)];
        let got = self
            .file
            .read_at(&mut buf, self.pos)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
        buf.truncate(got);
        self.pos += got as u64;
        Ok(buf.into())
    }
}

/// Writes to a served file (or the marks file) at a position, or at its end.
pub(crate) struct FileOutput {
    pub(crate) served: Shared,
    pub(crate) kind: Kind,
    pub(crate) ofd: Ofd,
    /// `None`: an append stream.
    pub(crate) pos: Option<u64>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for FileOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for FileOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let at = self.pos.map_or(WriteAt::Append, WriteAt::Offset);
        let end = self
            .served
            .lock()
            .write((&self.kind, self.ofd), &bytes, at)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
        if self.pos.is_some() {
            self.pos = Some(end);
        }
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

impl Kind {
    /// The same referent, for a stream (which outlives no borrow of the descriptor).
    pub(crate) fn share(&self) -> Kind {
        match self {
            Kind::Dir(p) => Kind::Dir(p.clone()),
            Kind::File(f, p) => Kind::File(f.clone(), p.clone()),
            Kind::MarksDir => Kind::MarksDir,
            Kind::Marks => Kind::Marks,
        }
    }
}
