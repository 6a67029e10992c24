//! Making a stored variant: the source body decoded (when the origin sent it encoded) and
//! encoded in the coding a client asked for, at the route's cache level (higher than on the
//! fly: the cost is paid once per stored response, not per request).

use std::time::Duration;

use http::{HeaderValue, header};
use sluice_cache::meta::Meta;
use sluice_core::{Body, ContentCoding};
use sluice_http::compress::{CompressBody, CompressOptions, Encoder};
use sluice_http::decompress::{DecompressBody, DecompressLimits};

/// Decoded sources are bounded like request bodies are: a stored response is the origin's,
/// and an origin can send a bomb too.
const DECODE_LIMITS: DecompressLimits = DecompressLimits {
    max_size: 256 * 1024 * 1024,
    max_ratio: 1000,
};

/// `body` (in `from`) as `to`; `None` when no encoder can be made (the request then goes on as
/// if nothing were stored in that coding).
pub(super) fn transform(
    body: Body,
    from: ContentCoding,
    to: ContentCoding,
    level: Option<i32>,
) -> Option<Body> {
    let decoded = match sluice_core::Compression::new(from) {
        None => body,
        Some(coding) => match DecompressBody::new(body, &[coding], DECODE_LIMITS) {
            Ok(decoded) => Body::stream(decoded),
            Err(err) => {
                tracing::warn!("cannot decode a stored {from} body: {err}");
                return None;
            }
        },
    };
    let Some(coding) = sluice_core::Compression::new(to) else {
        return Some(decoded);
    };
    let encoder = match Encoder::new(coding, level) {
        Ok(encoder) => encoder,
        Err(err) => {
            tracing::warn!("creating a {to} encoder for a stored variant failed: {err}");
            return None;
        }
    };
    // One stream, flushed only when the source pauses for long: a stored variant is read from
    // memory or disk, so this is as good as compressing the whole body at once.
    let options = CompressOptions {
        flush_delay: Duration::from_secs(3600),
        event_stream: false,
    };
    Some(Body::stream(CompressBody::new(decoded, encoder, options)))
}

/// The stored form of the variant of `source` in `coding`: the same response with its own
/// `Content-Encoding`, no `Content-Length` (set when served), and its own strong `ETag` — the
/// bytes differ per coding, so validators must too (RFC 9110 §8.8.3).
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

/// `"abc"` → `"abc-gzip"`, `W/"abc"` → `W/"abc-gzip"`; `None` for a malformed tag.
fn variant_etag(etag: &HeaderValue, coding: ContentCoding) -> Option<HeaderValue> {
    let text = etag.to_str().ok()?;
    let (weak, quoted) = match text.strip_prefix("W/") {
        Some(rest) => ("W/", rest),
        None => ("", text),
    };
    let opaque = quoted.strip_prefix('"')?.strip_suffix('"')?;
    HeaderValue::from_str(&format!("{weak}\"{opaque}-{}\"", coding.as_str())).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn variant_etags_keep_weakness_and_add_the_coding() {
        let tag = |s: &'static str| HeaderValue::from_static(s);
        assert_eq!(
            variant_etag(&tag("\"abc\""), ContentCoding::Gzip).unwrap(),
            "\"abc-gzip\""
        );
        assert_eq!(
            variant_etag(&tag("W/\"abc\""), ContentCoding::Br).unwrap(),
            "W/\"abc-br\""
        );
        assert!(variant_etag(&tag("abc"), ContentCoding::Br).is_none());
    }
}
