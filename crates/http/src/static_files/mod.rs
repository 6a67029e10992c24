//! Static files: a route's directory served over GET and HEAD, with validators, conditional
//! requests, single byte ranges, a directory index, and no way out of the root.
//!
//! # Why sluice owns this handler
//! tower-http's `ServeDir` has no `ETag`, no `If-None-Match` / `If-Range`, and no containment of
//! symbolic links, and it cannot give precompressed sidecars (`.br`, `.zst`, `.gz`) their own
//! ETag, and it has no memory cache for small hot files. So the handler is written here,
//! with crates for the well-defined pieces: `mime_guess` (types), `httpdate` (dates),
//! `http-range-header` (Range syntax) and `percent-encoding` (paths).
//!
//! # How a request flows (read the files in this order)
//! 1. `path.rs`: method check (GET/HEAD, else 405), route prefix stripped, path decoded; any
//!    `..`, NUL or invalid UTF-8 is a 400. `precompressed.rs`: with `precompressed` on, the
//!    sidecar codings the client accepts, best first (`Accept-Encoding` negotiation).
//! 2. `cache.rs`: a small file served recently and unchanged since (a `stat` says so, at most
//!    once per `memory_cache_recheck`) is answered from memory, with no lookup and no
//!    allocation beyond the response itself: keyed by the request's path as it came, with its
//!    heads built once (`head.rs`). Otherwise `resolve.rs` (one trip to the blocking
//!    pool): canonicalise, contain symlinks, directory -> 301 to add `/` or its index file,
//!    open, `fstat` once; then one `lstat` per accepted coding until a sidecar (`app.js.br`
//!    beside the canonical `app.js`, not older than it) is found.
//! 3. `conditional.rs` (entity-tag lists read by `sluice_core::etag`): validators and RFC 9110
//!    §13.2.2 preconditions: 412 or 304. The ETag is nginx's strong
//!    `"<mtime secs hex>-<size hex>"`: it changes when the file's mtime or size changes; a
//!    sidecar's adds its coding (`"…-br"`).
//! 4. `range.rs`: `Range` (GET only) with `If-Range`: 206, 416, or the whole file.
//! 5. `body.rs`: the bytes, read whole up to 256 KiB or streamed in 64 KiB frames. A file of
//!    up to 256 KiB is read on the lookup's trip to the blocking pool (step 2) when the memory
//!    cache is on, or for a plain GET (no Range, no If-None-Match / If-Modified-Since) when it
//!    is off: one trip per request instead of two or more, which was most of a small file's
//!    cost in `sluice bench`. Those bytes then go into the memory cache.
//! 6. `head.rs`: the validators and the `200` and `304` heads of one version of a file, built
//!    once (kept with a memory-cache entry); `response.rs`: `Content-Type` (by extension; a
//!    sidecar gets its original's) and the body-less answers.
//!
//! A sidecar is served as the representation itself: `Content-Encoding`, its own validators and
//! length, ranges over its encoded bytes (as Caddy and nginx's `gzip_static` do), and the
//! [`Precompressed`] extension so the pipeline neither compresses it again nor calls it
//! `already_encoded`. With `precompressed` on, every file response says
//! `Vary: Accept-Encoding`, since another request may get another variant. A request for
//! `/app.js.gz` itself is a normal file (`application/gzip`), as in nginx.
//!
//! A `200` of a file's own bytes carries their [`ContentId`] (device, inode, size, mtime and
//! ctime, from the same `fstat` as the validators) so that response compression can make each
//! coding of a small file once and serve it from memory afterwards, for as long as the file is
//! unchanged (DESIGN.md capability 9); 206, 304 and sidecar responses carry none.
//!
//! Hidden files (`.well-known/`, but also `.env`) are served like any other file, as nginx does;
//! keep secrets out of served directories.
//!
//! Failures that become a plain status page (400, 403, 404, 500) are `Err`; everything that is a
//! protocol answer (304, 206, 412, 416, 405, 301) is an `Ok` response.
//!
//! Specs: RFC 9110 §8.8 (validators), §13 (conditional requests), §14 (range requests).
//! Not implemented: `multipart/byteranges` (several ranges get the whole file with 200),
//! directory listings, `sendfile` (files above 256 KiB are read in 64 KiB frames).

mod body;
mod cache;
mod conditional;
mod head;
mod path;
mod precompressed;
pub mod range;
mod resolve;
mod response;

