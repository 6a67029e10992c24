//! Whether a request may be answered with a dictionary-compressed body, and whether its
//! response may be offered as a dictionary (RFC 9842 §9.3.2, "Response Readability"): a
//! browser must be able to read both the dictionary and the response, or the size of the
//! compressed body would leak content across origins.
//!
//! From the request's fetch metadata (sent by every current browser):
//! - `Sec-Fetch-Site: same-origin`: allowed;
//! - no `Sec-Fetch-Mode` (not a browser, or an old one): allowed (the RFC's SHOULD);
//! - mode `navigate` or `same-origin`: allowed;
//! - mode `cors`: allowed only when the response carries `Access-Control-Allow-Origin` that is
//!   `*` or the request's `Origin` (and the request has one);
//! - any other mode (`no-cors`, `websocket`, ...): refused.
//!
//! Same origin for the dictionary itself (§2.2.2, §9.3.1) is the store's business: it keeps the
//! origin each dictionary was served from.

use http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, ORIGIN};
use http::{HeaderMap, HeaderValue};

/// `Sec-Fetch-Site` and `Sec-Fetch-Mode` (fetch metadata; not in the `http` crate's list).
const SEC_FETCH_SITE: &str = "sec-fetch-site";
const SEC_FETCH_MODE: &str = "sec-fetch-mode";

/// What the request's metadata alone decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readability {
    Allowed,
    /// A CORS request: allowed if the response's `Access-Control-Allow-Origin` admits it.
    IfCorsAllows,
    Refused,
}

/// RFC 9842 §9.3.2 for the request's part.
pub fn of_request(headers: &HeaderMap) -> Readability {
    let value = |name: &str| headers.get(name).map(|v| v.as_bytes().trim_ascii());
    if value(SEC_FETCH_SITE).is_some_and(|site| site.eq_ignore_ascii_case(b"same-origin")) {
        return Readability::Allowed;
    }
    match value(SEC_FETCH_MODE) {
        None => Readability::Allowed,
        Some(mode)
            if mode.eq_ignore_ascii_case(b"navigate")
                || mode.eq_ignore_ascii_case(b"same-origin") =>
        {
            Readability::Allowed
        }
        Some(mode) if mode.eq_ignore_ascii_case(b"cors") => Readability::IfCorsAllows,
        Some(_) => Readability::Refused,
    }
}

/// Whether a request with `request` headers may use dictionary compression for (and take as a
/// dictionary) a response with `response` headers.
pub fn allowed(request: &HeaderMap, response: &HeaderMap) -> bool {
    allowed_for(of_request(request), request.get(ORIGIN), response)
}

/// [`allowed`] from what a request's metadata decided and its `Origin`, for a caller that kept
/// those rather than the request.
pub fn allowed_for(
    readability: Readability,
    origin: Option<&HeaderValue>,
    response: &HeaderMap,
) -> bool {
    match readability {
        Readability::Allowed => true,
        Readability::Refused => false,
        Readability::IfCorsAllows => {
            let (Some(allow), Some(origin)) = (response.get(ACCESS_CONTROL_ALLOW_ORIGIN), origin)
            else {
                return false;
            };
            let allow = allow.as_bytes().trim_ascii();
            allow == b"*" || allow == origin.as_bytes().trim_ascii()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_rfcs_readability_rules() {
        let none = HeaderMap::new();
        assert!(allowed(&headers(&[]), &none), "no fetch metadata: allowed");
        assert!(allowed(
            &headers(&[
                ("sec-fetch-site", "same-origin"),
                ("sec-fetch-mode", "no-cors")
            ]),
            &none
        ));
        assert!(allowed(
            &headers(&[("sec-fetch-site", "none"), ("sec-fetch-mode", "navigate")]),
            &none
        ));
        let no_cors = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert!(!allowed(&no_cors, &none));
        let cors = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "cors"),
            ("origin", "https://a.example"),
        ]);
        assert!(!allowed(&cors, &none), "no Access-Control-Allow-Origin");
        assert!(allowed(
            &cors,
            &headers(&[("access-control-allow-origin", "*")])
        ));
        assert!(allowed(
            &cors,
            &headers(&[("access-control-allow-origin", "https://a.example")])
        ));
        assert!(!allowed(
            &cors,
            &headers(&[("access-control-allow-origin", "https://b.example")])
        ));
        let cors_without_origin =
            headers(&[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "cors")]);
        assert!(!allowed(
            &cors_without_origin,
            &headers(&[("access-control-allow-origin", "*")])
        ));
    }
}
