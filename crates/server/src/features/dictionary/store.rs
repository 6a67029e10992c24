//! A route's dictionary store: the dictionaries it offered (by SHA-256) and the deltas made
//! with them (by response version, coding and dictionary), in one memory budget: three
//! quarters for dictionaries (whole bodies), a quarter for deltas (a few KB each). Both are
//! quick_cache's S3-FIFO, weighed in bytes, so a crawl of many one-off versions does not push
//! out the hot ones; evictions are counted.
//!
//! Deltas per response are bounded (`deltas_per_response`): the deltas made for one response
//! are remembered in order, and making one more drops the oldest, so the dictionaries most
//! recently presented are the ones kept.
//!
//! Concurrent first requests for one delta collapse (quick_cache's placeholder): one makes it,
//! the others wait for its bytes, so a burst after a deploy makes each delta once.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use quick_cache::{DefaultHashBuilder, Lifecycle, Weighter};
use sluice_core::{Compression, DictionaryCoding};
use sluice_http::compress::Encoder;
use sluice_http::compress_policy::ContentId;
use sluice_http::dictionary::{Dictionary, DictionaryHash, MatchPattern, encode};

use super::RouteCompression;
use crate::shared::metrics::dictionary::DictionaryMetrics;

/// A dictionary sluice offered, with what ties it to requests: the origin it was served from
/// and the URLs (pattern, destinations) it was offered for (RFC 9842 §2.2.2).
pub struct Kept {
    origin: String,
    pattern: MatchPattern,
    match_dest: Vec<String>,
    dictionary: Option<Dictionary>,
}

impl Kept {
    /// The ties of a dictionary about to be kept.
    pub fn new(origin: String, pattern: MatchPattern, match_dest: Vec<String>) -> Self {
        Self {
            origin,
            pattern,
            match_dest,
            dictionary: None,
        }
    }

    /// Whether a request from `origin` for `path`/`query` with `Sec-Fetch-Dest` `dest` may be
    /// compressed with this dictionary: same origin, covered by the pattern, and a destination
    /// it was offered for (none listed, or a client that sends none: RFC 9842 §2.1.2).
    pub fn covers(
        &self,
        origin: &str,
        path: &str,
        query: Option<&str>,
        dest: Option<&http::HeaderValue>,
    ) -> bool {
        let dest_ok = match dest {
            Some(dest) if !self.match_dest.is_empty() => self.match_dest.iter().any(|d| {
                d.as_bytes()
                    .eq_ignore_ascii_case(dest.as_bytes().trim_ascii())
            }),
            _ => true,
        };
        self.origin == origin && dest_ok && self.pattern.matches(path, query)
    }

    fn dictionary(&self) -> Option<&Dictionary> {
        self.dictionary.as_ref()
    }
}

/// What a delta is stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct DeltaKey {
    pub(super) id: ContentId,
    pub(super) coding: DictionaryCoding,
    pub(super) hash: DictionaryHash,
}

/// A delta and the bytes it saves against the coding the client would have got otherwise.
#[derive(Debug, Clone)]
pub(super) struct Delta {
    pub(super) bytes: Bytes,
    pub(super) saved: u64,
}

/// Entries weigh their bytes plus the bookkeeping, so many small ones are bounded too.
#[derive(Debug, Clone, Copy)]
struct ByBytes;

const OVERHEAD: u64 = 256;

impl Weighter<DictionaryHash, Arc<Kept>> for ByBytes {
    fn weight(&self, _key: &DictionaryHash, kept: &Arc<Kept>) -> u64 {
        kept.dictionary().map_or(0, |d| d.len() as u64) + OVERHEAD
    }
}

impl Weighter<DeltaKey, Delta> for ByBytes {
    fn weight(&self, _key: &DeltaKey, delta: &Delta) -> u64 {
        delta.bytes.len() as u64 + OVERHEAD
    }
}

/// Counts evictions into a counter.
#[derive(Clone)]
struct Evictions(Counter);

impl<K, V> Lifecycle<K, V> for Evictions {
    type RequestState = ();

    fn begin_request(&self) -> Self::RequestState {}

    fn on_evict(&self, _state: &mut (), _key: K, _val: V) {
        self.0.inc();
    }
}

type Cache<K, V> = quick_cache::sync::Cache<K, V, ByBytes, DefaultHashBuilder, Evictions>;

pub(super) struct Store {
    dictionaries: Cache<DictionaryHash, Arc<Kept>>,
    /// Each response version's hash, so a body is hashed once.
    hashes: quick_cache::sync::Cache<ContentId, DictionaryHash>,
    deltas: Cache<DeltaKey, Delta>,
    /// Per response version, the deltas made for it, oldest first.
    made: quick_cache::sync::Cache<ContentId, Arc<Mutex<VecDeque<DeltaKey>>>>,
    per_response: usize,
    metrics: DictionaryMetrics,
}

/// Bodies larger than this are hashed on the blocking pool (SHA-256 runs at ~0.5 GB/s here:
/// 256 KiB is ~0.5 ms of a worker).
const HASH_INLINE: usize = 256 * 1024;

