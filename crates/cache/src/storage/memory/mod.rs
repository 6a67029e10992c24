//! The memory tier: whole objects in RAM under a byte budget.
//!
//! An object is its meta blob and its body as one contiguous [`Bytes`] (collected at
//! [`ObjectWriter::finish`]), so a hit is one hash lookup and two reference-count increments: no
//! copy, no allocation beyond the returned [`Object`], no async work.
//!
//! Eviction is [`quick_cache`]'s (S3-FIFO / CLOCK-Pro like: new objects enter a small "cold"
//! queue and only those read again move to the "hot" one), so a scan of one-hit objects (a crawler,
//! a bulk download) cannot flush the objects that are read all the time, which plain LRU would.
//! An object weighs its meta plus body plus [`OVERHEAD`] bytes (the entry, its map slot and the two
//! buffers' headers), so the budget bounds real memory, tiny objects included.
//!
//! quick_cache splits the budget into independently locked shards and never admits an object
//! heavier than (most of) one shard. The shard count is therefore chosen so that a shard holds a
//! few of the largest objects allowed; what still does not fit is declined by
//! [`Storage::writer`] (when the length is known) or refused by the writer, never stored halfway.

mod writer;

#[cfg(test)]
mod tests;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{BoxFuture, ready};
use quick_cache::sync::{Cache, EntryAction, EntryResult};
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};

use super::id_hash::BuildIdHasher;
use super::{EvictListener, Listed, Object, ObjectId, ObjectWriter, Storage, StoredBody, Usage};
use writer::MemoryWriter;

/// Bytes counted per object beyond its meta and body: the cache entry, its slot in the shard's
/// map, the two `Bytes` headers and the allocator's rounding, about 128 bytes all told.
pub const OVERHEAD: u64 = 128;

/// How many of the largest objects one shard must hold: fewer shards lock more often, but a shard
/// that holds one or two large objects would churn them out on every insert.
const LARGEST_PER_SHARD: u64 = 4;

/// The share of a shard quick_cache admits one object up to (its "hot" share, 97% by default),
/// with a margin: objects past it are declined up front instead of inserted and thrown away.
const ADMIT_SHARE: f64 = 0.9;

/// The memory tier's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySettings {
    /// Memory the tier may use, objects' meta, bodies and overhead included.
    pub budget_bytes: u64,
    /// The largest body stored; larger responses are declined (they stream through, or go to the
    /// disk tier only).
    pub max_object_bytes: u64,
}

/// The memory tier. Cloning gives another handle on the same objects.
#[derive(Clone)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

type ObjectCache = Cache<ObjectId, Stored, Weigh, BuildIdHasher, CollectEvicted>;

struct Inner {
    cache: ObjectCache,
    /// The largest body a writer accepts: `max_object_bytes`, or less when a shard is smaller.
    body_limit: u64,
    /// The heaviest object (meta, body, overhead) inserted.
    admit_limit: u64,
    evictions: AtomicU64,
    /// Behind a lock only so [`super::tiered`] can re-route it after construction; read once per
    /// eviction, never on a hit.
    listener: RwLock<Option<EvictListener>>,
    /// Tells an insert's own value from the older one it replaced when quick_cache reports both.
    stamps: AtomicU64,
}

/// One stored object. Cloned on every hit: two `Bytes` clones, no allocation.
#[derive(Clone)]
struct Stored {
    meta: Bytes,
    body: Bytes,
    stamp: u64,
}

#[derive(Clone)]
struct Weigh;

impl Weighter<ObjectId, Stored> for Weigh {
    fn weight(&self, _id: &ObjectId, stored: &Stored) -> u64 {
        weight(stored.meta.len(), stored.body.len())
    }
}

fn weight(meta_len: usize, body_len: usize) -> u64 {
    OVERHEAD + meta_len as u64 + body_len as u64
}

