//! Responses sluice makes itself: the 429 page, fixed responses and redirects (error pages are
//! `crate::shared::error_page`).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use sluice_config::{FixedResponse, Redirect};
use sluice_core::{Body, Error};

use crate::shared::error_page;

/// The 429 of a route's rate limit, with `Retry-After` in whole seconds (at least 1).
pub fn too_many_requests(error: &Error, retry_after_secs: u64) -> Response<Body> {
    let mut response = error_page(error.status(), Some(error.message()));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// A route's fixed response.
pub fn fixed(fixed: &FixedResponse) -> Response<Body> {
    let mut response = Response::new(Body::full(fixed.body.clone()));
    *response.status_mut() = fixed.status;
    *response.headers_mut() = fixed.headers.clone();
    response
}

/// A route's redirect, with `{uri}`, `{path}` and `{host}` filled in from the request.
pub fn redirect(redirect: &Redirect, uri: &http::Uri, host: Option<&str>) -> Response<Body> {
    let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let target = redirect
        .to
        .replace("{uri}", path_and_query)
        .replace("{path}", uri.path())
        .replace("{host}", host.unwrap_or(""));
    match HeaderValue::from_maybe_shared(Bytes::from(target)) {
        Ok(location) => {
            let mut response = Response::new(Body::Empty);
            *response.status_mut() = redirect.status;
            response.headers_mut().insert(header::LOCATION, location);
            response
        }
        // A request path can hold bytes that are not valid in a header; refuse it.
        Err(_) => error_page(
            StatusCode::BAD_REQUEST,
            Some("the redirect target is not a valid URL"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn redirect_fills_placeholders() {
        let r = Redirect {
            to: "https://{host}{uri}".into(),
            status: StatusCode::MOVED_PERMANENTLY,
        };
        let resp = redirect(&r, &"/a/b?x=1".parse().unwrap(), Some("example.com"));
        assert_eq!(resp.status(), 301);
        assert_eq!(
            resp.headers()[header::LOCATION],
            "https://example.com/a/b?x=1"
        );
    }

    #[test]
    fn server_errors_hide_details() {
        let resp = error_page(StatusCode::INTERNAL_SERVER_ERROR, Some("/secret/path"));
        assert!(
            matches!(resp.body(), Body::Full(Some(b)) if !b.windows(6).any(|w| w == b"secret"))
        );
    }
}
