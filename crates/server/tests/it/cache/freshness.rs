//! RFC 9111 §4.2: freshness lifetime (s-maxage, max-age, Expires, heuristics, the route's
//! `valid`), the Age sluice sends, and §4.2.4's ban on serving stale what says it must not be.

use std::time::{Duration, Instant, SystemTime};

use super::{Edge, Fail, Origin, Reply, Setup};

/// Whether a second request for `path` was answered from storage: the origin is asked once and the
/// second response is a HIT.
async fn reused(edge: &Edge, origin: &Origin, path: &str) -> bool {
    let first = edge.get(path).await;
    let second = edge.get(path).await;
    assert_eq!(second.body, first.body);
    let from_storage = second.cache() == "HIT";
    assert_eq!(
        origin.requests(path),
        if from_storage { 1 } else { 2 },
        "{second:?}"
    );
    from_storage
}

fn http_date(offset_secs: i64) -> String {
    let now = SystemTime::now();
    let delta = Duration::from_secs(offset_secs.unsigned_abs());
    let at = if offset_secs >= 0 {
        now + delta
    } else {
        now - delta
    };
    httpdate::fmt_http_date(at)
}

/// §4.2.1: a shared cache takes `s-maxage` over `max-age`, both ways.
#[tokio::test]
async fn s4_2_1_s_maxage_wins_over_max_age() {
    let origin = Origin::start().await;
    origin.set(
        "/longer",
        Reply::ok("a").cache_control("max-age=0, s-maxage=60"),
    );
    origin.set(
        "/shorter",
        Reply::ok("b").cache_control("max-age=60, s-maxage=0"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert!(reused(&edge, &origin, "/longer").await);
    assert!(!reused(&edge, &origin, "/shorter").await);
}

/// §4.2.1 and §5.3: without max-age, `Expires - Date` is the lifetime; an invalid Expires
/// ("0") is in the past; with max-age, Expires is ignored.
#[tokio::test]
async fn s4_2_1_expires_used_without_max_age() {
    let origin = Origin::start().await;
    origin.set("/future", Reply::ok("f").header("expires", http_date(60)));
    origin.set("/past", Reply::ok("p").header("expires", http_date(-60)));
    origin.set("/zero", Reply::ok("z").header("expires", "0"));
    let overridden = Reply::ok("o").cache_control("max-age=60");
    origin.set("/overridden", overridden.header("expires", http_date(-60)));
    let edge = Edge::start(&origin, Setup::default()).await;
    assert!(reused(&edge, &origin, "/future").await);
    assert!(!reused(&edge, &origin, "/past").await);
    assert!(!reused(&edge, &origin, "/zero").await);
    assert!(
        reused(&edge, &origin, "/overridden").await,
        "Expires must yield to max-age"
    );
}

/// §4.2.2: heuristic freshness is off unless configured; the route's `valid` gives a lifetime to
/// responses of the listed statuses that have none.
#[tokio::test]
async fn s4_2_2_heuristic_off_by_default_and_valid_applies() {
    let origin = Origin::start().await;
    let ten_days_ago = http_date(-10 * 86_400);
    origin.set(
        "/dated",
        Reply::ok("d").header("last-modified", ten_days_ago),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert!(
        !reused(&edge, &origin, "/dated").await,
        "heuristic freshness is off by default"
    );

    let origin = Origin::start().await;
    origin.set("/plain", Reply::ok("p"));
    origin.set("/gone", Reply::ok("g").status(404));
    let setup = Setup {
        cache: r#"valid = { "200" = "1m" }"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    assert!(reused(&edge, &origin, "/plain").await);
    assert!(
        !reused(&edge, &origin, "/gone").await,
        "valid lists 200 only"
    );
}

/// §4.2.2 with `heuristic = true`: 10% of the time since Last-Modified (10 days: one day).
/// Without Last-Modified there is nothing to base a heuristic on.
#[tokio::test]
async fn s4_2_2_heuristic_uses_last_modified_when_enabled() {
    let origin = Origin::start().await;
    let ten_days_ago = http_date(-10 * 86_400);
    origin.set(
        "/dated",
        Reply::ok("d").header("last-modified", ten_days_ago),
    );
    origin.set("/undated", Reply::ok("u"));
    let edge = Edge::start(
        &origin,
        Setup {
            zone: "heuristic = true",
            ..Setup::default()
        },
    )
    .await;
    assert!(reused(&edge, &origin, "/dated").await);
    assert!(!reused(&edge, &origin, "/undated").await);
}

/// §4.2.3 and §5.1: a response from storage carries an Age that counts the age the origin
/// reported, and grows while it is stored.
#[tokio::test]
async fn s4_2_3_age_sent_and_grows() {
    let origin = Origin::start().await;
    origin.set(
        "/aged",
        Reply::ok("old")
            .cache_control("max-age=60")
            .header("age", "10"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/aged").await.status, 200);
    let hit = edge.get("/aged").await;
    assert_eq!(hit.cache(), "HIT");
    let first_age = hit.age();
    assert!(first_age >= 10, "Age {first_age} lost the origin's 10 s");
    // Time passing is what is tested: poll until the Age grows, bounded.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let hit = edge.get("/aged").await;
        assert_eq!(hit.cache(), "HIT");
        if hit.age() > first_age {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Age stayed at {first_age} for 5 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await; // poll interval
    }
    assert_eq!(origin.requests("/aged"), 1);
}

/// §4.2.4 and §5.2.2.2, .8, .10: must-revalidate, proxy-revalidate and s-maxage forbid serving
/// the stale response when the origin cannot be reached, even with `use_stale`: an error instead
/// (504 is what the RFC suggests; 502 says the same). A plain stale response is served.
#[tokio::test]
async fn s4_2_4_must_revalidate_stale_not_served_when_origin_down() {
    let origin = Origin::start().await;
    let forbidding = [
        ("/must", "max-age=0, must-revalidate"),
        ("/proxy", "max-age=0, proxy-revalidate"),
        ("/shared", "s-maxage=0"),
    ];
    for (path, directives) in forbidding {
        origin.set(path, Reply::ok("stored").cache_control(directives));
    }
    origin.set("/plain", Reply::ok("stored").cache_control("max-age=0"));
    let setup = Setup {
        zone: r#"use_stale = ["error", "timeout"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    for path in ["/must", "/proxy", "/shared", "/plain"] {
        assert_eq!(edge.get(path).await.text(), "stored");
    }
    origin.fail(Some(Fail::Close));
    for (path, directives) in forbidding {
        let resp = edge.get(path).await;
        assert!([502, 504].contains(&resp.status), "{directives}: {resp:?}");
        assert_ne!(resp.text(), "stored", "{directives}");
    }
    let plain = edge.get("/plain").await;
    assert_eq!(
        (plain.status, plain.cache(), plain.text()),
        (200, "STALE", "stored")
    );
}
