//! The demo origin: the backend that sluice's demo, tests and benchmarks put behind the proxy.
//!
//! It serves seed 003's two JSON APIs (`/what-date-is-it`, `/what-is-my-name`), a request echo
//! (`/reqinfo`) that shows what reached the upstream side of a proxy, a chunked stream (`/stream`)
//! for streaming-compression tests, and seed 002's `/hello`. See the README for the table.
//!
//! Because benchmarks measure the proxy, the origin must never be the bottleneck: fixed bodies are
//! rendered once and shared (`Bytes` clones), the large arrays are built by doubling copies, headers
//! are static, and nothing is buffered that can be streamed. It depends only on `sluice-core` and
//! hyper, never on sluice's server or config crates, so it measures the same whatever the proxy does.
//!
//! Start reading at [`Origin::handle`] (routing) and `serve.rs` (connections).

mod body;
mod dates;
mod json;
mod names;
mod padding;
mod reqinfo;
mod respond;
mod serve;
mod stream;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use sluice_core::{Body, BoxError};

/// Response header naming the origin instance, so tests can see which peer a balancer picked.
pub const X_ORIGIN: HeaderName = HeaderName::from_static("x-origin");

/// Seed 002's test app: `Hello World!` ten times, 120 bytes.
const HELLO: &[u8] = b"Hello World!Hello World!Hello World!Hello World!Hello World!\
Hello World!Hello World!Hello World!Hello World!Hello World!";

/// How an [`Origin`] is set up.
#[derive(Debug, Clone, Default)]
pub struct OriginOptions {
    /// Sent as `X-Origin` on every response when set.
    pub name: Option<String>,
}

/// The demo origin. Cheap to clone: all state is behind one `Arc`.
#[derive(Clone)]
pub struct Origin {
    inner: Arc<Inner>,
}

struct Inner {
    /// The configured name as a ready header value (cloning a `HeaderValue` is a refcount bump).
    name: Option<HeaderValue>,
    dates: dates::DateBody,
}

impl Origin {
    /// A new origin. Renders today's date body right away so the first request is not slower.
    pub fn new(opts: OriginOptions) -> Self {
        let name = opts.name.as_deref().map(header_value_lossy);
        Self {
            inner: Arc::new(Inner {
                name,
                dates: dates::DateBody::new(),
            }),
        }
    }

    /// The `X-Origin` value this origin sends, if it has a name.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_ref().and_then(|v| v.to_str().ok())
    }

    /// Answer one request. Never fails: every problem becomes a JSON error response.
    ///
    /// Needs a tokio runtime with the time driver enabled (`/stream?delay_ms` sleeps).
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut resp = self.route(req).await;
        if let Some(name) = &self.inner.name {
            resp.headers_mut().insert(X_ORIGIN, name.clone());
        }
        resp
    }

    async fn route<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let method = req.method();
        match req.uri().path() {
            "/what-date-is-it" if respond::is_get_or_head(method) => {
                self.inner.dates.respond(method)
            }
            "/what-is-my-name" => names::respond(req).await,
            "/reqinfo" => reqinfo::respond(req).await,
            "/stream" if respond::is_get_or_head(method) => {
                stream::respond(method, req.uri().query())
            }
            "/hello" if respond::is_get_or_head(method) => {
                respond::full(method, respond::TEXT_PLAIN, Bytes::from_static(HELLO))
            }
            "/what-date-is-it" | "/stream" | "/hello" => respond::method_not_allowed("GET, HEAD"),
            _ => respond::not_found(),
        }
    }
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// A header value from a configured name; bytes a header cannot carry (control characters) become
/// `_` rather than failing, since a name is cosmetic and `Origin::new` has no error to report.
fn header_value_lossy(name: &str) -> HeaderValue {
    HeaderValue::from_str(name).unwrap_or_else(|_| {
        let cleaned: String = name
            .chars()
            .map(|c| if c == '\t' || !c.is_control() { c } else { '_' })
            .collect();
        tracing::warn!(
            name,
            "origin name has characters a header cannot carry; replaced with _"
        );
        HeaderValue::from_str(&cleaned).unwrap_or(HeaderValue::from_static("origin"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_is_seed_002s_body() {
        assert_eq!(HELLO.len(), 120);
        assert_eq!(HELLO, "Hello World!".repeat(10).as_bytes());
    }

    #[test]
    fn names_become_header_values() {
        let origin = Origin::new(OriginOptions {
            name: Some("a\nb".into()),
        });
        assert_eq!(origin.name(), Some("a_b"));
        assert_eq!(Origin::new(OriginOptions::default()).name(), None);
    }
}
