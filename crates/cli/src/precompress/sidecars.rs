//! `sluice precompress DIR`: write `f.gz` / `f.br` / `f.zst` beside every compressible file, for
//! static routes with `precompressed` on (see docs/precompressed.md).
//!
//! - Which files: regular files under DIR whose type (by extension, as the static handler
//!   serves it) is in response compression's default allow-list, of at least `min_size` bytes.
//!   Symbolic links are never followed, neither to files nor to directories: a linked file's
//!   target gets its sidecars where it lives, and the server looks them up beside the target.
//! - How: each variant is compressed at the highest level by default (a deploy step pays once,
//!   every response saves), streamed into a temporary file in the same directory, given the
//!   original's permissions and modification time, then renamed over the old variant: a
//!   reader sees the old file or the new one, never half of one.
//! - Up to date: a variant whose mtime equals its original's was written from that version, so
//!   it is skipped without compressing; the server, conversely, ignores a variant older than
//!   its original. A variant that is not smaller than the original is not kept (and an old one
//!   is removed): serving it would cost bytes.
//! - `clean`: remove the variants of every compressible original, whatever its size.
//!
//! Files are spread over `jobs` threads; errors name the file and do not stop the others.

use std::fs::{self, File, Metadata};
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use sluice_core::SidecarCoding;
use sluice_http::compress::Encoder;
use sluice_http::compress_policy::CompressPolicy;
use sluice_http::static_files::content_type;

/// The codings a sidecar can have, in the order they are written and reported.
pub const ALGORITHMS: [SidecarCoding; 3] =
    [SidecarCoding::GZIP, SidecarCoding::BR, SidecarCoding::ZSTD];

/// Read and encoder output sizes: the output is written out whenever it exceeds `CHUNK`, so
/// memory stays bounded whatever the file size.
const CHUNK: usize = 64 * 1024;

/// What to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    /// Codings to write (or remove), without duplicates.
    pub algorithms: Vec<SidecarCoding>,
    /// `None`: each coding's maximum ([`max_level`]); else clamped into each coding's range.
    pub level: Option<i32>,
    /// Files below this many bytes are left alone.
    pub min_size: u64,
    /// Remove the variants instead of writing them.
    pub clean: bool,
    /// Files worked on in parallel (at least one).
    pub jobs: usize,
    /// Show progress on stderr (when it is a terminal).
    pub progress: bool,
}

/// The highest level of a coding that HTTP clients can decode: gzip 9, br 11, zstd 19 (zstd's
/// "ultra" levels need windows larger than the 8 MiB clients must support).
pub const fn max_level(alg: SidecarCoding) -> i32 {
    alg.compression().levels().1 as i32
}

/// Counts for one coding.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CodingStats {
    /// Variants (re)written.
    pub written: u64,
    /// Variants already up to date: not compressed again.
    pub up_to_date: u64,
    /// Variants not kept because they were not smaller than the original.
    pub not_smaller: u64,
    /// Variants removed (`--clean`, or an old variant that is no longer smaller).
    pub removed: u64,
    /// Original and variant bytes of the written variants.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What a run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Regular files under the directory, sidecars not counted.
    pub files_seen: u64,
    /// Of those, the ones of a compressible type and size.
    pub compressible: u64,
    /// Files that got at least one variant written.
    pub files_compressed: u64,
    /// Left alone because of their type, or their size.
    pub skipped_type: u64,
    pub skipped_small: u64,
    /// Symbolic links met and not followed.
    pub links_skipped: u64,
    /// Per coding, in [`ALGORITHMS`] order.
    pub codings: [CodingStats; 3],
    /// One line per failure, naming the file.
    pub errors: Vec<String>,
}

impl Summary {
    fn merge(&mut self, other: Summary) {
        self.files_seen += other.files_seen;
        self.compressible += other.compressible;
        self.files_compressed += other.files_compressed;
        self.skipped_type += other.skipped_type;
        self.skipped_small += other.skipped_small;
        self.links_skipped += other.links_skipped;
        for (mine, theirs) in self.codings.iter_mut().zip(other.codings) {
            mine.written += theirs.written;
            mine.up_to_date += theirs.up_to_date;
            mine.not_smaller += theirs.not_smaller;
            mine.removed += theirs.removed;
            mine.bytes_in += theirs.bytes_in;
            mine.bytes_out += theirs.bytes_out;
        }
        self.errors.extend(other.errors);
    }

