//! Sending a response on an HTTP/3 request stream: the head, each body frame as it comes (a
//! compressed stream's flushes reach the client as they do over HTTP/2), the trailers, then the
//! stream's end.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, header};
use http_body_util::BodyExt as _;
use sluice_core::Body;

type SendStream = h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// Send `response` on `stream` and end it. On an error of the response body the stream is
/// reset (H3_INTERNAL_ERROR), so the client sees a broken response, never a short one that
/// looks complete (as hyper resets an h2 stream).
pub(super) async fn response(
    stream: &mut SendStream,
    response: Response<Body>,
) -> Result<(), h3::error::StreamError> {
    let (mut parts, mut body) = response.into_parts();
    connection_specific_removed(&mut parts.headers);
    // RFC 9110 §6.6.1: an origin server with a clock sends Date (hyper does for HTTP/1.1 and
    // HTTP/2).
    if !parts.headers.contains_key(header::DATE)
        && let Some(date) = date_now()
    {
        parts.headers.insert(header::DATE, date);
    }
    stream
        .send_response(Response::from_parts(parts, ()))
        .await?;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(err) => {
                tracing::debug!("HTTP/3 response body failed: {err}");
                stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Ok(());
            }
        };
        match frame.into_data() {
            Ok(data) => {
                if !data.is_empty() {
                    stream.send_data(data).await?;
                }
            }
            Err(frame) => {
                if let Ok(mut trailers) = frame.into_trailers() {
                    connection_specific_removed(&mut trailers);
                    stream.send_trailers(trailers).await?;
                    break;
                }
            }
        }
    }
    stream.finish().await
}

thread_local! {
    /// The `Date` value of the current second, made once per second per thread (hyper keeps
    /// the same cache for HTTP/1.1 and HTTP/2): formatting it per response showed in profiles.
    static DATE: RefCell<(u64, Option<HeaderValue>)> = const { RefCell::new((0, None)) };
}

/// `Date` for now (RFC 9110 §5.6.7's IMF-fixdate), from the per-second cache.
fn date_now() -> Option<HeaderValue> {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    DATE.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != secs || cached.1.is_none() {
            *cached = (
                secs,
                HeaderValue::from_str(&httpdate::fmt_http_date(now)).ok(),
            );
        }
        cached.1.clone()
    })
}

/// RFC 9114 §4.2: an HTTP/3 message carries no connection-specific fields (a response with one
/// is malformed); they describe a hop that does not exist here.
fn connection_specific_removed(headers: &mut HeaderMap) {
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::HeaderName::from_static("keep-alive"),
        header::HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
}
