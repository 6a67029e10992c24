//! The tiered writer: tees each chunk to both tiers' writers. A tier whose writer fails is dropped
//! (its temp state freed) and the other goes on; the write fails only when neither is left.

use std::io;

use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::TieredStorage;
use crate::storage::{ObjectId, ObjectWriter, Storage};

pub(super) struct TeeWriter {
    tiers: TieredStorage,
    id: ObjectId,
    memory: Option<Box<dyn ObjectWriter>>,
    disk: Option<Box<dyn ObjectWriter>>,
}

impl TeeWriter {
    pub(super) fn new(
        tiers: TieredStorage,
        id: ObjectId,
        memory: Option<Box<dyn ObjectWriter>>,
        disk: Option<Box<dyn ObjectWriter>>,
    ) -> Self {
        TeeWriter {
            tiers,
            id,
            memory,
            disk,
        }
    }

    async fn write_both(&mut self, chunk: Bytes) -> io::Result<()> {
        let mut last_err = None;
        if let Some(memory) = &mut self.memory
            && let Err(err) = memory.write(chunk.clone()).await
        {
            self.memory = None;
            last_err = Some(err);
        }
        if let Some(disk) = &mut self.disk
            && let Err(err) = disk.write(chunk).await
        {
            tracing::warn!(%err, "disk cache: write failed, object not stored on disk");
            self.disk = None;
            last_err = Some(err);
        }
        match (&self.memory, &self.disk, last_err) {
            (None, None, Some(err)) => Err(err),
            (None, None, None) => Err(io::Error::other("no storage tier is writing this object")),
            _ => Ok(()),
        }
    }

    async fn finish_both(self, meta: Bytes) -> io::Result<()> {
        let TeeWriter {
            tiers,
            id,
            memory,
            disk,
        } = self;
        let _one_at_a_time = tiers.commit_lock(id).lock().await;
        // Disk first: its commit may evict, and evictions drop memory copies; memory's commit
        // then goes in last and is not undone by this write's own evictions.
        let on_disk = match disk {
            Some(disk) => disk.finish(meta.clone()).await,
            None => Err(io::Error::other("not written to disk")),
        };
        if let Err(err) = &on_disk {
            tracing::debug!(%err, "disk cache: object not stored on disk");
            // An older copy on disk would resurface once memory evicts this one.
            if let Err(err) = tiers.disk.remove(id).await {
                tracing::warn!(%err, "disk cache: cannot remove a replaced object");
            }
        }
        let in_memory = match memory {
            Some(memory) => memory.finish(meta).await,
            None => Err(io::Error::other("not written to memory")),
        };
        if in_memory.is_err() {
            // An older copy in memory would shadow the new one on disk.
            tiers.memory.remove_now(id);
        }
        match (on_disk, in_memory) {
            (Ok(()), _) | (_, Ok(())) => Ok(()),
            (Err(err), Err(_)) => Err(err),
        }
    }
}

impl ObjectWriter for TeeWriter {
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.write_both(chunk))
    }

    fn finish(self: Box<Self>, meta: Bytes) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(self.finish_both(meta))
    }
}
