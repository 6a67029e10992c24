//! Which bytes in memory are a file's: the memory cache of static files registers each file it
//! holds, so the connection that writes those bytes can send them from the file with
//! `sendfile(2)` instead of copying them from memory into the socket.
//!
//! # Why
//! Copying a cached 74 KB page into the socket (`_copy_from_iter` under `writev`) was 36% of
//! sluice's CPU on the lab's static row; nginx `sendfile`s, and with its `sendfile off` its
//! kernel time per request went from 22 to 39 µs here. hyper writes a response's head and body
//! itself, from `Bytes`, through the connection's `AsyncWrite`: it has no way to pass a file. So
//! the connection recognises the bytes instead: a write whose buffer lies inside a registered
//! region is a write of that file's bytes at the same offset.
//!
//! # Why it is sound
//! A region is registered with a clone of its `Bytes`, which keeps the allocation alive while
//! it is registered: no other allocation can then occupy those addresses, so a buffer inside
//! the region can only be a view of those very bytes. [`Registration`] removes the region when
//! dropped (the cache entry went away); writes then copy from memory as before.
//!
//! # What is sent is what was cached
//! `sendfile` reads the file as it is now, so each write first compares the file's identity
//! (inode, size, modification and change times, one `fstat`) with what it was when the bytes
//! were read; a file changed since (edited in place, cut short, grown) has its bytes written
//! from memory, the cached version the headers describe, until the memory cache's next check
//! (`static.memory_cache_recheck`) drops the entry. Only a change in the microseconds between
//! that `fstat` and the `sendfile` can reach the wire; one that shortens the file makes
//! `sendfile` stop short, and the connection is then closed, as nginx does ("file was
//! truncated"), rather than completing the body with other bytes. A file replaced by `rename`
//! is not changed: the old inode stays open here and is sent as cached.

use std::collections::BTreeMap;
use std::fs::{File, Metadata};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use bytes::Bytes;

/// Registered regions by start address. Readers (every write of a cleartext connection) load a
/// snapshot without a lock; registering and dropping, rare, copy the map under `WRITER`.
static REGIONS: LazyLock<ArcSwap<BTreeMap<usize, Region>>> =
    LazyLock::new(|| ArcSwap::from_pointee(BTreeMap::new()));
static WRITER: Mutex<()> = Mutex::new(());

/// How many regions are registered: no lookup at all while there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Smaller bytes are not registered, and smaller buffers not looked up: one `writev` of head
/// and body costs less than a `sendmsg` and a `sendfile` when the copy is this small.
pub const MIN_LEN: usize = 16 * 1024;

/// At most this many regions, each holding its file open (and fewer when the process may open
/// fewer than four times as many files, see [`max_regions`]): the cache's byte budget alone
/// would allow one descriptor per 16 KiB. Past it, bytes are written from memory.
pub const MAX_REGIONS: usize = 1024;

#[derive(Clone)]
struct Region {
    /// Keeps the allocation alive (see the module docs); its length is the region's.
    bytes: Bytes,
    file: Arc<File>,
    /// Where `bytes` start in the file.
    offset: u64,
    /// The file as it was when `bytes` were read.
    stamp: Stamp,
}

/// What identifies one version of a file without reading it: device and inode (a file replaced
/// by `rename`, as deploys do, has a new one), size, and modification and change times to the
/// nanosecond (an edit in place changes both; `ctime` cannot be set back by `touch -d`). The
/// static files' memory cache checks its entries with it, and a registered file's bytes are
/// sent from it only while it is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
}

impl Stamp {
    /// This version as seven numbers (for keys); `None` where the platform gives no inode and
    /// change time (not Unix): size and mtime alone would let two versions look alike.
    pub fn words(&self) -> Option<[u64; 7]> {
        if !cfg!(unix) {
            return None;
        }
        let (secs, nanos) = self
            .modified
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or((u64::MAX, u64::MAX), |d| {
                (d.as_secs(), u64::from(d.subsec_nanos()))
            });
        let (changed_secs, changed_nanos) = self.changed;
        Some([
            self.dev,
            self.ino,
            self.len,
            secs,
            nanos,
            u64::from_ne_bytes(changed_secs.to_ne_bytes()),
            u64::from_ne_bytes(changed_nanos.to_ne_bytes()),
        ])
    }

    pub fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        let (dev, ino, changed) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino(), (meta.ctime(), meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (dev, ino, changed) = (0, 0, (0, 0));
        Stamp {
            dev,
            ino,
            len: meta.len(),
            modified: meta.modified().ok(),
            changed,
        }
    }
}

/// Where a buffer's bytes are in a file.
#[derive(Debug, Clone)]
pub struct InFile {
    pub file: Arc<File>,
    /// The file offset of the buffer's first byte.
    pub offset: u64,
    stamp: Stamp,
}

impl InFile {
    /// Whether the file is still the version its registered bytes were read from (one `fstat`).
    pub fn unchanged(&self) -> bool {
        self.file
            .metadata()
            .is_ok_and(|meta| Stamp::of(&meta) == self.stamp)
    }
}

/// Keeps `bytes` registered as `file`'s bytes from `offset` on, until dropped.
#[derive(Debug)]
pub struct Registration {
    start: usize,
    file: Arc<File>,
}

/// The limit on regions: [`MAX_REGIONS`], or a quarter of the descriptors the process may
/// open if that is less, so the cache never takes the descriptors connections need.
pub fn max_regions() -> usize {
    static MAX: LazyLock<usize> = LazyLock::new(|| {
        let soft = crate::open_files::limits().map_or(1024, |(soft, _)| soft);
        MAX_REGIONS.min(usize::try_from(soft / 4).unwrap_or(usize::MAX))
    });
    *MAX
}

