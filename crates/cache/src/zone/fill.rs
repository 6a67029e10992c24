//! The fill: one task per stored object that reads the body (the upstream's, or a variant being
//! encoded), fans it out to the readers through the flight's publisher, and writes it to
//! storage, committing the object at the end.
//!
//! Its own task, not the leader's response body: when the client that caused a miss goes away,
//! the object is still completed for the followers and for the next requests (nginx does the
//! same for cached responses). It reads as fast as the body comes while storing (the object is
//! bounded by the max object size); once the object will not be stored, it goes at the pace of
//! the slowest reader and stops when nobody reads.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use sluice_core::{Body, ContentCoding};

use super::{Entry, Fence, Head, Stats, Zone};
use crate::lock::Publisher;
use crate::meta::Meta;
use crate::storage::{ObjectId, ObjectWriter};

/// Bytes of a body held in full for the readers of its flight: past this, the flight is
/// detached (late requests go upstream; readers keep only what they have yet to read), so a
/// large object stored on disk is never held whole in memory.
pub const FANOUT_LIMIT: u64 = 16 * 1024 * 1024;

/// How long a detached fill waits for its slowest reader before cutting it off.
pub const STALLED: std::time::Duration = std::time::Duration::from_secs(30);

/// How a fill ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillOutcome {
    /// Stored and in the index.
    Stored,
    /// Delivered to its readers, not stored (too large, storage declined or failed).
    NotStored,
    /// The body failed (upstream reset, encoder error); readers got an error.
    Failed,
    /// Not stored and nobody was reading any more.
    Abandoned,
}

/// What a fill stores.
pub(super) enum Target {
    /// A source response; not committed once the fence is crossed. Kept this long in the
    /// shared tier.
    Source(Fence, std::time::Duration),
    /// A variant of a stored entry, in a coding.
    Variant(Arc<Entry>, ContentCoding),
}

pub(super) fn spawn(
    zone: Arc<Zone>,
    publisher: Publisher<ObjectId, Head>,
    id: ObjectId,
    meta: Meta,
    body: Body,
    target: Target,
) {
    tokio::spawn(async move {
        let outcome = run(&zone, publisher, id, meta, body, target).await;
        tracing::trace!(zone = %zone.name(), ?id, ?outcome, "fill ended");
    });
}

