//! Memory in front of disk: hot objects answer from RAM, everything else from the directory that
//! survives restarts.
//!
//! - A write goes to the disk tier always, and to memory too when it fits memory's max object
//!   size (`writer.rs`); a tier that refuses or fails drops out and the other completes.
//!   A tier that did not take the new object drops any older copy it held, so the tiers never
//!   disagree about what `id` is.
//! - A read tries memory, then disk. A disk hit small enough for memory is read whole and promoted
//!   (kept only if the disk still holds that same version once it is in memory, so a write or a
//!   meta update racing the read is never shadowed by the older copy); a larger one streams.
//! - `update_meta` and `remove` apply to both; `list` is the disk tier's. Commits of one id
//!   (disk then memory) go one at a time, so two writers of it cannot leave the tiers disagreeing.
//!
//! Listeners: the disk tier's listener is the zone's. A disk eviction (or damage) also drops the
//! memory copy, then tells the zone. A memory eviction tells the zone only when the disk does not
//! hold the object (it was too big for the disk's budget, or the disk failed when it was written):
//! otherwise the object is still stored and the zone's index stays right.

mod writer;

#[cfg(test)]
mod tests;

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::{BoxFuture, ready};

use super::disk::{DiskStorage, Version};
use super::memory::MemoryStorage;
use super::{EvictListener, Listed, Object, ObjectId, ObjectWriter, Storage, StoredBody, Usage};
use writer::TeeWriter;

/// The memory tier in front of the disk tier. Cloning gives another handle on the same tiers.
#[derive(Clone)]
pub struct TieredStorage {
    memory: MemoryStorage,
    disk: DiskStorage,
    /// Commits of one id go one at a time (striped by id): two writers of the same id
    /// interleaving their disk and memory commits could otherwise leave memory holding one
    /// object and disk the other.
    commits: Arc<[tokio::sync::Mutex<()>]>,
}

/// Stripes of [`TieredStorage::commits`].
const COMMIT_STRIPES: usize = 64;

impl TieredStorage {
    /// Stacks `memory` in front of `disk`. The disk tier's [`EvictListener`] becomes the zone's
    /// (see the module doc); memory's own listener is replaced, as memory evictions are mostly not
    /// the zone's business.
    pub fn new(memory: MemoryStorage, disk: DiskStorage) -> Self {
        let zone = disk.evict_listener();
        // Weak handles: each tier's listener refers to the other tier.
        let weak_memory = memory.downgrade();
        let zone_for_disk = zone.clone();
        let on_disk_evict: EvictListener = Arc::new(move |id| {
            if let Some(memory) = weak_memory.upgrade() {
                memory.remove_now(id);
            }
            if let Some(zone) = &zone_for_disk {
                zone(id);
            }
        });
        disk.set_evict_listener(Some(on_disk_evict));
        let weak_disk = disk.downgrade();
        let on_memory_evict = zone.map(|zone| -> EvictListener {
            Arc::new(move |id| {
                let on_disk = weak_disk.upgrade().is_some_and(|disk| disk.contains(id));
                if !on_disk {
                    zone(id);
                }
            })
        });
        memory.set_evict_listener(on_memory_evict);
        let commits = (0..COMMIT_STRIPES)
            .map(|_| tokio::sync::Mutex::new(()))
            .collect();
        TieredStorage {
            memory,
            disk,
            commits,
        }
    }

    /// The lock that orders the commits of `id`.
    fn commit_lock(&self, id: ObjectId) -> &tokio::sync::Mutex<()> {
        let stripe = usize::from(id.0[0]) % self.commits.len().max(1);
        &self.commits[stripe]
    }

    /// The memory tier, for its own usage metrics.
    pub fn memory(&self) -> &MemoryStorage {
        &self.memory
    }

    /// The disk tier, for its own usage metrics.
    pub fn disk(&self) -> &DiskStorage {
        &self.disk
    }

