//! A cache zone (`[caches.NAME]`): the storage tiers, the in-memory index of what they hold,
//! the in-flight misses, and the counters. Several routes may share one zone. A zone outlives
//! the config objects that point at it, so a reload keeps its entries.
//!
//! The index: a primary key (scheme, host, path, query by default) maps to the stored
//! responses for it, one per secondary key (RFC 9111 §4.1: the request fields its `Vary`
//! nominates). Each stored response (an [`Entry`]) is the origin's representation (the
//! *source*, as received: identity or already encoded) plus the *variants* made from it, one per
//! other content coding, produced once on first demand and then served from storage ("compress
//! once, serve many"). Freshness is the source's: a variant lives and dies with it.
//!
//! What the zone does not know: HTTP policy (see [`crate::policy`], applied by the caller),
//! sockets, and how variants are encoded (the caller hands the zone a body to store).

mod fence;
mod fill;
mod index;
mod purge;
mod shared;
mod stats;

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use sluice_core::{Body, ContentCoding};

pub use fence::Fence;
pub use fill::FillOutcome;
pub use index::{Entry, Variant};
pub use purge::{TAG_HEADERS, tags_of};
pub use shared::SharedRef;
pub use stats::{CacheStatus, Stats};

use crate::lock::{Flights, Join, Publisher};
use crate::meta::Meta;
use crate::storage::shared::SharedTier;
use crate::storage::{ObjectId, Storage, StoredBody};
use crate::vary::AcceptEncodingKey;
use fence::Fences;
use index::Index;

/// What a flight publishes to its followers: the head of the response being stored.
pub type Head = Arc<Meta>;

/// The in-flight misses and variant productions of a zone, keyed by the object they will store.
pub type ZoneFlights = Flights<ObjectId, Head>;

/// Settings of a zone that are not its storage's.
#[derive(Debug, Clone)]
pub struct ZoneSettings {
    pub name: String,
    /// Larger bodies are streamed through, not stored.
    pub max_object_size: u64,
    /// Send `Surrogate-Key`, `Cache-Tag` and `xkey` on to clients (by default they are
    /// removed: they are meant for caches).
    pub keep_tag_headers: bool,
}

/// One cache zone.
pub struct Zone {
    settings: ZoneSettings,
    storage: Arc<dyn Storage>,
    index: Arc<Index>,
    flights: ZoneFlights,
    stats: Arc<Stats>,
    /// Per key: a fill whose request went upstream before its key was invalidated commits
    /// nothing (see [`fence`]).
    fences: Arc<Fences>,
    /// The fleet's shared tier behind the local ones, if configured.
    shared: Option<Arc<SharedTier>>,
}

impl Zone {
    /// A zone over `storage`, its index rebuilt from what the storage already holds (the disk
    /// tier survives restarts). `index` must be the one whose evict listener `storage` was
    /// built with ([`Zone::evict_listener`]).
    pub async fn open(
        settings: ZoneSettings,
        storage: Arc<dyn Storage>,
        index: Arc<Index>,
    ) -> io::Result<Arc<Zone>> {
        Self::open_shared(settings, storage, index, None).await
    }

    /// [`Zone::open`], with a shared tier behind the local ones (`[caches.NAME.shared]`).
    pub async fn open_shared(
        settings: ZoneSettings,
        storage: Arc<dyn Storage>,
        index: Arc<Index>,
        shared: Option<Arc<SharedTier>>,
    ) -> io::Result<Arc<Zone>> {
        let listed = storage.list().await?;
        let mut dropped = Vec::new();
        for object in listed {
            match Meta::decode(&object.meta) {
                Ok(meta) => index.restore(object.id, meta, object.meta.clone()),
                Err(err) => {
                    tracing::warn!(zone = %settings.name, "dropping a stored object whose metadata does not decode: {err}");
                    dropped.push(object.id);
                }
            }
        }
        for id in index.orphans().into_iter().chain(dropped) {
            storage.remove(id).await?;
        }
        let zone = Arc::new(Zone {
            settings,
            storage,
            index,
            flights: Flights::new(),
            stats: Arc::new(Stats::default()),
            fences: Arc::default(),
            shared,
        });
        zone.listen_for_purges();
        Ok(zone)
    }

