//! The disk tier's tests of damage and failure: leftovers of a crash, foreign, corrupted and
//! truncated files (at start-up and when a read finds them), and a cache directory removed from
//! under an open storage. None may panic or serve a broken object.

use std::fs::{self, OpenOptions};

use bytes::Bytes;

use super::format::{self, body_name, meta_name};
use super::tests::{files, open};
use crate::storage::Storage;
use crate::storage::test_util::{Evicted, KIB, MIB, body, fetch, id, put};

/// Stores objects 0..n with a body of 10 KiB each and returns nothing: the files are the fixture.
async fn stored(dir: &std::path::Path, n: u32) {
    let storage = open(dir, 64 * MIB, 8 * MIB, &Evicted::default()).await;
    for k in 0..n {
        put(&storage, id(k), b"meta", &body(10 * KIB, k as u8), 4 * KIB)
            .await
            .unwrap();
    }
}

fn meta_file(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    format::meta_path(dir, id(n))
}

fn body_file(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    let leaf = format::leaf_dir(dir, id(n));
    let hex = id(n).to_hex();
    fs::read_dir(leaf)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(&hex) && name.ends_with(".b")
        })
        .unwrap()
}

#[tokio::test]
async fn leftover_temp_files_and_orphan_bodies_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    stored(dir.path(), 1).await;
    let leaf = format::leaf_dir(dir.path(), id(0));
    fs::write(format::temp_path(dir.path(), id(0), 77), b"half a body").unwrap();
    fs::write(leaf.join(body_name(id(0), 0x1234)), b"a body no meta names").unwrap();
    // A foreign name is not ours to delete.
    fs::write(leaf.join("README"), b"hello").unwrap();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    let names: Vec<_> = files(dir.path())
        .into_iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().any(|n| n == "README"));
    assert_eq!(fetch(&storage, id(0)).await.unwrap().1, body(10 * KIB, 0));
}

#[tokio::test]
async fn damaged_objects_are_dropped_and_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    stored(dir.path(), 6).await;
    // 0: body truncated (a crash before the data reached the disk).
    OpenOptions::new()
        .write(true)
        .open(body_file(dir.path(), 0))
        .unwrap()
        .set_len(100)
        .unwrap();
    // 1: meta truncated inside its header.
    OpenOptions::new()
        .write(true)
        .open(meta_file(dir.path(), 1))
        .unwrap()
        .set_len(20)
        .unwrap();
    // 2: meta of another program under our name.
    fs::write(
        meta_file(dir.path(), 2),
        b"GIF89a............................................",
    )
    .unwrap();
    // 3: body missing.
    fs::remove_file(body_file(dir.path(), 3)).unwrap();
    // 4: meta longer than its header says.
    let mut meta = fs::read(meta_file(dir.path(), 4)).unwrap();
    meta.extend_from_slice(b"trailing");
    fs::write(meta_file(dir.path(), 4), meta).unwrap();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    let listed: Vec<_> = storage
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(listed, vec![id(5)]);
    for n in 0..5 {
        assert!(storage.get(id(n)).await.unwrap().is_none());
    }
    assert_eq!(files(dir.path()).len(), 2, "only object 5's files remain");
}

#[tokio::test]
async fn damage_found_by_a_read_drops_the_object_and_tells_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let evicted = Evicted::default();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &evicted).await;
    for n in 0..3 {
        put(&storage, id(n), b"meta", &body(10 * KIB, 0), 4 * KIB)
            .await
            .unwrap();
    }
    OpenOptions::new()
        .write(true)
        .open(body_file(dir.path(), 0))
        .unwrap()
        .set_len(50)
        .unwrap();
    let mut head = fs::read(body_file(dir.path(), 1)).unwrap();
    head[0] = b'X';
    fs::write(body_file(dir.path(), 1), head).unwrap();
    fs::remove_file(meta_file(dir.path(), 2)).unwrap();
    for n in 0..3 {
        assert!(storage.get(id(n)).await.unwrap().is_none(), "object {n}");
    }
    assert_eq!(evicted.ids(), vec![id(0), id(1), id(2)]);
    assert!(files(dir.path()).is_empty());
    let usage = storage.usage();
    assert_eq!((usage.objects, usage.bytes, usage.evictions), (0, 0, 0));
}

#[tokio::test]
async fn a_removed_cache_directory_fails_writes_and_misses_reads_without_panicking() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("cache");
    let evicted = Evicted::default();
    let storage = open(&root, 64 * MIB, 8 * MIB, &evicted).await;
    put(&storage, id(1), b"m", &body(10 * KIB, 1), 4 * KIB)
        .await
        .unwrap();
    let mut open_writer = storage.writer(id(2), None).await.unwrap().unwrap();
    open_writer
        .write(Bytes::from(body(10 * KIB, 2)))
        .await
        .unwrap();

    fs::remove_dir_all(&root).unwrap();

    // A writer opened before: its bytes go to an unlinked file; the commit fails.
    let written = open_writer.write(Bytes::from(body(300 * KIB, 2))).await;
    let finished = match written {
        Ok(()) => open_writer.finish(Bytes::from_static(b"m")).await,
        Err(err) => Err(err),
    };
    assert!(finished.is_err());
    // A new writer fails at once, and the root is not silently recreated.
    assert!(storage.writer(id(3), None).await.is_err());
    assert!(!root.exists());
    // A read misses and forgets the object.
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert_eq!(evicted.ids(), vec![id(1)]);
    assert!(storage.update_meta(id(1), Bytes::new()).await.is_ok());
    storage.remove(id(1)).await.unwrap();
    assert!(storage.list().await.unwrap().is_empty());
    assert_eq!(storage.usage().objects, 0);
}

#[tokio::test]
async fn a_lowered_budget_trims_the_oldest_at_open() {
    let dir = tempfile::tempdir().unwrap();
    stored(dir.path(), 4).await;
    let per_object = format::disk_bytes(4, 10 * KIB as u64) as usize;
    let storage = open(dir.path(), 2 * per_object, 8 * MIB, &Evicted::default()).await;
    assert_eq!(storage.usage().objects, 2);
    assert_eq!(files(dir.path()).len(), 4);
    assert_eq!(meta_name(id(0)).len(), 34);
}
