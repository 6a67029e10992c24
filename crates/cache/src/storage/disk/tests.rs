//! The disk tier's tests of normal operation: round trips, streaming, refusals, the budget,
//! restarts, meta updates, replacement and removal. Damage and failures: `tests_damage.rs`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::format::disk_bytes;
use super::read::CHUNK;
use super::{DiskSettings, DiskStorage};
use crate::storage::test_util::{Evicted, KIB, MIB, body, fetch, id, put, read_all};
use crate::storage::{Storage, StoredBody};

pub(super) async fn open(dir: &Path, budget: usize, max: usize, evicted: &Evicted) -> DiskStorage {
    let settings = DiskSettings {
        path: dir.to_path_buf(),
        budget_bytes: budget as u64,
        max_object_bytes: max as u64,
    };
    DiskStorage::open(settings, Some(evicted.listener()))
        .await
        .unwrap()
}

/// Every file under `dir`, as paths relative to it, sorted.
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn round_trips_empty_one_byte_and_multi_chunk_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    for (n, len) in [0, 1, 5 * MIB].into_iter().enumerate() {
        let data = body(len, n as u8);
        put(&storage, id(n as u32), b"meta", &data, 16 * KIB)
            .await
            .unwrap();
        let (meta, read) = fetch(&storage, id(n as u32)).await.unwrap();
        assert_eq!(meta, b"meta");
        assert!(read == data, "body of {len} bytes differs");
    }
    // Two files per object, fanned out under root/<h>/<hh>/.
    assert_eq!(files(dir.path()).len(), 6);
    let usage = storage.usage();
    assert_eq!(usage.objects, 3);
    assert_eq!(
        usage.bytes,
        disk_bytes(4, 0) + disk_bytes(4, 1) + disk_bytes(4, 5 << 20)
    );
}

#[tokio::test]
async fn a_body_streams_in_chunks_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    let data = body(5 * MIB + 7, 3);
    put(&storage, id(1), b"m", &data, 100 * KIB).await.unwrap();
    let object = storage.get(id(1)).await.unwrap().unwrap();
    assert_eq!(object.body_len, data.len() as u64);
    let StoredBody::Stream(mut stream) = object.body else {
        panic!("the disk tier streams");
    };
    let (mut chunks, mut hasher, mut len) = (0, Sha256::new(), 0);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.len() <= CHUNK);
        hasher.update(&chunk);
        len += chunk.len();
        chunks += 1;
    }
    assert_eq!(len, data.len());
    assert_eq!(chunks, data.len().div_ceil(CHUNK));
    assert_eq!(hasher.finalize(), Sha256::digest(&data));
}

#[tokio::test]
async fn an_unfinished_object_is_invisible_and_dropping_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    let mut writer = storage.writer(id(1), None).await.unwrap().unwrap();
    // Past the writer's buffer, so part of it is in the temp file.
    for _ in 0..5 {
        writer.write(Bytes::from(body(100 * KIB, 1))).await.unwrap();
    }
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert_eq!(files(dir.path()).len(), 1, "the temp file");
    drop(writer);
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert_eq!(files(dir.path()), Vec::<PathBuf>::new());
    assert_eq!(storage.usage().objects, 0);
}

#[tokio::test]
async fn objects_over_the_max_size_are_declined_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path(), 64 * MIB, 100 * KIB, &Evicted::default()).await;
    assert!(
        storage
            .writer(id(1), Some(100 * KIB as u64 + 1))
            .await
            .unwrap()
            .is_none()
    );
    let mut writer = storage.writer(id(1), None).await.unwrap().unwrap();
    writer.write(Bytes::from(body(100 * KIB, 0))).await.unwrap();
    let err = writer.write(Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
    drop(writer);
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert!(files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_body_shorter_than_announced_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open(dir.path(), 64 * MIB, MIB, &Evicted::default()).await;
    let mut writer = storage.writer(id(1), Some(10)).await.unwrap().unwrap();
    writer.write(Bytes::from_static(b"12345")).await.unwrap();
    assert!(writer.finish(Bytes::new()).await.is_err());
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert!(files(dir.path()).is_empty());
}

#[tokio::test]
async fn the_budget_evicts_least_recent_calls_the_listener_and_shows_in_usage() {
    let dir = tempfile::tempdir().unwrap();
    let evicted = Evicted::default();
    let per_object = disk_bytes(1, 10 * KIB as u64) as usize;
    let storage = open(dir.path(), 4 * per_object, MIB, &evicted).await;
    for n in 0..4 {
        put(&storage, id(n), b"m", &body(10 * KIB, n as u8), 4 * KIB)
            .await
            .unwrap();
    }
    // Reading 0 makes 1 the least recent.
    assert!(fetch(&storage, id(0)).await.is_some());
    put(&storage, id(4), b"m", &body(10 * KIB, 4), 4 * KIB)
        .await
        .unwrap();
    assert_eq!(evicted.ids(), vec![id(1)]);
    assert!(storage.get(id(1)).await.unwrap().is_none());
    for kept in [0, 2, 3, 4] {
        assert!(fetch(&storage, id(kept)).await.is_some());
    }
    let usage = storage.usage();
    assert_eq!((usage.objects, usage.evictions), (4, 1));
    assert_eq!(usage.bytes, 4 * per_object as u64);
    assert_eq!(
        files(dir.path()).len(),
        8,
        "the evicted object's files are gone"
    );
}

#[tokio::test]
async fn reopening_the_directory_lists_every_object() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    {
        let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
        for n in 0..50u32 {
            let data = body(n as usize * 997, n as u8);
            let meta = format!("meta {n}");
            put(&storage, id(n), meta.as_bytes(), &data, 1000)
                .await
                .unwrap();
            expected.push((id(n), meta.into_bytes(), data));
        }
    }
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    let mut listed: Vec<_> = storage
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.id, l.meta.to_vec(), l.body_len))
        .collect();
    listed.sort();
    let mut want: Vec<_> = expected
        .iter()
        .map(|(id, m, b)| (*id, m.clone(), b.len() as u64))
        .collect();
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(storage.usage().objects, 50);
    for (id, meta, data) in expected {
        assert_eq!(fetch(&storage, id).await.unwrap(), (meta, data));
    }
}

