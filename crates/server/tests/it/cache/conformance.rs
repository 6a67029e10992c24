//! sluice's own RFC 9111 conformance suite, under concurrency (issue 21).
//!
//! One sluice with a memory zone in front of the [scripted origin](super::origin), and
//! hundreds of independent scenarios at once: every scenario below runs [`COPIES`] times,
//! each copy on its own path, all of them concurrently. A scenario is a short sequence of
//! requests (some with a pause of its own, for freshness to run out) that asserts both the
//! responses and how many requests the origin received for its path: a count above the
//! expected one is a duplicate upstream request, a count below it a response served from the
//! cache that should not have been.
//!
//! Each scenario is named after the section it checks (`rfc9111_4_2_1_...` is RFC 9111
//! §4.2.1; `rfc5861_...`, `rfc9110_...` likewise). The properties of issue 21 have scenarios of
//! their own: read after write (`rfc9111_4_read_after_write_...`), a waiter joins a response in
//! flight only if it may use it (`rfc9111_4_waiter_...`), one client request makes at most one
//! upstream request (every count), and a background refresh never races a foreground fetch
//! (`rfc5861_3_...`).
//!
//! Nothing here waits for time to pass except a scenario's own pauses (freshness is in whole
//! seconds): a response with `max-age=1` is stale after a 2.1 s pause whatever the rounding of
//! `Date`, and one with `max-age=60` is fresh for the few seconds a scenario lasts. Requests
//! that must overlap are held at the origin's gate for their path, never timed.
//!
//! The long version, 200 clients for 60 s, is `conformance_soak` (ignored; run it by hand:
//! `cargo test -p sluice --test it cache::conformance::conformance_soak -- --ignored
//! --nocapture`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::{Edge, Got, Origin, Reply};

/// How many times each scenario runs at once, each copy on its own path.
const COPIES: usize = 8;

/// A scenario's pause for a `max-age=1` response to be stale: more than a second past its
/// `Date` (whole seconds, so up to a second older than it looks) plus the lifetime.
const STALE_AFTER_1S: Duration = Duration::from_millis(2100);

type Outcome = Result<(), String>;
type Run = Pin<Box<dyn Future<Output = Outcome> + Send>>;
type Scenario = fn(Case) -> Run;

/// What a scenario works with: sluice, the origin, and a path no other scenario uses.
#[derive(Clone)]
pub struct Case {
    edge: Arc<Edge>,
    origin: Arc<Origin>,
    path: String,
}

impl Case {
    async fn get(&self) -> Got {
        self.edge.get(&self.path).await
    }

    async fn get_with(&self, headers: &[(&str, &str)]) -> Got {
        self.edge.get_with(&self.path, headers).await
    }

    async fn send(&self, method: &str, headers: &[(&str, &str)]) -> Got {
        self.edge.send(method, &self.path, headers).await
    }

    fn set(&self, reply: Reply) {
        self.origin.set(&self.path, reply);
    }

    /// Requests the origin received for this scenario's path.
    fn count(&self) -> usize {
        self.origin.requests(&self.path)
    }

    fn expect_count(&self, expected: usize, when: &str) -> Outcome {
        let count = self.count();
        if count == expected {
            Ok(())
        } else {
            Err(format!(
                "{when}: the origin received {count} requests, expected {expected}"
            ))
        }
    }
}

/// `Err` with the message unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// Status, `X-Cache-Status` and body of a response, or why not.
fn expect(got: &Got, status: u16, cache: &str, body: &str, when: &str) -> Outcome {
    ensure!(
        (got.status, got.cache(), got.text()) == (status, cache, body),
        "{when}: got {} {} {:?}, expected {status} {cache} {body:?}",
        got.status,
        got.cache(),
        got.text()
    );
    Ok(())
}

fn fresh(body: &str) -> Reply {
    Reply::ok(body.to_string()).cache_control("max-age=60")
}

/// A response stale after [`STALE_AFTER_1S`], with an entity tag the origin validates.
fn short_lived(body: &str, etag: &str) -> Reply {
    Reply::ok(body.to_string())
        .cache_control("max-age=1")
        .header("etag", etag)
        .conditional()
}

// ---------------------------------------------------------------------------------------------
// Freshness (RFC 9111 §4.2)

