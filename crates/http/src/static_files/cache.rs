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
//! A hit is checked with a `stat` on the worker thread of each path the lookup looked at,
//! compared with what it found then: the served file (as requested, through any symbolic link,
//! and as opened), for a sidecar its original, each better sidecar passed over (missing, stale)
//! and each index name tried before the one served. A file's stamp is its inode, size, mtime
//! and ctime to the nanosecond, so an edit in place, an atomic `rename` deploy, a re-pointed or
//! removed link, a new or refreshed sidecar or index file, a `chmod`, or a deleted file is
//! seen. The `stat`s run inline, as every nginx file access does: these paths were looked at
//! less than [`REVALIDATE_AFTER`] ago, so they are in the kernel's dentry cache.
//!
//! The check runs at most once per entry per `memory_cache_recheck` (100 ms by default): hits
//! within that time after a check that found everything unchanged are served on trust, so a
//! change is seen by the first request after that bound, not by the very next one. Per hit, the
//! `stat`s (one to three system calls) cost more than the rest of the hit together; nginx's
//! `open_file_cache_valid` trusts its entries for 60 s by default. `memory_cache_recheck = "0s"`
//! checks before every hit.
//!
//! A change a `stat` of these paths cannot see (a directory on the way made unreadable) is
//! seen once the entry is older than [`REVALIDATE_AFTER`] (1 s): the next request then does the
//! full lookup. On a network file system, where a `stat` may block, turn the cache off
//! (`memory_cache = 0`).
//!
//! Any GET or HEAD that looks a small file up fills the cache (the file is read on the same
//! trip to the pool), and any GET or HEAD, with validators or a Range, is answered from an
//! entry. Errors (404, 403) and redirects are not cached.
//! Bounded by bytes (`memory_cache`, per static route, 32 MiB by default; 0 turns it off), evicted
//! by quick_cache's S3-FIFO, which keeps a one-off scan of many files from flushing the hot
//! ones. quick_cache rather than moka: its hit is a hash lookup under a sharded lock, with no
//! access log to drain, and TTL (which moka adds) is not needed since every hit is checked.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::head::Prepared;
use super::precompressed::Accepted;
use super::resolve::Probe;

/// How long an entry is served on a `stat` alone before the next request looks the path up
/// again (to see sidecars, index files or symbolic links that changed).
pub(crate) const REVALIDATE_AFTER: Duration = Duration::from_secs(1);

/// What a request asks the file system: the same key gets the same file. The path is the
/// request's as the route sees it (prefix stripped, still percent-encoded): a hit needs no
/// decoding and no allocation. Two spellings of one file (`/a%62` and `/ab`) are two entries,
/// each checked like the other; only paths that passed [`super::path::to_rel_path`] are
/// ever inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) path: Box<str>,
    pub(crate) sidecars: Accepted,
}

/// A [`Key`] borrowed from the request, for the lookup.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    pub(crate) path: &'a str,
    pub(crate) sidecars: Accepted,
}

// `Key` and `KeyRef` must hash alike (quick_cache looks a `Key` up by a `KeyRef`).
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state);
    }
}

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.path.hash(state);
        self.sidecars.hash(state);
    }
}

impl quick_cache::Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.path == &*key.path && self.sidecars == key.sidecars
    }
}

impl Key {
    pub(crate) fn as_ref(&self) -> KeyRef<'_> {
        KeyRef {
            path: &self.path,
            sidecars: self.sidecars,
        }
    }
}

/// A file's bytes and what the response needs to describe them.
#[derive(Debug)]
pub(crate) struct Cached {
    pub(crate) contents: Bytes,
    /// Validators and the response heads, built once for this version of the file.
    pub(crate) prepared: Prepared,
    probes: Vec<Probe>,
    read_at: Instant,
    /// When (nanoseconds after `read_at`) the probes last found every path unchanged.
    checked: AtomicU64,
    /// `contents` registered as the file's bytes while the entry lives, so a plain connection
    /// sends them with `sendfile` (`sluice_core::file_bytes`).
    _in_file: Option<sluice_core::file_bytes::Registration>,
}

/// A route's memory cache of small files.
pub(crate) struct FileCache {
    entries: quick_cache::sync::Cache<Key, Arc<Cached>, Weight>,
    revalidate_after: Duration,
    /// How long a hit is served without looking at the file system (the `stat`s); zero: before
    /// every hit.
    recheck_after: Duration,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("entries", &self.entries.len())
            .field("bytes", &self.entries.weight())
            .field("recheck_after", &self.recheck_after)
            .finish()
    }
}

/// An entry weighs its bytes plus its paths and bookkeeping, so many tiny files are bounded too.
#[derive(Debug, Clone, Copy)]
struct Weight;

