//! Listeners without TLS in a config with ACME listeners (docs/acme.md): they answer HTTP-01
//! challenges (RFC 8555 §8.3) at `/.well-known/acme-challenge/TOKEN` before any route is
//! looked at, so no route (a catch-all proxy, a redirect, access control) can hide them, and
//! they send every other request to HTTPS with `[acme] http_redirect` (308 by default: the
//! method and body are kept, RFC 9110 §15.4.9).

use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode, header};
use sluice_core::Body;

use crate::pipeline::host::request_host;
use crate::shared::acme::Http01Tokens;

/// The path prefix of HTTP-01 challenges (RFC 8555 §8.3).
pub const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// What a listener without TLS does for ACME.
#[derive(Debug)]
pub struct AcmeFront {
    pub tokens: Arc<Http01Tokens>,
    /// The redirect status and the HTTPS port (`None`: 443, left out of the URL).
    pub redirect: Option<(StatusCode, Option<u16>)>,
}

impl AcmeFront {
    /// The answer to `req` when ACME decides it: a challenge, or the redirect to HTTPS.
    /// `None`: route it as usual.
    pub fn answer<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        if let Some(token) = req.uri().path().strip_prefix(CHALLENGE_PREFIX) {
            return Some(match self.tokens.get(token) {
                Some(key_authorization) => {
                    let mut response = Response::new(Body::full(key_authorization));
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    );
                    response
                }
                None => crate::shared::error_page(StatusCode::NOT_FOUND, None),
            });
        }
        let (status, port) = self.redirect?;
        let Some(host) = request_host(req) else {
            let why = "a redirect to HTTPS needs the request's host";
            return Some(crate::shared::error_page(
                StatusCode::BAD_REQUEST,
                Some(why),
            ));
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.into_owned()
        };
        let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let location = match port {
            Some(port) => format!("https://{host}:{port}{target}"),
            None => format!("https://{host}{target}"),
        };
        let Ok(location) = HeaderValue::from_str(&location) else {
            let why = "the request's host cannot be put in a URL";
            return Some(crate::shared::error_page(
                StatusCode::BAD_REQUEST,
                Some(why),
            ));
        };
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = status;
        response.headers_mut().insert(header::LOCATION, location);
        Some(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front(redirect: Option<(StatusCode, Option<u16>)>) -> AcmeFront {
        let tokens = Arc::new(Http01Tokens::default());
        tokens.insert("tok".into(), "tok.thumb".into());
        AcmeFront { tokens, redirect }
    }

    fn get(uri: &str, host: &str) -> Request<()> {
        Request::get(uri).header("host", host).body(()).unwrap()
    }

    #[test]
    fn a_known_token_is_answered_and_an_unknown_one_is_404() {
        let front = front(Some((StatusCode::PERMANENT_REDIRECT, None)));
        let ok = front
            .answer(&get("/.well-known/acme-challenge/tok", "a.test"))
            .unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        assert!(matches!(ok.body(), Body::Full(Some(b)) if b.as_ref() == b"tok.thumb"));
        let missing = front
            .answer(&get("/.well-known/acme-challenge/other", "a.test"))
            .unwrap();
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn other_requests_go_to_https_keeping_the_target() {
        let on_8443 = front(Some((StatusCode::PERMANENT_REDIRECT, Some(8443))));
        let moved = on_8443.answer(&get("/a/b?c=d", "A.test:8080")).unwrap();
        assert_eq!(moved.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(
            moved.headers()[header::LOCATION],
            "https://a.test:8443/a/b?c=d"
        );
        let default_port = front_default();
        let moved = default_port.answer(&get("/", "[::1]:80")).unwrap();
        assert_eq!(moved.headers()[header::LOCATION], "https://[::1]/");
        assert!(front(None).answer(&get("/x", "a.test")).is_none());
    }

    fn front_default() -> AcmeFront {
        front(Some((StatusCode::MOVED_PERMANENTLY, None)))
    }
}