async fn rfc9111_4_2_1_max_age_fresh(c: Case) -> Outcome {
    c.set(fresh("a"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

async fn rfc9111_4_2_1_s_maxage_wins_over_max_age(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=0, s-maxage=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

async fn rfc9111_4_2_1_expires_fresh(c: Case) -> Outcome {
    let expires = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    c.set(Reply::ok("a").header("expires", expires));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

/// RFC 9110 §5.6.7: recipients accept the obsolete `asctime` format (and RFC 9111 §4.2 asks
/// caches to match dates case-insensitively).
async fn rfc9110_5_6_7_expires_in_asctime_format(c: Case) -> Outcome {
    let expires = asctime(SystemTime::now() + Duration::from_secs(3600));
    c.set(Reply::ok("a").header("expires", expires));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

async fn rfc9111_4_2_expires_in_upper_case(c: Case) -> Outcome {
    let expires = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    c.set(Reply::ok("a").header("expires", expires.to_uppercase()));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

/// §4.2.1: of two `max-age`s, the first is used (the RFC's first option; the other is to treat
/// the response as stale).
async fn rfc9111_4_2_1_first_of_two_max_ages(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=60, max-age=0"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "second")?;
    c.expect_count(1, "end")
}

/// §4.2.1: invalid freshness information (`max-age=60.0` is not delta-seconds) is stale.
async fn rfc9111_4_2_1_invalid_max_age_is_stale(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=60.0"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let second = c.get().await;
    ensure!(second.cache() != "HIT", "second: {second:?}");
    c.expect_count(2, "end")
}

async fn rfc9111_4_2_stale_after_max_age(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(Reply::ok("b").cache_control("max-age=60"));
    expect(&c.get().await, 200, "EXPIRED", "b", "after expiry")?;
    expect(&c.get().await, 200, "HIT", "b", "third")?;
    c.expect_count(2, "end")
}

/// §4.2.3 and §5.1: a response the origin took over a second to produce says so in `Age`, and a
/// hit of it is at least that old.
async fn rfc9111_4_2_3_age_on_a_delayed_response(c: Case) -> Outcome {
    c.set(fresh("a").delay(Duration::from_millis(1500)));
    let first = c.get().await;
    expect(&first, 200, "MISS", "a", "first")?;
    ensure!(first.header("age").is_some(), "first: no Age in {first:?}");
    let second = c.get().await;
    expect(&second, 200, "HIT", "a", "second")?;
    ensure!(second.age() >= 1, "second: Age {}", second.age());
    c.expect_count(1, "end")
}

// ---------------------------------------------------------------------------------------------
// Storing (RFC 9111 §3)

async fn rfc9111_3_no_store_is_not_stored(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("no-store, max-age=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "MISS", "a", "second")?;
    c.expect_count(2, "end")
}

async fn rfc9111_3_private_is_not_stored(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("private, max-age=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "MISS", "a", "second")?;
    c.expect_count(2, "end")
}

/// §3: a cache may store `Set-Cookie`; sluice does not by default (`store_set_cookie`), as one
/// client's cookie would be replayed to every other.
async fn rfc9111_3_set_cookie_not_stored_by_default(c: Case) -> Outcome {
    c.set(fresh("a").header("set-cookie", "id=1"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "MISS", "a", "second")?;
    c.expect_count(2, "end")
}

async fn rfc9111_5_2_1_5_request_no_store(c: Case) -> Outcome {
    c.set(fresh("a"));
    expect(
        &c.get_with(&[("cache-control", "no-store")]).await,
        200,
        "MISS",
        "a",
        "no-store",
    )?;
    expect(&c.get().await, 200, "MISS", "a", "after")?;
    expect(&c.get().await, 200, "HIT", "a", "third")?;
    c.expect_count(2, "end")
}

// ---------------------------------------------------------------------------------------------
// Validation (RFC 9111 §4.3)

async fn rfc9111_4_3_1_revalidates_with_the_stored_etag(c: Case) -> Outcome {
    c.set(short_lived("a", "\"v1\""));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    expect(&c.get().await, 200, "REVALIDATED", "a", "stale")?;
    let seen = c.origin.last(&c.path);
    ensure!(
        seen.header("if-none-match") == Some("\"v1\""),
        "the revalidation carried {:?}",
        seen.header("if-none-match")
    );
    c.expect_count(2, "end")
}

async fn rfc9111_4_3_1_revalidates_with_last_modified(c: Case) -> Outcome {
    let lm = "Wed, 01 Jan 2020 00:00:00 GMT";
    c.set(
        Reply::ok("a")
            .cache_control("max-age=1")
            .header("last-modified", lm)
            .conditional(),
    );
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    expect(&c.get().await, 200, "REVALIDATED", "a", "stale")?;
    let seen = c.origin.last(&c.path);
    ensure!(
        seen.header("if-modified-since") == Some(lm),
        "the revalidation carried {:?}",
        seen.header("if-modified-since")
    );
    c.expect_count(2, "end")
}

/// §4.3.4: a 304 that repeats no validator answers the one stored response the conditional
/// request named: served from storage, with no second request.
async fn rfc9111_4_3_4_304_without_validators_is_used(c: Case) -> Outcome {
    c.set(short_lived("a", "\"v1\""));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    // The origin's 304 will carry only this (no ETag).
    c.set(
        Reply::ok("")
            .cache_control("max-age=60")
            .header("x-version", "2")
            .status(304),
    );
    let second = c.get().await;
    expect(&second, 200, "REVALIDATED", "a", "stale")?;
    ensure!(second.header("x-version") == Some("2"), "{second:?}");
    expect(&c.get().await, 200, "HIT", "a", "third")?;
    c.expect_count(2, "end")
}

async fn rfc9111_4_3_3_new_response_replaces(c: Case) -> Outcome {
    c.set(short_lived("a", "\"v1\""));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(fresh("b").header("etag", "\"v2\""));
    expect(&c.get().await, 200, "EXPIRED", "b", "stale")?;
    expect(&c.get().await, 200, "HIT", "b", "third")?;
    c.expect_count(2, "end")
}

async fn rfc9111_5_2_2_4_no_cache_response_revalidates_every_time(c: Case) -> Outcome {
    c.set(
        Reply::ok("a")
            .cache_control("no-cache, max-age=60")
            .header("etag", "\"n\"")
            .conditional(),
    );
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "REVALIDATED", "a", "second")?;
    expect(&c.get().await, 200, "REVALIDATED", "a", "third")?;
    c.expect_count(3, "end")
}

async fn rfc9111_5_2_1_4_request_no_cache_revalidates(c: Case) -> Outcome {
    c.set(fresh("a").header("etag", "\"r\"").conditional());
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let second = c.get_with(&[("cache-control", "no-cache")]).await;
    expect(&second, 200, "REVALIDATED", "a", "no-cache")?;
    expect(&c.get().await, 200, "HIT", "a", "third")?;
    c.expect_count(2, "end")
}

async fn rfc9111_5_2_1_1_request_max_age_0_revalidates(c: Case) -> Outcome {
    c.set(fresh("a").header("etag", "\"r\"").conditional());
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let second = c.get_with(&[("cache-control", "max-age=0")]).await;
    expect(&second, 200, "REVALIDATED", "a", "max-age=0")?;
    c.expect_count(2, "end")
}

async fn rfc9111_5_2_1_7_only_if_cached(c: Case) -> Outcome {
    let first = c.get_with(&[("cache-control", "only-if-cached")]).await;
    ensure!(first.status == 504, "nothing stored: {first:?}");
    c.set(fresh("a"));
    expect(&c.get().await, 200, "MISS", "a", "fill")?;
    let third = c.get_with(&[("cache-control", "only-if-cached")]).await;
    expect(&third, 200, "HIT", "a", "stored")?;
    c.expect_count(1, "end")
}

/// RFC 9110 §13.1.2 via RFC 9111 §4.3.2: a client's `If-None-Match` answered from storage.
async fn rfc9111_4_3_2_client_if_none_match_from_storage(c: Case) -> Outcome {
    c.set(fresh("a").header("etag", "\"c\""));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let second = c.get_with(&[("if-none-match", "\"c\"")]).await;
    expect(&second, 304, "HIT", "", "conditional")?;
    c.expect_count(1, "end")
}

// ---------------------------------------------------------------------------------------------
// Vary (RFC 9111 §4.1)

async fn rfc9111_4_1_vary_separates_variants(c: Case) -> Outcome {
    c.set(fresh("fr").header("vary", "x-lang"));
    let fr = [("x-lang", "fr")];
    expect(&c.get_with(&fr).await, 200, "MISS", "fr", "fr")?;
    c.set(fresh("en").header("vary", "x-lang"));
    let en = [("x-lang", "en")];
    expect(&c.get_with(&en).await, 200, "MISS", "en", "en")?;
    expect(&c.get_with(&fr).await, 200, "HIT", "fr", "fr again")?;
    expect(&c.get_with(&en).await, 200, "HIT", "en", "en again")?;
    c.expect_count(2, "end")
}

async fn rfc9111_4_1_vary_star_never_matches(c: Case) -> Outcome {
    c.set(fresh("a").header("vary", "*"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "MISS", "a", "second")?;
    c.expect_count(2, "end")
}

// ---------------------------------------------------------------------------------------------
// Methods, ranges, invalidation

/// RFC 9110 §9.3.2: HEAD answered from the stored GET (a HEAD miss is fetched as a GET).
async fn rfc9110_9_3_2_head_from_the_stored_get(c: Case) -> Outcome {
    c.set(fresh("body"));
    let head = c.send("HEAD", &[]).await;
    expect(&head, 200, "MISS", "", "HEAD miss")?;
    expect(&c.get().await, 200, "HIT", "body", "GET")?;
    let head = c.send("HEAD", &[]).await;
    expect(&head, 200, "HIT", "", "HEAD hit")?;
    ensure!(head.header("content-length") == Some("4"), "{head:?}");
    c.expect_count(1, "end")
}

/// RFC 9110 §14.2: one range of a stored 200.
async fn rfc9110_14_2_range_from_the_stored_response(c: Case) -> Outcome {
    c.set(fresh("0123456789"));
    expect(&c.get().await, 200, "MISS", "0123456789", "fill")?;
    let range = c.get_with(&[("range", "bytes=2-4")]).await;
    expect(&range, 206, "HIT", "234", "range")?;
    c.expect_count(1, "end")
}

async fn rfc9111_4_4_unsafe_method_invalidates(c: Case) -> Outcome {
    c.set(fresh("a"));
    c.origin
        .set_for("POST", &c.path, Reply::ok("posted").status(201));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let post = c.send("POST", &[]).await;
    ensure!(post.status == 201, "POST: {post:?}");
    expect(&c.get().await, 200, "MISS", "a", "after POST")?;
    c.expect_count(3, "end")
}

/// §4.4: only a non-error status invalidates.
async fn rfc9111_4_4_error_status_does_not_invalidate(c: Case) -> Outcome {
    c.set(fresh("a"));
    c.origin
        .set_for("DELETE", &c.path, Reply::ok("no").status(500));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    let delete = c.send("DELETE", &[]).await;
    ensure!(delete.status == 500, "DELETE: {delete:?}");
    expect(&c.get().await, 200, "HIT", "a", "after DELETE")?;
    c.expect_count(2, "end")
}

// ---------------------------------------------------------------------------------------------
// Stale responses (RFC 9111 §4.2.4, RFC 5861)

async fn rfc5861_4_stale_if_error_on_503(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1, stale-if-error=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(Reply::ok("down").status(503));
    expect(&c.get().await, 200, "STALE", "a", "origin 503")?;
    c.expect_count(2, "end")
}

async fn rfc5861_4_stale_if_error_on_a_closed_connection(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1, stale-if-error=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(Reply::ok("down").close());
    expect(&c.get().await, 200, "STALE", "a", "origin closed")?;
    // A connection the origin closed under a request on a kept-alive connection is retried
    // once on a new one (RFC 9112 §9.3.1): the one counted retry there is.
    let count = c.count();
    ensure!((2..=3).contains(&count), "the origin received {count}");
    Ok(())
}

/// §4.2.4: without a permission, a stale response is not served when the origin fails.
async fn rfc9111_4_2_4_no_stale_without_permission(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(Reply::ok("down").status(503));
    let second = c.get().await;
    ensure!(
        (second.status, second.text()) == (503, "down"),
        "second: {second:?}"
    );
    c.expect_count(2, "end")
}

async fn rfc9111_5_2_2_2_must_revalidate_forbids_stale_if_error(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1, must-revalidate, stale-if-error=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(Reply::ok("down").status(503));
    let second = c.get().await;
    ensure!(second.status == 503, "second: {second:?}");
    c.expect_count(2, "end")
}

/// RFC 5861 §3: served stale at once, refreshed once in the background; requests during the
/// refresh are answered from storage and make no request of their own (a background refresh
/// never races a foreground fetch into two origin requests).
async fn rfc5861_3_stale_while_revalidate_refreshes_once(c: Case) -> Outcome {
    c.set(Reply::ok("a").cache_control("max-age=1, stale-while-revalidate=60"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.origin.close_gate(&c.path);
    c.set(Reply::ok("b").cache_control("max-age=60"));
    expect(&c.get().await, 200, "STALE", "a", "stale")?;
    // The refresh is held at the origin: everyone meanwhile gets the stale response.
    c.origin.wait_requests(&c.path, 2).await;
    let during = futures_util::future::join_all((0..5).map(|_| c.get())).await;
    for got in &during {
        expect(got, 200, "UPDATING", "a", "during the refresh")?;
    }
    c.origin.open_gate(&c.path);
    c.expect_count(2, "after the refresh")?;
    wait_for_body(&c, "b").await?;
    c.expect_count(2, "end")
}

// ---------------------------------------------------------------------------------------------
// The properties of issue 21, under concurrency

/// Read after write: once a storable response was delivered whole, every request that starts
/// afterwards is answered from storage (or the same flight), never by the origin.
async fn rfc9111_4_read_after_write_sequential(c: Case) -> Outcome {
    c.set(fresh("a"));
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    for i in 0..5 {
        expect(&c.get().await, 200, "HIT", "a", &format!("read {i}"))?;
    }
    c.expect_count(1, "end")
}

/// Read after write while another key is invalidated: an unsafe method on another URI while
/// this response is in flight does not stop it being stored (§4.4 invalidates the URIs it
/// names). Before the fix, a zone-wide counter dropped every fill in flight.
async fn rfc9111_4_4_invalidating_another_uri_keeps_a_fill(c: Case) -> Outcome {
    let other = format!("{}-other", c.path);
    c.origin
        .set_for("POST", &other, Reply::ok("posted").status(201));
    c.set(fresh("a"));
    c.origin.close_gate(&c.path);
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.get().await })
    };
    c.origin.wait_requests(&c.path, 1).await;
    let post = c.edge.send("POST", &other, &[]).await;
    ensure!(post.status == 201, "POST: {post:?}");
    c.origin.open_gate(&c.path);
    expect(&first.await.unwrap(), 200, "MISS", "a", "first")?;
    expect(&c.get().await, 200, "HIT", "a", "after")?;
    c.expect_count(1, "end")
}

/// Concurrent misses for one key make one origin request, however they overlap: the late ones
/// join the flight or find it stored.
async fn rfc9111_4_concurrent_misses_make_one_request(c: Case) -> Outcome {
    c.set(fresh("a"));
    let all = futures_util::future::join_all((0..10).map(|_| c.get())).await;
    let misses = all.iter().filter(|g| g.cache() == "MISS").count();
    for got in &all {
        ensure!(
            (got.status, got.text()) == (200, "a"),
            "a collapsed request got {got:?}"
        );
    }
    ensure!(misses == 1, "{misses} MISS among the 10");
    c.expect_count(1, "end")
}

/// A waiter joins a response in flight only if it may use it: one whose `Vary`ing field
/// differs goes upstream itself (held at the gate with the first: it did not wait for it).
async fn rfc9111_4_waiter_with_another_vary_value_goes_upstream(c: Case) -> Outcome {
    c.set(fresh("v").header("vary", "x-lang"));
    c.origin.close_gate(&c.path);
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.get_with(&[("x-lang", "fr")]).await })
    };
    c.origin.wait_requests(&c.path, 1).await;
    // Published only at the response head, so the second request waits as a follower; when
    // the head shows `Vary: x-lang` with another value, it must go upstream on its own.
    let second = {
        let c = c.clone();
        tokio::spawn(async move { c.get_with(&[("x-lang", "en")]).await })
    };
    c.origin.open_gate(&c.path);
    expect(&first.await.unwrap(), 200, "MISS", "v", "fr")?;
    let second = second.await.unwrap();
    ensure!(second.text() == "v", "en: {second:?}");
    expect(
        &c.get_with(&[("x-lang", "fr")]).await,
        200,
        "HIT",
        "v",
        "fr again",
    )?;
    // fr once; en once (as a follower that went upstream, or as a miss of its own).
    c.expect_count(2, "end")
}

/// A waiter with `Cache-Control: no-cache` does not take a response whose request was sent
/// before it arrived (§5.2.1.4): it reaches the origin itself, while the first is held.
async fn rfc9111_5_2_1_4_waiter_with_no_cache_goes_upstream(c: Case) -> Outcome {
    c.set(fresh("a"));
    c.origin.close_gate(&c.path);
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.get().await })
    };
    c.origin.wait_requests(&c.path, 1).await;
    let second = {
        let c = c.clone();
        tokio::spawn(async move { c.get_with(&[("cache-control", "no-cache")]).await })
    };
    // Both at the origin at once: the second did not wait for the first.
    c.origin.wait_requests(&c.path, 2).await;
    c.origin.open_gate(&c.path);
    expect(&first.await.unwrap(), 200, "MISS", "a", "first")?;
    let second = second.await.unwrap();
    ensure!(
        (second.status, second.text()) == (200, "a"),
        "second: {second:?}"
    );
    c.expect_count(2, "end")
}

/// A waiter's own `If-None-Match` is answered from the response in flight (RFC 9111 §4.3.2),
/// as it would be from storage.
async fn rfc9111_4_3_2_waiter_with_if_none_match_gets_304(c: Case) -> Outcome {
    c.set(fresh("a").header("etag", "\"w\""));
    c.origin.close_gate(&c.path);
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.get().await })
    };
    c.origin.wait_requests(&c.path, 1).await;
    let second = {
        let c = c.clone();
        tokio::spawn(async move { c.get_with(&[("if-none-match", "\"w\"")]).await })
    };
    c.origin.open_gate(&c.path);
    expect(&first.await.unwrap(), 200, "MISS", "a", "first")?;
    // Joined the flight (304 from its head) or came after the commit (304 from storage).
    expect(&second.await.unwrap(), 304, "HIT", "", "conditional waiter")?;
    c.expect_count(1, "end")
}