    /// A fresh index and the listener a storage calls when it drops an object on its own.
    pub fn evict_listener() -> (Arc<Index>, crate::storage::EvictListener) {
        let index = Arc::new(Index::default());
        let weak = Arc::downgrade(&index);
        let listener: crate::storage::EvictListener = Arc::new(move |id| {
            if let Some(index) = weak.upgrade() {
                index.forget(id);
            }
        });
        (index, listener)
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &ZoneSettings {
        &self.settings
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Stored responses for a primary key (for tests and purge listings).
    pub fn entries(&self, primary: &str) -> Vec<Arc<Entry>> {
        self.index.entries(primary)
    }

    /// The stored response whose secondary key matches `request` (RFC 9111 §4.1), if any.
    pub fn find(
        &self,
        primary: &str,
        request: &HeaderMap,
        accept_encoding: AcceptEncodingKey,
    ) -> Option<Arc<Entry>> {
        self.index.find(primary, request, accept_encoding)
    }

    /// The id of the source object of `primary` under secondary key `vary`.
    pub fn source_id(primary: &str, vary: &str) -> ObjectId {
        ObjectId::of(&[primary.as_bytes(), vary.as_bytes(), b"source"])
    }

    /// The id of a variant of that source in `coding`.
    pub fn variant_id(primary: &str, vary: &str, coding: ContentCoding) -> ObjectId {
        ObjectId::of(&[
            primary.as_bytes(),
            vary.as_bytes(),
            coding.as_str().as_bytes(),
        ])
    }

    /// Lead or follow the production of object `id` (a miss of a source, or a variant).
    pub fn join(&self, id: ObjectId) -> Join<ObjectId, Head> {
        self.flights.join(id)
    }

    /// A fence for `primary`: take it when a request for the key goes upstream, hand it to
    /// [`Zone::store_source`]; an invalidation of the key meanwhile means nothing is stored.
    pub fn fence(&self, primary: &str) -> Fence {
        self.fences.fence(primary)
    }

    /// Primary keys with a request in flight that holds a [`Fence`] (tests: it must come back
    /// to 0, the registry holds nothing for finished requests).
    pub fn fenced_keys(&self) -> usize {
        self.fences.keys()
    }

    /// The flights in progress (tests).
    pub fn flights(&self) -> &ZoneFlights {
        &self.flights
    }

    /// Read a stored object's body, if it is still the one whose stored metadata is
    /// `expected` (another response may have been stored under the same id meanwhile: its body
    /// must not go out with the old headers). `None`: gone (evicted, lost by the disk: the index
    /// forgets it) or replaced; the caller goes on as for a miss.
    pub async fn body(&self, id: ObjectId, expected: &Bytes) -> Option<(u64, Body)> {
        match self.storage.get(id).await {
            Ok(Some(object)) if object.meta != *expected => None,
            Ok(Some(object)) => {
                let body = match object.body {
                    StoredBody::Memory(bytes) => Body::full(bytes),
                    StoredBody::Stream(stream) => Body::stream(http_body_util::StreamBody::new(
                        futures_util::StreamExt::map(stream, |chunk| {
                            chunk.map(http_body::Frame::data)
                        }),
                    )),
                };
                Some((object.body_len, body))
            }
            Ok(None) => {
                self.index.forget(id);
                None
            }
            Err(err) => {
                tracing::warn!(zone = %self.settings.name, "reading a stored object failed: {err}");
                self.index.forget(id);
                None
            }
        }
    }

    /// Store a new source response for `meta`'s keys from `body`, fanning it out through
    /// `publisher` as it arrives; replaces the entry stored under the same keys (and drops its
    /// variants) once committed. Runs in its own task, so the object is completed and stored
    /// even if the client that caused the miss goes away. Nothing is committed if `fence` has
    /// been crossed by then.
    pub fn store_source(
        self: &Arc<Self>,
        publisher: Publisher<ObjectId, Head>,
        meta: Meta,
        body: Body,
        fence: Fence,
    ) {
        let retain = crate::policy::retention(
            &meta,
            &crate::policy::Settings::default(),
            std::time::SystemTime::now(),
        );
        self.store_source_retained(publisher, meta, body, fence, retain);
    }

    /// [`Zone::store_source`], kept in the shared tier (if any) for `retain`
    /// ([`crate::policy::retention`] under the route's settings).
    pub fn store_source_retained(
        self: &Arc<Self>,
        publisher: Publisher<ObjectId, Head>,
        meta: Meta,
        body: Body,
        fence: Fence,
        retain: std::time::Duration,
    ) {
        let id = Self::source_id(&meta.primary_key, meta.vary_key.as_str());
        fill::spawn(
            self.clone(),
            publisher,
            id,
            meta,
            body,
            fill::Target::Source(fence, retain),
        );
    }

    /// Store a variant of `entry` in `coding` from `body` (the source transformed by the
    /// caller), fanning it out through `publisher`; counted as one variant made.
    pub fn store_variant(
        self: &Arc<Self>,
        publisher: Publisher<ObjectId, Head>,
        entry: Arc<Entry>,
        coding: ContentCoding,
        meta: Meta,
        body: Body,
    ) {
        let id = Self::variant_id(&meta.primary_key, meta.vary_key.as_str(), coding);
        self.stats.variant_made(coding);
        // No fence: a variant is committed only to the entry it was made from, and only while
        // that entry is the stored one (an invalidation removes it).
        let target = fill::Target::Variant(entry, coding);
        fill::spawn(self.clone(), publisher, id, meta, body, target);
    }

    /// Replace the stored headers of `entry` (a 304 from the origin, RFC 9111 §4.3.4); the
    /// body and variants stay.
    pub async fn freshen(&self, entry: &Arc<Entry>, meta: Meta) {
        // Replaced meanwhile: these headers describe a body that is no longer stored.
        if !self.index.is_current(entry) {
            return;
        }
        let blob = meta.encode();
        entry.set_meta(Arc::new(meta), blob.clone());
        // Revalidated: whatever a soft purge meant, the origin has answered since.
        entry.set_soft_purged(false);
        if let Err(err) = self.storage.update_meta(entry.id, blob).await {
            tracing::warn!(zone = %self.settings.name, "updating stored headers failed: {err}");
        }
    }

    /// Replace the stored headers of `entry`'s variants after its source was freshened: a
    /// variant is the same response in another coding, so it carries the new `Date`,
    /// `Cache-Control`, ... too. `meta_of` makes a variant's headers from the fresh source's.
    pub async fn freshen_variants(&self, entry: &Arc<Entry>, meta_of: impl Fn(&Variant) -> Meta) {
        if !self.index.is_current(entry) {
            return;
        }
        for variant in entry.variants() {
            let mut meta = meta_of(&variant);
            meta.body_len = variant.body_len;
            let blob = meta.encode();
            entry.set_variant_meta(variant.coding, Arc::new(meta), blob.clone());
            if let Err(err) = self.storage.update_meta(variant.id, blob).await {
                tracing::warn!(zone = %self.settings.name, "updating a variant's stored headers failed: {err}");
            }
        }
    }

    /// Remove every stored response of `primary` (RFC 9111 §4.4, purge), here and, with a
    /// shared tier, in it and on every instance sharing it. Returns how many were here.
    pub async fn invalidate(&self, primary: &str) -> usize {
        let removed = self.invalidate_local(primary).await;
        self.purge_fleet(purge::Purge::Key(primary.to_string()), false)
            .await;
        removed
    }

    /// Remove every stored response whose primary key starts with `prefix`, here and across
    /// the fleet. Returns how many were here.
    pub async fn purge_prefix(&self, prefix: &str) -> usize {
        let removed = self.purge_prefix_local(prefix).await;
        self.purge_fleet(purge::Purge::Prefix(prefix.to_string()), true)
            .await;
        removed
    }

    /// [`Zone::invalidate`] in this instance's tiers only.
    async fn invalidate_local(&self, primary: &str) -> usize {
        // Fences first, then the index: a fill commits under the index lock after checking its
        // fence, so it either sees the fence crossed or is removed here.
        self.fences.cross(primary);
        let ids = self.index.remove_primary(primary);
        self.remove_objects(ids).await
    }

    async fn purge_prefix_local(&self, prefix: &str) -> usize {
        self.fences.cross_prefix(prefix);
        let ids = self.index.remove_prefix(prefix);
        self.remove_objects(ids).await
    }

    async fn remove_objects(&self, ids: Vec<(ObjectId, bool)>) -> usize {
        let mut entries = 0;
        for (id, is_source) in ids {
            entries += usize::from(is_source);
            if let Err(err) = self.storage.remove(id).await {
                tracing::warn!(zone = %self.settings.name, "removing a stored object failed: {err}");
            }
        }
        Stats::add(&self.stats.invalidated, entries as u64);
        entries
    }

    /// Stored responses (sources) in the index.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Put a written object in the index; false when it may not be (its fence was crossed, or
    /// the source of a variant was replaced): the caller removes it from storage.
    fn commit(
        &self,
        id: ObjectId,
        meta: Arc<Meta>,
        blob: Bytes,
        body_len: u64,
        target: &fill::Target,
    ) -> bool {
        match target {
            fill::Target::Source(fence, _) => {
                let Some(replaced) = self
                    .index
                    .insert_source(id, meta, blob, body_len, || !fence.crossed())
                else {
                    return false;
                };
                // The old response's variants are of a representation that is no more.
                for old in replaced {
                    let storage = self.storage.clone();
                    tokio::spawn(async move {
                        let _ = storage.remove(old).await;
                    });
                }
                true
            }
            // False when the source was replaced while this variant was made: it describes
            // nothing.
            fill::Target::Variant(entry, coding) => self.index.insert_variant(
                entry,
                Variant {
                    coding: *coding,
                    id,
                    meta,
                    blob,
                    body_len,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests;
