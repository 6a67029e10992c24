//! Writing to the disk tier: the streaming writer, its commit (two renames, meta last), meta
//! updates and removal. Everything here that touches files runs on the blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::{BoxFuture, ready};

use super::format::{self, MetaHeader, body_header, disk_bytes};
use super::lru::Entry;
use super::{Inner, scan};
use crate::storage::body_len::{check_complete, check_not_past};
use crate::storage::{ObjectId, ObjectWriter};

/// Chunks are gathered up to this size before one trip to the blocking pool writes them: a
/// response arrives in pieces of a few KiB, and a thread hop per piece would cost more than the
/// write.
const FLUSH_AT: usize = 256 * 1024;

/// A file that is deleted when this is dropped, unless [`TempFile::keep`] was called: whatever
/// path a write takes (an error, a cancelled future, a dropped writer), no temp file outlives it.
/// Deleting is one `unlink`, done in `drop` even on an async thread, as closing a file is.
pub(super) struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl TempFile {
    fn create(path: PathBuf) -> io::Result<(TempFile, File)> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok((TempFile { path, armed: true }, file))
    }

    /// Renames the file to `to`; from then on it is not temporary.
    fn rename_to(mut self, to: &Path) -> io::Result<()> {
        fs::rename(&self.path, to)?;
        self.armed = false;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed {
            scan::remove_quietly(&self.path);
        }
    }
}

/// Writes one object's body to a temp file; see [`super`] for the commit.
pub(super) struct DiskWriter {
    inner: Arc<Inner>,
    id: ObjectId,
    generation: u64,
    temp: TempFile,
    /// `None` once a write failed (or was cancelled halfway): the writer is then useless.
    file: Option<File>,
    pending: Vec<Bytes>,
    pending_len: usize,
    written: u64,
    expected_len: Option<u64>,
}

impl DiskWriter {
    /// Creates the temp file and writes the body header. Creates the two levels of directories
    /// under the root, never the root itself (see [`super`], "Failures").
    pub(super) fn create(inner: Arc<Inner>, id: ObjectId, generation: u64) -> io::Result<Self> {
        ensure_leaf_dir(&inner.root, id)?;
        let (temp, mut file) = TempFile::create(format::temp_path(&inner.root, id, generation))?;
        file.write_all(&body_header(id, generation))?;
        Ok(DiskWriter {
            inner,
            id,
            generation,
            temp,
            file: Some(file),
            pending: Vec::new(),
            pending_len: 0,
            written: 0,
            expected_len: None,
        })
    }

    pub(super) fn with_expected_len(mut self, expected_len: Option<u64>) -> Self {
        self.expected_len = expected_len;
        self
    }

    fn accept(&mut self, chunk: Bytes) -> io::Result<()> {
        if self.file.is_none() {
            return Err(broken());
        }
        let written = self.written + chunk.len() as u64;
        if written > self.inner.body_limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "body over the disk tier's max object size",
            ));
        }
        check_not_past(written, self.expected_len)?;
        self.written = written;
        self.pending_len += chunk.len();
        self.pending.push(chunk);
        Ok(())
    }

    async fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut file = self.file.take().ok_or_else(broken)?;
        let chunks = std::mem::take(&mut self.pending);
        self.pending_len = 0;
        let file = tokio::task::spawn_blocking(move || {
            for chunk in &chunks {
                file.write_all(chunk)?;
            }
            Ok::<_, io::Error>(file)
        })
        .await
        .map_err(io::Error::other)??;
        self.file = Some(file);
        Ok(())
    }
}

impl ObjectWriter for DiskWriter {
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, io::Result<()>> {
        if let Err(err) = self.accept(chunk) {
            return Box::pin(ready(Err(err)));
        }
        if self.pending_len < FLUSH_AT {
            return Box::pin(ready(Ok(())));
        }
        Box::pin(self.flush())
    }

    fn finish(self: Box<Self>, meta: Bytes) -> BoxFuture<'static, io::Result<()>> {
        let mut this = *self;
        Box::pin(async move {
            this.flush().await?;
            check_complete(this.written, this.expected_len)?;
            let file = this.file.take().ok_or_else(broken)?;
            tokio::task::spawn_blocking(move || {
                // Closed before the rename: the body is complete in the page cache.
                drop(file);
                commit(this, &meta)
            })
            .await
            .map_err(io::Error::other)?
        })
    }
}

