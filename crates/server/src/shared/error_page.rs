//! The one error page: every layer that answers with an error status writes it through
//! [`error_page`], so pages look alike whoever wrote them. The pipeline turns a failed action's
//! `sluice_core::Error` into one (`Error::status`); the few places that write one themselves
//! say why in `pipeline/mod.rs`.

use http::{HeaderValue, Response, StatusCode, header};
use sluice_core::Body;

/// A short plain-text page for an error status: the status line, plus the reason for 4xx (which
/// helps the client fix its request) but never internal details for 5xx.
pub fn error_page(status: StatusCode, detail: Option<&str>) -> Response<Body> {
    let reason = status.canonical_reason().unwrap_or("");
    let body = match detail {
        Some(d) if status.is_client_error() => format!("{} {reason}: {d}\n", status.as_u16()),
        _ => format!("{} {reason}\n", status.as_u16()),
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
