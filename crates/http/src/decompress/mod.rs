//! Request-body decompression for the proxy (DESIGN.md capability 10): a request sent with
//! `Content-Encoding` ([RFC 9110 §8.4](https://www.rfc-editor.org/rfc/rfc9110#section-8.4)) is
//! decoded while it streams to the upstream, which then sees a plain chunked body.
//!
//! The decoded stream is the dangerous part: a few kilobytes of gzip can expand to gigabytes. So
//! decoding is pulled, one bounded frame at a time ([`FRAME`]), never pushed: memory is one frame
//! per coding plus the codecs' windows whatever the ratio, and [`DecompressLimits`] stops the body
//! with `413` before it yields a byte past `max_size` (or past `max_ratio` times the input).
//!
//! Flow for the caller: [`plan`] the codings (unknown → `415` with `Accept-Encoding: `[`ACCEPTED`],
//! [RFC 7694 §3](https://www.rfc-editor.org/rfc/rfc7694#section-3)), [`rewrite_headers`], wrap the
//! body in [`DecompressBody`]. When sending upstream fails, [`error_kind`] finds whether the body
//! was the cause (`413` too large, `400` corrupt or truncated) through whatever wraps the error.
//!
//! Files: `codec` (one incremental decoder per coding), `body` (the stacked pipeline and limits).

mod body;
mod codec;

use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
use sluice_core::{Compression, ContentCoding, Error, ErrorKind};

pub use body::{DecompressBody, DecompressError, FRAME};

/// The codings sluice decodes, for `Accept-Encoding` on a `415` (RFC 7694 §3).
pub const ACCEPTED: &str = "gzip, deflate, br, zstd";

/// Hard limits on one decoded body; exceeding either is `413`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressLimits {
    /// Most decoded bytes one body may have.
    pub max_size: u64,
    /// Most decoded bytes per encoded byte, checked once more than [`FRAME`] bytes are decoded
    /// so tiny, very compressible bodies (`{}` padded by a gzip header) are not refused.
    pub max_ratio: u64,
}

impl Default for DecompressLimits {
    fn default() -> Self {
        Self {
            max_size: 10 * 1024 * 1024,
            max_ratio: 100,
        }
    }
}

/// The codings of a request body in the order they must be undone, `None` when it has none.
///
/// Codings are listed in the order they were applied (RFC 9110 §8.4), across comma lists and
/// repeated fields alike, so decoding runs the list backwards. `identity` is skipped; tokens are
/// case-insensitive and `x-gzip` is gzip (RFC 9110 §8.4.1.3).
pub fn plan(headers: &HeaderMap) -> Result<Option<Vec<Compression>>, Error> {
    let mut applied = Vec::new();
    for value in headers.get_all(CONTENT_ENCODING) {
        let value = value.to_str().map_err(|_| unsupported("(not text)"))?;
        for token in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let coding = ContentCoding::from_token(token).ok_or_else(|| unsupported(token))?;
            // `None`: identity, which changes nothing.
            if let Some(compression) = Compression::new(coding) {
                applied.push(compression);
            }
        }
    }
    if applied.is_empty() {
        return Ok(None);
    }
    applied.reverse();
    Ok(Some(applied))
}

fn unsupported(token: &str) -> Error {
    Error::downstream(
        ErrorKind::UnsupportedMediaType,
        format!("unsupported request content coding {token:?}"),
    )
}

/// Make the headers describe the decoded body: no `Content-Encoding`, and no `Content-Length`
/// since the decoded size is unknown until the end (the body then goes out chunked, or as HTTP/2
/// DATA frames without a declared length).
pub fn rewrite_headers(headers: &mut HeaderMap) {
    headers.remove(CONTENT_ENCODING);
    headers.remove(CONTENT_LENGTH);
}

/// The sluice error kind behind `err`, looked up along its whole `source()` chain: the proxy's
/// send error wraps the body error (sometimes several times), and the status must follow the
/// body's failure (`413`, `400`), not the transport's.
pub fn error_kind(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(kind) = e
            .downcast_ref::<DecompressError>()
            .and_then(DecompressError::kind)
        {
            return Some(kind);
        }
        if let Some(e) = e.downcast_ref::<Error>() {
            return Some(e.kind());
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(CONTENT_ENCODING, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn plan_reverses_applied_codings_across_lists_and_fields() {
        let plan = plan(&headers(&[
            "GZIP, identity",
            "br",
            " x-gzip ,zstd",
            "Deflate",
        ]));
        use Compression as C;
        assert_eq!(
            plan.ok().flatten(),
            Some(vec![C::DEFLATE, C::ZSTD, C::GZIP, C::BR, C::GZIP])
        );
    }

    #[test]
    fn plan_without_codings_is_none() {
        assert!(matches!(plan(&headers(&[])), Ok(None)));
        assert!(matches!(plan(&headers(&["identity", ""])), Ok(None)));
    }

    #[test]
    fn unknown_coding_is_415_from_the_client() {
        let err = plan(&headers(&["gzip, compress"])).err();
        assert_eq!(
            err.as_ref().map(Error::kind),
            Some(ErrorKind::UnsupportedMediaType)
        );
        assert_eq!(err.map(|e| e.side()), Some(sluice_core::Side::Downstream));
    }

    #[test]
    fn rewrite_removes_encoding_and_length() {
        let mut h = headers(&["gzip"]);
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("12"));
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("a/b"));
        rewrite_headers(&mut h);
        assert_eq!(h.len(), 1);
    }
}

#[cfg(test)]
mod proptest;