fn broken() -> io::Error {
    io::Error::other("disk cache writer unusable after an earlier failure")
}

/// Writes the meta, renames body then meta into place, updates the index, evicts to budget.
fn commit(writer: DiskWriter, meta: &[u8]) -> io::Result<()> {
    let DiskWriter {
        inner,
        id,
        generation,
        temp,
        written: body_len,
        ..
    } = writer;
    let meta_len = meta_len(meta)?;
    if disk_bytes(u64::from(meta_len), body_len) > inner.budget {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "object larger than the disk tier's budget",
        ));
    }
    let header = MetaHeader {
        id,
        generation,
        body_len,
        meta_len,
    };
    let meta_temp = write_meta_temp(&inner, &header, meta)?;
    let body_final = format::body_path(&inner.root, id, generation);
    let victims = {
        let _stripe = inner.stripe(id);
        temp.rename_to(&body_final)?;
        if let Err(err) = meta_temp.rename_to(&format::meta_path(&inner.root, id)) {
            // The previous object (if any) is intact: its meta still names its own body.
            scan::remove_quietly(&body_final);
            return Err(err);
        }
        let entry = Entry {
            generation,
            body_len,
            meta_len,
            meta_version: 0,
        };
        let mut index = inner.index();
        let replaced = index.insert(id, entry);
        let victims = index.evict_to(inner.budget, Some(id));
        drop(index);
        if let Some(old) = replaced.filter(|old| old.generation != generation) {
            scan::remove_quietly(&format::body_path(&inner.root, id, old.generation));
        }
        victims
    };
    inner.drop_evicted(victims);
    Ok(())
}

/// Replaces the meta file of a stored object; its body file is untouched.
pub(super) fn update_meta(inner: &Inner, id: ObjectId, meta: &[u8]) -> io::Result<bool> {
    let meta_len = meta_len(meta)?;
    let victims = {
        let _stripe = inner.stripe(id);
        let Some(entry) = inner.index().get(id) else {
            return Ok(false);
        };
        let header = MetaHeader {
            id,
            generation: entry.generation,
            body_len: entry.body_len,
            meta_len,
        };
        write_meta_temp(inner, &header, meta)?.rename_to(&format::meta_path(&inner.root, id))?;
        let mut index = inner.index();
        let meta_version = entry.meta_version.wrapping_add(1);
        index.insert(
            id,
            Entry {
                meta_len,
                meta_version,
                ..entry
            },
        );
        index.evict_to(inner.budget, Some(id))
    };
    inner.drop_evicted(victims);
    Ok(true)
}

pub(super) fn remove(inner: &Inner, id: ObjectId) -> io::Result<()> {
    let _stripe = inner.stripe(id);
    let Some(entry) = inner.index().remove(id) else {
        return Ok(());
    };
    remove_if_present(&format::meta_path(&inner.root, id))?;
    remove_if_present(&format::body_path(&inner.root, id, entry.generation))
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

fn meta_len(meta: &[u8]) -> io::Result<u32> {
    u32::try_from(meta.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "meta blob over 4 GiB"))
}

fn write_meta_temp(inner: &Inner, header: &MetaHeader, meta: &[u8]) -> io::Result<TempFile> {
    let path = format::temp_path(&inner.root, header.id, inner.next_nonce());
    let (temp, mut file) = TempFile::create(path)?;
    let mut bytes = Vec::with_capacity(header.file_len() as usize);
    bytes.extend_from_slice(&header.encode());
    bytes.extend_from_slice(meta);
    file.write_all(&bytes)?;
    Ok(temp)
}

fn ensure_leaf_dir(root: &Path, id: ObjectId) -> io::Result<()> {
    let leaf = format::leaf_dir(root, id);
    for dir in [leaf.parent().unwrap_or(root), leaf.as_path()] {
        match fs::create_dir(dir) {
            Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
            _ => {}
        }
    }
    Ok(())
}
