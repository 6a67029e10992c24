//! The in-memory index of a zone: which responses are stored under which keys, with their
//! metadata, so a lookup never reads storage before it knows it has a usable hit.
//!
//! One mutex over two maps: lookups hold it for a hash probe and an `Arc` clone. The storage
//! tiers never call into the index while it is locked by the index's own callers (the evict
//! listener takes the lock on its own), so there is no lock-order problem.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderMap;
use sluice_core::ContentCoding;

use super::Zone;
use crate::lock::lock;
use crate::meta::Meta;
use crate::storage::ObjectId;
use crate::vary::{AcceptEncodingKey, VaryKey, VaryRule, vary_key};

/// One stored response: the source object and the variants made from it.
pub struct Entry {
    /// The source object.
    pub id: ObjectId,
    pub primary: String,
    pub vary_key: VaryKey,
    /// Exact length of the source body.
    pub body_len: u64,
    state: Mutex<EntryState>,
    refreshing: AtomicBool,
    /// Where the source is in the zone's shared tier, if there is one and it is there.
    pub(super) shared: Mutex<Option<super::shared::SharedRef>>,
    /// Soft-purged: to be treated as stale (served within its stale windows while one
    /// request refreshes it) until it is replaced or revalidated.
    soft_purged: AtomicBool,
}

struct EntryState {
    meta: Arc<Meta>,
    /// `meta` as stored: compared with what storage returns, so a body replaced under the
    /// same id meanwhile is never sent with these headers.
    blob: Bytes,
    rule: VaryRule,
    variants: Vec<Variant>,
}

/// A variant made from a source: the same representation in another content coding.
#[derive(Clone)]
pub struct Variant {
    pub coding: ContentCoding,
    pub id: ObjectId,
    pub meta: Arc<Meta>,
    /// `meta` as stored (see `EntryState::blob`).
    pub blob: Bytes,
    pub body_len: u64,
}

impl Entry {
    fn new(id: ObjectId, meta: Arc<Meta>, blob: Bytes, body_len: u64) -> Self {
        Self {
            id,
            primary: meta.primary_key.clone(),
            vary_key: meta.vary_key.clone(),
            body_len,
            state: Mutex::new(EntryState {
                rule: VaryRule::of(&meta.headers),
                meta,
                blob,
                variants: Vec::new(),
            }),
            refreshing: AtomicBool::new(false),
            shared: Mutex::new(None),
            soft_purged: AtomicBool::new(false),
        }
    }

    /// The stored metadata (headers, times) of the source.
    pub fn meta(&self) -> Arc<Meta> {
        lock(&self.state).meta.clone()
    }

    /// The stored metadata and its stored bytes, read together.
    pub fn meta_and_blob(&self) -> (Arc<Meta>, Bytes) {
        let state = lock(&self.state);
        (state.meta.clone(), state.blob.clone())
    }

    pub(super) fn set_meta(&self, meta: Arc<Meta>, blob: Bytes) {
        let mut state = lock(&self.state);
        state.rule = VaryRule::of(&meta.headers);
        state.meta = meta;
        state.blob = blob;
    }

    /// The stored variant in `coding`, if it has been made.
    pub fn variant(&self, coding: ContentCoding) -> Option<Variant> {
        lock(&self.state)
            .variants
            .iter()
            .find(|v| v.coding == coding)
            .cloned()
    }

    /// Every stored variant (to refresh their headers with the source's).
    pub fn variants(&self) -> Vec<Variant> {
        lock(&self.state).variants.clone()
    }

    pub(super) fn set_variant_meta(&self, coding: ContentCoding, meta: Arc<Meta>, blob: Bytes) {
        let mut state = lock(&self.state);
        if let Some(variant) = state.variants.iter_mut().find(|v| v.coding == coding) {
            variant.meta = meta;
            variant.blob = blob;
        }
    }

    /// Whether a soft purge marked this entry stale (see [`super::Zone::purge_tag`]).
    pub fn soft_purged(&self) -> bool {
        self.soft_purged.load(Ordering::Acquire)
    }

    pub(super) fn set_soft_purged(&self, on: bool) {
        self.soft_purged.store(on, Ordering::Release);
    }

    /// Claim the background refresh of this entry; false if another request holds it.
    pub fn start_refresh(&self) -> bool {
        !self.refreshing.swap(true, Ordering::AcqRel)
    }

    pub fn end_refresh(&self) {
        self.refreshing.store(false, Ordering::Release);
    }

    pub fn refreshing(&self) -> bool {
        self.refreshing.load(Ordering::Acquire)
    }

