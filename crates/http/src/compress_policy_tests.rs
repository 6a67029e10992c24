use super::*;

fn request(accept: Option<&'static str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(accept) = accept {
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(accept));
    }
    headers
}

fn response(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(name.clone(), HeaderValue::from_static(value));
    }
    headers
}

fn html() -> HeaderMap {
    response(&[
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_LENGTH, "5000"),
    ])
}

fn decide_for(
    method: Method,
    accept: Option<&'static str>,
    status: u16,
    resp: &HeaderMap,
) -> Decision {
    let status = StatusCode::from_u16(status).unwrap();
    decide(
        &CompressPolicy::default(),
        &method,
        &request(accept),
        status,
        resp,
    )
}

fn skip(reason: SkipReason) -> Decision {
    Decision::Skip(reason)
}

#[test]
fn compresses_with_the_negotiated_coding() {
    let resp = html();
    assert_eq!(
        decide_for(Method::GET, Some("gzip, br, zstd"), 200, &resp),
        Decision::Compress(ContentCoding::Zstd)
    );
    assert_eq!(
        decide_for(Method::GET, Some("gzip, br;q=0.9"), 200, &resp),
        Decision::Compress(ContentCoding::Gzip)
    );
    assert_eq!(
        decide_for(Method::POST, Some("br"), 404, &resp),
        Decision::Compress(ContentCoding::Br)
    );
}

#[test]
fn head_is_decided_like_get() {
    let resp = html();
    assert_eq!(
        decide_for(Method::HEAD, Some("br"), 200, &resp),
        decide_for(Method::GET, Some("br"), 200, &resp)
    );
}

#[test]
fn not_accepted() {
    let resp = html();
    assert_eq!(
        decide_for(Method::GET, None, 200, &resp),
        skip(SkipReason::NotAccepted)
    );
    assert_eq!(
        decide_for(Method::GET, Some("deflate"), 200, &resp),
        skip(SkipReason::NotAccepted)
    );
    assert_eq!(
        decide_for(Method::GET, Some("identity;q=0, deflate"), 200, &resp),
        skip(SkipReason::NotAccepted)
    );
}

#[test]
fn bodiless_statuses_and_tunnels_left_alone() {
    let resp = html();
    for status in [101, 103, 204, 304] {
        assert_eq!(
            decide_for(Method::GET, Some("gzip"), status, &resp),
            skip(SkipReason::Status),
            "{status}"
        );
    }
    assert_eq!(
        decide_for(Method::CONNECT, Some("gzip"), 200, &resp),
        skip(SkipReason::Status)
    );
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 206, &resp),
        skip(SkipReason::Range)
    );
}

#[test]
fn already_encoded() {
    let mut resp = html();
    resp.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    assert_eq!(
        decide_for(Method::GET, Some("br"), 200, &resp),
        skip(SkipReason::AlreadyEncoded)
    );
    resp.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static("Identity"),
    );
    assert_eq!(
        decide_for(Method::GET, Some("br"), 200, &resp),
        Decision::Compress(ContentCoding::Br)
    );
    resp.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static("identity, foo"),
    );
    assert_eq!(
        decide_for(Method::GET, Some("br"), 200, &resp),
        skip(SkipReason::AlreadyEncoded)
    );
}

#[test]
fn no_transform() {
    let mut resp = html();
    resp.append(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=60"),
    );
    resp.append(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, No-Transform"),
    );
    assert_eq!(
        decide_for(Method::GET, Some("br"), 200, &resp),
        skip(SkipReason::NoTransform)
    );
}

#[test]
fn type_allow_list() {
    let cases = [
        ("text/plain", true),
        ("TEXT/CSS; charset=utf-8", true),
        ("application/json", true),
        (" Application/JSON ;charset=utf-8", true),
        ("image/svg+xml", true),
        ("application/wasm", true),
        ("image/png", false),
        ("application/octet-stream", false),
        ("application/jsonx", false),
        ("text/", false),
        ("", false),
    ];
    for (content_type, allowed) in cases {
        let resp = response(&[(header::CONTENT_TYPE, content_type)]);
        let expected = if allowed {
            Decision::Compress(ContentCoding::Gzip)
        } else {
            skip(SkipReason::Type)
        };
        assert_eq!(
            decide_for(Method::GET, Some("gzip"), 200, &resp),
            expected,
            "{content_type:?}"
        );
    }
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &HeaderMap::new()),
        skip(SkipReason::Type)
    );
    let policy = CompressPolicy {
        mime_types: vec!["text/*".into()],
        ..CompressPolicy::default()
    };
    let resp = response(&[(header::CONTENT_TYPE, "text/csv")]);
    let decision = decide(
        &policy,
        &Method::GET,
        &request(Some("br")),
        StatusCode::OK,
        &resp,
    );
    assert_eq!(decision, Decision::Compress(ContentCoding::Br));
}

#[test]
fn minimum_length() {
    let with_length = |len: &'static str| {
        response(&[
            (header::CONTENT_TYPE, "text/plain"),
            (header::CONTENT_LENGTH, len),
        ])
    };
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &with_length("255")),
        skip(SkipReason::TooSmall)
    );
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &with_length("0")),
        skip(SkipReason::TooSmall)
    );
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &with_length("256")),
        Decision::Compress(ContentCoding::Gzip)
    );
    // Unknown (absent or unreadable) length: compress, the encoder streams.
    let unknown = response(&[(header::CONTENT_TYPE, "text/plain")]);
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &unknown),
        Decision::Compress(ContentCoding::Gzip)
    );
    assert_eq!(
        decide_for(Method::GET, Some("gzip"), 200, &with_length("x")),
        Decision::Compress(ContentCoding::Gzip)
    );
}

