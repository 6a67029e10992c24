use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use sluice_core::{Body, ContentCoding};

use super::*;
use crate::lock::Join;
use crate::storage::disk::{DiskSettings, DiskStorage};
use crate::storage::memory::{MemorySettings, MemoryStorage};
use crate::vary::{VaryKey, VaryRule};

fn meta(primary: &str, at: SystemTime, variant: &str) -> Meta {
    Meta {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        request_time: at,
        response_time: at,
        primary_key: primary.to_string(),
        vary: VaryRule::None,
        vary_key: VaryKey::empty(),
        variant: variant.to_string(),
        body_len: 0,
    }
}

async fn memory_zone() -> Arc<Zone> {
    let (index, evict) = Zone::evict_listener();
    let storage = MemoryStorage::new(
        MemorySettings {
            budget_bytes: 8 << 20,
            max_object_bytes: 1 << 20,
        },
        Some(evict),
    );
    let settings = ZoneSettings {
        name: "t".into(),
        max_object_size: 1 << 20,
        keep_tag_headers: false,
    };
    Zone::open(settings, Arc::new(storage), index)
        .await
        .unwrap()
}

async fn disk_zone(dir: &std::path::Path) -> Arc<Zone> {
    let (index, evict) = Zone::evict_listener();
    let settings = DiskSettings {
        path: dir.to_path_buf(),
        budget_bytes: 64 << 20,
        max_object_bytes: 1 << 20,
    };
    let storage = DiskStorage::open(settings, Some(evict)).await.unwrap();
    let settings = ZoneSettings {
        name: "t".into(),
        max_object_size: 1 << 20,
        keep_tag_headers: false,
    };
    Zone::open(settings, Arc::new(storage), index)
        .await
        .unwrap()
}

/// Store `body` as the source for `m`'s keys and wait until it is committed.
async fn store(zone: &Arc<Zone>, m: Meta, body: &'static [u8]) {
    let Join::Leader(leader) = zone.join(ObjectId::of(&[m.primary_key.as_bytes()])) else {
        panic!("a flight in the way")
    };
    let publisher = leader.publish(Arc::new(m.clone()));
    let shared = publisher.shared().clone();
    let fence = zone.fence(&m.primary_key);
    zone.store_source(publisher, m, Body::full(Bytes::from_static(body)), fence);
    shared.settled().await;
}

async fn read(zone: &Zone, id: ObjectId, blob: &Bytes) -> Option<Vec<u8>> {
    let (_, body) = zone.body(id, blob).await?;
    Some(body.collect().await.unwrap().to_bytes().to_vec())
}

#[tokio::test]
async fn a_replaced_body_is_never_read_with_the_old_headers() {
    let zone = memory_zone().await;
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    store(&zone, meta("http://a/x", t0, "identity"), b"old body").await;
    let old = zone
        .find("http://a/x", &HeaderMap::new(), AcceptEncodingKey::Drop)
        .unwrap();
    let (_, old_blob) = old.meta_and_blob();
    assert_eq!(read(&zone, old.id, &old_blob).await.unwrap(), b"old body");

    let t1 = t0 + Duration::from_secs(60);
    store(
        &zone,
        meta("http://a/x", t1, "identity"),
        b"a new, longer body",
    )
    .await;
    // Same id (same keys), another object: the old entry's headers must not go with it.
    assert!(read(&zone, old.id, &old_blob).await.is_none());
    let new = zone
        .find("http://a/x", &HeaderMap::new(), AcceptEncodingKey::Drop)
        .unwrap();
    let (_, new_blob) = new.meta_and_blob();
    assert_eq!(new.id, old.id);
    assert_eq!(
        read(&zone, new.id, &new_blob).await.unwrap(),
        b"a new, longer body"
    );
    assert_eq!(zone.len(), 1);
    // And a freshen of the replaced entry changes nothing stored.
    zone.freshen(&old, meta("http://a/x", t0, "identity")).await;
    assert_eq!(
        read(&zone, new.id, &new_blob).await.unwrap(),
        b"a new, longer body"
    );
}

