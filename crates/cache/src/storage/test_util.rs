//! Helpers the tiers' tests share: ids, bodies with a recognisable pattern, writing an object in
//! chunks, reading a body back whatever its form, and a listener that records evictions.

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;

use super::{EvictListener, Object, ObjectId, Storage, StoredBody};

pub(crate) const KIB: usize = 1024;
pub(crate) const MIB: usize = 1024 * 1024;

pub(crate) fn id(n: u32) -> ObjectId {
    ObjectId::of(&[b"test", &n.to_be_bytes()])
}

/// `len` bytes that differ at every offset modulo a prime, so a shifted, repeated or dropped
/// chunk shows in a comparison.
pub(crate) fn body(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed.wrapping_mul(31))
        .collect()
}

/// Writes `body` in `chunk`-sized pieces and finishes with `meta`. Fails if the tier declined.
pub(crate) async fn put(
    storage: &dyn Storage,
    id: ObjectId,
    meta: &[u8],
    body: &[u8],
    chunk: usize,
) -> io::Result<()> {
    let mut writer = storage
        .writer(id, Some(body.len() as u64))
        .await?
        .ok_or_else(|| io::Error::other("declined"))?;
    for piece in body.chunks(chunk.max(1)) {
        writer.write(Bytes::copy_from_slice(piece)).await?;
    }
    writer.finish(Bytes::copy_from_slice(meta)).await
}

/// The body of `object`, collected; also checks `body_len` against what was read.
pub(crate) async fn read_all(object: Object) -> io::Result<Vec<u8>> {
    let body = match object.body {
        StoredBody::Memory(bytes) => bytes.to_vec(),
        StoredBody::Stream(mut stream) => {
            let mut body = Vec::new();
            while let Some(chunk) = stream.next().await {
                body.extend_from_slice(&chunk?);
            }
            body
        }
    };
    assert_eq!(
        body.len() as u64,
        object.body_len,
        "body_len disagrees with the body"
    );
    Ok(body)
}

/// `(meta, body)` of `id`, or `None`.
pub(crate) async fn fetch(storage: &dyn Storage, id: ObjectId) -> Option<(Vec<u8>, Vec<u8>)> {
    let object = storage.get(id).await.unwrap()?;
    let meta = object.meta.to_vec();
    Some((meta, read_all(object).await.unwrap()))
}

/// Records the ids an [`EvictListener`] is called with.
#[derive(Clone, Default)]
pub(crate) struct Evicted(Arc<Mutex<Vec<ObjectId>>>);

impl Evicted {
    pub(crate) fn listener(&self) -> EvictListener {
        let seen = self.0.clone();
        Arc::new(move |id| seen.lock().unwrap().push(id))
    }

    pub(crate) fn ids(&self) -> Vec<ObjectId> {
        self.0.lock().unwrap().clone()
    }
}
