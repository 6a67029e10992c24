//! Building the responses of a static route: representation headers, `Content-Type`, and the
//! body-less answers (304, 405, 412, 416, 301).

use std::path::Path;

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use sluice_core::Body;

/// `Content-Type` from the file name's extension; `application/octet-stream` when unknown
/// (never sniffed: sniffing turns uploaded text into HTML). Textual types say `charset=utf-8`,
/// the only charset a modern site ships, so browsers do not guess.
pub fn content_type(name: &Path) -> HeaderValue {
    let Some(mime) = mime_guess::from_path(name).first() else {
        return HeaderValue::from_static("application/octet-stream");
    };
    let textual = mime.type_() == mime_guess::mime::TEXT
        || mime.essence_str() == "application/javascript"
        || mime.essence_str() == "application/json";
    let value = if textual {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    };
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

/// An empty-bodied response.
pub(crate) fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = status;
    response
}

/// `405` with `Allow: GET, HEAD`.
pub(crate) fn method_not_allowed() -> Response<Body> {
    let mut response = empty(StatusCode::METHOD_NOT_ALLOWED);
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// `416` with `Content-Range: bytes */len` (RFC 9110 §15.5.17), so the client learns the length.
pub(crate) fn range_not_satisfiable(len: u64) -> Response<Body> {
    let mut response = empty(StatusCode::RANGE_NOT_SATISFIABLE);
    if let Ok(value) = HeaderValue::from_str(&format!("bytes */{len}")) {
        response.headers_mut().insert(header::CONTENT_RANGE, value);
    }
    response
}

/// `301` to `location` (already a valid URI path and query).
pub(crate) fn moved_permanently(location: HeaderValue) -> Response<Body> {
    let mut response = empty(StatusCode::MOVED_PERMANENTLY);
    response.headers_mut().insert(header::LOCATION, location);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ct(name: &str) -> String {
        content_type(Path::new(name))
            .to_str()
            .map(str::to_owned)
            .unwrap_or_default()
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(ct("index.html"), "text/html; charset=utf-8");
        assert_eq!(ct("site.css"), "text/css; charset=utf-8");
        assert_eq!(ct("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(ct("mod.mjs"), "application/javascript; charset=utf-8");
        assert_eq!(ct("data.json"), "application/json; charset=utf-8");
        assert_eq!(ct("logo.svg"), "image/svg+xml");
        assert_eq!(ct("app.wasm"), "application/wasm");
        assert_eq!(ct("photo.PNG"), "image/png");
        assert_eq!(ct("blob.unknownext"), "application/octet-stream");
        assert_eq!(ct("README"), "application/octet-stream");
    }

    #[test]
    fn bodyless_responses_carry_their_headers() {
        let r = method_not_allowed();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[header::ALLOW], "GET, HEAD");
        let r = range_not_satisfiable(42);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes */42");
    }
}