/// Collects what an insert pushed out, so the listener runs after quick_cache released its shard
/// lock (a listener may take the zone's locks) and the bodies are freed outside it.
#[derive(Clone)]
struct CollectEvicted;

impl Lifecycle<ObjectId, Stored> for CollectEvicted {
    type RequestState = Vec<(ObjectId, Stored)>;

    fn begin_request(&self) -> Self::RequestState {
        Vec::new()
    }

    fn on_evict(&self, state: &mut Self::RequestState, id: ObjectId, stored: Stored) {
        state.push((id, stored));
    }
}

impl MemoryStorage {
    /// An empty tier. `evict` hears of every object dropped to stay within the budget.
    pub fn new(settings: MemorySettings, evict: Option<EvictListener>) -> Self {
        let budget = settings.budget_bytes.max(1);
        let largest = weight(
            0,
            usize::try_from(settings.max_object_bytes).unwrap_or(usize::MAX),
        );
        let cache = build_cache(budget, largest);
        let admit_limit = (cache.shard_capacity() as f64 * ADMIT_SHARE) as u64;
        let body_limit = settings
            .max_object_bytes
            .min(admit_limit.saturating_sub(OVERHEAD));
        MemoryStorage {
            inner: Arc::new(Inner {
                cache,
                body_limit,
                admit_limit,
                evictions: AtomicU64::new(0),
                listener: RwLock::new(evict),
                stamps: AtomicU64::new(0),
            }),
        }
    }

    /// The largest body this tier stores (its max object size, or less if its budget is small).
    pub fn body_limit(&self) -> u64 {
        self.inner.body_limit
    }

    /// The object if held: the synchronous form of [`Storage::get`], for callers that hold a
    /// `MemoryStorage` and want no future at all.
    pub fn get_now(&self, id: ObjectId) -> Option<Object> {
        let stored = self.inner.cache.get(&id)?;
        Some(Object {
            meta: stored.meta,
            body_len: stored.body.len() as u64,
            body: StoredBody::Memory(stored.body),
        })
    }

    /// [`Storage::remove`] without a future.
    pub(crate) fn remove_now(&self, id: ObjectId) {
        self.inner.cache.remove(&id);
    }

    /// Stores a whole object (a finished writer, or a promotion from the disk tier). Fails when it
    /// is heavier than a shard admits; then no older copy under `id` remains either.
    pub(crate) fn insert(&self, id: ObjectId, meta: Bytes, body: Bytes) -> io::Result<()> {
        let inner = &self.inner;
        if weight(meta.len(), body.len()) > inner.admit_limit {
            inner.cache.remove(&id);
            return Err(too_heavy());
        }
        let stamp = inner.stamps.fetch_add(1, Ordering::Relaxed);
        let pushed_out = inner
            .cache
            .insert_with_lifecycle(id, Stored { meta, body, stamp });
        let mut refused = false;
        for (out_id, stored) in pushed_out {
            if out_id == id {
                // Our own value back means quick_cache refused it; any other is the copy this
                // insert replaced, which is not an eviction.
                refused |= stored.stamp == stamp;
            } else {
                self.evicted(out_id);
            }
        }
        if refused { Err(too_heavy()) } else { Ok(()) }
    }

    fn evicted(&self, id: ObjectId) {
        self.inner.evictions.fetch_add(1, Ordering::Relaxed);
        let listener = match self.inner.listener.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if let Some(listener) = listener {
            listener(id);
        }
    }

    /// Replaces the listener (the tiered storage routes memory evictions itself).
    pub(crate) fn set_evict_listener(&self, listener: Option<EvictListener>) {
        match self.inner.listener.write() {
            Ok(mut guard) => *guard = listener,
            Err(poisoned) => *poisoned.into_inner() = listener,
        }
    }

    pub(crate) fn downgrade(&self) -> WeakMemory {
        WeakMemory(Arc::downgrade(&self.inner))
    }

