//! The memory cache: small, hot files served without a trip to the blocking pool.
//!
//! # Why
//! A lookup on the blocking pool (canonicalise, stat, open, read) costs a thread wake-up and two
//! context switches; on one core that handoff, not the file system, was most of a 75 KB page's
//! serving time in `sluice bench` (docs/benchmarks.md). DESIGN.md §5: "small hot files are best
//! served from memory, keyed by path + mtime + size". nginx's `open_file_cache` keeps
//! descriptors and metadata for `open_file_cache_valid` (60 s) without looking at the file; this
//! cache keeps the bytes too, and looks.
//!
//! # What is kept, and how it stays right
//! Key: the request's checked relative path, its trailing slash, and the sidecar codings the
//! client accepts (so a `br` client and a plain one get their own entries). Value: the bytes of
//! the file that lookup served (the file, a sidecar, or a directory's index), each at most
//! [`super::body::SMALL_BODY`], with its validators and `Content-Type`.
//!
//! Before every hit, a `stat` on the worker thread compares each path the lookup looked at with
//! what it found then: the served file (as requested, through any symbolic link, and as
//! opened), for a sidecar its original, each better sidecar passed over (missing, stale) and
//! each index name tried before the one served. A file's stamp is its inode, size, mtime and
//! ctime to the nanosecond, so an edit in place, an atomic `rename` deploy, a re-pointed or
//! removed link, a new or refreshed sidecar or index file, a `chmod`, or a deleted file is seen
//! by the next request, exactly as without the cache. The `stat`s run inline, as every nginx
//! file access does: these paths were looked at less than [`REVALIDATE_AFTER`] ago, so they are
//! in the kernel's dentry cache. A change a `stat` of these paths cannot see (a directory on
//! the way made unreadable) is seen once the entry is older than [`REVALIDATE_AFTER`] (1 s):
//! the next request then does the full lookup. On a network file system, where a `stat` may
//! block, turn the cache off (`memory_cache = 0`).
//!
//! Any GET or HEAD that looks a small file up fills the cache (the file is read on the same
//! trip to the pool), and any GET or HEAD, with validators or a Range, is answered from an
//! entry. Errors (404, 403) and redirects are not cached.
//! Bounded by bytes (`memory_cache`, per static route, 32 MiB by default; 0 turns it off), evicted
//! by quick_cache's S3-FIFO, which keeps a one-off scan of many files from flushing the hot
//! ones. quick_cache rather than moka: its hit is a hash lookup under a sharded lock, with no
//! access log to drain, and TTL (which moka adds) is not needed since every hit is checked.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::HeaderValue;

use super::path::RelPath;
use super::precompressed::Accepted;
use super::resolve::{FileStamp, OpenFile, Probe};
use sluice_core::ContentCoding;

/// How long an entry is served on a `stat` alone before the next request looks the path up
/// again (to see sidecars, index files or symbolic links that changed).
pub(crate) const REVALIDATE_AFTER: Duration = Duration::from_secs(1);

/// What a request asks the file system: the same key gets the same file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) rel: RelPath,
    pub(crate) sidecars: Accepted,
}

/// A file's bytes and what the response needs to describe them.
#[derive(Debug)]
pub(crate) struct Cached {
    pub(crate) contents: Bytes,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) encoding: ContentCoding,
    pub(crate) content_type: HeaderValue,
    /// The served file's identity when it was read (see [`FileStamp::content_id`]).
    pub(crate) stamp: FileStamp,
    probes: Vec<Probe>,
    read_at: Instant,
}

/// A route's memory cache of small files.
pub(crate) struct FileCache {
    entries: quick_cache::sync::Cache<Key, Arc<Cached>, Weight>,
    revalidate_after: Duration,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("entries", &self.entries.len())
            .field("bytes", &self.entries.weight())
            .finish()
    }
}

/// An entry weighs its bytes plus its paths and bookkeeping, so many tiny files are bounded too.
#[derive(Debug, Clone, Copy)]
struct Weight;

impl quick_cache::Weighter<Key, Arc<Cached>> for Weight {
    fn weight(&self, key: &Key, value: &Arc<Cached>) -> u64 {
        const OVERHEAD: usize = 256;
        let paths = key.rel.path.as_os_str().len()
            + (value.probes.iter())
                .map(|p| p.path.as_os_str().len())
                .sum::<usize>();
        (value.contents.len() + paths + OVERHEAD) as u64
    }
}

