//! The memory tier's writer: keeps the chunks as they arrive and copies them into one exact-size
//! buffer at `finish`. Copying even a body that arrived as a single chunk is deliberate: a chunk
//! is often a slice of a larger receive buffer, and keeping the slice would keep (and not count)
//! the whole buffer for as long as the object lives.

use std::io;

use bytes::Bytes;
use futures_util::future::{BoxFuture, ready};

use super::MemoryStorage;
use crate::storage::body_len::{check_complete, check_not_past};
use crate::storage::{ObjectId, ObjectWriter};

pub(super) struct MemoryWriter {
    storage: MemoryStorage,
    id: ObjectId,
    expected_len: Option<u64>,
    chunks: Vec<Bytes>,
    len: u64,
}

impl MemoryWriter {
    pub(super) fn new(storage: MemoryStorage, id: ObjectId, expected_len: Option<u64>) -> Self {
        MemoryWriter {
            storage,
            id,
            expected_len,
            chunks: Vec::new(),
            len: 0,
        }
    }

    fn append(&mut self, chunk: Bytes) -> io::Result<()> {
        let len = self.len + chunk.len() as u64;
        if len > self.storage.body_limit() {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "body over the memory tier's max object size",
            ));
        }
        check_not_past(len, self.expected_len)?;
        self.len = len;
        if !chunk.is_empty() {
            self.chunks.push(chunk);
        }
        Ok(())
    }

    fn commit(self, meta: Bytes) -> io::Result<()> {
        check_complete(self.len, self.expected_len)?;
        let body = match self.chunks.len() {
            0 => Bytes::new(),
            _ => {
                let mut body = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
                for chunk in &self.chunks {
                    body.extend_from_slice(chunk);
                }
                Bytes::from(body)
            }
        };
        self.storage.insert(self.id, meta, body)
    }
}

impl ObjectWriter for MemoryWriter {
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(ready(self.append(chunk)))
    }

    fn finish(self: Box<Self>, meta: Bytes) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(ready(self.commit(meta)))
    }
}
