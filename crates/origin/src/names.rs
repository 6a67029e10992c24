//! `POST /what-is-my-name`: 10,000 copies of `{"name":"<name>"}`, the name taken from the
//! `application/x-www-form-urlencoded` field `name`.
//!
//! The `Content-Type` is not checked: seed 003's clients (`ab -p`, `curl -d`, h2load) do not all set
//! it, and any body that parses as a form is accepted. Limits keep one request from costing the
//! origin a lot: the body may be at most 64 KiB (`413` beyond, checked against `Content-Length`
//! before reading and against the bytes while reading), and the name at most 1 KiB (`400` beyond),
//! so a response stays under ~60 MB even when every byte of the name needs a `\u00XX` escape.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde::Serialize;
use sluice_core::{Body, BoxError};

use crate::body::{ReadError, content_length, read_limited};
use crate::json::{RECORDS, repeated_array};
use crate::respond;

/// Largest form body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Largest (decoded) name accepted.
pub(crate) const MAX_NAME: usize = 1024;

#[derive(Serialize)]
struct Record<'a> {
    name: &'a str,
}

/// Answer `/what-is-my-name` for any method (`405` unless POST).
pub(crate) async fn respond<B>(req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if req.method() != Method::POST {
        return respond::method_not_allowed("POST");
    }
    let (parts, body) = req.into_parts();
    if content_length(&parts.headers).is_some_and(|len| len > MAX_BODY as u64) {
        return too_large();
    }
    let form = match read_limited(body, MAX_BODY).await {
        Ok(form) => form,
        Err(ReadError::TooLarge) => return too_large(),
        Err(ReadError::Body(err)) => {
            tracing::debug!(error = %err, "reading the form body failed");
            return respond::error(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            );
        }
    };
    match render(&form) {
        Ok(body) => respond::full(&Method::POST, respond::APPLICATION_JSON, body),
        Err(message) => respond::error(StatusCode::BAD_REQUEST, message),
    }
}

fn too_large() -> Response<Body> {
    respond::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "the form body is larger than 64 KiB",
    )
}

/// The response body for a form, or the reason it is refused.
fn render(form: &[u8]) -> Result<Bytes, &'static str> {
    let name = name_field(form).ok_or("missing form field `name`")?;
    if name.len() > MAX_NAME {
        return Err("the name is longer than 1024 bytes");
    }
    // serde_json escapes quotes, backslashes and control characters; the element is rendered once
    // and then copied, so the escaping cost does not scale with the 10,000 records.
    let element = serde_json::to_vec(&Record { name: &name }).map_err(|_| "unencodable name")?;
    Ok(repeated_array(&element, RECORDS))
}

/// The first `name` field of a URL-encoded form, percent- and `+`-decoded (invalid UTF-8 replaced).
fn name_field(form: &[u8]) -> Option<String> {
    form_urlencoded::parse(form)
        .find(|(key, _)| key == "name")
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_field_decodes_and_takes_the_first() {
        assert_eq!(name_field(b"name=Bob").as_deref(), Some("Bob"));
        assert_eq!(
            name_field(b"x=1&name=a%22b+c&name=z").as_deref(),
            Some("a\"b c")
        );
        assert_eq!(name_field(b"name=").as_deref(), Some(""));
        assert_eq!(name_field(b"names=x&nam=y"), None);
        assert_eq!(name_field(b""), None);
    }

    #[test]
    fn render_escapes_and_repeats() {
        let body = render(b"name=a%22b%5C").unwrap_or_default();
        let parsed: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(parsed.len(), RECORDS);
        assert!(parsed.iter().all(|r| r["name"] == "a\"b\\"));
    }

    #[test]
    fn render_refuses_missing_and_long_names() {
        assert_eq!(render(b"nom=x"), Err("missing form field `name`"));
        let long = format!("name={}", "x".repeat(MAX_NAME + 1));
        assert!(render(long.as_bytes()).is_err());
        let longest = format!("name={}", "x".repeat(MAX_NAME));
        assert!(render(longest.as_bytes()).is_ok());
    }
}