async fn run(
    zone: &Arc<Zone>,
    publisher: Publisher<ObjectId, Head>,
    id: ObjectId,
    mut meta: Meta,
    mut body: Body,
    target: Target,
) -> FillOutcome {
    // Locals drop in reverse order: the fence goes before the publisher settles the flight, so
    // whoever waited for the flight finds the fence registry without it.
    let mut publisher = publisher;
    let target = target;
    let max = zone.settings.max_object_size;
    let expected = http_body::Body::size_hint(&body).exact();
    let mut writer = if expected.is_some_and(|len| len > max) {
        Stats::add(&zone.stats.too_large, 1);
        None
    } else {
        open_writer(zone, id, expected).await
    };
    let mut detached = writer.is_none();
    if detached {
        publisher.detach();
    }
    let mut len = 0u64;
    // What the shared tier gets once the object is committed here (pieces, no copy), while
    // it stays within the tier's max object size.
    let shared_max = zone.shared().map(|s| s.settings().max_object_size);
    let mut copy: Option<Vec<Bytes>> = match (shared_max, expected) {
        (Some(max), Some(len)) if len > max => None,
        (Some(_), _) => Some(Vec::new()),
        (None, _) => None,
    };
    loop {
        // Detached, the fill goes at the slowest reader's pace, but not forever: a reader that
        // has not taken the window in STALLED is cut off and the others go on.
        while tokio::time::timeout(STALLED, publisher.room())
            .await
            .is_err()
        {
            let cut = publisher.cut_slowest();
            tracing::debug!(zone = %zone.name(), cut, "cut off readers that stopped reading");
        }
        if writer.is_none() && publisher.abandoned() {
            return FillOutcome::Abandoned;
        }
        let Some(frame) = body.frame().await else {
            break;
        };
        let data: Bytes = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers are not stored
            },
            Err(err) => {
                tracing::debug!(zone = %zone.name(), "the body of a response being cached failed: {err}");
                return FillOutcome::Failed;
            }
        };
        len += data.len() as u64;
        if let Some(pieces) = copy.as_mut() {
            if shared_max.is_some_and(|max| len > max) || writer.is_none() {
                copy = None;
            } else {
                pieces.push(data.clone());
            }
        }
        if len > FANOUT_LIMIT && !detached {
            // Still storing, but no longer holding the whole body for readers that may join
            // late: they go upstream, and the readers here keep only what they have not read.
            detached = true;
            publisher.detach();
        }
        if len > max && writer.is_some() {
            Stats::add(&zone.stats.too_large, 1);
            writer = None;
            detached = true;
            publisher.detach();
        }
        if let Some(w) = writer.as_mut()
            && let Err(err) = w.write(data.clone()).await
        {
            storage_failed(zone, "writing", &err);
            writer = None;
            detached = true;
            publisher.detach();
        }
        publisher.push(data);
    }
    publisher.end();
    let outcome = match writer {
        None => FillOutcome::NotStored,
        Some(writer) => {
            meta.body_len = len;
            let meta = Arc::new(meta);
            let blob = meta.encode();
            match writer.finish(blob.clone()).await {
                Ok(()) if zone.commit(id, meta.clone(), blob.clone(), len, &target) => {
                    Stats::add(&zone.stats.stored, 1);
                    if let Some(pieces) = copy {
                        share(zone, id, &meta, blob, pieces, &target);
                    }
                    FillOutcome::Stored
                }
                // Its key was purged or invalidated since the request went upstream (what
                // arrived may be what the invalidation meant to remove), or the source of a
                // variant was replaced.
                Ok(()) => {
                    let _ = zone.storage.remove(id).await;
                    FillOutcome::NotStored
                }
                Err(err) => {
                    storage_failed(zone, "committing", &err);
                    FillOutcome::NotStored
                }
            }
        }
    };
    drop(target);
    publisher.done();
    outcome
}

/// Hand a committed object to the shared tier (a background write).
fn share(
    zone: &Arc<Zone>,
    id: ObjectId,
    meta: &Meta,
    blob: Bytes,
    pieces: Vec<Bytes>,
    target: &Target,
) {
    let body = match pieces.len() {
        1 => pieces.into_iter().next().unwrap_or_default(),
        _ => {
            let mut whole = bytes::BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            for piece in pieces {
                whole.extend_from_slice(&piece);
            }
            whole.freeze()
        }
    };
    match target {
        Target::Source(_, retain) => {
            let entry = zone
                .index
                .entries(&meta.primary_key)
                .into_iter()
                .find(|e| e.id == id);
            zone.write_shared(entry, None, meta, blob, body, Some(*retain));
        }
        Target::Variant(entry, coding) => {
            zone.write_shared(Some(entry.clone()), Some(*coding), meta, blob, body, None);
        }
    }
}

async fn open_writer(
    zone: &Zone,
    id: ObjectId,
    expected: Option<u64>,
) -> Option<Box<dyn ObjectWriter>> {
    match zone.storage.writer(id, expected).await {
        Ok(Some(writer)) => Some(writer),
        Ok(None) => {
            Stats::add(&zone.stats.too_large, 1);
            None
        }
        Err(err) => {
            storage_failed(zone, "opening", &err);
            None
        }
    }
}

/// A failing storage never fails the response: it is delivered, not stored, and this says why.
fn storage_failed(zone: &Zone, doing: &str, err: &std::io::Error) {
    Stats::add(&zone.stats.store_errors, 1);
    tracing::warn!(
        zone = %zone.name(),
        tier = zone.storage.name(),
        "{doing} a cached object failed, the response is served without being stored: {err}"
    );
}