    fn coding(&mut self, alg: SidecarCoding) -> &mut CodingStats {
        let at = ALGORITHMS.iter().position(|&a| a == alg).unwrap_or(0);
        &mut self.codings[at]
    }

    /// The report printed at the end, one line per coding that was asked for.
    pub fn render(&self, options: &Options) -> String {
        let mut out = format!(
            "{}: {} files seen, {} compressible ({} of other types, {} below {} bytes, {} links not followed)\n",
            options.dir.display(),
            self.files_seen,
            self.compressible,
            self.skipped_type,
            self.skipped_small,
            options.min_size,
            self.links_skipped,
        );
        for (alg, stats) in ALGORITHMS.iter().zip(&self.codings) {
            if !options.algorithms.contains(alg) {
                continue;
            }
            let name = alg.as_str();
            if options.clean {
                out.push_str(&format!("  {name:<4} {} removed\n", stats.removed));
                continue;
            }
            out.push_str(&format!(
                "  {name:<4} {} written, {} up to date, {} not smaller (not kept)",
                stats.written, stats.up_to_date, stats.not_smaller
            ));
            if stats.written > 0 {
                let percent = stats.bytes_out as f64 * 100.0 / stats.bytes_in.max(1) as f64;
                out.push_str(&format!(
                    ": {} -> {} ({percent:.1}%)",
                    human(stats.bytes_in),
                    human(stats.bytes_out)
                ));
            }
            out.push('\n');
        }
        let written: u64 = self.codings.iter().map(|c| c.written).sum();
        let removed: u64 = self.codings.iter().map(|c| c.removed).sum();
        if options.clean {
            out.push_str(&format!("{removed} sidecar files removed\n"));
        } else if written == 0 && removed == 0 {
            out.push_str("nothing written: every variant is up to date\n");
        } else {
            out.push_str(&format!(
                "{} files compressed, {written} variants written\n",
                self.files_compressed
            ));
        }
        if !self.errors.is_empty() {
            out.push_str(&format!("{} errors\n", self.errors.len()));
        }
        out
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// One original file to work on.
struct Original {
    path: PathBuf,
    meta: Metadata,
}

/// Walk `options.dir` and write (or remove) the variants. `Err` only when the directory itself
/// cannot be used; failures on single files are in [`Summary::errors`].
pub fn run(options: &Options) -> Result<Summary, String> {
    let meta = fs::metadata(&options.dir).map_err(|e| format!("{}: {e}", options.dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", options.dir.display()));
    }
    let mut summary = Summary::default();
    let originals = walk(&options.dir, options, &mut summary);

    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let progress = Progress {
        on: options.progress && io::stderr().is_terminal(),
        total: originals.len(),
        done: &done,
        line: Mutex::new(()),
    };
    let jobs = options.jobs.clamp(1, originals.len().max(1));
    let results: Vec<Summary> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Summary::default();
                    while let Some(original) = originals.get(next.fetch_add(1, Ordering::Relaxed)) {
                        process(original, options, &mut mine);
                        progress.advance(&original.path);
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| Summary {
                    errors: vec!["a worker thread panicked".into()],
                    ..Summary::default()
                })
            })
            .collect()
    });
    progress.finish();
    for result in results {
        summary.merge(result);
    }
    Ok(summary)
}

/// Progress on stderr: one line, rewritten as files finish.
struct Progress<'a> {
    on: bool,
    total: usize,
    done: &'a AtomicUsize,
    line: Mutex<()>,
}

impl Progress<'_> {
    fn advance(&self, path: &Path) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.on {
            return;
        }
        // One writer at a time, or two threads' lines interleave.
        let _line = self.line.lock();
        eprint!("\r\x1b[2K[{done}/{}] {}", self.total, path.display());
        let _ = io::stderr().flush();
    }

    fn finish(&self) {
        if self.on && self.total > 0 {
            eprint!("\r\x1b[2K");
            let _ = io::stderr().flush();
        }
    }
}

