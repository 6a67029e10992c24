//! The limiter around the bucket: keys (IP, header, header absent), concurrent requests of one
//! client, the metric, and the bound on remembered keys. The bucket's arithmetic is tested in
//! `gcra.rs` with made-up clocks; here the rates are slow enough (one an hour) that no token
//! comes back while a test runs.

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::*;

fn hourly(burst: u32, key: RateLimitKey) -> RateLimit {
    RateLimit {
        shared: None,
        requests: NonZeroU32::new(1).unwrap(),
        per: Duration::from_secs(3600),
        burst: NonZeroU32::new(burst).unwrap(),
        key,
    }
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
}

fn allowed(limiter: &RouteRateLimit, ip: IpAddr, headers: &HeaderMap, n: usize) -> usize {
    (0..n)
        .filter(|_| limiter.check(ip, headers).is_ok())
        .count()
}

#[test]
fn each_client_ip_has_its_own_bucket_and_refusals_are_counted() {
    let counter = Counter::default();
    let limiter = RouteRateLimit::new(&hourly(3, RateLimitKey::ClientIp), counter.clone());
    let none = HeaderMap::new();
    assert_eq!(allowed(&limiter, ip(1), &none, 10), 3);
    assert_eq!(allowed(&limiter, ip(2), &none, 10), 3);
    assert_eq!(counter.get(), 14);
    let wait = limiter.check(ip(1), &none).unwrap_err();
    assert!(wait > Duration::from_secs(3500), "{wait:?}");
    assert_eq!(retry_after_secs(wait), wait.as_secs() + 1);
}

#[test]
fn a_header_key_separates_clients_behind_one_ip_and_falls_back_to_the_ip() {
    let name = HeaderName::from_static("x-api-key");
    let limiter = RouteRateLimit::new(
        &hourly(2, RateLimitKey::Header(name.clone())),
        Counter::default(),
    );
    let with = |value: &'static str| {
        let mut headers = HeaderMap::new();
        headers.insert(name.clone(), HeaderValue::from_static(value));
        headers
    };
    assert_eq!(allowed(&limiter, ip(1), &with("alice"), 5), 2);
    assert_eq!(allowed(&limiter, ip(1), &with("bob"), 5), 2);
    // Alice from elsewhere is still Alice.
    assert_eq!(allowed(&limiter, ip(9), &with("alice"), 5), 0);
    // Without the header, each IP is a client of its own.
    assert_eq!(allowed(&limiter, ip(1), &HeaderMap::new(), 5), 2);
    assert_eq!(allowed(&limiter, ip(2), &HeaderMap::new(), 5), 2);
}

#[test]
fn concurrent_requests_of_one_client_each_take_their_own_token() {
    let limiter = RouteRateLimit::new(&hourly(50, RateLimitKey::ClientIp), Counter::default());
    let none = HeaderMap::new();
    let passed: usize = std::thread::scope(|s| {
        let threads: Vec<_> = (0..8)
            .map(|_| s.spawn(|| allowed(&limiter, ip(1), &none, 100)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(passed, 50);
}

#[test]
fn a_million_distinct_clients_keep_the_map_at_its_capacity() {
    let limiter = RouteRateLimit::new(&hourly(1, RateLimitKey::ClientIp), Counter::default());
    let none = HeaderMap::new();
    for n in 0..1_000_000u32 {
        let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | n));
        // Every one is new to the limiter (or was evicted): a full bucket lets it through.
        assert!(limiter.check(client, &none).is_ok());
    }
    let keys = limiter.keys();
    // quick_cache's capacity is per shard, rounded; allow it 1% of slack, no more.
    assert!(
        (KEYS_PER_ROUTE * 9 / 10..=KEYS_PER_ROUTE * 101 / 100).contains(&keys),
        "{keys} keys remembered for a capacity of {KEYS_PER_ROUTE}"
    );
}
