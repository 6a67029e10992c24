//! Tests of [`super`]: parts, URI order, escaping, references and origins.

use super::*;
use http::HeaderValue;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn key(parts: &[KeyPart], scheme: &str, host: &str, uri: &str, h: &HeaderMap) -> String {
    primary_key(parts, scheme, host, &uri.parse().unwrap(), h)
}

fn parts(names: &[&str]) -> Vec<KeyPart> {
    names.iter().map(|n| n.parse().unwrap()).collect()
}

#[test]
fn s2_default_key_is_the_target_uri() {
    let h = HeaderMap::new();
    assert_eq!(
        key(&DEFAULT_PARTS, "http", "example.com", "/a/b?x=1", &h),
        "http://example.com/a/b?x=1"
    );
    assert_eq!(
        key(&DEFAULT_PARTS, "https", "example.com", "/", &h),
        "https://example.com/"
    );
    // An empty query is a different URI from no query (RFC 3986 §6.2.3 leaves them distinct).
    assert_eq!(
        key(&DEFAULT_PARTS, "http", "example.com", "/a?", &h),
        "http://example.com/a?"
    );
    // An absolute-form request target keys like its origin-form twin.
    assert_eq!(
        key(
            &DEFAULT_PARTS,
            "http",
            "example.com",
            "http://example.com/a?x",
            &h
        ),
        key(&DEFAULT_PARTS, "http", "example.com", "/a?x", &h)
    );
}

#[test]
fn rfc9110_s4_2_3_host_is_case_insensitive_and_default_port_is_dropped() {
    let h = HeaderMap::new();
    let plain = key(&DEFAULT_PARTS, "http", "example.com", "/", &h);
    assert_eq!(
        key(&DEFAULT_PARTS, "http", "EXAMPLE.com:80", "/", &h),
        plain
    );
    assert_ne!(
        key(&DEFAULT_PARTS, "http", "example.com:8080", "/", &h),
        plain
    );
    // 443 is only the default for https.
    assert_eq!(
        key(&DEFAULT_PARTS, "https", "example.com:443", "/", &h),
        "https://example.com/"
    );
    assert_eq!(
        key(&DEFAULT_PARTS, "http", "example.com:443", "/", &h),
        "http://example.com:443/"
    );
    assert_eq!(
        key(&DEFAULT_PARTS, "http", "[::1]:80", "/", &h),
        "http://[::1]/"
    );
}

#[test]
fn s2_uri_parts_render_in_uri_order_whatever_the_config_order() {
    let h = HeaderMap::new();
    let reordered = parts(&["query", "path", "host", "scheme"]);
    assert_eq!(
        key(&reordered, "http", "example.com", "/a?x=1", &h),
        "http://example.com/a?x=1"
    );
    assert_eq!(
        key(
            &parts(&["host", "path"]),
            "http",
            "example.com",
            "/a?x=1",
            &h
        ),
        "example.com/a"
    );
}

#[test]
fn s2_header_and_cookie_parts_distinguish_absent_empty_and_forged_values() {
    let p = parts(&[
        "scheme",
        "host",
        "path",
        "query",
        "header:x-tenant",
        "cookie:lang",
    ]);
    let absent = key(&p, "http", "h", "/", &HeaderMap::new());
    assert_eq!(absent, "http://h/ header:x-tenant cookie:lang");
    let empty = key(
        &p,
        "http",
        "h",
        "/",
        &headers(&[("x-tenant", ""), ("cookie", "lang=")]),
    );
    assert_eq!(empty, "http://h/ header:x-tenant= cookie:lang=");
    let set = key(
        &p,
        "http",
        "h",
        "/",
        &headers(&[
            ("x-tenant", "acme"),
            ("x-tenant", "b c"),
            ("cookie", "a=1; lang=fr"),
        ]),
    );
    assert_eq!(
        set,
        "http://h/ header:x-tenant=acme,%20b%20c cookie:lang=fr"
    );
    // A header value cannot impersonate the cookie part that follows it.
    let forged = key(
        &p,
        "http",
        "h",
        "/",
        &headers(&[("x-tenant", "acme cookie:lang=fr")]),
    );
    assert_ne!(
        forged,
        key(
            &p,
            "http",
            "h",
            "/",
            &headers(&[("x-tenant", "acme"), ("cookie", "lang=fr")])
        )
    );
}

