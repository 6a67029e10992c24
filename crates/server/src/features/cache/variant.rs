//! Making a stored variant: the source body decoded (when the origin sent it encoded) and
//! encoded in the coding a client asked for, at the route's cache level (higher than on the
//! fly: the cost is paid once per stored response, not per request), with the encoders that
//! give the fewest bytes rather than the fastest (see `sluice_http::compress::whole`).

use bytes::Bytes;
use http::{HeaderValue, header};
use http_body::Frame;
use http_body_util::{BodyExt, Limited, StreamBody};
use sluice_cache::meta::Meta;
use sluice_core::{Body, BoxError, Compression, ContentCoding};
use sluice_http::compress::compress_whole;
use sluice_http::decompress::{DecompressBody, DecompressLimits};

/// Decoded sources are bounded like request bodies are: a stored response is the origin's,
/// and an origin can send a bomb too.
const DECODE_LIMITS: DecompressLimits = DecompressLimits {
    max_size: 256 * 1024 * 1024,
    max_ratio: 1000,
};

/// `body` (in `from`) as `to`, as a body of one frame that is produced when first polled (by
/// the zone's fill task, not the request's): the source is read whole (a stored object is
/// bounded by the zone's max object size; a decoded one by [`DECODE_LIMITS`]) and compressed
/// whole on the blocking pool, ratio first ([`compress_whole`]); high levels take milliseconds
/// that must not stall the runtime.
pub(super) fn transform(
    body: Body,
    from: ContentCoding,
    to: ContentCoding,
    level: Option<i32>,
) -> Body {
    let made = async move { make(body, from, to, level).await.map(Frame::data) };
    Body::stream(StreamBody::new(futures_util::stream::once(made)))
}

async fn make(
    body: Body,
    from: ContentCoding,
    to: ContentCoding,
    level: Option<i32>,
) -> Result<Bytes, BoxError> {
    let decoded = match Compression::new(from) {
        None => body,
        Some(coding) => Body::stream(DecompressBody::new(body, &[coding], DECODE_LIMITS)?),
    };
    let limit = usize::try_from(DECODE_LIMITS.max_size).unwrap_or(usize::MAX);
    let data = Limited::new(decoded, limit).collect().await?.to_bytes();
    let Some(coding) = Compression::new(to) else {
        return Ok(data);
    };
    let compressed =
        tokio::task::spawn_blocking(move || compress_whole(coding, level, &data)).await??;
    Ok(Bytes::from(compressed))
}

/// The stored form of the variant of `source` in `coding`: the same response with its own
/// `Content-Encoding`, no `Content-Length` (set when served), and its own `ETag`: the bytes
/// differ per coding, so validators must too (RFC 9110 §8.8.3). Weak, like the tags of
/// responses compressed on the fly: a variant made again (evicted, a new level, a new library)
/// may differ in its bytes, which a strong tag would promise it does not (a resumed download
/// with `If-Range` could splice two encodings).
pub(super) fn meta(source: &Meta, coding: ContentCoding) -> Meta {
    let mut meta = source.clone();
    let headers = &mut meta.headers;
    headers.remove(header::CONTENT_LENGTH);
    match coding {
        ContentCoding::Identity => {
            headers.remove(header::CONTENT_ENCODING);
        }
        coding => {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(coding.as_str()),
            );
        }
    }
    if let Some(etag) = headers
        .get(header::ETAG)
        .and_then(|v| variant_etag(v, coding))
    {
        headers.insert(header::ETAG, etag);
    }
    meta.variant = coding.as_str().to_string();
    meta.body_len = 0;
    meta
}

/// `"abc"` and `W/"abc"` → `W/"abc-gzip"`; `None` for a malformed tag.
fn variant_etag(etag: &HeaderValue, coding: ContentCoding) -> Option<HeaderValue> {
    let text = etag.to_str().ok()?;
    let quoted = text.strip_prefix("W/").unwrap_or(text);
    let opaque = quoted.strip_prefix('"')?.strip_suffix('"')?;
    HeaderValue::from_str(&format!("W/\"{opaque}-{}\"", coding.as_str())).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn variant_etags_are_weak_and_name_the_coding() {
        let tag = |s: &'static str| HeaderValue::from_static(s);
        assert_eq!(
            variant_etag(&tag("\"abc\""), ContentCoding::Gzip).unwrap(),
            "W/\"abc-gzip\""
        );
        assert_eq!(
            variant_etag(&tag("W/\"abc\""), ContentCoding::Br).unwrap(),
            "W/\"abc-br\""
        );
        assert!(variant_etag(&tag("abc"), ContentCoding::Br).is_none());
    }
}