impl FileCache {
    /// A cache of at most `max_bytes`; `None` when that is 0 (off).
    pub(crate) fn new(max_bytes: u64, revalidate_after: Duration) -> Option<Self> {
        if max_bytes == 0 {
            return None;
        }
        // The item estimate only sizes the hash table up front: one entry per 16 KiB.
        let estimated_items = usize::try_from(max_bytes / (16 * 1024))
            .unwrap_or(usize::MAX)
            .clamp(16, 65_536);
        Some(Self {
            entries: quick_cache::sync::Cache::with_weighter(estimated_items, max_bytes, Weight),
            revalidate_after,
        })
    }

    /// The entry for `key` if the files its lookup looked at are unchanged (one `stat` each) and it
    /// is younger than the revalidation period; otherwise the entry is dropped and the
    /// caller looks the path up again.
    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Cached>> {
        let entry = self.entries.get(key)?;
        let current = entry.read_at.elapsed() < self.revalidate_after
            && entry.probes.iter().all(Probe::is_current);
        if !current {
            // Unless another request has just put a fresh entry in its place.
            self.entries.remove_if(key, |v| Arc::ptr_eq(v, &entry));
            return None;
        }
        Some(entry)
    }

    /// Keep what a lookup read whole (see [`OpenFile::prefetch`]); anything else is ignored.
    pub(crate) fn insert(&self, key: Key, open: &OpenFile, content_type: &HeaderValue) {
        let Some(contents) = &open.contents else {
            return;
        };
        let entry = Cached {
            contents: contents.clone(),
            modified: open.modified,
            encoding: open.encoding,
            content_type: content_type.clone(),
            stamp: open.stamp,
            probes: open.probes.clone(),
            read_at: Instant::now(),
        };
        self.entries.insert(key, Arc::new(entry));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::static_files::path::to_rel_path;
    use crate::static_files::precompressed::Accepted;
    use crate::static_files::resolve::{Resolver, Target};

    /// A lookup of `name` in a fresh root, read whole as a plain GET would.
    fn looked_up(
        dir: &std::path::Path,
        name: &str,
    ) -> Result<(Key, OpenFile), sluice_core::BoxError> {
        std::fs::write(dir.join(name), "cached bytes")?;
        let resolver = Resolver {
            root: std::fs::canonicalize(dir)?,
            index: Vec::new(),
            follow_symlinks_outside_root: false,
        };
        let key = Key {
            rel: to_rel_path(&format!("/{name}"))?,
            sidecars: Accepted::NONE,
        };
        let Target::File(mut open) = resolver.resolve(&key.rel, &[])? else {
            return Err("not a file".into());
        };
        open.prefetch(super::super::body::SMALL_BODY);
        Ok((key, open))
    }

    #[test]
    fn an_entry_is_served_within_the_period_and_looked_up_again_after()
    -> Result<(), sluice_core::BoxError> {
        let dir = tempfile::tempdir()?;
        let (key, open) = looked_up(dir.path(), "a.txt")?;
        let text = HeaderValue::from_static("text/plain");

        let cache = FileCache::new(1 << 20, Duration::from_secs(3600)).ok_or("off")?;
        cache.insert(key.clone(), &open, &text);
        let hit = cache.get(&key).ok_or("expected a hit")?;
        assert_eq!(hit.contents, "cached bytes");
        assert_eq!(cache.len(), 1);

        // Past the period: no hit, and the entry is gone until a lookup puts it back.
        let expired = FileCache::new(1 << 20, Duration::ZERO).ok_or("off")?;
        expired.insert(key.clone(), &open, &text);
        assert!(expired.get(&key).is_none());
        assert_eq!(expired.len(), 0);
        Ok(())
    }

    #[test]
    fn zero_bytes_turns_the_cache_off_and_the_budget_bounds_it() -> Result<(), sluice_core::BoxError>
    {
        assert!(FileCache::new(0, REVALIDATE_AFTER).is_none());
        let dir = tempfile::tempdir()?;
        let cache = FileCache::new(4096, REVALIDATE_AFTER).ok_or("off")?;
        let text = HeaderValue::from_static("text/plain");
        for i in 0..100 {
            let (key, open) = looked_up(dir.path(), &format!("f{i}.txt"))?;
            cache.insert(key, &open, &text);
        }
        assert!(cache.entries.weight() <= 4096, "{:?}", cache);
        assert!(cache.len() < 100, "{:?}", cache);
        Ok(())
    }
}