use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode, Uri};
use sluice_core::{Body, ContentCoding, Error, ErrorKind};

use cache::{Cached, FileCache, Key, KeyRef};
use conditional::Precondition;
use head::Prepared;
use precompressed::Accepted;
use range::RangeDecision;
use resolve::{FileStamp, Resolver, Target};

use crate::compress_policy::{ContentId, NotModifiedOf, Precompressed, add_vary};

pub use conditional::if_range_allows_with;
pub use response::content_type;

/// A static-files route, ready to serve. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StaticFiles {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    resolver: Resolver,
    route_prefix: String,
    strip_prefix: bool,
    /// Sidecar codings served when accepted, most preferred first; empty: off.
    sidecars: Vec<ContentCoding>,
    /// Small files kept in memory; `None` when the route turns it off.
    cache: Option<FileCache>,
    /// Keep each cached file open and its bytes registered for `sendfile`.
    sendfile: bool,
}

impl StaticFiles {
    /// `route_prefix` is the route's path prefix (used when `strip_prefix` is on). The root is
    /// canonicalised once here, so each request compares against a fixed, link-free path.
    pub fn new(cfg: &sluice_config::StaticFiles, route_prefix: &str) -> Result<Self, Error> {
        let root = std::fs::canonicalize(&cfg.root).map_err(|e| {
            let message = format!("cannot use static root {}", cfg.root.display());
            Error::internal(ErrorKind::Io, message).with_source(e)
        })?;
        if !root.is_dir() {
            let message = format!("static root {} is not a directory", cfg.root.display());
            return Err(Error::internal(ErrorKind::Io, message));
        }
        let resolver = Resolver {
            root,
            index: cfg.index.clone(),
            follow_symlinks_outside_root: cfg.follow_symlinks_outside_root,
        };
        let inner = Inner {
            resolver,
            route_prefix: route_prefix.to_owned(),
            strip_prefix: cfg.strip_prefix,
            sidecars: cfg.precompressed.iter().map(|&c| c.coding()).collect(),
            cache: FileCache::new(
                cfg.memory_cache,
                cache::REVALIDATE_AFTER,
                cfg.memory_cache_recheck,
            ),
            sendfile: cfg.sendfile,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.inner.resolver.root
    }

    /// Serve a request. `Err` for failures that become a plain status page (404, 400, 403, 500);
    /// `Ok` for everything else, including 304, 206, 412, 416 (with `Content-Range: bytes */LEN`),
    /// 405 (with `Allow: GET, HEAD`) and the 301 that adds a directory's trailing slash.
    pub async fn serve(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<Response<Body>, Error> {
        if method != Method::GET && method != Method::HEAD {
            return Ok(response::method_not_allowed());
        }
        let inner = &self.inner;
        let raw = path::strip_route_prefix(uri.path(), &inner.route_prefix, inner.strip_prefix)
            .ok_or_else(|| Error::downstream(ErrorKind::NotFound, "not found"))?;
        let sidecars = precompressed::accepted(headers, &inner.sidecars);
        // A hit needs neither the decoded path nor the clock's wall time: the key is the
        // request's own path, and the entry holds its finished heads.
        let now = Instant::now();
        let hit = (inner.cache.as_ref()).and_then(|cache| {
            cache.get(
                KeyRef {
                    path: raw,
                    sidecars,
                },
                now,
            )
        });
        let found = match hit {
            Some(hit) => Found::Cached(hit),
            None => match self.look_up(method, headers, raw, sidecars, now).await? {
                Some(found) => found,
                None => return add_slash(uri),
            },
        };
        let mut response = match found {
            Found::Cached(hit) => {
                let contents = FileOrContents::Contents(hit.contents.clone());
                respond(method, headers, &hit.prepared, contents).await?
            }
            Found::Opened(prepared, body) => respond(method, headers, &prepared, body).await?,
        };
        if !inner.sidecars.is_empty() {
            // Another Accept-Encoding may get another variant of this file: caches must key on
            // it, for the original and for 304s too (RFC 9110 §12.5.5).
            add_vary(response.headers_mut());
        }
        Ok(response)
    }

    /// Step 2 on the blocking pool: the file at `raw` (the request's path as the route sees
    /// it), read whole when small (and, with the cache off, about to be sent whole), then kept
    /// in the memory cache. `None`: a directory without its slash.
    async fn look_up(
        &self,
        method: &Method,
        headers: &HeaderMap,
        raw: &str,
        sidecars: Accepted,
        read_at: Instant,
    ) -> Result<Option<Found>, Error> {
        let rel = path::to_rel_path(raw)?;
        // A plain GET (no range, no validator that may make it a 304) almost always sends the
        // whole file: read a small one on the lookup's trip to the blocking pool. With the
        // memory cache on, read it for any request: the next ones are then served from memory.
        let prefetch = self.inner.cache.is_some()
            || (method == Method::GET
                && !headers.contains_key(header::RANGE)
                && !headers.contains_key(header::IF_NONE_MATCH)
                && !headers.contains_key(header::IF_MODIFIED_SINCE));
        let inner = Arc::clone(&self.inner);
        let target = tokio::task::spawn_blocking(move || {
            let mut target = inner.resolver.resolve(&rel, sidecars.as_slice())?;
            if let (true, Target::File(open)) = (prefetch, &mut target) {
                open.prefetch(body::SMALL_BODY);
            }
            Ok::<_, Error>(target)
        })
        .await
        .map_err(|e| Error::internal(ErrorKind::Io, "file lookup task failed").with_source(e))??;

        let open = match target {
            Target::AddSlash => return Ok(None),
            Target::File(open) => open,
        };
        let prepared = Prepared::new(
            open.len,
            open.modified,
            open.encoding,
            response::content_type(&open.name),
            content_id(open.encoding, &open.stamp),
            SystemTime::now(),
        );
        if let (Some(cache), Some(contents)) = (&self.inner.cache, &open.contents) {
            let key = Key {
                path: raw.into(),
                sidecars,
            };
            // Kept open and registered so plain connections `sendfile` it (`static.sendfile`).
            let file = self.inner.sendfile.then_some((open.file, open.stamp));
            let entry = cache.insert(key, contents.clone(), open.probes, prepared, read_at, file);
            return Ok(Some(Found::Cached(entry)));
        }
        let body = match open.contents {
            Some(contents) => FileOrContents::Contents(contents),
            None => FileOrContents::File(open.file),
        };
        Ok(Some(Found::Opened(Box::new(prepared), body)))
    }
}

/// What a request found: an entry of the memory cache, or a file looked up for it.
enum Found {
    Cached(Arc<Cached>),
    /// Boxed: the uncached path is the rare one, and it keeps `Found` small.
    Opened(Box<Prepared>, FileOrContents),
}

/// The identity a file's own bytes carry to compression; a sidecar is encoded already.
fn content_id(encoding: ContentCoding, stamp: &FileStamp) -> Option<ContentId> {
    match encoding {
        ContentCoding::Identity => resolve::content_id_of(stamp),
        _ => None,
    }
}

/// Steps 3–5 for a regular file, or for the precompressed sidecar chosen for it: then every
/// validator, precondition and range refers to the sidecar's (encoded) bytes.
async fn respond(
    method: &Method,
    headers: &HeaderMap,
    file: &Prepared,
    body: FileOrContents,
) -> Result<Response<Body>, Error> {
    let mut response = match conditional::evaluate(headers, &file.validators) {
        Precondition::Failed => return Ok(response::empty(StatusCode::PRECONDITION_FAILED)),
        Precondition::NotModified => {
            // No Content-Length and no body: RFC 9110 §15.4.5.
            let mut response = response::empty(StatusCode::NOT_MODIFIED);
            *response.headers_mut() = file.not_modified.clone();
            // What the 200 would be, so compression gives the 304 the same ETag and Vary.
            response.extensions_mut().insert(NotModifiedOf {
                content_type: file.content_type.clone(),
                len: file.len,
            });
            response
        }
        Precondition::Proceed => {
            let mut response = whole_or_range(method, headers, body, file).await?;
            if let (StatusCode::OK, Some(id)) = (response.status(), file.id) {
                // The whole file (a GET's body, or what a HEAD describes): compression may
                // keep its encoded forms under this identity and serve them again.
                response.extensions_mut().insert(id);
            }
            response
        }
    };
    if file.encoding != ContentCoding::Identity {
        // Logs and metrics say `precompressed`, and response compression leaves it alone.
        response
            .extensions_mut()
            .insert(Precompressed(file.encoding));
    }
    Ok(response)
}

/// An opened file, or its contents (read on the lookup's trip, or from the memory cache).
enum FileOrContents {
    File(std::fs::File),
    Contents(bytes::Bytes),
}

/// Steps 4–5: the whole file, or the one range asked for (GET only).
async fn whole_or_range(
    method: &Method,
    headers: &HeaderMap,
    file: FileOrContents,
    prepared: &Prepared,
) -> Result<Response<Body>, Error> {
    let len = prepared.len;
    // Range is defined for GET only (§14.2): a HEAD always describes the whole file. Without
    // a `Range` header, `If-Range` has nothing to decide (§13.1.5).
    let decision = if method == Method::GET
        && headers.contains_key(header::RANGE)
        && conditional::if_range_allows(headers, &prepared.validators)
    {
        range::decide(range::header_value(headers), len)
    } else {
        RangeDecision::Whole
    };
    let (status, start, count) = match decision {
        RangeDecision::Unsatisfiable => return Ok(response::range_not_satisfiable(len)),
        RangeDecision::Whole => (StatusCode::OK, 0, len),
        RangeDecision::Partial { start, end } => {
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
    };

    let body = match file {
        _ if method == Method::HEAD => Body::Empty,
        // In memory: the whole file, or a range of it (a cache hit), shared, not copied.
        FileOrContents::Contents(contents) if start == 0 && count == contents.len() as u64 => {
            Body::full(contents)
        }
        FileOrContents::Contents(contents) => {
            let range = usize::try_from(start)
                .ok()
                .zip(usize::try_from(start + count).ok());
            match range.filter(|&(from, to)| from <= to && to <= contents.len()) {
                Some((from, to)) => Body::full(contents.slice(from..to)),
                None => {
                    return Err(Error::internal(
                        ErrorKind::Io,
                        "range outside the file read",
                    ));
                }
            }
        }
        FileOrContents::File(file) => body::file_body(file, start, count).await?,
    };
    let mut response = Response::new(body);
    if status == StatusCode::OK {
        // The head built once for this version of the file.
        *response.headers_mut() = prepared.ok.clone();
        return Ok(response);
    }
    *response.status_mut() = status;
    let h = response.headers_mut();
    prepared.set_validators(h);
    h.insert(header::CONTENT_TYPE, prepared.content_type.clone());
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let end = start + count - 1;
    if let Ok(value) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
        h.insert(header::CONTENT_RANGE, value);
    }
    if prepared.encoding != ContentCoding::Identity {
        // Representation metadata goes with a representation: on 200 and 206, not on 304
        // (§15.4.5) or 416.
        let coding = HeaderValue::from_static(prepared.encoding.as_str());
        h.insert(header::CONTENT_ENCODING, coding);
    }
    Ok(response)
}

/// 301 to the same path with `/` appended, query kept. Leading slashes (and backslashes, which
/// browsers read as slashes) are collapsed to one: `//evil.example` must not become the
/// protocol-relative `Location: //evil.example/`.
fn add_slash(uri: &Uri) -> Result<Response<Body>, Error> {
    let path = uri.path().trim_start_matches(['/', '\\']);
    let mut location =
        String::with_capacity(path.len() + 2 + uri.query().map_or(0, |q| q.len() + 1));
    location.push('/');
    location.push_str(path);
    location.push('/');
    if let Some(query) = uri.query() {
        location.push('?');
        location.push_str(query);
    }
    let location = HeaderValue::from_str(&location).map_err(|_| {
        Error::downstream(ErrorKind::BadRequest, "request path cannot be redirected")
    })?;
    Ok(response::moved_permanently(location))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(uri: &'static str) -> Option<String> {
        let uri = Uri::from_static(uri);
        let response = add_slash(&uri).ok()?;
        assert_eq!(response.status(), StatusCode::MOVED_PERMANENTLY);
        Some(
            response
                .headers()
                .get(header::LOCATION)?
                .to_str()
                .ok()?
                .to_owned(),
        )
    }

    #[test]
    fn directory_redirect_keeps_the_query_and_stays_on_this_host() {
        assert_eq!(location("/docs").as_deref(), Some("/docs/"));
        assert_eq!(location("/docs?a=1&b").as_deref(), Some("/docs/?a=1&b"));
        assert_eq!(
            location("//evil.example").as_deref(),
            Some("/evil.example/")
        );
        assert_eq!(location("http://host/a/b?q").as_deref(), Some("/a/b/?q"));
    }
}
