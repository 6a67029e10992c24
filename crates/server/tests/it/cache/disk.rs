//! The disk tier: what is stored there outlives the process.

use super::{Edge, Origin, Reply, Setup, config, names, sha256, zone_series};

/// Stored, shut down, started again on the same directory: the first request is a HIT and the
/// origin is not asked.
#[tokio::test]
async fn disk_tier_survives_restart() {
    let origin = Origin::start().await;
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let reply = Reply::ok(body.clone())
        .cache_control("max-age=600")
        .header("etag", "\"d1\"");
    origin.set(
        "/kept",
        reply.header("content-type", "application/octet-stream"),
    );
    let disk = tempfile::tempdir().unwrap();
    let zone = format!(
        r#"disk = {{ path = "{}", size = "1GiB" }}"#,
        disk.path().display()
    );
    let toml = config(
        &origin,
        Setup {
            zone: &zone,
            ..Setup::default()
        },
    );

    let edge = Edge::from_toml(&toml).await;
    assert_eq!(edge.get("/kept").await.cache(), "MISS");
    assert_eq!(edge.get("/kept").await.cache(), "HIT");
    edge.wait_metric(&zone_series(names::STORED, &[]), 1.0)
        .await;
    assert!(edge.shutdown().await, "sluice did not stop in time");

    let edge = Edge::from_toml(&toml).await;
    let resp = edge.get("/kept").await;
    assert_eq!((resp.status, resp.cache()), (200, "HIT"));
    assert_eq!(sha256(&resp.body), sha256(&body));
    assert_eq!(resp.header("etag"), Some("\"d1\""));
    assert!(
        resp.header("age").is_some(),
        "a response from storage carries Age"
    );
    assert_eq!(origin.requests("/kept"), 1);
}

/// A disk that fails (its directory removed under the running server) never fails a request:
/// the response is served, not stored, and the metric says why.
#[tokio::test]
async fn a_failing_disk_serves_the_response_and_counts_the_error() {
    let origin = Origin::start().await;
    // Larger than the memory tier takes, so only the disk could store it.
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 239) as u8).collect();
    origin.set("/big", Reply::ok(body.clone()).cache_control("max-age=600"));
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("cache");
    let zone = format!(r#"disk = {{ path = "{}", size = "1GiB" }}"#, dir.display());
    let toml = config(
        &origin,
        Setup {
            zone: &zone,
            ..Setup::default()
        },
    )
    .replace(r#"memory = "64MiB""#, r#"memory = "256KiB""#);
    let edge = Edge::from_toml(&toml).await;
    std::fs::remove_dir_all(&dir).unwrap();
    for _ in 0..2 {
        let resp = edge.get("/big").await;
        assert_eq!((resp.status, resp.cache()), (200, "MISS"));
        assert_eq!(sha256(&resp.body), sha256(&body));
    }
    assert_eq!(origin.requests("/big"), 2);
    edge.wait_metric(&zone_series(names::STORE_ERRORS, &[]), 1.0)
        .await;
}