    fn matches(&self, request: &HeaderMap, accept_encoding: AcceptEncodingKey) -> bool {
        let state = lock(&self.state);
        vary_key(&state.rule, request, accept_encoding).is_some_and(|key| key == self.vary_key)
    }
}

/// Most stored responses per primary key (one per secondary key): `Vary` on a field with many
/// values (User-Agent, Cookie) must not grow one key's list, which every lookup scans, without
/// bound.
pub const MAX_PER_KEY: usize = 32;

/// Whose an object is, so an eviction finds what to forget.
enum Owner {
    Source { primary: String },
    Variant { primary: String, source: ObjectId },
}

#[derive(Default)]
struct Inner {
    primaries: HashMap<String, Vec<Arc<Entry>>>,
    objects: HashMap<ObjectId, Owner>,
    /// Variants read back at start-up before their source was: attached by `orphans`.
    restored_variants: Vec<(ObjectId, Meta, Bytes)>,
    sources: usize,
}

/// The index of one zone.
#[derive(Default)]
pub struct Index {
    inner: Mutex<Inner>,
}

impl Index {
    pub(super) fn find(
        &self,
        primary: &str,
        request: &HeaderMap,
        accept_encoding: AcceptEncodingKey,
    ) -> Option<Arc<Entry>> {
        let inner = lock(&self.inner);
        inner
            .primaries
            .get(primary)?
            .iter()
            .find(|entry| entry.matches(request, accept_encoding))
            .cloned()
    }

    pub(super) fn entries(&self, primary: &str) -> Vec<Arc<Entry>> {
        lock(&self.inner)
            .primaries
            .get(primary)
            .cloned()
            .unwrap_or_default()
    }

