//! A zone and its shared tier ([`crate::storage::shared`]): on a local miss, the stored response
//! another instance wrote is looked up, under the tier's deadline, and copied into the local
//! tiers with the variants made of it (so a coding made once anywhere in the fleet is not made
//! again); what this instance stores is written to the tier after its fill committed.
//!
//! Correctness rules, each tested: a record is used only for its own primary key (the tag is a
//! hash) and only when its `Vary` rule gives the request's secondary key; a body is used only
//! when every chunk is there and the lengths agree; a copy is committed under the key's fence,
//! so a purge meanwhile wins; a variant is used only with the source generation it was made of.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use sluice_core::ContentCoding;

use super::{Entry, Fence, Variant, Zone};
use crate::lock::lock;
use crate::meta::Meta;
use crate::storage::ObjectId;
use crate::storage::shared::{
    Failure, Field, Keys, Record, SharedStats, SharedTier, Write, ms_of, now_ms, record,
};
use crate::vary::{AcceptEncodingKey, VaryRule, vary_key};

/// Where an entry's source lives in the shared tier: its variants are written naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRef {
    pub generation: u64,
    pub expires_ms: u64,
}

/// A stored response read back from the shared tier.
struct Found {
    meta: Meta,
    record: Record,
    body: Bytes,
    variants: Vec<(ContentCoding, Meta, Record, Bytes)>,
}

impl Zone {
    pub fn shared(&self) -> Option<&Arc<SharedTier>> {
        self.shared.as_ref()
    }

    /// A local miss: the stored response for the request in the shared tier, copied into the
    /// local tiers and the index. `None` on a miss, and on any failure of the tier (counted):
    /// never an error, never longer than the tier's deadline.
    pub async fn find_shared(
        &self,
        primary: &str,
        request: &HeaderMap,
        accept_encoding: AcceptEncodingKey<'_>,
    ) -> Option<Arc<Entry>> {
        let shared = self.shared.clone()?;
        let fence = self.fence(primary);
        let started = Instant::now();
        let deadline = started + shared.settings().deadline;
        let keys = Keys::of(&self.settings.name, primary);
        let result = fetch(&shared, &keys, primary, request, accept_encoding, deadline).await;
        let stats = shared.stats();
        if !matches!(result, Err(Failure::Skipped)) {
            stats.observe(started.elapsed());
        }
        match result {
            Ok(Some(found)) => {
                SharedStats::add(&stats.hits, 1);
                self.promote(found, fence).await;
                self.index.find(primary, request, accept_encoding)
            }
            Ok(None) => {
                SharedStats::add(&stats.misses, 1);
                None
            }
            Err(Failure::Skipped) => {
                SharedStats::add(&stats.skipped, 1);
                None
            }
            Err(Failure::Timeout) => {
                SharedStats::add(&stats.timeouts, 1);
                None
            }
            Err(Failure::Error(_)) => {
                SharedStats::add(&stats.errors, 1);
                None
            }
        }
    }

    /// Copy `found` into the local tiers and the index (nothing when its key was invalidated
    /// since the lookup began).
    async fn promote(&self, found: Found, fence: Fence) {
        let primary = found.meta.primary_key.clone();
        let vary = found.meta.vary_key.as_str().to_string();
        let id = Zone::source_id(&primary, &vary);
        let blob = found.record.meta.clone();
        if !self.write_local(id, &found.body, &blob).await {
            return;
        }
        let len = found.body.len() as u64;
        let meta = Arc::new(found.meta);
        let Some(replaced) = self
            .index
            .insert_source(id, meta, blob, len, || !fence.crossed())
        else {
            let _ = self.storage.remove(id).await;
            return;
        };
        for old in replaced {
            let _ = self.storage.remove(old).await;
        }
        let Some(entry) = self
            .index
            .entries(&primary)
            .into_iter()
            .find(|e| e.id == id)
        else {
            return;
        };
        entry.set_shared(SharedRef {
            generation: found.record.generation,
            expires_ms: found.record.expires_ms,
        });
        for (coding, meta, record, body) in found.variants {
            let vid = Zone::variant_id(&primary, &vary, coding);
            if !self.write_local(vid, &body, &record.meta).await {
                continue;
            }
            let variant = Variant {
                coding,
                id: vid,
                meta: Arc::new(meta),
                blob: record.meta,
                body_len: body.len() as u64,
            };
            if !self.index.insert_variant(&entry, variant) {
                let _ = self.storage.remove(vid).await;
            }
        }
    }

    async fn write_local(&self, id: ObjectId, body: &Bytes, blob: &Bytes) -> bool {
        let Ok(Some(mut writer)) = self.storage.writer(id, Some(body.len() as u64)).await else {
            return false;
        };
        if !body.is_empty() && writer.write(body.clone()).await.is_err() {
            return false;
        }
        writer.finish(blob.clone()).await.is_ok()
    }