/// Every compressible original under `dir`, without following links; counts the others.
fn walk(dir: &Path, options: &Options, summary: &mut Summary) -> Vec<Original> {
    let policy = CompressPolicy::default();
    let mut originals = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                summary.fail(&dir, "cannot list the directory", &e);
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    summary.fail(&dir, "cannot list the directory", &e);
                    continue;
                }
            };
            let path = entry.path();
            // `DirEntry::file_type` does not follow links.
            let kind = match entry.file_type() {
                Ok(kind) => kind,
                Err(e) => {
                    summary.fail(&path, "cannot read the file type", &e);
                    continue;
                }
            };
            if kind.is_symlink() {
                summary.links_skipped += 1;
            } else if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && !is_sidecar(&path) {
                summary.files_seen += 1;
                let meta = match entry.metadata() {
                    Ok(meta) => meta,
                    Err(e) => {
                        summary.fail(&path, "cannot read the metadata", &e);
                        continue;
                    }
                };
                if !policy.allows_type(&content_type(&path)) {
                    summary.skipped_type += 1;
                } else if !options.clean && meta.len() < options.min_size {
                    summary.skipped_small += 1;
                } else {
                    summary.compressible += 1;
                    originals.push(Original { path, meta });
                }
            }
        }
    }
    // A stable order: the same run reports the same progress and errors.
    originals.sort_by(|a, b| a.path.cmp(&b.path));
    originals
}

impl Summary {
    fn fail(&mut self, path: &Path, what: &str, err: &io::Error) {
        let line = format!("{}: {what}: {err}", path.display());
        eprintln!("\r\x1b[2Kerror: {line}");
        self.errors.push(line);
    }
}

/// A file that is itself a sidecar (`.gz`, `.br`, `.zst`): never compressed again.
fn is_sidecar(path: &Path) -> bool {
    let name = path.as_os_str().as_encoded_bytes();
    ALGORITHMS
        .iter()
        .any(|&alg| name.ends_with(alg.extension().as_bytes()))
}

fn variant_path(original: &Path, alg: SidecarCoding) -> PathBuf {
    let mut path = original.as_os_str().to_owned();
    path.push(alg.extension());
    PathBuf::from(path)
}

/// Write (or remove) every variant of one original.
fn process(original: &Original, options: &Options, summary: &mut Summary) {
    let mut wrote_one = false;
    for &alg in &options.algorithms {
        let variant = variant_path(&original.path, alg);
        let outcome = if options.clean {
            remove_variant(&variant).map(|removed| {
                if removed {
                    summary.coding(alg).removed += 1;
                }
            })
        } else {
            let level = options.level.map_or(max_level(alg), |l| {
                Encoder::clamp_level(alg.compression(), l)
            });
            write_variant(original, &variant, alg, level).map(|outcome| {
                let stats = summary.coding(alg);
                match outcome {
                    Outcome::UpToDate => stats.up_to_date += 1,
                    Outcome::NotSmaller { removed } => {
                        stats.not_smaller += 1;
                        stats.removed += u64::from(removed);
                    }
                    Outcome::Written { bytes_out } => {
                        stats.written += 1;
                        stats.bytes_in += original.meta.len();
                        stats.bytes_out += bytes_out;
                        wrote_one = true;
                    }
                }
            })
        };
        if let Err((what, e)) = outcome {
            summary.fail(&variant, what, &e);
        }
    }
    if wrote_one {
        summary.files_compressed += 1;
    }
}

enum Outcome {
    UpToDate,
    NotSmaller { removed: bool },
    Written { bytes_out: u64 },
}

