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