/// Concurrent requests for a stale entry make one conditional request (§4.3): the others wait
/// for its answer and find the entry fresh.
async fn rfc9111_4_3_concurrent_revalidations_make_one_request(c: Case) -> Outcome {
    c.set(
        Reply::ok("a")
            .cache_control("max-age=1")
            .header("etag", "\"cr\"")
            .conditional(),
    );
    expect(&c.get().await, 200, "MISS", "a", "first")?;
    tokio::time::sleep(STALE_AFTER_1S).await;
    c.set(
        Reply::ok("a")
            .cache_control("max-age=60")
            .header("etag", "\"cr\"")
            .conditional(),
    );
    let all = futures_util::future::join_all((0..10).map(|_| c.get())).await;
    let revalidated = all.iter().filter(|g| g.cache() == "REVALIDATED").count();
    for got in &all {
        ensure!(
            (got.status, got.text()) == (200, "a"),
            "a revalidation got {got:?}"
        );
    }
    ensure!(revalidated == 1, "{revalidated} REVALIDATED among the 10");
    c.expect_count(2, "end")
}

/// Poll (by request, not by timer) until the stored response is `body`.
async fn wait_for_body(c: &Case, body: &str) -> Outcome {
    let deadline = Instant::now() + super::FAILURE_BOUND;
    loop {
        let got = c.get().await;
        if got.text() == body {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "still {got:?}");
        tokio::task::yield_now().await;
    }
}

