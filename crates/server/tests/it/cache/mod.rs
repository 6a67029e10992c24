//! The response cache (RFC 9111, <https://www.rfc-editor.org/rfc/rfc9111>) end to end: sluice in
//! front of a [scripted origin](origin), tests named after the section they check.
//!
//! Every request carries `Host: site.test`, so cache keys (and purge keys) are
//! `http://site.test/PATH` whatever port the listener got. Freshness is short-circuited where it
//! can be (`max-age=0` with an extension that allows reuse) instead of waiting for time to pass.

mod collapse;
mod compress;
mod conformance;
mod disk;
mod freshness;
mod invalidation;
mod options;
mod origin;
mod requests;
mod shared;
mod shared_cluster;
mod stale;
mod storable;
mod targeted;
mod validation;
mod vary;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method};
use sluice_testkit::{Offer, TestServer, client};

pub use origin::{Fail, Origin, Reply};

/// Upper bound for anything that should take milliseconds; only reached when a test fails.
pub const FAILURE_BOUND: Duration = Duration::from_secs(30);

/// The host every test request names.
pub const HOST: &str = "site.test";

/// The cache status response header (its default name).
pub const STATUS: &str = "x-cache-status";

/// The metric names, in one place.
pub mod names {
    pub const REQUESTS: &str = "sluice_cache_requests_total";
    pub const COLLAPSED: &str = "sluice_cache_collapsed_total";
    pub const STALE_ON_ERROR: &str = "sluice_cache_stale_on_error_total";
    pub const REFRESHES: &str = "sluice_cache_refreshes_total";
    pub const VARIANTS_MADE: &str = "sluice_cache_variants_made_total";
    pub const SERVED_BYTES: &str = "sluice_cache_served_bytes_total";
    pub const STORED: &str = "sluice_cache_stored_total";
    pub const STORE_ERRORS: &str = "sluice_cache_store_errors_total";
    pub const OBJECTS: &str = "sluice_cache_objects";
    /// The response compression metric (not the cache's), for "compressed once".
    pub const COMPRESS_BYTES_IN: &str = "sluice_compress_bytes_in_total";
}

/// The series of the zone `main`: `zone_series(COLLAPSED, &[])`,
/// `zone_series(REQUESTS, &[("status", "hit")])`.
pub fn zone_series(name: &str, labels: &[(&str, &str)]) -> String {
    let mut series = format!("{name}{{zone=\"main\"");
    for (label, value) in labels {
        series.push_str(&format!(",{label}=\"{value}\""));
    }
    series + "}"
}

/// `sluice_cache_requests_total{zone="main",status=STATUS}`, `status` lowercase.
pub fn requests_series(status: &str) -> String {
    zone_series(names::REQUESTS, &[("status", status)])
}

/// What the cache's config can add to the defaults: lines of `[caches.main]`, of the route's
/// `cache` table, and of the route itself (before its `proxy` table).
#[derive(Clone, Copy, Default)]
pub struct Setup<'a> {
    pub zone: &'a str,
    pub cache: &'a str,
    pub route: &'a str,
}

/// sluice with an admin listener, the zone `main` and one cached route proxying to `origin`.
pub fn config(origin: &Origin, setup: Setup<'_>) -> String {
    let Setup { zone, cache, route } = setup;
    format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [caches.main]
        memory = "64MiB"
        max_object_size = "8MiB"
        {zone}
        [[routes]]
        name = "cached"
        {route}
        [routes.cache]
        zone = "main"
        {cache}
        [routes.proxy]
        upstream = "backend"
        [upstreams.backend]
        servers = ["{}"]
        "#,
        origin.addr
    )
}

/// A response, read whole.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The `X-Cache-Status` value ("" when absent).
    pub fn cache(&self) -> &str {
        self.header(STATUS).unwrap_or("")
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    /// The `Age` in seconds (panics when absent or not a number).
    pub fn age(&self) -> u64 {
        let age = self
            .header("age")
            .unwrap_or_else(|| panic!("no Age on {self:?}"));
        age.parse().unwrap()
    }
}

/// sluice in front of a scripted origin, and a client for both of its listeners.
pub struct Edge {
    pub server: TestServer,
    http: sluice_testkit::reqwest::Client,
}

impl Edge {
    pub async fn start(origin: &Origin, setup: Setup<'_>) -> Edge {
        Edge::from_toml(&config(origin, setup)).await
    }

    pub async fn from_toml(toml: &str) -> Edge {
        Edge {
            server: sluice_testkit::start_toml(toml).await,
            http: client(Offer::Http1),
        }
    }

    /// Drain and stop sluice; whether everything finished within [`FAILURE_BOUND`].
    pub async fn shutdown(self) -> bool {
        self.server.shutdown(FAILURE_BOUND).await
    }

    pub async fn get(&self, path: &str) -> Got {
        self.send("GET", path, &[]).await
    }

    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Got {
        self.send("GET", path, headers).await
    }

    /// `method` for `path` on the public listener with `headers` (and `Host: site.test` unless
    /// they name another).
    pub async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Got {
        let url = self.server.url(path);
        self.exchange(method, &url, headers).await
    }

    /// `method` for `path_and_query` on the admin listener.
    pub async fn admin(&self, method: &str, path_and_query: &str) -> Got {
        let admin = self.server.running().admin_address().unwrap();
        let url = format!("http://{admin}{path_and_query}");
        self.exchange(method, &url, &[]).await
    }

    async fn exchange(&self, method: &str, url: &str, headers: &[(&str, &str)]) -> Got {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, url);
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            req = req.header("host", HOST);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let resp = req.send().await.unwrap();
        Got {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: resp.bytes().await.unwrap(),
        }
    }

    pub async fn metrics(&self) -> String {
        crate::scrape_metrics(&self.server).await
    }

    /// The value of `series` now (panics when the series is missing).
    pub async fn metric(&self, series: &str) -> f64 {
        crate::metric(&self.metrics().await, series)
    }

    /// Poll the metrics until `series` is at least `at_least` (panics after [`FAILURE_BOUND`]).
    pub async fn wait_metric(&self, series: &str, at_least: f64) {
        let deadline = Instant::now() + FAILURE_BOUND;
        loop {
            let text = self.metrics().await;
            let value = text
                .lines()
                .find(|l| l.starts_with(series))
                .map(|_| crate::metric(&text, series));
            if value.is_some_and(|v| v >= at_least) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{series} stayed at {value:?}, below {at_least}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
        }
    }
}

/// The sha256 of `data`, in hex.
pub fn sha256(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}
