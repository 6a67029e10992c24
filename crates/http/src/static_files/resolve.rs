//! From a checked relative path to an opened file, with symbolic links contained.
//!
//! Runs on the blocking pool (one trip per request: resolve, stat, open, `fstat`), using
//! `std::fs` directly rather than `tokio::fs`, which would pay one trip per call.
//!
//! Containment: [`super::path`] already refuses `..`, so the joined path is textually inside the
//! root; only symbolic links can still lead elsewhere. The path is canonicalised and must start
//! with the canonical root (resolved once, at start-up), unless the route sets
//! `follow_symlinks_outside_root`. Links that stay inside the root are always followed. A link
//! swapped in between the check and the `open` is not caught (that needs `openat2` with
//! `RESOLVE_BENEATH`): whoever can write into the root is trusted.
//!
//! Because the root is canonicalised at start-up, a root that is itself a symbolic link
//! (`current -> releases/42`, the atomic-deploy pattern) keeps pointing at the release it had
//! when the route was built: switching the link takes effect on reload, not per request.
//!
//! Only regular files and directories are served. The type is checked *before* opening because
//! opening a FIFO blocks until a writer appears, which would pin a blocking thread per request;
//! the authoritative metadata (length, mtime) is then read once from the opened handle so the
//! headers describe exactly the bytes that will be read.
//!
//! Hidden files (`.env`, `.git/`) are served like any other, as nginx does: keep them out of the
//! served directory, or add a route that answers them with 404.
//!
//! Precompressed sidecars (`app.js.br`) are looked up on the same trip, beside the *canonical*
//! file, for the codings the client accepts (best first; none when it accepts none, so a plain
//! request costs nothing more). The canonical directory is link-free and contained, so a sidecar
//! that is a regular file there is contained too and costs one `lstat`; only a sidecar that is
//! itself a symbolic link is canonicalised and checked like a requested path. A sidecar older
//! than its original is stale (the original was edited after compressing) and ignored; any
//! failure to use a sidecar falls back to the original rather than failing the request.

use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use sluice_core::{ContentCoding, Error, ErrorKind};

use super::path::RelPath;
use crate::compress_policy::ContentId;

/// What a request path leads to.
#[derive(Debug)]
pub(crate) enum Target {
    /// A regular file (the requested one, or a directory's index), opened.
    File(OpenFile),
    /// A directory requested without the trailing slash: redirect to add it, so relative links
    /// in its index resolve against the directory.
    AddSlash,
}

/// A regular file (or the sidecar chosen for it), opened, with what its one `fstat` said.
#[derive(Debug)]
pub(crate) struct OpenFile {
    pub(crate) file: File,
    pub(crate) len: u64,
    /// `None` when the file system keeps no modification time.
    pub(crate) modified: Option<SystemTime>,
    /// The requested (not canonical) path, whose extension decides the `Content-Type`, as in
    /// nginx: a link `app.js -> app.3f2a` is still JavaScript. For a sidecar, still the
    /// original's name: `app.js.br` is JavaScript in the `br` coding.
    pub(crate) name: PathBuf,
    /// The coding of the opened bytes: `Identity` for the file itself, else a sidecar's.
    pub(crate) encoding: ContentCoding,
    /// The whole file, read on the same blocking-pool trip that opened it (see
    /// [`OpenFile::prefetch`]); `None` when not asked for or too large.
    pub(crate) contents: Option<Bytes>,
    /// What the memory cache checks before serving these bytes again without a lookup: the
    /// opened file (canonical path), for a sidecar its original, and every sidecar tried and
    /// passed over (missing, stale, not a file), each as it was found.
    pub(crate) probes: Vec<Probe>,
    /// The opened file's identity, from the same `fstat` as `len` and `modified`.
    pub(crate) stamp: FileStamp,
}

/// A canonical path and what was found there: a file's identity, or nothing.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) path: PathBuf,
    pub(crate) found: Option<FileStamp>,
}

