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

/// What ties a dictionary to the requests it may compress: the origin it was served from and
/// the URLs (pattern, destinations) it was offered for (RFC 9842 §2.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tie {
    origin: String,
    pattern: MatchPattern,
    match_dest: Vec<String>,
}

impl Tie {
    pub fn new(origin: String, pattern: MatchPattern, match_dest: Vec<String>) -> Self {
        Self {
            origin,
            pattern,
            match_dest,
        }
    }

    /// Whether a request from `origin` for `path`/`query` with `Sec-Fetch-Dest` `dest` is
    /// covered: same origin, the pattern matches, and a destination it was offered for (none
    /// listed, or a client that sends none: RFC 9842 §2.1.2).
    fn covers(
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
}

/// A dictionary sluice offered, and every way it was offered: the same bytes may be served
/// from several origins (a plain and a TLS listener, two host names) or, in the automatic
/// mode, under several paths. At most [`TIES`] are remembered, the oldest dropped first.
pub struct Kept {
    dictionary: Dictionary,
    ties: Mutex<VecDeque<Tie>>,
}

/// The most ties a kept dictionary remembers.
const TIES: usize = 8;

impl Kept {
    /// Whether some way this dictionary was offered covers the request.
    pub fn covers(
        &self,
        origin: &str,
        path: &str,
        query: Option<&str>,
        dest: Option<&http::HeaderValue>,
    ) -> bool {
        lock(&self.ties)
            .iter()
            .any(|tie| tie.covers(origin, path, query, dest))
    }

    /// Add `tie` unless known.
    fn add_tie(&self, tie: Tie) {
        let mut ties = lock(&self.ties);
        if !ties.contains(&tie) {
            if ties.len() == TIES {
                ties.pop_front();
            }
            ties.push_back(tie);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        kept.dictionary.len() as u64 + OVERHEAD
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

    /// Record that response version `id` was offered as `tie` says; `Some(tie)` back when its
    /// body is not kept (never seen, or evicted): the caller keeps it with [`Store::keep`].
    pub(super) fn tie(&self, id: &ContentId, tie: Tie) -> Option<Tie> {
        let kept = self
            .hashes
            .get(id)
            .and_then(|hash| self.dictionaries.get(&hash));
        match kept {
            Some(kept) => {
                kept.add_tie(tie);
                None
            }
            None => Some(tie),
        }
    }

    /// Keep `body` (response version `id`) as a dictionary offered as `tie` says.
    pub(super) async fn keep(&self, id: ContentId, body: Bytes, tie: Tie) {
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
        if let Some(kept) = self.dictionaries.get(&hash) {
            // The same bytes under another version id (a touched file): one more tie.
            kept.add_tie(tie);
            return;
        }
        let kept = Kept {
            dictionary,
            ties: Mutex::new(VecDeque::from([tie])),
        };
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
            let bytes = encode(key.coding, &kept.dictionary, &source, level)?;
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