impl quick_cache::Weighter<Key, Arc<Cached>> for Weight {
    fn weight(&self, key: &Key, value: &Arc<Cached>) -> u64 {
        const OVERHEAD: usize = 512;
        let paths = key.path.len()
            + (value.probes.iter())
                .map(|p| p.path.as_os_str().len())
                .sum::<usize>();
        (value.contents.len() + paths + OVERHEAD) as u64
    }
}

impl FileCache {
    /// A cache of at most `max_bytes`; `None` when that is 0 (off). An entry is looked up
    /// afresh once it is `revalidate_after` old, and its paths are `stat`ed again at most once
    /// per `recheck_after`.
    pub(crate) fn new(
        max_bytes: u64,
        revalidate_after: Duration,
        recheck_after: Duration,
    ) -> Option<Self> {
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
            recheck_after,
        })
    }

    /// The entry for `key` at `now`, if it is younger than the revalidation period and the
    /// files its lookup looked at are unchanged: taken on trust if they were found so less
    /// than `recheck_after` ago, else checked now (one `stat` each). Otherwise the entry is
    /// dropped and the caller looks the path up again.
    pub(crate) fn get(&self, key: KeyRef<'_>, now: Instant) -> Option<Arc<Cached>> {
        let entry = self.entries.get(&key)?;
        let age = now.saturating_duration_since(entry.read_at);
        if age < self.revalidate_after {
            let checked = Duration::from_nanos(entry.checked.load(Ordering::Relaxed));
            if age.saturating_sub(checked) < self.recheck_after {
                return Some(entry);
            }
            if entry.probes.iter().all(Probe::is_current) {
                let age = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
                entry.checked.fetch_max(age, Ordering::Relaxed);
                return Some(entry);
            }
        }
        // Unless another request has just put a fresh entry in its place.
        self.entries.remove_if(&key, |v| Arc::ptr_eq(v, &entry));
        None
    }

    /// Keep what a lookup read whole (see [`super::resolve::OpenFile::prefetch`]): its `contents`, the
    /// `probes` that check it, described by `prepared`, as found at `read_at` (taken before the
    /// lookup began); `file`, the opened file they were read from and its version then, is
    /// kept open to send them from.
    pub(crate) fn insert(
        &self,
        key: Key,
        contents: Bytes,
        probes: Vec<Probe>,
        prepared: Prepared,
        read_at: Instant,
        file: Option<(std::fs::File, super::resolve::FileStamp)>,
    ) -> Arc<Cached> {
        let in_file = file
            .and_then(|(file, stamp)| sluice_core::file_bytes::register(&contents, file, 0, stamp));
        let entry = Arc::new(Cached {
            contents,
            prepared,
            probes,
            read_at,
            checked: AtomicU64::new(0),
            _in_file: in_file,
        });
        self.entries.insert(key, entry.clone());
        entry
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
    use crate::static_files::resolve::{OpenFile, Resolver, Target};
    use http::HeaderValue;
    use sluice_core::ContentCoding;

    const MS: Duration = Duration::from_millis(1);

    /// A lookup of `name` in `dir` (written with `content`), read whole as a plain GET would.
    fn looked_up(
        dir: &std::path::Path,
        name: &str,
        content: &str,
    ) -> Result<(Key, OpenFile, Prepared), sluice_core::BoxError> {
        std::fs::write(dir.join(name), content)?;
        let resolver = Resolver {
            root: std::fs::canonicalize(dir)?,
            index: Vec::new(),
            follow_symlinks_outside_root: false,
        };
        let path = format!("/{name}");
        let Target::File(mut open) = resolver.resolve(&to_rel_path(&path)?, &[])? else {
            return Err("not a file".into());
        };
        open.prefetch(super::super::body::SMALL_BODY);
        let prepared = Prepared::new(
            open.len,
            open.modified,
            ContentCoding::Identity,
            HeaderValue::from_static("text/plain"),
            None,
            std::time::SystemTime::now(),
        );
        let key = Key {
            path: path.into(),
            sidecars: Accepted::NONE,
        };
        Ok((key, open, prepared))
    }

    fn insert(cache: &FileCache, key: Key, open: OpenFile, prepared: Prepared, at: Instant) {
        let contents = open.contents.unwrap_or_default();
        cache.insert(
            key,
            contents,
            open.probes,
            prepared,
            at,
            Some((open.file, open.stamp)),
        );
    }

    #[test]
    fn an_entry_is_served_within_the_period_and_looked_up_again_after()
    -> Result<(), sluice_core::BoxError> {
        let dir = tempfile::tempdir()?;
        let (key, open, prepared) = looked_up(dir.path(), "a.txt", "cached bytes")?;
        let cache = FileCache::new(1 << 20, REVALIDATE_AFTER, 100 * MS).ok_or("off")?;
        let t0 = Instant::now();
        insert(&cache, key.clone(), open, prepared, t0);
        let hit = cache.get(key.as_ref(), t0).ok_or("expected a hit")?;
        assert_eq!(hit.contents, "cached bytes");
        assert_eq!(hit.prepared.ok[http::header::CONTENT_LENGTH], "12");
        assert!(cache.get(key.as_ref(), t0 + 999 * MS).is_some());
        assert_eq!(cache.len(), 1);

        // Past the period: no hit, and the entry is gone until a lookup puts it back.
        assert!(cache.get(key.as_ref(), t0 + REVALIDATE_AFTER).is_none());
        assert_eq!(cache.len(), 0);
        assert!(cache.get(key.as_ref(), t0).is_none());
        Ok(())
    }

    /// The `stat`s run at most once per `recheck_after`: a change is seen by the first hit
    /// after that bound (counted from the last check that found nothing changed), not before.
    #[test]
    fn a_change_is_seen_once_the_recheck_interval_has_passed() -> Result<(), sluice_core::BoxError>
    {
        let dir = tempfile::tempdir()?;
        let (key, open, prepared) = looked_up(dir.path(), "a.txt", "version one")?;
        let cache = FileCache::new(1 << 20, REVALIDATE_AFTER, 100 * MS).ok_or("off")?;
        let t0 = Instant::now();
        insert(&cache, key.clone(), open, prepared, t0);

        // Checked at 100 ms (unchanged): trusted until 200 ms.
        assert!(cache.get(key.as_ref(), t0 + 100 * MS).is_some());
        std::fs::write(dir.path().join("a.txt"), "version two, longer")?;
        let hit = cache.get(key.as_ref(), t0 + 150 * MS).ok_or("trusted")?;
        assert_eq!(hit.contents, "version one");
        assert!(cache.get(key.as_ref(), t0 + 199 * MS).is_some());
        // The bound has passed: checked, changed, dropped.
        assert!(cache.get(key.as_ref(), t0 + 200 * MS).is_none());
        assert_eq!(cache.len(), 0);
        Ok(())
    }

    #[test]
    fn a_zero_interval_checks_before_every_hit() -> Result<(), sluice_core::BoxError> {
        let dir = tempfile::tempdir()?;
        let (key, open, prepared) = looked_up(dir.path(), "a.txt", "version one")?;
        let cache = FileCache::new(1 << 20, REVALIDATE_AFTER, Duration::ZERO).ok_or("off")?;
        let t0 = Instant::now();
        insert(&cache, key.clone(), open, prepared, t0);
        assert!(cache.get(key.as_ref(), t0).is_some());
        std::fs::write(dir.path().join("a.txt"), "version two, longer")?;
        assert!(cache.get(key.as_ref(), t0).is_none());
        Ok(())
    }

    #[test]
    fn keys_borrowed_from_the_request_find_their_entries() -> Result<(), sluice_core::BoxError> {
        let dir = tempfile::tempdir()?;
        let cache = FileCache::new(1 << 20, REVALIDATE_AFTER, 100 * MS).ok_or("off")?;
        let t0 = Instant::now();
        let (key, open, prepared) = looked_up(dir.path(), "a.txt", "a")?;
        insert(&cache, key, open, prepared, t0);
        let gzip = crate::static_files::precompressed::accepted(
            &[(
                http::header::ACCEPT_ENCODING,
                HeaderValue::from_static("gzip"),
            )]
            .into_iter()
            .collect(),
            &[ContentCoding::Gzip],
        );
        let lookup = |path, sidecars| cache.get(KeyRef { path, sidecars }, t0).is_some();
        assert!(lookup("/a.txt", Accepted::NONE));
        assert!(!lookup("/a.txt", gzip));
        assert!(!lookup("/a.txt/", Accepted::NONE));
        assert!(!lookup("/b.txt", Accepted::NONE));
        Ok(())
    }

    #[test]
    fn zero_bytes_turns_the_cache_off_and_the_budget_bounds_it() -> Result<(), sluice_core::BoxError>
    {
        assert!(FileCache::new(0, REVALIDATE_AFTER, Duration::ZERO).is_none());
        let dir = tempfile::tempdir()?;
        let cache = FileCache::new(8192, REVALIDATE_AFTER, Duration::ZERO).ok_or("off")?;
        for i in 0..100 {
            let (key, open, prepared) = looked_up(dir.path(), &format!("f{i}.txt"), "bytes")?;
            insert(&cache, key, open, prepared, Instant::now());
        }
        assert!(cache.entries.weight() <= 8192, "{:?}", cache);
        assert!(cache.len() < 100, "{:?}", cache);
        Ok(())
    }
}