    /// Every stored response (tag purges look at each one's headers).
    pub(super) fn all_entries(&self) -> Vec<Arc<Entry>> {
        lock(&self.inner)
            .primaries
            .values()
            .flatten()
            .cloned()
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.inner).sources
    }

    /// Add a committed source; returns the objects it makes obsolete, to be removed from
    /// storage: the variants of the entry it replaces, and the entries of the same primary key
    /// with another `Vary` rule (RFC 9111 §4.1: the most recent response decides how the
    /// resource varies; an older rule would otherwise keep matching and shadow this one).
    /// At most [`MAX_PER_KEY`] responses are kept per primary key, the oldest going first.
    /// `admit` is asked under the index lock (an invalidation takes it too): `None` when it
    /// says no, and nothing changes.
    pub(super) fn insert_source(
        &self,
        id: ObjectId,
        meta: Arc<Meta>,
        blob: Bytes,
        body_len: u64,
        admit: impl FnOnce() -> bool,
    ) -> Option<Vec<ObjectId>> {
        let entry = Arc::new(Entry::new(id, meta, blob, body_len));
        let rule = lock(&entry.state).rule.clone();
        let mut inner = lock(&self.inner);
        if !admit() {
            return None;
        }
        let primary = entry.primary.clone();
        let list = inner.primaries.entry(primary.clone()).or_default();
        let mut dropped = Vec::new();
        list.retain(|e| {
            let keep = e.id != id && lock(&e.state).rule == rule;
            if !keep {
                dropped.push(e.clone());
            }
            keep
        });
        while list.len() >= MAX_PER_KEY {
            dropped.push(list.remove(0));
        }
        list.push(entry);
        let mut obsolete = Vec::new();
        inner.sources = inner.sources.saturating_sub(dropped.len()) + 1;
        for old in dropped {
            if old.id != id {
                inner.objects.remove(&old.id);
                obsolete.push(old.id);
            }
            for variant in &lock(&old.state).variants {
                inner.objects.remove(&variant.id);
                obsolete.push(variant.id);
            }
        }
        inner.objects.insert(id, Owner::Source { primary });
        Some(obsolete)
    }

    /// Add a committed variant to `entry`, unless `entry` is no longer the stored one.
    pub(super) fn insert_variant(&self, entry: &Arc<Entry>, variant: Variant) -> bool {
        let mut inner = lock(&self.inner);
        let current = inner
            .primaries
            .get(&entry.primary)
            .is_some_and(|list| list.iter().any(|e| Arc::ptr_eq(e, entry)));
        if !current {
            return false;
        }
        inner.objects.insert(
            variant.id,
            Owner::Variant {
                primary: entry.primary.clone(),
                source: entry.id,
            },
        );
        let mut state = lock(&entry.state);
        state.variants.retain(|v| v.coding != variant.coding);
        state.variants.push(variant);
        true
    }

    /// An object read back at start-up.
    pub(super) fn restore(&self, id: ObjectId, meta: Meta, blob: Bytes) {
        if id == Zone::source_id(&meta.primary_key, meta.vary_key.as_str()) {
            let body_len = meta.body_len;
            self.insert_source(id, Arc::new(meta), blob, body_len, || true);
        } else {
            lock(&self.inner).restored_variants.push((id, meta, blob));
        }
    }

    /// Whether `entry` is still the one stored under its keys (not replaced, removed, evicted).
    pub(super) fn is_current(&self, entry: &Arc<Entry>) -> bool {
        let inner = lock(&self.inner);
        inner
            .primaries
            .get(&entry.primary)
            .is_some_and(|list| list.iter().any(|e| Arc::ptr_eq(e, entry)))
    }

    /// Attach the variants read back at start-up to their sources; returns the ids of those
    /// whose source is gone (to be removed from storage).
    pub(super) fn orphans(&self) -> Vec<ObjectId> {
        let restored = std::mem::take(&mut lock(&self.inner).restored_variants);
        let mut orphans = Vec::new();
        for (id, meta, blob) in restored {
            let coding = ContentCoding::from_token(&meta.variant);
            // A variant is made of one response and carries its receive time (kept in step
            // when both are freshened): one made of an older response is an orphan.
            let entry = self.entries(&meta.primary_key).into_iter().find(|e| {
                e.vary_key == meta.vary_key && e.meta().response_time == meta.response_time
            });
            match (coding, entry) {
                (Some(coding), Some(entry))
                    if id
                        == Zone::variant_id(&meta.primary_key, meta.vary_key.as_str(), coding) =>
                {
                    let body_len = meta.body_len;
                    let variant = Variant {
                        coding,
                        id,
                        meta: Arc::new(meta),
                        blob,
                        body_len,
                    };
                    self.insert_variant(&entry, variant);
                }
                _ => orphans.push(id),
            }
        }
        orphans
    }

    /// A storage dropped `id` on its own: forget it (a source takes its variants along; they
    /// are left to the storage's own eviction, or removed by the next store of the key).
    pub(super) fn forget(&self, id: ObjectId) {
        let mut inner = lock(&self.inner);
        match inner.objects.remove(&id) {
            Some(Owner::Source { primary }) => {
                let mut gone = Vec::new();
                if let Some(list) = inner.primaries.get_mut(&primary) {
                    if let Some(pos) = list.iter().position(|e| e.id == id) {
                        let entry = list.remove(pos);
                        gone.extend(lock(&entry.state).variants.iter().map(|v| v.id));
                    }
                    if list.is_empty() {
                        inner.primaries.remove(&primary);
                    }
                }
                for variant in gone {
                    inner.objects.remove(&variant);
                }
                inner.sources = inner.sources.saturating_sub(1);
            }
            Some(Owner::Variant { primary, source }) => {
                if let Some(entry) = inner
                    .primaries
                    .get(&primary)
                    .and_then(|list| list.iter().find(|e| e.id == source))
                {
                    lock(&entry.state).variants.retain(|v| v.id != id);
                }
            }
            None => {}
        }
    }

    /// Remove every entry of `primary`; returns its objects (`true` for sources).
    pub(super) fn remove_primary(&self, primary: &str) -> Vec<(ObjectId, bool)> {
        let mut inner = lock(&self.inner);
        let entries = inner.primaries.remove(primary).unwrap_or_default();
        Self::drop_entries(&mut inner, entries)
    }

    /// Remove every entry whose primary key starts with `prefix`.
    pub(super) fn remove_prefix(&self, prefix: &str) -> Vec<(ObjectId, bool)> {
        let mut inner = lock(&self.inner);
        let keys: Vec<String> = inner
            .primaries
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        let mut entries = Vec::new();
        for key in keys {
            entries.extend(inner.primaries.remove(&key).unwrap_or_default());
        }
        Self::drop_entries(&mut inner, entries)
    }

    fn drop_entries(inner: &mut Inner, entries: Vec<Arc<Entry>>) -> Vec<(ObjectId, bool)> {
        let mut ids = Vec::new();
        for entry in entries {
            inner.objects.remove(&entry.id);
            inner.sources = inner.sources.saturating_sub(1);
            ids.push((entry.id, true));
            for variant in &lock(&entry.state).variants {
                inner.objects.remove(&variant.id);
                ids.push((variant.id, false));
            }
        }
        ids
    }
}
