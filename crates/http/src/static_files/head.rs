//! A representation's validators and response heads, built once per version of a file.
//!
//! # Why
//! Formatting the `ETag`, the `Last-Modified` date and `Content-Length`, and inserting seven
//! headers one by one, cost about as much as everything else a memory-cache hit does
//! (docs/performance.md, "Static files"). A [`Prepared`] representation holds its `200` head
//! and its `304` head as finished [`HeaderMap`]s: the memory cache keeps one per entry, and a
//! hit clones the map (two allocations and a reference count per value; no formatting, no
//! hashing of header names). Only the rarer answers (206, 412, 416) are built per request,
//! from the same pre-built values.
//!
//! The heads are what [`super::respond`] used to build per request, header for header: the
//! memory cache's tests compare a hit with a lookup of the same request.

use std::time::SystemTime;

use http::HeaderMap;
use http::header::{self, HeaderValue};
use sluice_core::ContentCoding;

use super::conditional::Validators;
use crate::compress_policy::ContentId;

/// What describes one representation (a file's bytes, or a sidecar's) in a response.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Length of the representation's bytes.
    pub(crate) len: u64,
    /// `Identity`, or the coding of a precompressed sidecar.
    pub(crate) encoding: ContentCoding,
    /// The original's type, also for a sidecar.
    pub(crate) content_type: HeaderValue,
    pub(crate) validators: Validators,
    /// `ETag` as a header value, when it is a valid one (always, for the tags made here).
    pub(crate) etag: Option<HeaderValue>,
    /// `Last-Modified` as a header value; `None` without a modification time.
    pub(crate) last_modified: Option<HeaderValue>,
    /// What identifies these bytes to response compression; `None` for a sidecar (never
    /// compressed again) and where the platform cannot tell file versions apart.
    pub(crate) id: Option<ContentId>,
    /// The head of a `200` (GET, or the HEAD that describes it): `Content-Type`,
    /// `Content-Length`, `Accept-Ranges`, the validators, and a sidecar's `Content-Encoding`.
    pub(crate) ok: HeaderMap,
    /// The head of a `304`: the validators only (RFC 9110 §15.4.5).
    pub(crate) not_modified: HeaderMap,
}

impl Prepared {
    /// Describe `len` bytes in `encoding`, last modified at `modified`, as seen at `now` (a
    /// modification time in the future is announced as `now`, RFC 9110 §8.8.2.1).
    pub(crate) fn new(
        len: u64,
        modified: Option<SystemTime>,
        encoding: ContentCoding,
        content_type: HeaderValue,
        id: Option<ContentId>,
        now: SystemTime,
    ) -> Self {
        let validators = Validators::new(modified, len, encoding, now);
        let etag = validators.etag_header();
        let last_modified = validators.last_modified_header();

        let mut not_modified = HeaderMap::with_capacity(2);
        if let Some(etag) = &etag {
            not_modified.insert(header::ETAG, etag.clone());
        }
        if let Some(date) = &last_modified {
            not_modified.insert(header::LAST_MODIFIED, date.clone());
        }
        // Room for what the pipeline adds (`Server`, `Vary`) without growing the map.
        let mut ok = HeaderMap::with_capacity(9);
        ok.extend(not_modified.clone());
        ok.insert(header::CONTENT_TYPE, content_type.clone());
        ok.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        ok.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if encoding != ContentCoding::Identity {
            // Representation metadata goes with a representation: not on 304 (§15.4.5).
            ok.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(encoding.as_str()),
            );
        }
        Self {
            len,
            encoding,
            content_type,
            validators,
            etag,
            last_modified,
            id,
            ok,
            not_modified,
        }
    }

    /// The validators of a `206`, which also carries them (§15.3.7).
    pub(crate) fn set_validators(&self, headers: &mut HeaderMap) {
        if let Some(etag) = &self.etag {
            headers.insert(header::ETAG, etag.clone());
        }
        if let Some(date) = &self.last_modified {
            headers.insert(header::LAST_MODIFIED, date.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn names(map: &HeaderMap) -> Vec<&str> {
        map.keys().map(|k| k.as_str()).collect()
    }

    #[test]
    fn heads_of_a_file_and_of_a_sidecar() {
        let mtime = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = mtime + Duration::from_secs(60);
        let html = HeaderValue::from_static("text/html; charset=utf-8");
        let file = Prepared::new(
            10,
            Some(mtime),
            ContentCoding::Identity,
            html.clone(),
            None,
            now,
        );
        assert_eq!(
            names(&file.ok),
            [
                "etag",
                "last-modified",
                "content-type",
                "content-length",
                "accept-ranges"
            ]
        );
        assert_eq!(file.ok[header::ETAG], "\"6553f100-a\"");
        assert_eq!(
            file.ok[header::LAST_MODIFIED],
            "Tue, 14 Nov 2023 22:13:20 GMT"
        );
        assert_eq!(file.ok[header::CONTENT_LENGTH], "10");
        assert_eq!(names(&file.not_modified), ["etag", "last-modified"]);

        let gz = Prepared::new(4, Some(mtime), ContentCoding::Gzip, html, None, now);
        assert_eq!(gz.ok[header::CONTENT_ENCODING], "gzip");
        assert_eq!(gz.ok[header::ETAG], "\"6553f100-4-gzip\"");
        assert!(!gz.not_modified.contains_key(header::CONTENT_ENCODING));
    }

    #[test]
    fn without_a_modification_time_there_is_no_last_modified() {
        let text = HeaderValue::from_static("text/plain");
        let now = UNIX_EPOCH + Duration::from_secs(1);
        let p = Prepared::new(0, None, ContentCoding::Identity, text, None, now);
        assert_eq!(names(&p.not_modified), ["etag"]);
        assert_eq!(p.ok[header::CONTENT_LENGTH], "0");
    }
}
