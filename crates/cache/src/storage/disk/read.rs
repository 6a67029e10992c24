//! Reading from the disk tier: a hit opens and checks both files on the blocking pool, then
//! streams the body from the open file in [`CHUNK`] pieces. The file stays open for the whole
//! stream, so a replacement or eviction meanwhile (which unlinks it) does not cut the response.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::{BoxFuture, ready};
use futures_util::stream::{BoxStream, try_unfold};

use super::format::{self, BODY_HEADER_LEN, META_HEADER_LEN, MetaHeader, body_file_len};
use super::{Inner, Version};
use crate::storage::{Listed, Object, ObjectId, StoredBody};

/// The size of a body read: large enough that the trip to the blocking pool is a small part of
/// its cost, small enough that a slow client does not hold much in buffers.
pub(super) const CHUNK: usize = 64 * 1024;

/// An object found on disk: its meta and its body file, positioned after the body header.
struct Opened {
    meta: Bytes,
    header: MetaHeader,
    body: File,
}

/// The object and the [`Version`] of it the index held before the files were read (so a change
/// during the read shows as a different version afterwards), or `None`. A miss in the index costs
/// no file access.
pub(super) fn get(
    inner: Arc<Inner>,
    id: ObjectId,
) -> BoxFuture<'static, io::Result<Option<(Object, Version)>>> {
    let Some(entry) = inner.index().touch(id) else {
        return Box::pin(ready(Ok(None)));
    };
    let version = Version::of(&entry);
    Box::pin(async move {
        let opened = tokio::task::spawn_blocking(move || open_checked(&inner, id))
            .await
            .map_err(io::Error::other)??;
        Ok(opened.map(|opened| {
            let body_len = opened.header.body_len;
            let object = Object {
                meta: opened.meta,
                body_len,
                body: StoredBody::Stream(body_stream(opened.body, body_len)),
            };
            (object, version)
        }))
    })
}

/// Every indexed object's meta, for the zone's index at start-up. Objects whose meta file is
/// damaged are dropped; one that cannot be read now (an I/O error) is left out of this list.
pub(super) fn list(inner: &Inner) -> Vec<Listed> {
    let ids = inner.index().ids();
    let mut listed = Vec::with_capacity(ids.len());
    for id in ids {
        match with_damage_check(inner, id, read_meta) {
            Ok(Some((header, meta))) => listed.push(Listed {
                id,
                meta,
                body_len: header.body_len,
            }),
            Ok(None) => {}
            Err(err) => tracing::warn!(?id, %err, "disk cache: meta unreadable, not listed"),
        }
    }
    listed
}

fn open_checked(inner: &Inner, id: ObjectId) -> io::Result<Option<Opened>> {
    with_damage_check(inner, id, |inner, id| {
        let (header, meta) = read_meta(inner, id)?;
        let body = open_body(inner, &header)?;
        Ok(Opened { meta, header, body })
    })
}

/// Runs `read`; when it finds the object gone or damaged, runs it again under the object's stripe
/// (a commit may have been between its two renames) and, if it fails the same way again, drops
/// the object and returns `None`. Other I/O errors come back as they are.
fn with_damage_check<T>(
    inner: &Inner,
    id: ObjectId,
    read: impl Fn(&Inner, ObjectId) -> io::Result<T>,
) -> io::Result<Option<T>> {
    match read(inner, id) {
        Err(err) if is_damage(&err) => {}
        other => return other.map(Some),
    }
    let dropped = {
        let _stripe = inner.stripe(id);
        if inner.index().get(id).is_none() {
            // Removed or evicted meanwhile: a plain miss.
            return Ok(None);
        }
        match read(inner, id) {
            Err(err) if is_damage(&err) => inner.forget_damaged(id),
            other => return other.map(Some),
        }
    };
    // The listener runs with no lock of ours held.
    if dropped {
        inner.notify(id);
    }
    Ok(None)
}

fn is_damage(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
    )
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads and checks `<id>.m`: our magic and version, this id, and a length that matches.
fn read_meta(inner: &Inner, id: ObjectId) -> io::Result<(MetaHeader, Bytes)> {
    let mut file = File::open(format::meta_path(&inner.root, id))?;
    let len = file.metadata()?.len();
    if !(META_HEADER_LEN as u64..=META_HEADER_LEN as u64 + u64::from(u32::MAX)).contains(&len) {
        return Err(invalid("meta file of impossible length"));
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact(&mut buf)?;
    let header = MetaHeader::decode(&buf)
        .filter(|header| header.id == id && header.file_len() == len)
        .ok_or_else(|| invalid("not a meta file of this object"))?;
    let meta = Bytes::from(buf).slice(META_HEADER_LEN..);
    Ok((header, meta))
}

/// Opens the body file the meta names and checks its header and exact length.
fn open_body(inner: &Inner, header: &MetaHeader) -> io::Result<File> {
    let mut file = File::open(format::body_path(&inner.root, header.id, header.generation))?;
    let mut head = [0u8; BODY_HEADER_LEN];
    file.read_exact(&mut head)?;
    if head != format::body_header(header.id, header.generation) {
        return Err(invalid("not the body file its meta names"));
    }
    if file.metadata()?.len() != body_file_len(header.body_len) {
        return Err(invalid("body file of the wrong length"));
    }
    Ok(file)
}

/// `len` bytes from `file`'s position, a [`CHUNK`] per trip to the blocking pool. A file that ends
/// early (changed under us by something else) ends the stream with `UnexpectedEof`.
fn body_stream(file: File, len: u64) -> BoxStream<'static, io::Result<Bytes>> {
    try_unfold((file, len), |(file, remaining)| async move {
        if remaining == 0 {
            return Ok(None);
        }
        let want = remaining.min(CHUNK as u64);
        let (file, chunk) = tokio::task::spawn_blocking(move || {
            let mut chunk = Vec::with_capacity(want as usize);
            (&file).take(want).read_to_end(&mut chunk)?;
            Ok::<_, io::Error>((file, chunk))
        })
        .await
        .map_err(io::Error::other)??;
        if (chunk.len() as u64) < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "cached body file ended early",
            ));
        }
        Ok(Some((Bytes::from(chunk), (file, remaining - want))))
    })
    .boxed()
}