/// `time` in the obsolete ANSI C `asctime` format (RFC 9110 §5.6.7): `Sun Nov  6 08:49:37
/// 1994`, from the IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`.
fn asctime(time: SystemTime) -> String {
    let imf = httpdate::fmt_http_date(time);
    let parts: Vec<&str> = imf.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [weekday, day, month, year, clock, _gmt] = parts[..] else {
        panic!("{imf}")
    };
    let day: u32 = day.parse().unwrap();
    format!("{weekday} {month} {day:>2} {clock} {year}")
}

/// Every scenario, by name.
pub const SCENARIOS: &[(&str, Scenario)] = &[
    ("rfc9111_4_2_1_max_age_fresh", |c| {
        Box::pin(rfc9111_4_2_1_max_age_fresh(c))
    }),
    ("rfc9111_4_2_1_s_maxage_wins_over_max_age", |c| {
        Box::pin(rfc9111_4_2_1_s_maxage_wins_over_max_age(c))
    }),
    ("rfc9111_4_2_1_expires_fresh", |c| {
        Box::pin(rfc9111_4_2_1_expires_fresh(c))
    }),
    ("rfc9110_5_6_7_expires_in_asctime_format", |c| {
        Box::pin(rfc9110_5_6_7_expires_in_asctime_format(c))
    }),
    ("rfc9111_4_2_expires_in_upper_case", |c| {
        Box::pin(rfc9111_4_2_expires_in_upper_case(c))
    }),
    ("rfc9111_4_2_1_first_of_two_max_ages", |c| {
        Box::pin(rfc9111_4_2_1_first_of_two_max_ages(c))
    }),
    ("rfc9111_4_2_1_invalid_max_age_is_stale", |c| {
        Box::pin(rfc9111_4_2_1_invalid_max_age_is_stale(c))
    }),
    ("rfc9111_4_2_stale_after_max_age", |c| {
        Box::pin(rfc9111_4_2_stale_after_max_age(c))
    }),
    ("rfc9111_4_2_3_age_on_a_delayed_response", |c| {
        Box::pin(rfc9111_4_2_3_age_on_a_delayed_response(c))
    }),
    ("rfc9111_3_no_store_is_not_stored", |c| {
        Box::pin(rfc9111_3_no_store_is_not_stored(c))
    }),
    ("rfc9111_3_private_is_not_stored", |c| {
        Box::pin(rfc9111_3_private_is_not_stored(c))
    }),
    ("rfc9111_3_set_cookie_not_stored_by_default", |c| {
        Box::pin(rfc9111_3_set_cookie_not_stored_by_default(c))
    }),
    ("rfc9111_5_2_1_5_request_no_store", |c| {
        Box::pin(rfc9111_5_2_1_5_request_no_store(c))
    }),
    ("rfc9111_4_3_1_revalidates_with_the_stored_etag", |c| {
        Box::pin(rfc9111_4_3_1_revalidates_with_the_stored_etag(c))
    }),
    ("rfc9111_4_3_1_revalidates_with_last_modified", |c| {
        Box::pin(rfc9111_4_3_1_revalidates_with_last_modified(c))
    }),
    ("rfc9111_4_3_4_304_without_validators_is_used", |c| {
        Box::pin(rfc9111_4_3_4_304_without_validators_is_used(c))
    }),
    ("rfc9111_4_3_3_new_response_replaces", |c| {
        Box::pin(rfc9111_4_3_3_new_response_replaces(c))
    }),
    (
        "rfc9111_5_2_2_4_no_cache_response_revalidates_every_time",
        |c| Box::pin(rfc9111_5_2_2_4_no_cache_response_revalidates_every_time(c)),
    ),
    ("rfc9111_5_2_1_4_request_no_cache_revalidates", |c| {
        Box::pin(rfc9111_5_2_1_4_request_no_cache_revalidates(c))
    }),
    ("rfc9111_5_2_1_1_request_max_age_0_revalidates", |c| {
        Box::pin(rfc9111_5_2_1_1_request_max_age_0_revalidates(c))
    }),
    ("rfc9111_5_2_1_7_only_if_cached", |c| {
        Box::pin(rfc9111_5_2_1_7_only_if_cached(c))
    }),
    ("rfc9111_4_3_2_client_if_none_match_from_storage", |c| {
        Box::pin(rfc9111_4_3_2_client_if_none_match_from_storage(c))
    }),
    ("rfc9111_4_1_vary_separates_variants", |c| {
        Box::pin(rfc9111_4_1_vary_separates_variants(c))
    }),
    ("rfc9111_4_1_vary_star_never_matches", |c| {
        Box::pin(rfc9111_4_1_vary_star_never_matches(c))
    }),
    ("rfc9110_9_3_2_head_from_the_stored_get", |c| {
        Box::pin(rfc9110_9_3_2_head_from_the_stored_get(c))
    }),
    ("rfc9110_14_2_range_from_the_stored_response", |c| {
        Box::pin(rfc9110_14_2_range_from_the_stored_response(c))
    }),
    ("rfc9111_4_4_unsafe_method_invalidates", |c| {
        Box::pin(rfc9111_4_4_unsafe_method_invalidates(c))
    }),
    ("rfc9111_4_4_error_status_does_not_invalidate", |c| {
        Box::pin(rfc9111_4_4_error_status_does_not_invalidate(c))
    }),
    ("rfc5861_4_stale_if_error_on_503", |c| {
        Box::pin(rfc5861_4_stale_if_error_on_503(c))
    }),
    ("rfc5861_4_stale_if_error_on_a_closed_connection", |c| {
        Box::pin(rfc5861_4_stale_if_error_on_a_closed_connection(c))
    }),
    ("rfc9111_4_2_4_no_stale_without_permission", |c| {
        Box::pin(rfc9111_4_2_4_no_stale_without_permission(c))
    }),
    (
        "rfc9111_5_2_2_2_must_revalidate_forbids_stale_if_error",
        |c| Box::pin(rfc9111_5_2_2_2_must_revalidate_forbids_stale_if_error(c)),
    ),
    ("rfc5861_3_stale_while_revalidate_refreshes_once", |c| {
        Box::pin(rfc5861_3_stale_while_revalidate_refreshes_once(c))
    }),
    ("rfc9111_4_read_after_write_sequential", |c| {
        Box::pin(rfc9111_4_read_after_write_sequential(c))
    }),
    ("rfc9111_4_4_invalidating_another_uri_keeps_a_fill", |c| {
        Box::pin(rfc9111_4_4_invalidating_another_uri_keeps_a_fill(c))
    }),
    ("rfc9111_4_concurrent_misses_make_one_request", |c| {
        Box::pin(rfc9111_4_concurrent_misses_make_one_request(c))
    }),
    (
        "rfc9111_4_waiter_with_another_vary_value_goes_upstream",
        |c| Box::pin(rfc9111_4_waiter_with_another_vary_value_goes_upstream(c)),
    ),
    ("rfc9111_5_2_1_4_waiter_with_no_cache_goes_upstream", |c| {
        Box::pin(rfc9111_5_2_1_4_waiter_with_no_cache_goes_upstream(c))
    }),
    ("rfc9111_4_3_2_waiter_with_if_none_match_gets_304", |c| {
        Box::pin(rfc9111_4_3_2_waiter_with_if_none_match_gets_304(c))
    }),
    (
        "rfc9111_4_3_concurrent_revalidations_make_one_request",
        |c| Box::pin(rfc9111_4_3_concurrent_revalidations_make_one_request(c)),
    ),
];

