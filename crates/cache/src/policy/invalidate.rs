//! Invalidation after unsafe requests (RFC 9111 §4.4,
//! <https://www.rfc-editor.org/rfc/rfc9111#section-4.4>).
//!
//! "A cache MUST invalidate the target URI when it receives a non-error status code in
//! response to an unsafe request method (including methods whose safety is unknown)", and MAY
//! invalidate the URIs in `Location` and `Content-Location`, but "MUST NOT trigger an
//! invalidation ... if the origin of the URI to be invalidated differs from that of the target
//! URI". A non-error status is 2xx or 3xx.
//!
//! [`invalidation`] returns the URIs; the zone turns each into a key with
//! [`crate::key::reference_key`], which refuses other origins, and removes (or marks for
//! revalidation) every stored response under it.

use http::header::{self, HeaderMap};
use http::{Method, StatusCode, Uri};

use crate::key::resolve_reference;

/// The URIs to invalidate after a `method` request to `req_uri` answered with `status` and
/// `resp_headers`: the request's own URI first, then `Location` and `Content-Location`
/// resolved against it (RFC 3986 §5). Empty for safe methods and error statuses.
pub fn invalidation(
    method: &Method,
    status: StatusCode,
    req_uri: &Uri,
    resp_headers: &HeaderMap,
) -> Vec<Uri> {
    // RFC 9110 §9.2.1: GET, HEAD, OPTIONS and TRACE are safe; every other method, known or
    // not, may change state.
    let safe = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method);
    let non_error = status.is_success() || status.is_redirection();
    if safe || !non_error {
        return Vec::new();
    }
    let mut targets = vec![req_uri.clone()];
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let resolved = resp_headers
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .and_then(|reference| resolve_reference(req_uri, reference));
        if let Some(uri) = resolved
            && !targets.contains(&uri)
        {
            targets.push(uri);
        }
    }
    targets
}