impl Probe {
    /// Look at `path` now (one `stat`, following links).
    pub(crate) fn take(path: PathBuf) -> Self {
        let found = std::fs::metadata(&path)
            .ok()
            .map(|meta| FileStamp::of(&meta));
        Self { path, found }
    }

    /// `path` still holds what it held when probed: the same file, unchanged, or still nothing.
    pub(crate) fn is_current(&self) -> bool {
        match std::fs::metadata(&self.path) {
            Ok(meta) => self.found == Some(FileStamp::of(&meta)),
            Err(_) => self.found.is_none(),
        }
    }
}

/// A file version's identity (`sluice_core::file_bytes::Stamp`, which sendfile checks too).
pub(crate) use sluice_core::file_bytes::Stamp as FileStamp;

/// This version's identity for compressed variants kept in memory (see [`ContentId`]).
pub(crate) fn content_id_of(stamp: &FileStamp) -> Option<ContentId> {
    stamp.words().map(ContentId)
}

impl OpenFile {
    fn new(
        file: File,
        meta: &Metadata,
        name: PathBuf,
        encoding: ContentCoding,
        path: PathBuf,
    ) -> Self {
        let stamp = FileStamp::of(meta);
        Self {
            file,
            len: meta.len(),
            modified: meta.modified().ok(),
            name,
            encoding,
            contents: None,
            probes: vec![Probe {
                path,
                found: Some(stamp),
            }],
            stamp,
        }
    }

    /// Read the whole file now if it is at most `limit` bytes. Called on the blocking pool
    /// right after the lookup: a second trip to the pool (a thread wake-up and two context
    /// switches) costs more than reading a page-cached file of this size, and was most of a
    /// small file's serving time in `sluice bench` (docs/benchmarks.md). A short read (the
    /// file shrank) leaves `contents` empty so the normal path reports it.
    pub(crate) fn prefetch(&mut self, limit: u64) {
        if self.len == 0 || self.len > limit {
            return;
        }
        let mut buf = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        let read = std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut self.file, self.len),
            &mut buf,
        );
        if read.is_ok() && buf.len() as u64 == self.len {
            self.contents = Some(Bytes::from(buf));
        } else if std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(0)).is_err() {
            tracing::debug!("cannot rewind a file after a short read");
        }
    }
}

/// What a sidecar lookup found.
enum Sidecar {
    /// A contained regular file, not stale: served.
    Usable(File, Metadata),
    /// Nothing (`None`), or something not served (stale, not a file, a link out of the root).
    Unusable(Option<FileStamp>),
}

/// The file-system side of a static route.
#[derive(Debug)]
pub(crate) struct Resolver {
    /// Canonical, so containment is a component-wise prefix test.
    pub(crate) root: PathBuf,
    pub(crate) index: Vec<String>,
    pub(crate) follow_symlinks_outside_root: bool,
}

impl Resolver {
    /// Resolve `rel` under the root. `sidecars`: the codings the client accepts, best first, for
    /// which a precompressed sidecar is tried before the file itself. Blocking.
    pub(crate) fn resolve(
        &self,
        rel: &RelPath,
        sidecars: &[ContentCoding],
    ) -> Result<Target, Error> {
        let requested = self.root.join(&rel.path);
        let canonical = self.contained(&requested)?;
        let meta = std::fs::metadata(&canonical).map_err(io_error)?;

        if meta.is_dir() {
            if !rel.trailing_slash {
                return Ok(Target::AddSlash);
            }
            return self.index_of(&requested, &canonical, sidecars);
        }
        if rel.trailing_slash || !meta.is_file() {
            // `/file.txt/` names a directory that does not exist (as `open(2)` says with
            // ENOTDIR); sockets, FIFOs and devices are never served.
            return Err(not_found());
        }
        let (file, meta) = open_regular(&canonical)?;
        Ok(Target::File(
            self.variant(&canonical, requested, file, &meta, sidecars),
        ))
    }