#[tokio::test]
async fn a_purge_stops_a_fill_that_began_before_it() {
    let zone = memory_zone().await;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let fence = zone.fence("http://a/y");
    let m = meta("http://a/y", at, "identity");
    let Join::Leader(leader) = zone.join(ObjectId::of(&[b"y"])) else {
        panic!()
    };
    let publisher = leader.publish(Arc::new(m.clone()));
    let shared = publisher.shared().clone();
    assert_eq!(zone.purge_prefix("http://a/").await, 0);
    zone.store_source(
        publisher,
        m,
        Body::full(Bytes::from_static(b"stale")),
        fence,
    );
    shared.settled().await;
    assert!(
        zone.find("http://a/y", &HeaderMap::new(), AcceptEncodingKey::Drop)
            .is_none()
    );
    assert_eq!(
        zone.fenced_keys(),
        0,
        "a finished fill left its fence behind"
    );
}

/// RFC 9111 §4.4 invalidates the URI an unsafe method targeted, not the zone: a fill of another
/// key in flight at that moment is stored (it used to be dropped, so the next request for a
/// fresh response went to the origin again, depending on which requests overlapped).
#[tokio::test]
async fn s4_4_invalidating_one_key_does_not_stop_the_fill_of_another() {
    let zone = memory_zone().await;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let kept = zone.fence("http://a/kept");
    let gone = zone.fence("http://a/gone");
    assert_eq!(zone.fenced_keys(), 2);
    zone.invalidate("http://a/gone").await;
    zone.invalidate("http://a/kept-not").await;
    zone.purge_prefix("http://a/g").await;
    assert!(!kept.crossed());
    assert!(gone.crossed());
    drop(gone);
    let m = meta("http://a/kept", at, "identity");
    let Join::Leader(leader) = zone.join(ObjectId::of(&[b"kept"])) else {
        panic!()
    };
    let publisher = leader.publish(Arc::new(m.clone()));
    let shared = publisher.shared().clone();
    zone.store_source(publisher, m, Body::full(Bytes::from_static(b"x")), kept);
    shared.settled().await;
    assert!(
        zone.find("http://a/kept", &HeaderMap::new(), AcceptEncodingKey::Drop)
            .is_some()
    );
    assert_eq!(zone.fenced_keys(), 0);
}

#[tokio::test]
async fn the_disk_index_comes_back_with_variants_and_drops_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000);
    {
        let zone = disk_zone(dir.path()).await;
        store(&zone, meta("http://a/z", t0, "identity"), b"source").await;
        let entry = zone
            .find("http://a/z", &HeaderMap::new(), AcceptEncodingKey::Drop)
            .unwrap();
        let id = Zone::variant_id("http://a/z", "", ContentCoding::Gzip);
        let Join::Leader(leader) = zone.join(id) else {
            panic!()
        };
        let vmeta = meta("http://a/z", t0, "gzip");
        let publisher = leader.publish(Arc::new(vmeta.clone()));
        let shared = publisher.shared().clone();
        let body = Body::full(Bytes::from_static(b"gzipped"));
        zone.store_variant(publisher, entry, ContentCoding::Gzip, vmeta, body);
        shared.settled().await;
        // A variant of an older response of the same keys, left behind (as by an eviction).
        let orphan = Zone::variant_id("http://a/z", "", ContentCoding::Br);
        let mut writer = zone.storage().writer(orphan, None).await.unwrap().unwrap();
        writer.write(Bytes::from_static(b"old br")).await.unwrap();
        let old = meta("http://a/z", t0 - Duration::from_secs(3600), "br");
        writer.finish(old.encode()).await.unwrap();
    }
    let zone = disk_zone(dir.path()).await;
    let entry = zone
        .find("http://a/z", &HeaderMap::new(), AcceptEncodingKey::Drop)
        .unwrap();
    let (_, blob) = entry.meta_and_blob();
    assert_eq!(read(&zone, entry.id, &blob).await.unwrap(), b"source");
    let gzip = entry.variant(ContentCoding::Gzip).unwrap();
    assert_eq!(read(&zone, gzip.id, &gzip.blob).await.unwrap(), b"gzipped");
    assert!(
        entry.variant(ContentCoding::Br).is_none(),
        "an orphan was attached"
    );
    let orphan = Zone::variant_id("http://a/z", "", ContentCoding::Br);
    assert!(
        zone.storage().get(orphan).await.unwrap().is_none(),
        "the orphan was kept"
    );
}