    async fn get_from_disk(&self, id: ObjectId) -> io::Result<Option<Object>> {
        let Some((object, version)) = self.disk.get_versioned(id).await? else {
            return Ok(None);
        };
        if object.body_len > self.memory.body_limit() {
            return Ok(Some(object));
        }
        let meta = object.meta.clone();
        let body_len = object.body_len;
        let body = collect(object).await?;
        self.promote(id, version, meta.clone(), body.clone());
        Ok(Some(Object {
            meta,
            body_len,
            body: StoredBody::Memory(body),
        }))
    }

    /// Puts a copy read from disk as `version` into memory, unless the disk has moved on since
    /// (a write or meta update raced the read): the older copy would shadow the newer one.
    fn promote(&self, id: ObjectId, version: Version, meta: Bytes, body: Bytes) {
        if self.disk.version(id) == Some(version)
            && self.memory.insert(id, meta, body).is_ok()
            && self.disk.version(id) != Some(version)
        {
            // Changed between the check and the insert: the copy just inserted may be the old
            // one; the next read promotes the new one.
            self.memory.remove_now(id);
        }
    }
}

/// The whole body of a small object, in one exact-size buffer.
async fn collect(object: Object) -> io::Result<Bytes> {
    use futures_util::StreamExt;
    match object.body {
        StoredBody::Memory(body) => Ok(body),
        StoredBody::Stream(mut stream) => {
            let mut body = Vec::with_capacity(usize::try_from(object.body_len).unwrap_or(0));
            while let Some(chunk) = stream.next().await {
                body.extend_from_slice(&chunk?);
            }
            Ok(Bytes::from(body))
        }
    }
}

impl Storage for TieredStorage {
    fn name(&self) -> &'static str {
        "tiered"
    }

    fn get(&self, id: ObjectId) -> BoxFuture<'_, io::Result<Option<Object>>> {
        match self.memory.get_now(id) {
            Some(object) => Box::pin(ready(Ok(Some(object)))),
            None => Box::pin(self.get_from_disk(id)),
        }
    }

    fn writer(
        &self,
        id: ObjectId,
        expected_len: Option<u64>,
    ) -> BoxFuture<'_, io::Result<Option<Box<dyn ObjectWriter>>>> {
        Box::pin(async move {
            let memory = self.memory.writer(id, expected_len).await?;
            let disk = match self.disk.writer(id, expected_len).await {
                Ok(disk) => disk,
                // Memory may still take it; with no memory writer either, this is the answer.
                Err(err) if memory.is_none() => return Err(err),
                Err(err) => {
                    tracing::warn!(%err, "disk cache: cannot start a write, memory only");
                    None
                }
            };
            if memory.is_none() && disk.is_none() {
                return Ok(None);
            }
            let tee = TeeWriter::new(self.clone(), id, memory, disk);
            Ok(Some(Box::new(tee) as Box<dyn ObjectWriter>))
        })
    }

    fn update_meta(&self, id: ObjectId, meta: Bytes) -> BoxFuture<'_, io::Result<bool>> {
        Box::pin(async move {
            let on_disk = self.disk.update_meta(id, meta.clone()).await;
            let in_memory = self.memory.replace_meta(id, meta);
            match on_disk {
                Ok(on_disk) => Ok(on_disk || in_memory),
                Err(err) => {
                    // The disk copy keeps the old meta: drop the object from both tiers rather
                    // than serve the old headers once memory lets go of the new ones.
                    self.memory.remove_now(id);
                    if let Err(err) = self.disk.remove(id).await {
                        tracing::warn!(%err, "disk cache: cannot remove a stale object");
                    }
                    Err(err)
                }
            }
        })
    }

    fn remove(&self, id: ObjectId) -> BoxFuture<'_, io::Result<()>> {
        self.memory.remove_now(id);
        self.disk.remove(id)
    }

    fn list(&self) -> BoxFuture<'_, io::Result<Vec<Listed>>> {
        self.disk.list()
    }

    /// The disk tier's: it holds every object but those it refused (see [`Self::memory`] and
    /// [`Self::disk`] for each tier's own).
    fn usage(&self) -> Usage {
        self.disk.usage()
    }
}