    /// The first index file of the directory `requested` (canonical: `canonical`) that exists;
    /// 404 if none (no directory listings). Names tried before it are probes: one appearing
    /// later would be served instead.
    fn index_of(
        &self,
        requested: &Path,
        canonical: &Path,
        sidecars: &[ContentCoding],
    ) -> Result<Target, Error> {
        let mut skipped = Vec::new();
        for index in &self.index {
            let requested = requested.join(index);
            let found = self
                .contained(&canonical.join(index))
                .and_then(|canonical| {
                    let meta = std::fs::metadata(&canonical).map_err(io_error)?;
                    if !meta.is_file() {
                        return Err(not_found());
                    }
                    open_regular(&canonical).map(|(file, meta)| (canonical, file, meta))
                });
            match found {
                Ok((canonical, file, meta)) => {
                    let mut open = self.variant(&canonical, requested, file, &meta, sidecars);
                    open.probes.extend(skipped);
                    return Ok(Target::File(open));
                }
                // Try the next name; a real failure (permissions, I/O) is reported as is.
                Err(e) if e.kind() == ErrorKind::NotFound => skipped.push(Probe::take(requested)),
                Err(e) => return Err(e),
            }
        }
        Err(not_found())
    }

    /// The first usable sidecar of the opened original at `canonical`, else the original.
    /// The probes: the file served, as requested (a symbolic link on the way may be re-pointed
    /// or removed) and as opened; for a sidecar its original; every sidecar passed over.
    fn variant(
        &self,
        canonical: &Path,
        requested: PathBuf,
        file: File,
        meta: &Metadata,
        sidecars: &[ContentCoding],
    ) -> OpenFile {
        let stamp = FileStamp::of(meta);
        let mut probes = Vec::new();
        if requested != canonical {
            probes.push(Probe {
                path: requested.clone(),
                found: Some(stamp),
            });
        }
        for &encoding in sidecars {
            let Some(extension) = encoding.extension() else {
                continue;
            };
            let mut path = canonical.as_os_str().to_owned();
            path.push(extension);
            let path = PathBuf::from(path);
            match self.open_sidecar(&path, meta) {
                Ok(Sidecar::Usable(file, sidecar_meta)) => {
                    let mut open = OpenFile::new(file, &sidecar_meta, requested, encoding, path);
                    open.probes.push(Probe {
                        path: canonical.to_path_buf(),
                        found: Some(stamp),
                    });
                    open.probes.extend(probes);
                    return open;
                }
                Ok(Sidecar::Unusable(found)) => probes.push(Probe { path, found }),
                Err(e) => {
                    tracing::debug!(
                        sidecar = %path.display(),
                        error = %e,
                        "cannot use a precompressed sidecar; trying the next coding"
                    );
                    probes.push(Probe::take(path));
                }
            }
        }
        let mut open = OpenFile::new(
            file,
            meta,
            requested,
            ContentCoding::Identity,
            canonical.to_path_buf(),
        );
        open.probes.extend(probes);
        open
    }

    /// The sidecar at `path`, opened, if it is a contained regular file no older than the
    /// original. Else what is there, as a probe sees it (the common case: nothing, one `lstat`).
    fn open_sidecar(&self, path: &Path, original: &Metadata) -> io::Result<Sidecar> {
        let link = match std::fs::symlink_metadata(path) {
            Ok(link) => link,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Sidecar::Unusable(None)),
            Err(e) => return Err(e),
        };
        let target = if link.is_symlink() {
            // Rare: a deploy that links sidecars. Contain it like a requested path, and check
            // the type before `open` (a FIFO would block).
            let target = std::fs::metadata(path)?;
            let contained = self.contained(path);
            match contained {
                Ok(canonical) if target.is_file() => canonical,
                _ => return Ok(Sidecar::Unusable(Some(FileStamp::of(&target)))),
            }
        } else if link.is_file() {
            path.to_path_buf()
        } else {
            return Ok(Sidecar::Unusable(Some(FileStamp::of(&link))));
        };
        let file = File::open(&target)?;
        let meta = file.metadata()?;
        if !meta.is_file() || is_stale(&meta, original) {
            return Ok(Sidecar::Unusable(Some(FileStamp::of(&meta))));
        }
        Ok(Sidecar::Usable(file, meta))
    }

    /// `path` canonicalised, if it is allowed: inside the root or links may leave it.
    fn contained(&self, path: &Path) -> Result<PathBuf, Error> {
        let canonical = std::fs::canonicalize(path).map_err(io_error)?;
        if self.follow_symlinks_outside_root || canonical.starts_with(&self.root) {
            return Ok(canonical);
        }
        tracing::debug!(
            requested = %path.display(),
            resolved = %canonical.display(),
            "symbolic link leads outside the static root; answering 404"
        );
        Err(not_found())
    }
}

