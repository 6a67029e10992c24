//! Where cached objects live. A [`Storage`] keeps opaque objects: a small `meta` blob (encoded by
//! [`crate::meta`]; the storage never looks inside) and a body, under an [`ObjectId`]. Policy,
//! keys and variants are the zone's business, not the storage's, so another tier plugs in by
//! implementing this trait alone. The shared tier of a fleet ([`shared`]) is not one: it has an
//! index of its own, which the zone consults on a local miss.
//!
//! Tiers: [`memory`] (a byte budget with an eviction policy suited to a cache), [`disk`] (a
//! directory of files that survives restarts), [`tiered`] (memory in front of disk).
//!
//! A storage never fails a request: errors come back as `io::Error`, and the caller serves the
//! response anyway, logs and counts why the object was not stored.

mod body_len;
pub mod disk;
mod id_hash;
pub mod memory;
pub mod shared;
#[cfg(test)]
mod test_util;
pub mod tiered;

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

/// The address of one stored object: a hash of its primary key, secondary (vary) key and coding,
/// computed by the zone. 16 bytes of SHA-256: collisions are not a concern at any cache size.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 16]);

impl ObjectId {
    /// The id of `parts` joined unambiguously (each part length-prefixed).
    pub fn of(parts: &[&[u8]]) -> Self {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part);
        }
        let digest = hasher.finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        ObjectId(id)
    }

    /// Lowercase hex, 32 characters (file names of the disk tier).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parse [`ObjectId::to_hex`]'s output.
    pub fn from_hex(hex_str: &str) -> Option<Self> {
        let bytes = hex::decode(hex_str).ok()?;
        Some(ObjectId(bytes.try_into().ok()?))
    }
}

impl std::fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectId({})", self.to_hex())
    }
}

/// A stored object as read back.
pub struct Object {
    /// The meta blob as given to [`ObjectWriter::finish`] or [`Storage::update_meta`].
    pub meta: Bytes,
    /// Exact body length in bytes.
    pub body_len: u64,
    pub body: StoredBody,
}

/// A body as read back: whole in memory, or streamed from its tier in chunks (the disk tier never
/// loads a body whole).
pub enum StoredBody {
    Memory(Bytes),
    Stream(BoxStream<'static, io::Result<Bytes>>),
}

/// What [`Storage::list`] returns per object, to rebuild the zone's index at start-up.
pub struct Listed {
    pub id: ObjectId,
    pub meta: Bytes,
    pub body_len: u64,
}

/// Called with the id of every object a tier drops on its own (eviction for its budget, a file
/// that disappeared), so the zone's index stays in step. Not called for [`Storage::remove`], nor
/// for an object replaced under the same id. Called with none of the tier's locks held, possibly
/// from a blocking-pool thread: keep it short and never block on the storage from it.
pub type EvictListener = Arc<dyn Fn(ObjectId) + Send + Sync>;

/// Byte and object counts of a tier, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub objects: u64,
    pub bytes: u64,
    /// Objects dropped to stay in budget since start.
    pub evictions: u64,
}

/// One tier (or a stack of tiers) of object storage.
pub trait Storage: Send + Sync + 'static {
    /// `memory`, `disk`, ...: the label in metrics and logs.
    fn name(&self) -> &'static str;

    /// The object, or `None` when it is not (or no longer) stored.
    fn get(&self, id: ObjectId) -> BoxFuture<'_, io::Result<Option<Object>>>;

    /// Start writing an object of `expected_len` bytes if known. `Ok(None)` means the tier
    /// declines it (larger than its max object size, or than its whole budget); the caller then
    /// streams the response through without storing it. Given `expected_len`, the writer refuses
    /// bytes past it and `finish` fails short of it: a body that disagrees with its announced
    /// length is never stored.
    fn writer(
        &self,
        id: ObjectId,
        expected_len: Option<u64>,
    ) -> BoxFuture<'_, io::Result<Option<Box<dyn ObjectWriter>>>>;

    /// Replace the meta blob of a stored object, body untouched (a 304 from the origin refreshes
    /// the stored headers, RFC 9111 §4.3.4). `Ok(false)` when the object is gone.
    fn update_meta(&self, id: ObjectId, meta: Bytes) -> BoxFuture<'_, io::Result<bool>>;

    /// Drop an object; no-op when absent.
    fn remove(&self, id: ObjectId) -> BoxFuture<'_, io::Result<()>>;

    /// Every object this tier holds, for the index at start-up (the disk tier reads its directory;
    /// the memory tier starts empty).
    fn list(&self) -> BoxFuture<'_, io::Result<Vec<Listed>>>;

    fn usage(&self) -> Usage;
}

/// Writes one object. The body arrives in chunks as the upstream sends it; nothing of it is
/// visible to [`Storage::get`] until [`ObjectWriter::finish`] succeeds (a half-written object is
/// never served). Dropping a writer without finishing aborts it and frees what it wrote.
pub trait ObjectWriter: Send {
    /// Append body bytes. An error (disk full, body over the max object size) means the object
    /// will not be stored; the caller stops writing and drops the writer.
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, io::Result<()>>;

    /// Commit the object with its meta blob; replaces any object stored under the same id.
    fn finish(self: Box<Self>, meta: Bytes) -> BoxFuture<'static, io::Result<()>>;
}
