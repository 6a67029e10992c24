//! The host a request is for: `:authority` (HTTP/2, absolute-form) or `Host`, without port,
//! lowercase. Routing and the cache key both need it; a leaf module so neither imports the
//! other for it.

use http::Request;

/// The request's host without port, lowercase: `:authority` (HTTP/2, absolute-form) or `Host`.
pub fn request_host<B>(req: &Request<B>) -> Option<std::borrow::Cow<'_, str>> {
    host_of(req.uri(), req.headers())
}

/// [`request_host`] for a request taken apart.
pub fn request_host_parts(parts: &http::request::Parts) -> Option<std::borrow::Cow<'_, str>> {
    host_of(&parts.uri, &parts.headers)
}

/// Why an HTTP/1.1 request's `Host` makes it a 400 (RFC 9112 §3.2: "A server MUST respond with a
/// 400 (Bad Request) status code to any HTTP/1.1 request message that lacks a Host header field
/// and to any request message that contains more than one Host header field line or a Host
/// header field with an invalid field value"): none, or more than one. HTTP/1.0 may omit it;
/// HTTP/2 carries `:authority` instead, and hyper already refuses two of those.
pub fn invalid_host<B>(req: &Request<B>) -> Option<&'static str> {
    let mut hosts = req.headers().get_all(http::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if req.version() == http::Version::HTTP_11 => {
            Some("an HTTP/1.1 request needs a Host header")
        }
        (Some(_), Some(_)) => Some("a request may have only one Host header"),
        _ => None,
    }
}

fn host_of<'a>(
    uri: &'a http::Uri,
    headers: &'a http::HeaderMap,
) -> Option<std::borrow::Cow<'a, str>> {
    let raw = match uri.host() {
        Some(host) => host,
        None => {
            let value = headers.get(http::header::HOST)?.to_str().ok()?;
            strip_port(value)
        }
    };
    let raw = raw.trim_end_matches('.');
    if raw.bytes().any(|b| b.is_ascii_uppercase()) {
        Some(std::borrow::Cow::Owned(raw.to_ascii_lowercase()))
    } else {
        Some(std::borrow::Cow::Borrowed(raw))
    }
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // IPv6 literal: [::1]:8080
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(uri: &str, host: Option<&str>) -> Request<()> {
        let mut b = Request::builder().uri(uri);
        if let Some(h) = host {
            b = b.header("host", h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn host_is_lowercased_and_port_stripped() {
        assert_eq!(
            request_host(&req("/", Some("Example.COM:8080"))).unwrap(),
            "example.com"
        );
        assert_eq!(request_host(&req("/", Some("[::1]:8443"))).unwrap(), "::1");
        assert_eq!(
            request_host(&req("http://a.test:1/x", Some("b.test"))).unwrap(),
            "a.test"
        );
        assert_eq!(
            request_host(&req("/", Some("fqdn.test."))).unwrap(),
            "fqdn.test"
        );
        assert!(request_host(&req("/", None)).is_none());
    }
}
