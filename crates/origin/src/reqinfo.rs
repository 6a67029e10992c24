//! `/reqinfo` (any method): describe the request as the origin received it, as JSON.
//!
//! Tests of the proxy use this to see what actually arrived upstream: which headers were added or
//! removed, whether the body came chunked or with a length, and whether every byte made it (length
//! and SHA-256). The body is hashed frame by frame as it arrives and never held whole, so a 1 GiB
//! upload costs one frame of memory; hyper's flow control pushes back on the sender meanwhile.
//!
//! `headers` lists `[name, value]` pairs in the order of `http::HeaderMap`'s iteration: names in
//! the order they first arrived, repeated names grouped at their first position. HTTP/2
//! pseudo-headers are not headers: `:authority` and `:path` show up in `path` (and hyper does not
//! synthesise a `host` header).

use std::borrow::Cow;
use std::pin::pin;

use bytes::Bytes;
use http::header::TRANSFER_ENCODING;
use http::{Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sluice_core::{Body, BoxError};

use crate::body::content_length;
use crate::respond;

/// What `/reqinfo` answers.
#[derive(Serialize)]
struct Info<'a> {
    method: &'a str,
    path: &'a str,
    version: &'static str,
    headers: Vec<(&'a str, Cow<'a, str>)>,
    content_length: Option<u64>,
    chunked: bool,
    body_length: u64,
    body_sha256: String,
}

/// Answer `/reqinfo`.
pub(crate) async fn respond<B>(req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    let (body_length, digest) = match hash_body(body).await {
        Ok(hashed) => hashed,
        Err(err) => {
            tracing::debug!(error = %err, "reading the request body failed");
            return respond::error(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            );
        }
    };
    let info = Info {
        method: parts.method.as_str(),
        path: parts.uri.path_and_query().map_or("/", |pq| pq.as_str()),
        version: version_name(parts.version),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), String::from_utf8_lossy(value.as_bytes())))
            .collect(),
        content_length: content_length(&parts.headers),
        chunked: is_chunked(&parts.headers),
        body_length,
        body_sha256: hex::encode(digest),
    };
    match serde_json::to_vec(&info) {
        Ok(json) => respond::full(&parts.method, respond::APPLICATION_JSON, Bytes::from(json)),
        Err(err) => {
            tracing::warn!(error = %err, "encoding /reqinfo failed");
            respond::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not encode the answer",
            )
        }
    }
}

/// Count and hash the body one frame at a time.
async fn hash_body<B>(body: B) -> Result<(u64, [u8; 32]), BoxError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    let mut hasher = Sha256::new();
    let mut length = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(Into::into)?.into_data() {
            length += data.len() as u64;
            hasher.update(&data);
        }
    }
    Ok((length, hasher.finalize().into()))
}

/// The version as it appears on an HTTP/1 request line (`HTTP/2.0` for HTTP/2, as `http` spells it).
fn version_name(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "unknown",
    }
}

/// Whether any `Transfer-Encoding` value lists `chunked` (case-insensitively, as RFC 9112 says).
fn is_chunked(headers: &http::HeaderMap) -> bool {
    headers.get_all(TRANSFER_ENCODING).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|c| c.trim().eq_ignore_ascii_case("chunked"))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn chunked_is_found_in_any_position_and_case() {
        let mut headers = http::HeaderMap::new();
        assert!(!is_chunked(&headers));
        headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("gzip, Chunked"));
        assert!(is_chunked(&headers));
        headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("gzip"));
        assert!(!is_chunked(&headers));
        headers.append(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        assert!(is_chunked(&headers));
    }

    #[test]
    fn versions_are_spelled_like_request_lines() {
        assert_eq!(version_name(Version::HTTP_11), "HTTP/1.1");
        assert_eq!(version_name(Version::HTTP_2), "HTTP/2.0");
    }

    #[tokio::test]
    async fn describes_a_request_and_hashes_its_body() {
        let req = Request::post("/reqinfo?x=1")
            .header("x-b", "2")
            .header("x-a", b"\xff".as_slice())
            .body(http_body_util::Full::new(Bytes::from_static(b"abc")))
            .unwrap_or_default();
        let resp = respond(req).await;
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(v["method"], "POST");
        assert_eq!(v["path"], "/reqinfo?x=1");
        assert_eq!(
            v["headers"],
            serde_json::json!([["x-b", "2"], ["x-a", "\u{fffd}"]])
        );
        assert_eq!(v["content_length"], serde_json::Value::Null);
        assert_eq!(v["body_length"], 3);
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(v["body_sha256"], abc);
    }
}
