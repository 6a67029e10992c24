//! Property tests of the compression decision: any response fields and request `Accept-Encoding`
//! lines decide without a panic, a `Compress` verdict only ever comes with what RFC 9110 allows
//! (an offered coding, a status with content, no existing coding, no `no-transform`), and the
//! header changes leave a valid, weak (or no) `ETag` and exactly one `Accept-Encoding` in `Vary`.

use proptest::prelude::*;

use super::*;
use crate::proptest_config::cases;

/// Any value a `HeaderValue` can hold (visible ASCII, space, tab, obs-text), biased towards the
/// words the decision looks for.
fn field_value() -> impl Strategy<Value = HeaderValue> {
    let words = proptest::sample::select(vec![
        "gzip",
        "identity",
        "no-transform",
        "NO-TRANSFORM",
        "text/html",
        "text/",
        "application/json",
        "W/",
        "\"",
        ",",
        ";",
        "=",
        " ",
        "256",
        "1000000",
    ]);
    let piece = prop_oneof![
        words.prop_map(|w| w.as_bytes().to_vec()),
        proptest::collection::vec(prop_oneof![Just(b'\t'), 0x20u8..=0x7e, 0x80u8..=0xff], 0..4),
    ];
    proptest::collection::vec(piece, 0..6)
        .prop_map(|pieces| HeaderValue::from_bytes(&pieces.concat()).unwrap())
}

fn response_headers() -> impl Strategy<Value = HeaderMap> {
    let name = proptest::sample::select(vec![
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
        header::CACHE_CONTROL,
        header::ETAG,
        header::VARY,
        header::ACCEPT_RANGES,
    ]);
    proptest::collection::vec((name, field_value()), 0..8).prop_map(|pairs| {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, value);
        }
        headers
    })
}

fn policy() -> impl Strategy<Value = CompressPolicy> {
    let offered = proptest::sample::subsequence(ContentCoding::ALL.to_vec(), 0..=5).prop_shuffle();
    let types = proptest::collection::vec(
        proptest::sample::select(vec!["text/", "text/*", "application/json", "*", "/", ""]),
        0..4,
    );
    (types, 0u64..2000, offered).prop_map(|(types, min_length, offered)| CompressPolicy {
        mime_types: types.into_iter().map(str::to_owned).collect(),
        min_length,
        offered,
    })
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn any_response_decides_and_compresses_only_what_rfc_9110_allows(
        policy in policy(),
        method in proptest::sample::select(vec![Method::GET, Method::HEAD, Method::POST, Method::CONNECT]),
        accept in proptest::collection::vec(field_value(), 0..3),
        status in 100u16..=599,
        resp in response_headers(),
        body_len in proptest::option::of(any::<u64>()),
    ) {
        let status = StatusCode::from_u16(status).unwrap();
        let decision = decide_with(
            &policy,
            &method,
            accept.iter().map(HeaderValue::as_bytes),
            status,
            &resp,
            body_len,
        );
        if let Decision::Compress(coding) = decision {
            prop_assert!(policy.offered.contains(&coding) && coding != ContentCoding::Identity);
            prop_assert!(!matches!(status.as_u16(), 100..=199 | 204 | 206 | 304));
            prop_assert!(!(method == Method::CONNECT && status.is_success()));
            prop_assert!(list_tokens(&resp, &header::CONTENT_ENCODING)
                .all(|t| t.eq_ignore_ascii_case(b"identity")));
            // RFC 9111 §5.2.2.6: a proxy MUST NOT transform a no-transform response.
            prop_assert!(!list_tokens(&resp, &header::CACHE_CONTROL)
                .any(|t| t.eq_ignore_ascii_case(b"no-transform")));
        }
    }

    #[test]
    fn applied_headers_have_a_weak_or_no_etag_and_vary_once(
        resp in response_headers(),
        coding in proptest::sample::select(ContentCoding::ALL.to_vec()),
    ) {
        let mut headers = resp.clone();
        apply_headers(&mut headers, coding);
        let vary_listed = |h: &HeaderMap| {
            list_tokens(h, &header::VARY)
                .filter(|t| *t == b"*" || t.eq_ignore_ascii_case(b"accept-encoding"))
                .count()
        };
        prop_assert!(vary_listed(&headers) >= 1);
        // Applying twice (a 304 and its 200, or two layers) lists it no more often.
        let once = headers.clone();
        add_vary(&mut headers);
        prop_assert_eq!(vary_listed(&headers), vary_listed(&once));
        if coding != ContentCoding::Identity {
            prop_assert_eq!(
                headers.get(header::CONTENT_ENCODING).map(HeaderValue::as_bytes),
                Some(coding.as_str().as_bytes())
            );
            prop_assert!(!headers.contains_key(header::CONTENT_LENGTH));
            // RFC 9110 §8.8.1: the encoded bytes differ, so a strong validator would lie.
            if let Some(etag) = headers.get(header::ETAG) {
                prop_assert!(etag.as_bytes().starts_with(b"W/"), "{etag:?}");
            }
        }
    }
}
