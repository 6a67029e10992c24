//! Compressed variants of static files, kept in memory: each version of a file is compressed
//! once per coding, and later requests in that coding are answered with the stored bytes, a
//! `Content-Length` and no compression work (DESIGN.md capability 9, "compress once, serve
//! many"; nginx compresses a static file again on every request unless `gzip_static` finds a
//! sidecar).
//!
//! # What is kept, and how it stays right
//! Key: the [`ContentId`] a producer put on a `200` whose whole body is one buffer in memory
//! (static files: device, inode, size, mtime and ctime of the file, read whole up to 256 KiB),
//! and the algorithm. The level is the route's, fixed for the life of the store (a reload
//! builds a new one). Nothing is ever invalidated: an edited or replaced file has a new id, so
//! its old variants are simply never hit again and age out.
//!
//! # Bound
//! [`STORE_BYTES`] (16 MiB) per static route with `compress`, weighed in bytes, evicted by
//! quick_cache's S3-FIFO (as the static memory cache is): a one-off crawl of many files does not
//! flush the hot ones. 16 MiB holds the three codings of ~250 typical 70 KB pages (each about
//! 18 KB compressed); the memory cache of the files themselves is 32 MiB by default.
//!
//! # Making a variant
//! Concurrent first requests for one variant collapse: the first compresses, the others wait
//! for its bytes (quick_cache's placeholder), so a burst on a new deploy compresses once. Small
//! bodies at live levels are compressed on the worker thread, the rest on the blocking pool;
//! see [`inline_limit`].

use std::io;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Response};
use sluice_core::{Body, Compression};
use sluice_http::compress::Encoder;
use sluice_http::compress_policy::{ContentId, apply_headers};

use super::RouteCompression;

/// The memory a static route with `compress` may keep variants in.
pub const STORE_BYTES: u64 = 16 * 1024 * 1024;

/// What a variant is stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) id: ContentId,
    pub(super) algorithm: Compression,
}

/// A route's variant store.
pub(super) struct Variants {
    entries: quick_cache::sync::Cache<Key, Bytes, Weight>,
}

/// A variant weighs its bytes plus its key and the cache's bookkeeping, so many tiny variants
/// are bounded too.
#[derive(Debug, Clone, Copy)]
struct Weight;

impl quick_cache::Weighter<Key, Bytes> for Weight {
    fn weight(&self, _key: &Key, value: &Bytes) -> u64 {
        const OVERHEAD: u64 = 128;
        value.len() as u64 + OVERHEAD
    }
}

/// How [`Variants::get_or_make`] got its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Got {
    /// Compressed for this request (and stored).
    Made,
    /// From the store, or from another request that made it meanwhile.
    Stored,
}

impl Variants {
    /// A store of at most `max_bytes`; `None` when that is 0.
    pub(super) fn new(max_bytes: u64) -> Option<Self> {
        if max_bytes == 0 {
            return None;
        }
        // The item estimate sizes the hash table and, since quick_cache keeps at least 32
        // items per shard, caps the shards: one per 32 KiB gives 16 MiB at most 16 shards of
        // 1 MiB, whatever the core count, so the largest variant (a 256 KiB file that does not
        // compress) always fits one; a larger item would never be stored.
        let estimated_items = usize::try_from(max_bytes / (32 * 1024))
            .unwrap_or(usize::MAX)
            .clamp(16, 65_536);
        Some(Self {
            entries: quick_cache::sync::Cache::with_weighter(estimated_items, max_bytes, Weight),
        })
    }

    /// The stored variant, if any, without making one (a HEAD only wants its length).
    pub(super) fn peek(&self, key: &Key) -> Option<Bytes> {
        self.entries.peek(key)
    }

    /// The variant for `key`: stored, or made now from `source` at `level` (see
    /// [`Encoder::new`]) and stored. A request that finds another making it waits for those
    /// bytes instead of compressing too; if that request goes away first, the next one in line
    /// makes it.
    #[cfg(test)]
    pub(super) async fn get_or_make(
        &self,
        key: Key,
        source: Bytes,
        level: Option<i32>,
    ) -> io::Result<(Bytes, Got)> {
        let (variant, got, _) = self.get_or_make_timed(key, source, level).await?;
        Ok((variant, got))
    }