#[test]
fn reasons_have_distinct_labels_and_vary_hints() {
    let reasons = [
        SkipReason::Status,
        SkipReason::Range,
        SkipReason::AlreadyEncoded,
        SkipReason::NoTransform,
        SkipReason::Type,
        SkipReason::TooSmall,
        SkipReason::NotAccepted,
    ];
    let labels: std::collections::HashSet<_> = reasons.iter().map(|r| r.as_str()).collect();
    assert_eq!(labels.len(), reasons.len());
    let varying: Vec<_> = reasons
        .into_iter()
        .filter(|r| skip(*r).wants_vary())
        .collect();
    assert_eq!(varying, [SkipReason::TooSmall, SkipReason::NotAccepted]);
    assert!(Decision::Compress(ContentCoding::Gzip).wants_vary());
}

#[test]
fn apply_headers_rewrites_the_representation_metadata() {
    let mut resp = html();
    resp.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    resp.insert(header::ETAG, HeaderValue::from_static("\"abc\""));
    for digest in ["content-md5", "digest", "content-digest", "repr-digest"] {
        resp.insert(digest, HeaderValue::from_static("sha-256=:AAAA:"));
    }
    apply_headers(&mut resp, ContentCoding::Br);
    for digest in ["content-md5", "digest", "content-digest", "repr-digest"] {
        assert!(
            resp.get(digest).is_none(),
            "{digest} of the identity bytes kept"
        );
    }
    assert_eq!(resp[header::CONTENT_ENCODING], "br");
    assert!(resp.get(header::CONTENT_LENGTH).is_none());
    assert!(resp.get(header::ACCEPT_RANGES).is_none());
    assert_eq!(resp[header::ETAG], "W/\"abc\"");
    assert_eq!(resp[header::VARY], "Accept-Encoding");
    assert_eq!(resp[header::CONTENT_TYPE], "text/html; charset=utf-8");
}

#[test]
fn etag_weakening() {
    let etag_after = |etag: &'static str| {
        let mut resp = response(&[(header::ETAG, etag)]);
        apply_headers(&mut resp, ContentCoding::Gzip);
        resp.get(header::ETAG)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(etag_after("\"x\"").as_deref(), Some("W/\"x\""));
    assert_eq!(etag_after("W/\"x\"").as_deref(), Some("W/\"x\""));
    assert_eq!(etag_after("\"\"").as_deref(), Some("W/\"\""));
    assert_eq!(etag_after("unquoted"), None, "malformed tags are dropped");
}

#[test]
fn identity_only_adds_vary() {
    let mut resp = html();
    resp.insert(header::ETAG, HeaderValue::from_static("\"abc\""));
    apply_headers(&mut resp, ContentCoding::Identity);
    assert!(resp.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(resp[header::CONTENT_LENGTH], "5000");
    assert_eq!(resp[header::ETAG], "\"abc\"");
    assert_eq!(resp[header::VARY], "Accept-Encoding");
}

fn vary_after(existing: &[&'static str]) -> Vec<String> {
    let mut resp = HeaderMap::new();
    for value in existing {
        resp.append(header::VARY, HeaderValue::from_static(value));
    }
    add_vary(&mut resp);
    add_vary(&mut resp); // idempotent
    resp.get_all(header::VARY)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn vary_merging() {
    assert_eq!(vary_after(&[]), ["Accept-Encoding"]);
    assert_eq!(vary_after(&["Origin"]), ["Origin", "Accept-Encoding"]);
    assert_eq!(
        vary_after(&["vary-me, accept-encoding"]),
        ["vary-me, accept-encoding"]
    );
    assert_eq!(
        vary_after(&["Origin", " ACCEPT-ENCODING "]),
        ["Origin", " ACCEPT-ENCODING "]
    );
    assert_eq!(vary_after(&["*"]), ["*"]);
    assert_eq!(vary_after(&["Origin, *"]), ["Origin, *"]);
    assert_eq!(
        vary_after(&["accept-encoding-x"]),
        ["accept-encoding-x", "Accept-Encoding"]
    );
}

#[test]
fn decide_with_takes_accept_encoding_lines_and_a_known_body_length() {
    let policy = CompressPolicy::default();
    let text = response(&[(header::CONTENT_TYPE, "text/plain")]);
    let lines: [&[u8]; 2] = [b"identity;q=0.5", b"br"];
    let decide = |body_len| {
        decide_with(
            &policy,
            &Method::GET,
            lines,
            StatusCode::OK,
            &text,
            body_len,
        )
    };
    assert_eq!(
        decide(None),
        Decision::Compress(ContentCoding::Br),
        "both lines count, unknown length compresses"
    );
    assert_eq!(decide(Some(10)), skip(SkipReason::TooSmall));
    assert_eq!(decide(Some(10_000)), Decision::Compress(ContentCoding::Br));
    // A declared Content-Length wins over the body's length.
    let declared = response(&[
        (header::CONTENT_TYPE, "text/plain"),
        (header::CONTENT_LENGTH, "10"),
    ]);
    let decision = decide_with(
        &policy,
        &Method::GET,
        lines,
        StatusCode::OK,
        &declared,
        Some(10_000),
    );
    assert_eq!(decision, skip(SkipReason::TooSmall));
}
