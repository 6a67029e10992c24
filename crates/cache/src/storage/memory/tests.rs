//! The memory tier's tests: round trips, refusals, the budget and its evictions, meta updates.

use bytes::Bytes;

use super::{MemorySettings, MemoryStorage, OVERHEAD};
use crate::storage::test_util::{Evicted, KIB, MIB, body, fetch, id, put};
use crate::storage::{Storage, StoredBody};

fn memory(budget: usize, max_object: usize, evicted: &Evicted) -> MemoryStorage {
    let settings = MemorySettings {
        budget_bytes: budget as u64,
        max_object_bytes: max_object as u64,
    };
    MemoryStorage::new(settings, Some(evicted.listener()))
}

#[tokio::test]
async fn round_trips_empty_one_byte_and_multi_chunk_bodies() {
    let storage = memory(64 * MIB, 8 * MIB, &Evicted::default());
    for (n, len) in [0, 1, 5 * MIB].into_iter().enumerate() {
        let data = body(len, n as u8);
        put(&storage, id(n as u32), b"meta", &data, 64 * KIB)
            .await
            .unwrap();
        let (meta, read) = fetch(&storage, id(n as u32)).await.unwrap();
        assert_eq!(meta, b"meta");
        assert!(read == data, "body of {len} bytes differs");
    }
    assert_eq!(storage.usage().objects, 3);
}

#[tokio::test]
async fn a_hit_is_one_contiguous_buffer() {
    let storage = memory(MIB, MIB, &Evicted::default());
    put(&storage, id(1), b"m", &body(10 * KIB, 1), KIB)
        .await
        .unwrap();
    let object = storage.get_now(id(1)).unwrap();
    assert!(matches!(object.body, StoredBody::Memory(ref b) if b.len() == 10 * KIB));
}

#[tokio::test]
async fn an_unfinished_object_is_invisible_and_dropping_frees_it() {
    let storage = memory(MIB, MIB, &Evicted::default());
    let mut writer = storage.writer(id(1), None).await.unwrap().unwrap();
    writer.write(Bytes::from_static(b"half")).await.unwrap();
    assert!(storage.get(id(1)).await.unwrap().is_none());
    drop(writer);
    assert!(storage.get(id(1)).await.unwrap().is_none());
    assert_eq!(storage.usage().objects, 0);
    assert_eq!(storage.usage().bytes, 0);
}

#[tokio::test]
async fn objects_over_the_max_size_are_declined_or_refused() {
    let storage = memory(4 * MIB, 100, &Evicted::default());
    assert!(storage.writer(id(1), Some(101)).await.unwrap().is_none());
    let mut writer = storage.writer(id(1), None).await.unwrap().unwrap();
    writer.write(Bytes::from(vec![0u8; 100])).await.unwrap();
    let err = writer.write(Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
    drop(writer);
    assert!(storage.get(id(1)).await.unwrap().is_none());
}

#[tokio::test]
async fn a_budget_smaller_than_the_max_object_bounds_the_body() {
    let storage = memory(10 * KIB, MIB, &Evicted::default());
    assert!(storage.body_limit() < 10 * KIB as u64);
    assert!(
        storage
            .writer(id(1), Some(10 * KIB as u64))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_body_that_disagrees_with_its_announced_length_is_not_stored() {
    let storage = memory(MIB, MIB, &Evicted::default());
    let mut short = storage.writer(id(1), Some(10)).await.unwrap().unwrap();
    short.write(Bytes::from_static(b"12345")).await.unwrap();
    assert!(short.finish(Bytes::new()).await.is_err());
    let mut long = storage.writer(id(2), Some(3)).await.unwrap().unwrap();
    assert!(long.write(Bytes::from_static(b"12345")).await.is_err());
    assert_eq!(storage.usage().objects, 0);
}

#[tokio::test]
async fn the_budget_evicts_calls_the_listener_and_shows_in_usage() {
    let evicted = Evicted::default();
    let storage = memory(64 * KIB, 4 * KIB, &evicted);
    for n in 0..100 {
        put(&storage, id(n), b"meta", &body(4 * KIB, n as u8), KIB)
            .await
            .unwrap();
    }
    let usage = storage.usage();
    assert!(usage.bytes <= 64 * KIB as u64, "{usage:?}");
    assert!(usage.evictions > 0);
    assert_eq!(usage.objects + usage.evictions, 100, "{usage:?}");
    let seen = evicted.ids();
    assert_eq!(seen.len() as u64, usage.evictions);
    for gone in &seen {
        assert!(storage.get_now(*gone).is_none());
    }
}

#[tokio::test]
async fn weight_counts_meta_body_and_overhead() {
    let storage = memory(MIB, MIB, &Evicted::default());
    put(&storage, id(1), b"12345", &body(1000, 0), 100)
        .await
        .unwrap();
    assert_eq!(storage.usage().bytes, OVERHEAD + 5 + 1000);
}

#[tokio::test]
async fn replacing_an_object_is_not_an_eviction() {
    let evicted = Evicted::default();
    let storage = memory(MIB, MIB, &evicted);
    put(&storage, id(1), b"old", b"old body", 3).await.unwrap();
    put(&storage, id(1), b"new", b"new body!", 3).await.unwrap();
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"new".to_vec(), b"new body!".to_vec())
    );
    assert!(evicted.ids().is_empty());
    assert_eq!(storage.usage().objects, 1);
    assert_eq!(storage.usage().evictions, 0);
}

#[tokio::test]
async fn update_meta_keeps_the_body() {
    let storage = memory(MIB, MIB, &Evicted::default());
    let data = body(3000, 7);
    put(&storage, id(1), b"before", &data, 1000).await.unwrap();
    assert!(
        storage
            .update_meta(id(1), Bytes::from_static(b"after, longer"))
            .await
            .unwrap()
    );
    assert_eq!(
        fetch(&storage, id(1)).await.unwrap(),
        (b"after, longer".to_vec(), data)
    );
    assert_eq!(storage.usage().bytes, OVERHEAD + 13 + 3000);
    assert!(!storage.update_meta(id(2), Bytes::new()).await.unwrap());
    assert!(storage.get_now(id(2)).is_none());
}

#[tokio::test]
async fn remove_drops_without_calling_the_listener() {
    let evicted = Evicted::default();
    let storage = memory(MIB, MIB, &evicted);
    put(&storage, id(1), b"m", b"b", 1).await.unwrap();
    storage.remove(id(1)).await.unwrap();
    storage.remove(id(2)).await.unwrap();
    assert!(storage.get_now(id(1)).is_none());
    assert!(evicted.ids().is_empty());
    assert_eq!(storage.usage().objects, 0);
}

#[tokio::test]
async fn list_returns_what_is_held() {
    let storage = memory(MIB, MIB, &Evicted::default());
    put(&storage, id(1), b"one", b"1", 1).await.unwrap();
    put(&storage, id(2), b"two", b"22", 1).await.unwrap();
    let mut listed: Vec<_> = storage
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.id, l.body_len))
        .collect();
    listed.sort();
    let mut expected = vec![(id(1), 1), (id(2), 2)];
    expected.sort();
    assert_eq!(listed, expected);
}