/// Register `bytes`, which hold `file`'s contents from `offset` on as they were when `file`
/// looked like `stamp`. `None` (and `file` closed) for bytes shorter than [`MIN_LEN`] or when
/// [`max_regions`] are registered.
pub fn register(bytes: &Bytes, file: File, offset: u64, stamp: Stamp) -> Option<Registration> {
    if bytes.len() < MIN_LEN {
        return None;
    }
    let start = bytes.as_ptr() as usize;
    let file = Arc::new(file);
    let region = Region {
        bytes: bytes.clone(),
        file: file.clone(),
        offset,
        stamp,
    };
    let _writer = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    if COUNT.load(Ordering::Relaxed) >= max_regions() {
        return None;
    }
    let mut regions = BTreeMap::clone(&REGIONS.load());
    if regions.insert(start, region).is_none() {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
    REGIONS.store(Arc::new(regions));
    Some(Registration { start, file })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let old = {
            let _writer = WRITER.lock().unwrap_or_else(|e| e.into_inner());
            let current = REGIONS.load_full();
            // Only this registration's own region (a region at the same address is ours).
            if !current
                .get(&self.start)
                .is_some_and(|r| Arc::ptr_eq(&r.file, &self.file))
            {
                return;
            }
            let mut regions = BTreeMap::clone(&current);
            regions.remove(&self.start);
            COUNT.fetch_sub(1, Ordering::Relaxed);
            REGIONS.store(Arc::new(regions));
            current
        };
        // The old map, and with it the region's bytes and file, is dropped here, outside the
        // lock (or later, by the last reader still holding it).
        drop(old);
    }
}

/// The file and offset of `buf`'s bytes, when `buf` (at least [`MIN_LEN`] long) lies wholly
/// inside a registered region.
pub fn find(buf: &[u8]) -> Option<InFile> {
    if buf.len() < MIN_LEN || COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let start = buf.as_ptr() as usize;
    let end = start.checked_add(buf.len())?;
    let regions = REGIONS.load();
    let (&region_start, region) = regions.range(..=start).next_back()?;
    let region_end = region_start.checked_add(region.bytes.len())?;
    if end > region_end {
        return None;
    }
    Some(InFile {
        file: region.file.clone(),
        offset: region.offset + (start - region_start) as u64,
        stamp: region.stamp,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn register_file(bytes: &Bytes, file: File, offset: u64) -> Option<Registration> {
        let stamp = Stamp::of(&file.metadata().unwrap());
        register(bytes, file, offset, stamp)
    }

    fn file_with(contents: &[u8]) -> File {
        let mut file = tempfile_in_target();
        file.write_all(contents).unwrap();
        file
    }

    /// An anonymous temporary file (the core crate has no tempfile dependency).
    fn tempfile_in_target() -> File {
        let dir = std::env::temp_dir();
        let path = dir.join(format!(
            "sluice-file-bytes-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    #[test]
    fn a_buffer_inside_a_registered_region_is_found_at_its_offset_until_dropped() {
        let bytes = Bytes::from(vec![7; MIN_LEN]);
        let registration = register_file(&bytes, file_with(&bytes), 100).unwrap();
        let whole = find(&bytes).unwrap();
        assert_eq!(whole.offset, 100);
        let long = Bytes::from(vec![7; 2 * MIN_LEN]);
        let _long = register_file(&long, file_with(&long), 0).unwrap();
        let tail = long.slice(4..);
        assert_eq!(find(&tail).unwrap().offset, 4);
        let middle = long.slice(2..MIN_LEN + 2);
        assert_eq!(find(&middle).unwrap().offset, 2);
        assert!(whole.unchanged());
        drop(registration);
        assert!(find(&bytes).is_none());
        assert!(find(&tail).is_some(), "the other region stays");
    }

    #[test]
    fn a_file_changed_since_its_bytes_were_read_is_not_unchanged() {
        let bytes = Bytes::from(vec![3; MIN_LEN]);
        let file = file_with(&bytes);
        let mut writer = file.try_clone().unwrap();
        let _registration = register_file(&bytes, file, 0).unwrap();
        let at = find(&bytes).unwrap();
        assert!(at.unchanged());
        writer.write_all(b"more").unwrap();
        assert!(!at.unchanged(), "grown");
    }

    #[test]
    fn buffers_elsewhere_or_reaching_past_the_region_are_not_found() {
        let backing = Bytes::from(vec![1; MIN_LEN + 8]);
        let registered = backing.slice(2..MIN_LEN + 6);
        let _registration = register_file(&registered, file_with(&registered), 0).unwrap();
        // Starts before the region, ends after it, or is another allocation with equal bytes.
        assert!(find(&backing).is_none());
        assert!(find(&backing.slice(0..4)).is_none());
        assert!(find(&backing.slice(4..MIN_LEN + 8)).is_none());
        let equal_elsewhere: Vec<u8> = registered.to_vec();
        assert!(find(&equal_elsewhere).is_none());
        assert_eq!(find(&backing.slice(3..MIN_LEN + 3)).unwrap().offset, 1);
        // Too short a buffer to be worth a sendfile, even inside a region.
        assert!(find(&backing.slice(3..5)).is_none());
        assert!(find(&[]).is_none());
        // Too small to be worth a sendfile.
        let small = Bytes::from(vec![2; MIN_LEN - 1]);
        assert!(register_file(&small, file_with(&small), 0).is_none());
    }
}