/// A sidecar last modified before its original was made from an older version: serving it
/// would send old content. Unknown times (no mtime on this file system) are trusted.
fn is_stale(sidecar: &Metadata, original: &Metadata) -> bool {
    match (sidecar.modified(), original.modified()) {
        (Ok(sidecar), Ok(original)) => sidecar < original,
        _ => false,
    }
}

/// Open `path` and read its metadata from the handle; 404 if it is (now) not a regular file.
fn open_regular(path: &Path) -> Result<(File, Metadata), Error> {
    let file = File::open(path).map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    if !meta.is_file() {
        return Err(not_found());
    }
    Ok((file, meta))
}

fn not_found() -> Error {
    Error::downstream(ErrorKind::NotFound, "not found")
}

/// File-system errors as the statuses a client should see. Messages never contain paths: 4xx
/// messages may reach the client. The cause stays attached for the log.
pub(crate) fn io_error(err: io::Error) -> Error {
    use io::ErrorKind as K;
    let (kind, message) = match err.kind() {
        // A missing component, a file used as a directory, a symlink loop or an over-long name:
        // all "there is nothing at this path" from the client's point of view.
        K::NotFound | K::NotADirectory | K::InvalidFilename => (ErrorKind::NotFound, "not found"),
        K::PermissionDenied => (ErrorKind::Forbidden, "forbidden"),
        _ if is_symlink_loop(&err) => (ErrorKind::NotFound, "not found"),
        _ => (ErrorKind::Io, "cannot read file"),
    };
    Error::internal(kind, message).with_source(err)
}

/// `ELOOP` (too many levels of symbolic links): `io::ErrorKind::FilesystemLoop` is not stable
/// yet, so compare the errno (40 on Linux, 62 on the BSDs and macOS).
fn is_symlink_loop(err: &io::Error) -> bool {
    if cfg!(target_os = "linux") {
        err.raw_os_error() == Some(40)
    } else if cfg!(unix) {
        err.raw_os_error() == Some(62)
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_to_client_statuses() {
        let kind = |k: io::ErrorKind| io_error(io::Error::from(k)).kind();
        assert_eq!(kind(io::ErrorKind::NotFound), ErrorKind::NotFound);
        assert_eq!(kind(io::ErrorKind::NotADirectory), ErrorKind::NotFound);
        assert_eq!(kind(io::ErrorKind::PermissionDenied), ErrorKind::Forbidden);
        assert_eq!(kind(io::ErrorKind::Other), ErrorKind::Io);
        let err = io_error(io::Error::from(io::ErrorKind::Other));
        assert_eq!(err.side(), sluice_core::Side::Internal);
        assert_eq!(err.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_is_not_found() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::os::unix::fs::symlink("b", dir.path().join("a"))?;
        std::os::unix::fs::symlink("a", dir.path().join("b"))?;
        let err = std::fs::canonicalize(dir.path().join("a"));
        let kind = err.map(|_| ()).map_err(|e| io_error(e).kind());
        assert_eq!(kind, Err(ErrorKind::NotFound));
        Ok(())
    }
}
