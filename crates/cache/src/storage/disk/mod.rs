//! The disk tier: a directory of files that survives restarts, under a byte budget with
//! least-recently-used eviction.
//!
//! # Layout
//!
//! Each object is two files in `root/<h>/<hh>/`, named after the first three hex digits of its id
//! (nginx's `levels=1:2`: 4096 directories, none holding millions of entries):
//!
//! - `<id>-<generation>.b`, the body: a 40-byte header (magic `SLCBODY\0`, version `u32`, 4
//!   reserved bytes, the id, the generation `u64`) then the body bytes. Never modified once
//!   renamed into place.
//! - `<id>.m`, the meta: a 48-byte header (magic `SLCMETA\0`, version `u32`, meta length `u32`,
//!   the id, the generation of its body file `u64`, the body length `u64`) then the meta blob.
//!
//! Integers are little-endian. The meta file is the commit marker: a writer streams the body to a
//! temp file (`.tmp-…`, same directory so the rename is atomic), renames it to its body name,
//! then writes the meta to a temp file and renames it over `<id>.m`. Until that last rename
//! readers see the previous object (or none); after it, the new one. A new body gets a new
//! generation, so it never overwrites the body a reader is streaming, and a 304's
//! [`Storage::update_meta`] rewrites only the small meta file, never the body.
//!
//! A crash leaves at worst temp files and a body no meta names; [`DiskStorage::open`] removes
//! both. A meta file must match its body file's length exactly; a foreign, truncated or
//! mismatched pair is treated as absent and removed, at start-up or when a read finds it. Bodies
//! are not fsynced (the cost per object would be a disk flush): after a power cut the length check
//! catches the usual damage (a file cut short or empty), not a file of the right length whose
//! blocks never reached the disk. One process per directory: two would evict each other's files.
//!
//! # Memory
//!
//! The index (`lru.rs`) holds per object only its id, body generation, lengths and recency. Meta
//! blobs stay on disk: a hit reads the meta file, then streams the body in 64 KiB pieces
//! from the blocking pool; a body is never loaded whole. Recency is not persisted: at start-up
//! the meta files' modification times order the index.
//!
//! # Failures
//!
//! A full or failing disk never fails a request: writes return the `io::Error` and the object is
//! not stored; a read that finds a file gone or damaged drops the object (the listener hears of
//! it) and misses. The root directory is created by `open` only: a removed or unmounted root
//! makes writes fail rather than silently filling the filesystem underneath.

mod format;
mod lru;
mod read;
mod scan;
mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_damage;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use bytes::Bytes;
use futures_util::future::{BoxFuture, ready};

use super::{EvictListener, Listed, Object, ObjectId, ObjectWriter, Storage, Usage};
use format::{BODY_HEADER_LEN, META_HEADER_LEN, disk_bytes};
use lru::{Entry, Lru};

/// Mutations of one object's files (commit, meta update, removal, eviction) are serialised by one
/// of this many locks, picked by id; reads take none.
const STRIPES: usize = 64;

/// The disk tier's place and limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskSettings {
    /// The cache directory; created (with its parents) by [`DiskStorage::open`] if missing.
    pub path: PathBuf,
    /// Disk space the tier may use, counted in 4 KiB blocks per file.
    pub budget_bytes: u64,
    /// The largest body stored; larger responses are declined.
    pub max_object_bytes: u64,
}

/// The disk tier. Cloning gives another handle on the same directory and index.
#[derive(Clone)]
pub struct DiskStorage {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    budget: u64,
    body_limit: u64,
    index: Mutex<Lru>,
    stripes: Box<[Mutex<()>]>,
    /// Behind a lock only so [`crate::storage::tiered`] can re-route it after construction.
    listener: RwLock<Option<EvictListener>>,
    evictions: AtomicU64,
    /// Body generations and temp-file names; seeded at random so a restart does not reuse them.
    nonces: AtomicU64,
}

