//! The tiered storage's tests: where writes land, promotion, which evictions reach the zone, and
//! that the tiers never disagree about an object.

use std::path::Path;

use bytes::Bytes;

use super::TieredStorage;
use crate::storage::disk::{DiskSettings, DiskStorage};
use crate::storage::memory::{MemorySettings, MemoryStorage};
use crate::storage::test_util::{Evicted, KIB, MIB, body, fetch, id, put};
use crate::storage::{Storage, StoredBody};

struct Setup {
    memory_budget: usize,
    memory_max: usize,
    disk_budget: usize,
}

const ROOMY: Setup = Setup {
    memory_budget: 4 * MIB,
    memory_max: 64 * KIB,
    disk_budget: 64 * MIB,
};

/// The tiers over `dir`; `zone` is the disk's listener (the zone's), and memory's own listener
/// is a recorder that must never hear anything once tiered.
async fn tiered(dir: &Path, setup: Setup, zone: &Evicted) -> TieredStorage {
    let memory = MemoryStorage::new(
        MemorySettings {
            budget_bytes: setup.memory_budget as u64,
            max_object_bytes: setup.memory_max as u64,
        },
        Some(Evicted::default().listener()),
    );
    let disk = DiskStorage::open(
        DiskSettings {
            path: dir.to_path_buf(),
            budget_bytes: setup.disk_budget as u64,
            max_object_bytes: 8 * MIB as u64,
        },
        Some(zone.listener()),
    )
    .await
    .unwrap();
    TieredStorage::new(memory, disk)
}

#[tokio::test]
async fn a_small_object_goes_to_both_tiers_and_is_served_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
    let data = body(10 * KIB, 1);
    put(&storage, id(1), b"meta", &data, 4 * KIB).await.unwrap();
    let object = storage.get(id(1)).await.unwrap().unwrap();
    assert!(matches!(object.body, StoredBody::Memory(ref b) if b[..] == data[..]));
    assert_eq!(
        fetch(storage.disk(), id(1)).await.unwrap(),
        (b"meta".to_vec(), data)
    );
    assert_eq!(storage.memory().usage().objects, 1);
}

#[tokio::test]
async fn a_large_object_goes_to_disk_only_and_streams() {
    let dir = tempfile::tempdir().unwrap();
    let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
    let data = body(MIB, 2);
    put(&storage, id(1), b"meta", &data, 64 * KIB)
        .await
        .unwrap();
    assert!(storage.memory().get_now(id(1)).is_none());
    let object = storage.get(id(1)).await.unwrap().unwrap();
    assert!(matches!(object.body, StoredBody::Stream(_)));
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"meta".to_vec(), data)
    );
    assert!(
        storage.memory().get_now(id(1)).is_none(),
        "too large to promote"
    );
}

#[tokio::test]
async fn a_disk_hit_that_fits_memory_is_promoted_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let data = body(60 * KIB, 3);
    {
        let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
        put(&storage, id(1), b"meta", &data, 7 * KIB).await.unwrap();
    }
    // A restart: memory starts empty, the disk still has it.
    let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
    assert!(storage.memory().get_now(id(1)).is_none());
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"meta".to_vec(), data.clone())
    );
    let promoted = storage.memory().get_now(id(1)).unwrap();
    assert!(matches!(promoted.body, StoredBody::Memory(ref b) if b[..] == data[..]));
}

#[tokio::test]
async fn a_memory_eviction_leaves_the_disk_copy_and_the_zone_unbothered() {
    let dir = tempfile::tempdir().unwrap();
    let zone = Evicted::default();
    let setup = Setup {
        memory_budget: 64 * KIB,
        memory_max: 8 * KIB,
        disk_budget: 64 * MIB,
    };
    let storage = tiered(dir.path(), setup, &zone).await;
    for n in 0..40 {
        put(&storage, id(n), b"m", &body(4 * KIB, n as u8), KIB)
            .await
            .unwrap();
    }
    assert!(storage.memory().usage().evictions > 0);
    assert!(zone.ids().is_empty());
    for n in 0..40 {
        assert_eq!(
            fetch(&storage, id(n)).await.unwrap().1,
            body(4 * KIB, n as u8)
        );
    }
    assert_eq!(storage.usage().objects, 40);
}