    /// [`Variants::get_or_make`], with the time the encoder took (zero unless `Got::Made`).
    pub(super) async fn get_or_make_timed(
        &self,
        key: Key,
        source: Bytes,
        level: Option<i32>,
    ) -> io::Result<(Bytes, Got, Duration)> {
        let guard = match self.entries.get_value_or_guard_async(&key).await {
            Ok(variant) => return Ok((variant, Got::Stored, Duration::ZERO)),
            Err(guard) => guard,
        };
        let (variant, took) = encode(key.algorithm, level, source).await?;
        // Refused only if the entry was removed meanwhile; this response has its bytes anyway.
        let _ = guard.insert(variant.clone());
        Ok((variant, Got::Made, took))
    }

    #[cfg(test)]
    pub(super) fn weight(&self) -> u64 {
        self.entries.weight()
    }

    #[cfg(test)]
    pub(super) fn shard_capacity(&self) -> u64 {
        self.entries.shard_capacity()
    }
}

/// `source` compressed whole, and the time the encoder took (not the wait for a blocking
/// thread): on this worker thread up to [`inline_limit`], else on the blocking pool.
async fn encode(
    algorithm: Compression,
    level: Option<i32>,
    source: Bytes,
) -> io::Result<(Bytes, Duration)> {
    let inline = source.len() <= inline_limit(algorithm, level);
    let timed = move || {
        let started = std::time::Instant::now();
        Encoder::encode_all(algorithm, level, &source).map(|out| (out, started.elapsed()))
    };
    if inline {
        return timed();
    }
    tokio::task::spawn_blocking(timed)
        .await
        .map_err(io::Error::other)?
}

/// The largest body compressed on the worker thread: what costs at most ~250 µs there, about
/// what compressing one 70 KB page at gzip 2 cost on every request before the store, so making
/// a variant never stalls other connections longer than one response did. `encode_all` of the
/// bench's HTML page, release build, this project's 2-core VM: gzip 2 takes 213 µs for 64 KiB,
/// zstd 3 191 µs, so 64 KiB; brotli 4 takes 190 µs for 16 KiB but 1.05 ms for 64 KiB, so
/// 16 KiB. Above the default levels the cost climbs steeply (64 KiB: gzip 6 1.3 ms; 16 KiB:
/// brotli 11 17.5 ms), so those always go to the blocking pool, whose hand-off (a thread
/// wake-up, tens of µs) is paid once per variant, not per request.
fn inline_limit(algorithm: Compression, level: Option<i32>) -> usize {
    let default = Encoder::default_level(algorithm);
    let level = Encoder::clamp_level(algorithm, level.unwrap_or(default));
    if level > default {
        return 0;
    }
    if algorithm == Compression::BR {
        16 * 1024
    } else {
        64 * 1024
    }
}

impl RouteCompression {
    /// `response` in `algorithm` from the variant store, when it qualifies: a `200` marked
    /// with a [`ContentId`] whose whole body is in memory. The headers are those of the fly
    /// (`Content-Encoding`, `Vary`, weakened `ETag`, no `Accept-Ranges`) plus the variant's
    /// `Content-Length`. A HEAD only looks: it gets that length when the variant is stored
    /// already, and otherwise none, as on the fly (RFC 9110 §9.3.2 lets a HEAD omit what is
    /// only known by generating the content; compressing for a HEAD would be work for
    /// nothing). `make = false` (the CPU is above the route's `max_cpu`) serves a stored
    /// variant but makes none. `None`: compress on the fly.
    pub(super) async fn stored(
        &self,
        method: &Method,
        algorithm: Compression,
        response: &mut Response<Body>,
        make: bool,
    ) -> Option<io::Result<()>> {
        let variants = self.variants.as_ref()?;
        let id = *response.extensions().get::<ContentId>()?;
        let key = Key { id, algorithm };
        let variant = if method == Method::HEAD || !make {
            variants.peek(&key)?
        } else {
            let Body::Full(Some(source)) = response.body() else {
                return None;
            };
            let level = self.levels[algorithm.index()];
            let made = variants.get_or_make_timed(key, source.clone(), level).await;
            match made {
                Ok((variant, Got::Made, took)) => {
                    self.metrics.variant_made(algorithm);
                    let bytes_in = source.len() as u64;
                    self.metrics
                        .bytes(algorithm)
                        .add(bytes_in, variant.len() as u64, took);
                    variant
                }
                Ok((variant, Got::Stored, _)) => {
                    self.metrics.variant_hit(algorithm);
                    variant
                }
                Err(err) => return Some(Err(err)),
            }
        };
        let headers = response.headers_mut();
        apply_headers(headers, algorithm.coding());
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(variant.len()));
        *response.body_mut() = match *method {
            Method::HEAD => Body::Empty,
            _ => Body::full(variant),
        };
        Some(Ok(()))
    }
}

#[cfg(test)]
#[path = "variants_tests.rs"]
mod tests;
