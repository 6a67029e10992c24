//! Limits on what a client controls: connections (`connections.rs`, used by the accept loop)
//! and, in the pipeline's request phase, the request itself (here), with the request body's
//! size and time enforced while it streams (`body.rs`).
//!
//! The request checks answer before the action runs, so nothing over a limit reaches an
//! upstream, a file or a cache:
//! - the target's path and query longer than `max_uri_length` → 414 (RFC 9110 §15.5.15);
//! - `Content-Encoding` stacking more than `max_content_codings` codings → 415 (RFC 9110
//!   §15.5.16: the server refuses the content's coding);
//! - a `Content-Length` over the route's `max_body_size` → 413 before a byte of the body is
//!   read (RFC 9110 §15.5.14), with `Connection: close` on HTTP/1.1, since the unread body
//!   would otherwise be taken for the next request. A body without a length is counted as it
//!   streams instead (`body.rs`).
//!
//! Header count and size (431) are hyper's: it refuses them while parsing, before the
//! pipeline sees a request.

mod body;

use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use sluice_config::{BodyLimits, ListenerLimits};
use sluice_core::Body;

use crate::shared::metrics::limits::{RequestLimit, RequestLimitMetrics};
pub use body::limit_body;

/// A listener's request limits, checked in the request phase.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    max_uri_length: usize,
    max_content_codings: usize,
    pub metrics: RequestLimitMetrics,
}

impl RequestLimits {
    pub fn new(limits: &ListenerLimits, metrics: RequestLimitMetrics) -> Self {
        Self {
            max_uri_length: limits.max_uri_length,
            max_content_codings: limits.max_content_codings,
            metrics,
        }
    }

    /// The checks that need no route: the target's length and the stacked codings. `Some` is
    /// the refusal to answer with.
    pub fn check_head<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        let length = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
        if length > self.max_uri_length {
            return Some(self.refuse(
                RequestLimit::UriLength,
                StatusCode::URI_TOO_LONG,
                &format!(
                    "the request target is {length} bytes; at most {} are accepted",
                    self.max_uri_length
                ),
            ));
        }
        let codings = content_codings(req.headers());
        if codings > self.max_content_codings {
            return Some(self.refuse(
                RequestLimit::ContentCodings,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &format!(
                    "Content-Encoding stacks {codings} codings; at most {} are accepted",
                    self.max_content_codings
                ),
            ));
        }
        None
    }

    /// A declared `Content-Length` over the route's `max_body_size`: the refusal.
    pub fn check_length<B>(&self, req: &Request<B>, limits: &BodyLimits) -> Option<Response<Body>> {
        let max = limits.max_size?;
        let length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        match length {
            Some(length) if length > max => {
                let mut response = self.refuse(
                    RequestLimit::BodySize,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("the request body is {length} bytes; at most {max} are accepted"),
                );
                if req.version() <= Version::HTTP_11 {
                    // The body stays unread: the connection cannot carry another request.
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                Some(response)
            }
            _ => None,
        }
    }

    fn refuse(&self, limit: RequestLimit, status: StatusCode, why: &str) -> Response<Body> {
        self.metrics.exceeded(limit);
        // Debug: a client over a limit is the client's business, and a line per refusal at a
        // higher level would let anyone flood the log.
        tracing::debug!(%status, limit = limit.as_str(), "{why}");
        crate::shared::error_page(status, Some(why))
    }
}

/// The codings a request's `Content-Encoding` lines declare, together.
fn content_codings(headers: &http::HeaderMap) -> usize {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .map(|value| {
            value
                .as_bytes()
                .split(|b| *b == b',')
                .filter(|token| token.iter().any(|b| !b.is_ascii_whitespace()))
                .count()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codings_are_counted_across_lines_and_commas() {
        let mut headers = http::HeaderMap::new();
        headers.append(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("gzip, br"),
        );
        headers.append(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(" zstd ,, "),
        );
        assert_eq!(content_codings(&headers), 3);
        assert_eq!(content_codings(&http::HeaderMap::new()), 0);
    }
}