#[tokio::test]
async fn a_disk_eviction_tells_the_zone_and_drops_the_memory_copy() {
    let dir = tempfile::tempdir().unwrap();
    let zone = Evicted::default();
    let per_object = DiskStorage::disk_bytes(1, 10 * KIB as u64) as usize;
    let setup = Setup {
        disk_budget: 4 * per_object,
        ..ROOMY
    };
    let storage = tiered(dir.path(), setup, &zone).await;
    for n in 0..5 {
        put(&storage, id(n), b"m", &body(10 * KIB, n as u8), 4 * KIB)
            .await
            .unwrap();
    }
    assert_eq!(zone.ids(), vec![id(0)]);
    assert!(storage.memory().get_now(id(0)).is_none());
    assert!(storage.get(id(0)).await.unwrap().is_none());
    assert!(storage.memory().get_now(id(4)).is_some());
}

#[tokio::test]
async fn update_meta_and_remove_apply_to_both_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let zone = Evicted::default();
    let storage = tiered(dir.path(), ROOMY, &zone).await;
    let data = body(5 * KIB, 4);
    put(&storage, id(1), b"before", &data, KIB).await.unwrap();
    assert!(
        storage
            .update_meta(id(1), Bytes::from_static(b"after"))
            .await
            .unwrap()
    );
    let in_memory = storage.memory().get_now(id(1)).unwrap();
    assert_eq!(&in_memory.meta[..], b"after");
    assert_eq!(
        fetch(storage.disk(), id(1)).await.unwrap(),
        (b"after".to_vec(), data)
    );
    storage.remove(id(1)).await.unwrap();
    assert!(storage.memory().get_now(id(1)).is_none());
    assert!(storage.disk().get(id(1)).await.unwrap().is_none());
    assert!(zone.ids().is_empty());
    assert!(!storage.update_meta(id(1), Bytes::new()).await.unwrap());
}

#[tokio::test]
async fn a_replacement_too_large_for_memory_is_not_shadowed_by_the_old_copy() {
    let dir = tempfile::tempdir().unwrap();
    let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
    put(&storage, id(1), b"small", &body(KIB, 1), KIB)
        .await
        .unwrap();
    let large = body(MIB, 2);
    put(&storage, id(1), b"large", &large, 64 * KIB)
        .await
        .unwrap();
    assert!(storage.memory().get_now(id(1)).is_none());
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"large".to_vec(), large)
    );
}

#[tokio::test]
async fn a_failed_disk_keeps_objects_in_memory_and_their_eviction_reaches_the_zone() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("cache");
    let zone = Evicted::default();
    let setup = Setup {
        memory_budget: 64 * KIB,
        memory_max: 8 * KIB,
        disk_budget: 64 * MIB,
    };
    let storage = tiered(&root, setup, &zone).await;
    std::fs::remove_dir_all(&root).unwrap();
    put(&storage, id(0), b"m", &body(4 * KIB, 0), KIB)
        .await
        .unwrap();
    assert_eq!(fetch(&storage, id(0)).await.unwrap().1, body(4 * KIB, 0));
    // Too large for memory, and the disk is gone: the write fails, nothing panics.
    assert!(
        put(&storage, id(1), b"m", &body(MIB, 1), 64 * KIB)
            .await
            .is_err()
    );
    for n in 2..40 {
        put(&storage, id(n), b"m", &body(4 * KIB, n as u8), KIB)
            .await
            .unwrap();
    }
    let memory_evictions = storage.memory().usage().evictions;
    assert!(memory_evictions > 0);
    assert_eq!(
        zone.ids().len() as u64,
        memory_evictions,
        "nothing on disk: the zone hears"
    );
}