impl DiskStorage {
    /// Opens (or creates) the cache directory: removes temp files a crash left and damaged or
    /// orphaned files, and rebuilds the index from the meta files. Reads every meta file's
    /// header, so it takes a while on a large cache: call it before serving.
    pub async fn open(settings: DiskSettings, evict: Option<EvictListener>) -> io::Result<Self> {
        tokio::task::spawn_blocking(move || Self::open_blocking(settings, evict))
            .await
            .map_err(io::Error::other)?
    }

    fn open_blocking(settings: DiskSettings, evict: Option<EvictListener>) -> io::Result<Self> {
        let found = scan::scan(&settings.path)?;
        let smallest_object = disk_bytes(0, 0);
        let body_limit = settings.max_object_bytes.min(
            settings
                .budget_bytes
                .saturating_sub(smallest_object + (META_HEADER_LEN + BODY_HEADER_LEN) as u64),
        );
        let storage = DiskStorage {
            inner: Arc::new(Inner {
                root: settings.path,
                budget: settings.budget_bytes,
                body_limit,
                index: Mutex::new(Lru::new()),
                stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
                listener: RwLock::new(evict),
                evictions: AtomicU64::new(0),
                nonces: AtomicU64::new(random_seed()),
            }),
        };
        let over_budget = {
            let mut index = storage.inner.index();
            for (id, entry) in found {
                index.insert(id, entry);
            }
            index.evict_to(storage.inner.budget, None)
        };
        // A budget lowered since the last run: trim now. Nobody has listed these yet, so nobody
        // is told, and they are not counted as evictions of this run.
        for (id, entry) in over_budget {
            scan::remove_quietly(&format::meta_path(&storage.inner.root, id));
            scan::remove_quietly(&format::body_path(
                &storage.inner.root,
                id,
                entry.generation,
            ));
        }
        Ok(storage)
    }

    /// The disk space (whole blocks, both files) an object with these lengths takes in usage.
    pub fn disk_bytes(meta_len: u64, body_len: u64) -> u64 {
        disk_bytes(meta_len, body_len)
    }

    /// The largest body this tier stores.
    pub fn body_limit(&self) -> u64 {
        self.inner.body_limit
    }

    pub(crate) fn contains(&self, id: ObjectId) -> bool {
        self.inner.index().get(id).is_some()
    }

    /// The version of `id` stored now, to tell whether an object read earlier is still current.
    pub(crate) fn version(&self, id: ObjectId) -> Option<Version> {
        self.inner.index().get(id).map(|entry| Version::of(&entry))
    }

    /// [`Storage::get`] with the version read.
    pub(crate) fn get_versioned(
        &self,
        id: ObjectId,
    ) -> BoxFuture<'static, io::Result<Option<(Object, Version)>>> {
        read::get(self.inner.clone(), id)
    }

    /// Replaces the listener (the tiered storage adds its own step before the zone's).
    pub(crate) fn set_evict_listener(&self, listener: Option<EvictListener>) {
        match self.inner.listener.write() {
            Ok(mut guard) => *guard = listener,
            Err(poisoned) => *poisoned.into_inner() = listener,
        }
    }

    pub(crate) fn evict_listener(&self) -> Option<EvictListener> {
        self.inner.listener()
    }

    pub(crate) fn downgrade(&self) -> WeakDisk {
        WeakDisk(Arc::downgrade(&self.inner))
    }
}

/// Which body and which meta of an object: a new body changes the generation, a meta update the
/// meta version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    generation: u64,
    meta_version: u32,
}

impl Version {
    fn of(entry: &Entry) -> Self {
        Version {
            generation: entry.generation,
            meta_version: entry.meta_version,
        }
    }
}

/// A handle that does not keep the tier alive (see [`crate::storage::tiered`]).
#[derive(Clone)]
pub(crate) struct WeakDisk(Weak<Inner>);

impl WeakDisk {
    pub(crate) fn upgrade(&self) -> Option<DiskStorage> {
        self.0.upgrade().map(|inner| DiskStorage { inner })
    }
}