#[tokio::test]
async fn update_meta_keeps_the_body_rewrites_only_the_meta_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = body(300 * KIB, 9);
    {
        let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
        put(&storage, id(1), b"before", &data, 64 * KIB)
            .await
            .unwrap();
        let body_files_before: Vec<_> = files(dir.path())
            .into_iter()
            .filter(|p| p.extension().unwrap() == "b")
            .collect();
        assert!(
            storage
                .update_meta(id(1), Bytes::from_static(b"after"))
                .await
                .unwrap()
        );
        let body_files_after: Vec<_> = files(dir.path())
            .into_iter()
            .filter(|p| p.extension().unwrap() == "b")
            .collect();
        assert_eq!(
            body_files_before, body_files_after,
            "the body file is the same"
        );
        assert_eq!(
            fetch(&storage, id(1)).await.unwrap(),
            (b"after".to_vec(), data.clone())
        );
        assert!(!storage.update_meta(id(2), Bytes::new()).await.unwrap());
    }
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &Evicted::default()).await;
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"after".to_vec(), data)
    );
    assert_eq!(files(dir.path()).len(), 2);
}

#[tokio::test]
async fn replacing_keeps_one_body_file_and_an_open_stream_reads_the_old_body() {
    let dir = tempfile::tempdir().unwrap();
    let evicted = Evicted::default();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &evicted).await;
    let old = body(3 * CHUNK, 1);
    let new = body(2 * CHUNK + 5, 2);
    put(&storage, id(1), b"old", &old, CHUNK).await.unwrap();
    let reading = storage.get(id(1)).await.unwrap().unwrap();
    put(&storage, id(1), b"new", &new, CHUNK).await.unwrap();
    assert!(
        read_all(reading).await.unwrap() == old,
        "the stream opened before still reads"
    );
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"new".to_vec(), new)
    );
    assert_eq!(files(dir.path()).len(), 2);
    assert!(evicted.ids().is_empty());
    assert_eq!(storage.usage().objects, 1);
}

#[tokio::test]
async fn remove_deletes_the_files_without_calling_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let evicted = Evicted::default();
    let storage = open(dir.path(), 64 * MIB, 8 * MIB, &evicted).await;
    put(&storage, id(1), b"m", b"body", 4).await.unwrap();
    storage.remove(id(1)).await.unwrap();
    storage.remove(id(2)).await.unwrap();
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert!(files(dir.path()).is_empty());
    assert!(evicted.ids().is_empty());
    assert_eq!(storage.usage().bytes, 0);
}

/// Writers, readers and evictions at once on overlapping ids: every read pairs a
/// meta with the body written with it, and afterwards the index, the files and a fresh scan agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_reads_and_evictions_stay_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let per_object = disk_bytes(16, 20 * KIB as u64) as usize;
    let storage = open(dir.path(), 6 * per_object, MIB, &Evicted::default()).await;
    let mut tasks = Vec::new();
    for task in 0..8u32 {
        let storage = storage.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..30u32 {
                let n = (task * 7 + round) % 16;
                let seed = (task * 31 + round) as u8;
                let len = 1000 + (seed as usize * 71) % (19 * KIB);
                let meta = format!("{seed:03} {len:08}");
                put(&storage, id(n), meta.as_bytes(), &body(len, seed), 3000)
                    .await
                    .unwrap();
                if let Some(object) = storage.get(id((n + 5) % 16)).await.unwrap() {
                    check_pairing(object).await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let usage = storage.usage();
    assert!(usage.bytes <= 6 * per_object as u64);
    assert!(usage.evictions > 0);
    assert_eq!(files(dir.path()).len() as u64, 2 * usage.objects);
    drop(storage);
    let reopened = open(dir.path(), 6 * per_object, MIB, &Evicted::default()).await;
    assert_eq!(reopened.usage().objects, usage.objects);
    for listed in reopened.list().await.unwrap() {
        check_pairing(reopened.get(listed.id).await.unwrap().unwrap()).await;
    }
}

/// The meta says which body was written with it ("seed len").
async fn check_pairing(object: crate::storage::Object) {
    let meta = String::from_utf8(object.meta.to_vec()).unwrap();
    let (seed, len) = meta.split_once(' ').unwrap();
    let (seed, len): (u8, usize) = (seed.parse().unwrap(), len.parse().unwrap());
    assert!(
        read_all(object).await.unwrap() == body(len, seed),
        "meta {meta} with another body"
    );
}