/// Writes, promotions and evictions of both tiers at once on overlapping ids: each read pairs a
/// meta with its own body, and once quiet the memory copy of every object is the disk's current
/// one. A smoke test: the narrow promotion race itself is forced in the test after this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writes_and_promotions_never_leave_a_stale_memory_copy() {
    let dir = tempfile::tempdir().unwrap();
    let per_object = DiskStorage::disk_bytes(16, 8 * KIB as u64) as usize;
    let setup = Setup {
        memory_budget: 48 * KIB,
        memory_max: 16 * KIB,
        disk_budget: 10 * per_object,
    };
    let storage = tiered(dir.path(), setup, &Evicted::default()).await;
    let mut tasks = Vec::new();
    for task in 0..8u32 {
        let storage = storage.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..40u32 {
                let n = (task * 5 + round) % 12;
                let seed = (task * 37 + round) as u8;
                let len = 500 + (seed as usize * 53) % (8 * KIB);
                let meta = format!("{seed:03} {len:08}");
                put(&storage, id(n), meta.as_bytes(), &body(len, seed), 2000)
                    .await
                    .unwrap();
                for other in [(n + 3) % 12, (n + 7) % 12] {
                    if let Some((meta, read)) = fetch(&storage, id(other)).await {
                        assert_paired(&meta, &read);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for n in 0..12 {
        let in_memory = storage.memory().get_now(id(n));
        let on_disk = fetch(storage.disk(), id(n)).await;
        if let Some(object) = in_memory {
            let meta = object.meta.to_vec();
            let read = crate::storage::test_util::read_all(object).await.unwrap();
            assert_eq!(
                Some((meta, read)),
                on_disk,
                "object {n}: memory differs from disk"
            );
        }
    }
}

fn assert_paired(meta: &[u8], read: &[u8]) {
    let meta = std::str::from_utf8(meta).unwrap();
    let (seed, len) = meta.split_once(' ').unwrap();
    let (seed, len): (u8, usize) = (seed.parse().unwrap(), len.parse().unwrap());
    assert!(read == body(len, seed), "meta {meta} with another body");
}

#[tokio::test]
async fn a_copy_read_before_a_write_or_meta_update_is_not_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let storage = tiered(dir.path(), ROOMY, &Evicted::default()).await;
    put(storage.disk(), id(1), b"v1", &body(KIB, 1), KIB)
        .await
        .unwrap();
    put(storage.disk(), id(2), b"v1", &body(KIB, 2), KIB)
        .await
        .unwrap();
    // Read, then the disk moves on before the copy reaches memory.
    let (first, first_version) = storage.disk().get_versioned(id(1)).await.unwrap().unwrap();
    let (second, second_version) = storage.disk().get_versioned(id(2)).await.unwrap().unwrap();
    put(storage.disk(), id(1), b"v2", &body(KIB, 3), KIB)
        .await
        .unwrap();
    assert!(
        storage
            .disk()
            .update_meta(id(2), Bytes::from_static(b"v2"))
            .await
            .unwrap()
    );
    let first_body = super::collect(first).await.unwrap();
    storage.promote(id(1), first_version, Bytes::from_static(b"v1"), first_body);
    let second_body = super::collect(second).await.unwrap();
    storage.promote(
        id(2),
        second_version,
        Bytes::from_static(b"v1"),
        second_body.clone(),
    );
    assert!(storage.memory().get_now(id(1)).is_none());
    assert!(storage.memory().get_now(id(2)).is_none());
    // The current version is promoted by the next read.
    assert_eq!(
        fetch(&storage, id(2)).await.unwrap(),
        (b"v2".to_vec(), second_body.to_vec())
    );
    assert_eq!(&storage.memory().get_now(id(2)).unwrap().meta[..], b"v2");
}