/// sluice for the suite: a memory zone, collapsing on, and a server that is never taken out
/// for the failures some scenarios script (they are per path; the others must not pay).
async fn start() -> (Arc<Edge>, Arc<Origin>) {
    let origin = Origin::start().await;
    let toml = format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [caches.main]
        memory = "64MiB"
        [[routes]]
        name = "cached"
        [routes.cache]
        zone = "main"
        lock_timeout = "30s"
        [routes.proxy]
        upstream = "backend"
        [upstreams.backend]
        servers = [{{ address = "{}", max_fails = 0 }}]
        "#,
        origin.addr
    );
    (Arc::new(Edge::from_toml(&toml).await), Arc::new(origin))
}

/// Run `scenario` on a path of its own; `Err` names it.
async fn run_one(
    edge: Arc<Edge>,
    origin: Arc<Origin>,
    (name, scenario): (&'static str, Scenario),
    path: String,
) -> Result<(), String> {
    let case = Case { edge, origin, path };
    let run = tokio::spawn(scenario(case.clone()));
    match tokio::time::timeout(super::FAILURE_BOUND, run).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(why))) => Err(format!("{name} ({}): {why}", case.path)),
        Ok(Err(panic)) => Err(format!("{name} ({}): panicked: {panic}", case.path)),
        Err(_) => Err(format!("{name} ({}): did not finish", case.path)),
    }
}