    /// [`Storage::update_meta`] without a future.
    pub(crate) fn replace_meta(&self, id: ObjectId, meta: Bytes) -> bool {
        if !self.inner.cache.contains_key(&id) {
            return false;
        }
        // In place under the shard lock, so a writer finishing a new body for `id` at the same
        // time is never overwritten with the old body; quick_cache re-weighs the entry after.
        let result = self
            .inner
            .cache
            .entry(&id, Some(Duration::ZERO), |_, stored| {
                stored.meta = meta;
                EntryAction::Retain(())
            });
        matches!(result, EntryResult::Retained(()))
    }
}

/// A handle that does not keep the tier alive: the tiered storage's two listeners point at each
/// other's tier, and strong handles there would be a reference cycle.
#[derive(Clone)]
pub(crate) struct WeakMemory(Weak<Inner>);

impl WeakMemory {
    pub(crate) fn upgrade(&self) -> Option<MemoryStorage> {
        self.0.upgrade().map(|inner| MemoryStorage { inner })
    }
}

fn build_cache(budget: u64, largest: u64) -> ObjectCache {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shards = (cores * 4).next_power_of_two();
    while shards > 1 && budget / (shards as u64) < largest.saturating_mul(LARGEST_PER_SHARD) {
        shards /= 2;
    }
    // The item estimate sizes quick_cache's ghost list (recently evicted ids that earn a hot
    // admission when seen again); 16 KiB is a typical cached response.
    let estimated_items = usize::try_from(budget / (16 * 1024))
        .unwrap_or(usize::MAX)
        .max(64);
    let mut builder = OptionsBuilder::new();
    builder
        .shards(shards)
        .weight_capacity(budget)
        .estimated_items_capacity(estimated_items);
    match builder.build() {
        Ok(options) => ObjectCache::with_options(options, Weigh, BuildIdHasher, CollectEvicted),
        // Unreachable (both required fields are set above); quick_cache's default sharding then.
        Err(_) => ObjectCache::with(
            estimated_items,
            budget,
            Weigh,
            BuildIdHasher,
            CollectEvicted,
        ),
    }
}

fn too_heavy() -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        "object heavier than the memory tier admits",
    )
}

impl Storage for MemoryStorage {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn get(&self, id: ObjectId) -> BoxFuture<'_, io::Result<Option<Object>>> {
        Box::pin(ready(Ok(self.get_now(id))))
    }

    fn writer(
        &self,
        id: ObjectId,
        expected_len: Option<u64>,
    ) -> BoxFuture<'_, io::Result<Option<Box<dyn ObjectWriter>>>> {
        if expected_len.is_some_and(|len| len > self.inner.body_limit) {
            return Box::pin(ready(Ok(None)));
        }
        let writer = MemoryWriter::new(self.clone(), id, expected_len);
        Box::pin(ready(Ok(Some(Box::new(writer) as Box<dyn ObjectWriter>))))
    }

    fn update_meta(&self, id: ObjectId, meta: Bytes) -> BoxFuture<'_, io::Result<bool>> {
        Box::pin(ready(Ok(self.replace_meta(id, meta))))
    }

    fn remove(&self, id: ObjectId) -> BoxFuture<'_, io::Result<()>> {
        self.remove_now(id);
        Box::pin(ready(Ok(())))
    }

    fn list(&self) -> BoxFuture<'_, io::Result<Vec<Listed>>> {
        let listed = self
            .inner
            .cache
            .iter()
            .map(|(id, stored)| Listed {
                id,
                meta: stored.meta,
                body_len: stored.body.len() as u64,
            })
            .collect();
        Box::pin(ready(Ok(listed)))
    }

    fn usage(&self) -> Usage {
        Usage {
            objects: self.inner.cache.len() as u64,
            bytes: self.inner.cache.weight(),
            evictions: self.inner.evictions.load(Ordering::Relaxed),
        }
    }
}