impl Store {
    pub(super) fn new(memory: u64, per_response: usize, metrics: DictionaryMetrics) -> Self {
        let evictions = Evictions(metrics.evicted.clone());
        let for_dictionaries = memory / 4 * 3;
        let for_deltas = memory - for_dictionaries;
        let items = |bytes: u64, per_item: u64| {
            usize::try_from(bytes / per_item)
                .unwrap_or(usize::MAX)
                .clamp(16, 65_536)
        };
        Self {
            dictionaries: quick_cache::sync::Cache::with(
                items(for_dictionaries, 128 * 1024),
                for_dictionaries,
                ByBytes,
                DefaultHashBuilder::default(),
                evictions.clone(),
            ),
            hashes: quick_cache::sync::Cache::new(4096),
            deltas: quick_cache::sync::Cache::with(
                items(for_deltas, 4 * 1024),
                for_deltas,
                ByBytes,
                DefaultHashBuilder::default(),
                evictions,
            ),
            made: quick_cache::sync::Cache::new(4096),
            per_response,
            metrics,
        }
    }

    /// Whether the body of response version `id` is kept as a dictionary already.
    pub(super) fn knows(&self, id: &ContentId) -> bool {
        self.hashes
            .get(id)
            .is_some_and(|hash| self.dictionaries.contains_key(&hash))
    }

    /// Keep `body` (response version `id`) as a dictionary tied as `kept` says.
    pub(super) async fn keep(&self, id: ContentId, body: Bytes, mut kept: Kept) {
        let dictionary = if body.len() <= HASH_INLINE {
            Dictionary::new(body)
        } else {
            match tokio::task::spawn_blocking(move || Dictionary::new(body)).await {
                Ok(dictionary) => dictionary,
                Err(err) => {
                    tracing::warn!("hashing a dictionary failed: {err}");
                    return;
                }
            }
        };
        let hash = dictionary.hash();
        self.hashes.insert(id, hash);
        if self.dictionaries.contains_key(&hash) {
            return;
        }
        kept.dictionary = Some(dictionary);
        self.dictionaries.insert(hash, Arc::new(kept));
        self.metrics.stored.inc();
    }

    /// The kept dictionary with `hash`.
    pub(super) fn dictionary(&self, hash: &DictionaryHash) -> Option<Arc<Kept>> {
        self.dictionaries.get(hash)
    }

    /// The stored delta for `key`, without making one (a HEAD only wants its length).
    pub(super) fn peek_delta(&self, key: &DeltaKey) -> Option<Delta> {
        self.deltas.peek(key)
    }

    /// The delta for `key`: stored, or made now from `source` with `kept`'s dictionary at
    /// `level` (on the blocking pool: level 19 / 11 takes milliseconds) and stored. `normal` is
    /// the coding the client would have got without a dictionary (for the bytes saved).
    pub(super) async fn delta(
        &self,
        key: DeltaKey,
        kept: Arc<Kept>,
        source: Bytes,
        level: i32,
        normal: Option<Compression>,
        compression: &RouteCompression,
    ) -> io::Result<Delta> {
        let guard = match self.deltas.get_value_or_guard_async(&key).await {
            Ok(delta) => return Ok(delta),
            Err(guard) => guard,
        };
        let normal_level = normal.and_then(|algorithm| compression.level(algorithm));
        let made = tokio::task::spawn_blocking(move || -> io::Result<Delta> {
            let dictionary = kept
                .dictionary()
                .ok_or_else(|| io::Error::other("a kept dictionary without bytes"))?;
            let bytes = encode(key.coding, dictionary, &source, level)?;
            let otherwise = match normal {
                Some(algorithm) => Encoder::encode_all(algorithm, normal_level, &source)?.len(),
                None => source.len(),
            };
            let saved = (otherwise as u64).saturating_sub(bytes.len() as u64);
            Ok(Delta { bytes, saved })
        })
        .await
        .map_err(io::Error::other)??;
        // Refused only if the entry was removed meanwhile; this response has its bytes anyway.
        let _ = guard.insert(made.clone());
        self.metrics.delta_made(key.coding);
        self.bound_per_response(key);
        Ok(made)
    }

    /// Remember `key` among its response's deltas; past `per_response`, drop the oldest.
    fn bound_per_response(&self, key: DeltaKey) {
        let list = self
            .made
            .get_or_insert_with(&key.id, || -> Result<_, ()> {
                Ok(Arc::new(Mutex::new(VecDeque::new())))
            })
            .ok();
        let Some(list) = list else { return };
        let dropped: Vec<DeltaKey> = {
            let mut list = list
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            list.retain(|k| *k != key);
            list.push_back(key);
            let excess = list.len().saturating_sub(self.per_response);
            list.drain(..excess).collect()
        };
        for old in dropped {
            self.deltas.remove(&old);
        }
    }

    #[cfg(test)]
    pub(super) fn delta_count(&self) -> usize {
        self.deltas.len()
    }
}