/// Every scenario, [`COPIES`] times each, all at once against one sluice; every failure is
/// listed by its scenario's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rfc9111_scenarios_under_concurrency() {
    let (edge, origin) = start().await;
    let started = Instant::now();
    let runs: Vec<_> = SCENARIOS
        .iter()
        .flat_map(|&scenario| (0..COPIES).map(move |copy| (scenario, copy)))
        .map(|(scenario, copy)| {
            let path = format!("/c/{}/{copy}", scenario.0);
            run_one(edge.clone(), origin.clone(), scenario, path)
        })
        .collect();
    let total = runs.len();
    let failures: Vec<String> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {total} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(total, SCENARIOS.len() * COPIES);
    assert!(
        started.elapsed() < super::FAILURE_BOUND,
        "took {:?}",
        started.elapsed()
    );
    assert!(Arc::try_unwrap(edge).ok().unwrap().shutdown().await);
}

/// The soak: 200 clients for 60 s, each running the scenarios one after another on fresh
/// paths, against one sluice. Every scenario asserts its origin count, so a duplicate upstream
/// request or a miss that should have been a hit fails it. Run by hand (see the module doc).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "60 s soak, run by hand"]
async fn conformance_soak() {
    const CLIENTS: usize = 200;
    const FOR: Duration = Duration::from_secs(60);
    let (edge, origin) = start().await;
    let deadline = Instant::now() + FOR;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (edge, origin) = (edge.clone(), origin.clone());
            tokio::spawn(async move {
                let (mut runs, mut failures) = (0usize, Vec::new());
                while Instant::now() < deadline {
                    let scenario = SCENARIOS[(client + runs) % SCENARIOS.len()];
                    let path = format!("/soak/{client}/{runs}/{}", scenario.0);
                    if let Err(why) = run_one(edge.clone(), origin.clone(), scenario, path).await {
                        failures.push(why);
                    }
                    runs += 1;
                }
                (runs, failures)
            })
        })
        .collect();
    let (mut runs, mut failures) = (0, Vec::new());
    for client in clients {
        let (r, f) = client.await.unwrap();
        runs += r;
        failures.extend(f);
    }
    println!(
        "soak: {CLIENTS} clients, {FOR:?}: {runs} scenarios run, {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
