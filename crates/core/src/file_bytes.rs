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
//! # What can differ from the cached bytes
//! `sendfile` reads the file as it is now. A file replaced by `rename` (how deploys write) keeps
//! the old inode open here, so its old bytes are sent, as cached. A file edited in place, between
//! the edit and the memory cache's next check (`static.memory_cache_recheck`, 100 ms by
//! default, which then drops the entry), may be sent with its new bytes under the old headers,
//! as nginx's `sendfile` with `open_file_cache` does; a file that shrank makes `sendfile` stop
//! short, and the rest goes from memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use bytes::Bytes;

/// Registered regions by start address.
static REGIONS: LazyLock<RwLock<BTreeMap<usize, Region>>> =
    LazyLock::new(|| RwLock::new(BTreeMap::new()));

/// How many regions are registered: no lock at all on writes while there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Smaller bytes are not registered: one `writev` of head and body costs less than a
/// `sendmsg` and a `sendfile` when the copy is this small.
pub const MIN_LEN: usize = 16 * 1024;

/// At most this many regions, each holding its file open: a bound on the descriptors the cache
/// keeps (its byte budget alone would allow one per 16 KiB). Past it, bytes are written from
/// memory.
pub const MAX_REGIONS: usize = 1024;

struct Region {
    /// Keeps the allocation alive (see the module docs); its length is the region's.
    bytes: Bytes,
    file: Arc<File>,
    /// Where `bytes` start in the file.
    offset: u64,
}

/// Where a buffer's bytes are in a file.
#[derive(Debug, Clone)]
pub struct InFile {
    pub file: Arc<File>,
    /// The file offset of the buffer's first byte.
    pub offset: u64,
}

/// Keeps `bytes` registered as `file`'s bytes from `offset` on, until dropped.
#[derive(Debug)]
pub struct Registration {
    start: usize,
}

/// Register `bytes`, which hold `file`'s contents from `offset` on. `None` (and `file` closed)
/// for bytes shorter than [`MIN_LEN`] or when [`MAX_REGIONS`] are registered.
pub fn register(bytes: &Bytes, file: File, offset: u64) -> Option<Registration> {
    if bytes.len() < MIN_LEN || COUNT.load(Ordering::Relaxed) >= MAX_REGIONS {
        return None;
    }
    let start = bytes.as_ptr() as usize;
    let region = Region {
        bytes: bytes.clone(),
        file: Arc::new(file),
        offset,
    };
    let mut regions = REGIONS.write().unwrap_or_else(|e| e.into_inner());
    if regions.insert(start, region).is_none() {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
    Some(Registration { start })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut regions = REGIONS.write().unwrap_or_else(|e| e.into_inner());
        if regions.remove(&self.start).is_some() {
            COUNT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The file and offset of `buf`'s bytes, when `buf` lies wholly inside a registered region.
pub fn find(buf: &[u8]) -> Option<InFile> {
    if buf.is_empty() || COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let start = buf.as_ptr() as usize;
    let end = start.checked_add(buf.len())?;
    let regions = REGIONS.read().unwrap_or_else(|e| e.into_inner());
    let (&region_start, region) = regions.range(..=start).next_back()?;
    let region_end = region_start.checked_add(region.bytes.len())?;
    if end > region_end {
        return None;
    }
    Some(InFile {
        file: region.file.clone(),
        offset: region.offset + (start - region_start) as u64,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use super::*;

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
        let registration = register(&bytes, file_with(&bytes), 100).unwrap();
        let whole = find(&bytes).unwrap();
        assert_eq!(whole.offset, 100);
        let tail = bytes.slice(4..);
        assert_eq!(find(&tail).unwrap().offset, 104);
        let middle = bytes.slice(2..5);
        assert_eq!(find(&middle).unwrap().offset, 102);
        drop(registration);
        assert!(find(&bytes).is_none());
        assert!(find(&tail).is_none());
    }

    #[test]
    fn buffers_elsewhere_or_reaching_past_the_region_are_not_found() {
        let backing = Bytes::from(vec![1; MIN_LEN + 8]);
        let registered = backing.slice(2..MIN_LEN + 6);
        let _registration = register(&registered, file_with(&registered), 0).unwrap();
        // Starts before the region, ends after it, or is another allocation with equal bytes.
        assert!(find(&backing).is_none());
        assert!(find(&backing.slice(0..4)).is_none());
        assert!(find(&backing.slice(MIN_LEN..MIN_LEN + 8)).is_none());
        let equal_elsewhere: Vec<u8> = registered.to_vec();
        assert!(find(&equal_elsewhere).is_none());
        assert_eq!(find(&backing.slice(3..5)).unwrap().offset, 1);
        assert!(find(&[]).is_none());
        // Too small to be worth a sendfile.
        let small = Bytes::from(vec![2; MIN_LEN - 1]);
        assert!(register(&small, file_with(&small), 0).is_none());
    }
}