    /// After a fill committed `id` locally: write it to the shared tier in the background
    /// (a source kept for `retain`; a variant as long as its source).
    pub(super) fn write_shared(
        &self,
        entry: Option<Arc<Entry>>,
        coding: Option<ContentCoding>,
        meta: &Meta,
        blob: Bytes,
        body: Bytes,
        retain: Option<Duration>,
    ) {
        let (Some(shared), Some(entry)) = (self.shared.clone(), entry) else {
            return;
        };
        if body.len() as u64 > shared.settings().max_object_size {
            return;
        }
        let now = SystemTime::now();
        let (field, record) = match (coding, retain) {
            (None, Some(retain)) => {
                let retain = retain.min(shared.settings().max_ttl);
                if retain < Duration::from_secs(1) {
                    return;
                }
                let generation = shared.next_generation();
                let expires_ms = ms_of(now).saturating_add(retain.as_millis() as u64);
                entry.set_shared(SharedRef {
                    generation,
                    expires_ms,
                });
                let record = Record {
                    generation,
                    source_generation: 0,
                    expires_ms,
                    body_len: body.len() as u64,
                    chunks: record::chunks_for(body.len() as u64) as u32,
                    meta: blob,
                };
                (record::source_field(meta.vary_key.as_str()), record)
            }
            (Some(coding), _) => {
                let Some(source) = entry.shared() else { return };
                if source.expires_ms <= now_ms() + 1000 {
                    return;
                }
                let record = Record {
                    generation: shared.next_generation(),
                    source_generation: source.generation,
                    expires_ms: source.expires_ms,
                    body_len: body.len() as u64,
                    chunks: record::chunks_for(body.len() as u64) as u32,
                    meta: blob,
                };
                (
                    record::variant_field(meta.vary_key.as_str(), coding),
                    record,
                )
            }
            (None, None) => return,
        };
        let keys = Keys::of(&self.settings.name, &meta.primary_key);
        let primary = meta.primary_key.clone();
        let index = self.index.clone();
        let tags = if coding.is_none() {
            super::tags_of(&meta.headers)
        } else {
            Vec::new()
        };
        tokio::spawn(async move {
            // Removed or replaced meanwhile (a purge): not indexed in the tier either.
            let still_wanted = || index.is_current(&entry);
            shared
                .write(
                    Write {
                        keys,
                        primary,
                        field,
                        record,
                        body,
                        tags,
                    },
                    still_wanted,
                )
                .await;
        });
    }
}

impl Entry {
    pub(super) fn set_shared(&self, shared: SharedRef) {
        *lock(&self.shared) = Some(shared);
    }

    /// Where this entry's source is in the shared tier, if it was written there or read from it.
    pub fn shared(&self) -> Option<SharedRef> {
        *lock(&self.shared)
    }
}

/// Read the index record, pick the stored response for the request, read its body and the
/// variants made of it.
async fn fetch(
    shared: &Arc<SharedTier>,
    keys: &Keys,
    primary: &str,
    request: &HeaderMap,
    accept_encoding: AcceptEncodingKey<'_>,
    deadline: Instant,
) -> Result<Option<Found>, Failure> {
    let fields = shared.read_index(keys, deadline).await?;
    let now = now_ms();
    let mut sources = Vec::new();
    let mut variants = Vec::new();
    for (field, value) in fields {
        let Some(field) = std::str::from_utf8(&field).ok().and_then(Field::parse) else {
            continue;
        };
        let Some(record) = Record::decode(&Bytes::from(value)) else {
            continue;
        };
        let Ok(meta) = Meta::decode(&record.meta) else {
            continue;
        };
        // Another key under a colliding tag, a record past its time, or a length that
        // disagrees with the stored headers: not this response.
        if record.expires_ms <= now
            || record.body_len > shared.settings().max_object_size
            || meta.primary_key != primary
            || meta.body_len != record.body_len
        {
            continue;
        }
        match field {
            Field::Source { .. } => sources.push((meta, record)),
            Field::Variant { coding, .. } if meta.variant == coding.as_str() => {
                variants.push((coding, meta, record));
            }
            Field::Variant { .. } => {}
        }
    }
    // RFC 9111 §4.1: the stored response whose Vary rule gives this request its secondary key;
    // of several, the most recent (§4.1: "the most recent response ... is used").
    let Some((meta, record)) = sources
        .into_iter()
        .filter(|(meta, _)| {
            vary_key(&VaryRule::of(&meta.headers), request, accept_encoding)
                .is_some_and(|key| key == meta.vary_key)
        })
        .max_by_key(|(meta, _)| meta.response_time)
    else {
        return Ok(None);
    };
    let variants: Vec<_> = variants
        .into_iter()
        .filter(|(_, vmeta, vrecord)| {
            vrecord.source_generation == record.generation && vmeta.vary_key == meta.vary_key
        })
        .collect();
    let mut chunk_keys = keys.chunks(&record);
    for (_, _, vrecord) in &variants {
        chunk_keys.extend(keys.chunks(vrecord));
    }
    let mut chunks = shared.read_chunks(chunk_keys, deadline).await?.into_iter();
    let Some(body) = assemble(&mut chunks, &record) else {
        return Ok(None);
    };
    let mut complete = Vec::new();
    for (coding, vmeta, vrecord) in variants {
        if let Some(vbody) = assemble(&mut chunks, &vrecord) {
            complete.push((coding, vmeta, vrecord, vbody));
        }
    }
    Ok(Some(Found {
        meta,
        record,
        body,
        variants: complete,
    }))
}

/// The body of `record` from the next of `chunks`, if every one is there and they add up.
fn assemble(chunks: &mut impl Iterator<Item = Option<Vec<u8>>>, record: &Record) -> Option<Bytes> {
    let mut body = BytesMut::with_capacity(usize::try_from(record.body_len).ok()?);
    let mut complete = true;
    for _ in 0..record.chunks {
        match chunks.next().flatten() {
            Some(chunk) if complete => body.extend_from_slice(&chunk),
            _ => complete = false,
        }
    }
    (complete && body.len() as u64 == record.body_len).then(|| body.freeze())
}