#[test]
fn s2_cookie_part_searches_every_cookie_line() {
    let p = parts(&["path", "cookie:session"]);
    let h = headers(&[("cookie", "a=1"), ("cookie", "session=xyz; b=2")]);
    assert_eq!(key(&p, "http", "h", "/p", &h), "/p cookie:session=xyz");
    // A cookie whose name only ends with the wanted one does not match.
    let h = headers(&[("cookie", "mysession=1")]);
    assert_eq!(key(&p, "http", "h", "/p", &h), "/p cookie:session");
}

#[test]
fn key_parts_parse_and_print_back() {
    for text in [
        "scheme",
        "host",
        "path",
        "query",
        "method",
        "header:accept-language",
        "cookie:sid",
    ] {
        let part: KeyPart = text.parse().unwrap();
        assert_eq!(part.to_string(), text);
    }
    assert_eq!(
        "header:X-Tenant".parse::<KeyPart>().unwrap(),
        KeyPart::Header(HeaderName::from_static("x-tenant"))
    );
    assert_eq!(
        "verb".parse::<KeyPart>(),
        Err(KeyPartError::Unknown("verb".into()))
    );
    assert!(matches!(
        "header:bad name".parse::<KeyPart>(),
        Err(KeyPartError::BadHeaderName(_))
    ));
    assert!(matches!(
        "cookie:".parse::<KeyPart>(),
        Err(KeyPartError::BadCookieName(_))
    ));
    assert!(matches!(
        "cookie:a;b".parse::<KeyPart>(),
        Err(KeyPartError::BadCookieName(_))
    ));
}

fn resolve(base: &str, reference: &str) -> Option<String> {
    resolve_reference(&base.parse().unwrap(), reference).map(|u| u.to_string())
}

#[test]
fn rfc3986_s5_2_references_resolve_against_the_request_target() {
    assert_eq!(resolve("/a/b?q", "c").as_deref(), Some("/a/c"));
    assert_eq!(resolve("/a/b?q", "../c?x#frag").as_deref(), Some("/c?x"));
    assert_eq!(resolve("/a/b?q", "../../../c").as_deref(), Some("/c"));
    assert_eq!(resolve("/a/b?q", "/x/./y/../z").as_deref(), Some("/x/z"));
    assert_eq!(resolve("/a/b?q", "?y").as_deref(), Some("/a/b?y"));
    assert_eq!(resolve("/a/b?q", "").as_deref(), Some("/a/b?q"));
    assert_eq!(resolve("/a/b?q", ".").as_deref(), Some("/a/"));
    assert_eq!(
        resolve("/a/b", "https://Other.example/p").as_deref(),
        Some("https://Other.example/p")
    );
    assert_eq!(
        resolve("http://example.com/a/b", "//cdn.example/p").as_deref(),
        Some("http://cdn.example/p")
    );
    assert_eq!(resolve("/a", "mailto:x@example.com"), None);
    assert_eq!(resolve("/a", "//cdn.example/p"), None);
    assert_eq!(resolve("/a", "/has space"), None);
}

#[test]
fn s4_4_reference_key_refuses_other_origins() {
    let h = HeaderMap::new();
    let at = |target: &str| {
        reference_key(
            &DEFAULT_PARTS,
            "http",
            "example.com",
            &target.parse().unwrap(),
            &h,
        )
    };
    assert_eq!(at("/x?y").as_deref(), Some("http://example.com/x?y"));
    assert_eq!(
        at("http://EXAMPLE.com:80/x").as_deref(),
        Some("http://example.com/x")
    );
    assert_eq!(
        at("http://user@example.com/x").as_deref(),
        Some("http://example.com/x")
    );
    assert_eq!(at("https://example.com/x"), None);
    assert_eq!(at("http://example.com:8080/x"), None);
    assert_eq!(at("http://evil.example/x"), None);
    // Paths in normal form, as the requests' keys have them.
    assert_eq!(
        at("/%61/./b?%61").as_deref(),
        Some("http://example.com/a/b?%61")
    );
    assert_eq!(
        at("http://example.com/x/../%7e").as_deref(),
        Some("http://example.com/~")
    );
    assert_eq!(at("/%zz"), None);
}
