//! §4.4 invalidation after unsafe methods.

use http::{Method, Uri};

use super::*;
use crate::key::{DEFAULT_PARTS, reference_key};
use crate::policy::invalidation;

fn targets(method: Method, status: u16, uri: &str, resp: &[(&str, &str)]) -> Vec<String> {
    let uri: Uri = uri.parse().unwrap();
    invalidation(
        &method,
        StatusCode::from_u16(status).unwrap(),
        &uri,
        &headers(resp),
    )
    .iter()
    .map(Uri::to_string)
    .collect()
}

#[test]
fn s4_4_unsafe_methods_with_non_error_status_invalidate_target_and_locations() {
    let resp = [("location", "/items/7"), ("content-location", "7?v=2")];
    assert_eq!(
        targets(Method::POST, 201, "/items/", &resp),
        ["/items/", "/items/7", "/items/7?v=2"]
    );
    let unknown = Method::from_bytes(b"PURGEX").unwrap();
    assert_eq!(targets(unknown, 204, "/a", &[]), ["/a"]);
    assert_eq!(
        targets(Method::DELETE, 302, "/a", &[("location", "/a")]),
        ["/a"]
    );
}

#[test]
fn s4_4_safe_methods_and_error_statuses_invalidate_nothing() {
    for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
        assert!(targets(method, 200, "/a", &[("location", "/b")]).is_empty());
    }
    for status in [400, 404, 500, 503] {
        assert!(targets(Method::PUT, status, "/a", &[]).is_empty());
    }
}

#[test]
fn s4_4_other_origins_are_never_invalidated() {
    let uri: Uri = "/a".parse().unwrap();
    let resp = headers(&[
        ("location", "https://evil.example/a"),
        ("content-location", "/b"),
    ]);
    let keys: Vec<Option<String>> = invalidation(&Method::PUT, StatusCode::OK, &uri, &resp)
        .iter()
        .map(|target| {
            reference_key(
                &DEFAULT_PARTS,
                "http",
                "example.com",
                target,
                &HeaderMap::new(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            Some("http://example.com/a".to_owned()),
            None,
            Some("http://example.com/b".to_owned()),
        ]
    );
}
