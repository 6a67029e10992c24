//! `[caches.NAME]` and a route's `cache` option, as written. Like the rest of [`crate::raw`],
//! every key is optional and values people write in more than one shape (`heuristic = true` or
//! `"1d"`, `status_header = false` or a name) are [`Scalar`]s, so that validation judges them.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{OneOrMany, RawCompressLevels, Scalar};

/// `[caches.NAME]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { memory = \"256MiB\" }")]
pub(crate) struct RawCacheZone {
    pub memory: Option<Spanned<Scalar>>,
    pub max_object_size: Option<Spanned<Scalar>>,
    pub disk: Option<RawCacheDisk>,
    pub use_stale: Option<Spanned<OneOrMany>>,
    pub store_set_cookie: Option<bool>,
    pub heuristic: Option<Spanned<Scalar>>,
    pub shared: Option<RawCacheShared>,
    pub keep_tag_headers: Option<bool>,
}

/// `[caches.NAME.shared]`: the fleet's shared tier (docs/fleet.md).
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { redis = \"redis://127.0.0.1:6379\" }")]
pub(crate) struct RawCacheShared {
    pub redis: Option<Spanned<String>>,
    pub deadline: Option<Spanned<Scalar>>,
    pub max_object_size: Option<Spanned<Scalar>>,
    pub max_ttl: Option<Spanned<Scalar>>,
}

/// `disk = { path = "...", size = "10GiB" }` of a cache zone.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { path = \"/var/cache/sluice\", size = \"10GiB\" }")]
pub(crate) struct RawCacheDisk {
    pub path: Option<Spanned<String>>,
    pub size: Option<Spanned<Scalar>>,
}

/// `cache = { zone = "...", ... }` of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { zone = \"api\" }, naming a [caches.NAME] table")]
pub(crate) struct RawRouteCache {
    pub zone: Option<Spanned<String>>,
    pub key: Option<Spanned<OneOrMany>>,
    /// Status (or `any`) -> lifetime. Keys are checked in validation (a bad one is pointed at
    /// by key); the order does not matter, the lookup is by status.
    pub valid: Option<BTreeMap<String, Spanned<Scalar>>>,
    pub bypass: Option<Spanned<OneOrMany>>,
    pub no_store: Option<Spanned<OneOrMany>>,
    pub min_uses: Option<Spanned<Scalar>>,
    pub lock_timeout: Option<Spanned<Scalar>>,
    pub methods: Option<Spanned<OneOrMany>>,
    pub status_header: Option<Spanned<Scalar>>,
    pub levels: Option<RawCompressLevels>,
}