type Failure = (&'static str, io::Error);

/// What is at a variant's path: nothing, a regular file (with its metadata), or something this
/// tool must not replace or remove (a directory, a link: someone put it there on purpose).
fn existing(variant: &Path) -> Result<Option<Metadata>, Failure> {
    match fs::symlink_metadata(variant) {
        Ok(meta) if meta.is_file() => Ok(Some(meta)),
        Ok(_) => Err((
            "exists and is not a regular file; left alone",
            io::Error::from(io::ErrorKind::AlreadyExists),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(("cannot read the metadata", e)),
    }
}

fn remove_variant(variant: &Path) -> Result<bool, Failure> {
    if existing(variant)?.is_none() {
        return Ok(false);
    }
    fs::remove_file(variant).map_err(|e| ("cannot remove", e))?;
    Ok(true)
}

fn write_variant(
    original: &Original,
    variant: &Path,
    alg: SidecarCoding,
    level: i32,
) -> Result<Outcome, Failure> {
    let mtime = original.meta.modified().ok();
    let old = existing(variant)?;
    if let (Some(old), Some(mtime)) = (&old, mtime)
        && old.modified().ok() == Some(mtime)
    {
        return Ok(Outcome::UpToDate);
    }
    let dir = variant.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".sluice-precompress-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| ("cannot create a temporary file beside it", e))?;
    let Some(bytes_out) = compress_file(
        &original.path,
        original.meta.len(),
        alg,
        level,
        temp.as_file_mut(),
    )?
    else {
        // Dropping `temp` deletes it. An old variant must go too: it was made from an older
        // version of the file.
        let removed = old.is_some() && fs::remove_file(variant).is_ok();
        return Ok(Outcome::NotSmaller { removed });
    };
    let file = temp.as_file();
    file.set_permissions(original.meta.permissions())
        .map_err(|e| ("cannot set the permissions", e))?;
    // The variant's mtime says which version of the original it was made from: last, after
    // every write (each write would update it).
    if let Some(mtime) = mtime {
        file.set_modified(mtime)
            .map_err(|e| ("cannot set the modification time", e))?;
    }
    temp.persist(variant)
        .map_err(|e| ("cannot rename the temporary file into place", e.error))?;
    Ok(Outcome::Written { bytes_out })
}

/// Compress `path` into `out`. `None` as soon as the output reaches the original's length (not
/// worth keeping, so not worth finishing).
fn compress_file(
    path: &Path,
    len: u64,
    alg: SidecarCoding,
    level: i32,
    out: &mut File,
) -> Result<Option<u64>, Failure> {
    let mut input = File::open(path).map_err(|e| ("cannot open", e))?;
    let mut encoder = Encoder::new(alg.compression(), Some(level))
        .map_err(|e| ("cannot start the encoder", e))?;
    let mut read_buf = vec![0; CHUNK];
    let mut encoded = BytesMut::with_capacity(2 * CHUNK);
    let mut total: u64 = 0;
    let mut drain = |encoded: &mut BytesMut, total: &mut u64| -> Result<bool, Failure> {
        *total += encoded.len() as u64;
        if *total >= len {
            return Ok(false);
        }
        out.write_all(encoded).map_err(|e| ("cannot write", e))?;
        encoded.clear();
        Ok(true)
    };
    loop {
        let n = match input.read(&mut read_buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(("cannot read", e)),
        };
        encoder
            .write(&read_buf[..n], &mut encoded)
            .map_err(|e| ("cannot compress", e))?;
        if encoded.len() >= CHUNK && !drain(&mut encoded, &mut total)? {
            return Ok(None);
        }
    }
    encoder
        .finish(&mut encoded)
        .map_err(|e| ("cannot compress", e))?;
    if !drain(&mut encoded, &mut total)? {
        return Ok(None);
    }
    Ok(Some(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_and_their_paths() {
        assert!(is_sidecar(Path::new("a/app.js.gz")));
        assert!(is_sidecar(Path::new("a/app.js.zst")));
        assert!(!is_sidecar(Path::new("a/app.js")));
        assert!(!is_sidecar(Path::new("a/brochure")));
        assert_eq!(
            variant_path(Path::new("a/app.js"), SidecarCoding::BR),
            Path::new("a/app.js.br")
        );
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 * 1024 * 1024), "3.0 MiB");
    }
}