impl Inner {
    fn index(&self) -> MutexGuard<'_, Lru> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lock order: a stripe, then the index; never the other way round.
    fn stripe(&self, id: ObjectId) -> MutexGuard<'_, ()> {
        let stripe = &self.stripes[usize::from(id.0[15]) % STRIPES];
        stripe.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_nonce(&self) -> u64 {
        self.nonces.fetch_add(1, Ordering::Relaxed)
    }

    fn listener(&self) -> Option<EvictListener> {
        match self.listener.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Deletes what the index already let go of to stay in budget, then tells the listener. Each
    /// victim's files are deleted under its stripe: if the id was committed again meanwhile, its
    /// meta file is the new object's and stays; the old body (its own generation) goes anyway.
    fn drop_evicted(&self, victims: Vec<(ObjectId, Entry)>) {
        if victims.is_empty() {
            return;
        }
        for (id, entry) in &victims {
            let _stripe = self.stripe(*id);
            if self.index().get(*id).is_none() {
                scan::remove_quietly(&format::meta_path(&self.root, *id));
            }
            scan::remove_quietly(&format::body_path(&self.root, *id, entry.generation));
        }
        self.evictions
            .fetch_add(victims.len() as u64, Ordering::Relaxed);
        if let Some(listener) = self.listener() {
            for (id, _) in victims {
                listener(id);
            }
        }
    }

    /// Forgets an object found damaged or gone and deletes what is left of it; `false` when it
    /// was not indexed. Called under its stripe; the caller tells the listener after.
    fn forget_damaged(&self, id: ObjectId) -> bool {
        let Some(entry) = self.index().remove(id) else {
            return false;
        };
        scan::remove_quietly(&format::meta_path(&self.root, id));
        scan::remove_quietly(&format::body_path(&self.root, id, entry.generation));
        tracing::warn!(?id, "disk cache: object damaged or gone, dropped");
        true
    }

    fn notify(&self, id: ObjectId) {
        if let Some(listener) = self.listener() {
            listener(id);
        }
    }
}

/// A seed for generations that differs between runs: `RandomState` is seeded from the OS.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> BoxFuture<'static, io::Result<T>> {
    Box::pin(async move {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(io::Error::other)?
    })
}

impl Storage for DiskStorage {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn get(&self, id: ObjectId) -> BoxFuture<'_, io::Result<Option<Object>>> {
        let read = self.get_versioned(id);
        Box::pin(async move { Ok(read.await?.map(|(object, _)| object)) })
    }

    fn writer(
        &self,
        id: ObjectId,
        expected_len: Option<u64>,
    ) -> BoxFuture<'_, io::Result<Option<Box<dyn ObjectWriter>>>> {
        if expected_len.is_some_and(|len| len > self.inner.body_limit) {
            return Box::pin(ready(Ok(None)));
        }
        let inner = self.inner.clone();
        let generation = inner.next_nonce();
        let create = blocking(move || writer::DiskWriter::create(inner, id, generation));
        Box::pin(async move {
            let writer = create.await?.with_expected_len(expected_len);
            Ok(Some(Box::new(writer) as Box<dyn ObjectWriter>))
        })
    }

    fn update_meta(&self, id: ObjectId, meta: Bytes) -> BoxFuture<'_, io::Result<bool>> {
        let inner = self.inner.clone();
        blocking(move || writer::update_meta(&inner, id, &meta))
    }

    fn remove(&self, id: ObjectId) -> BoxFuture<'_, io::Result<()>> {
        let inner = self.inner.clone();
        blocking(move || writer::remove(&inner, id))
    }

    fn list(&self) -> BoxFuture<'_, io::Result<Vec<Listed>>> {
        let inner = self.inner.clone();
        blocking(move || Ok(read::list(&inner)))
    }

    fn usage(&self) -> Usage {
        let (objects, bytes) = {
            let index = self.inner.index();
            (index.len() as u64, index.bytes())
        };
        Usage {
            objects,
            bytes,
            evictions: self.inner.evictions.load(Ordering::Relaxed),
        }
    }
}
