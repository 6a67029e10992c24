//! Property tests of the RFC 9111 parsers and rules: any field values (`Cache-Control`, targeted
//! fields, `Age`, `Date`, `Expires`, `Last-Modified`, validators, `Location`) and any clock
//! readings never panic; well-formed `Cache-Control` lists and RFC 8941 dictionaries parse to
//! what the RFCs say, in any spelling and any split into field lines; stored metadata survives
//! its encoding and rejects damaged blobs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use proptest::prelude::*;

use super::meta_status;
use crate::key::resolve_reference;
use crate::meta::Meta;
use crate::policy::structured::{SfValue, parse_dictionary};
use crate::policy::{
    CDN_CACHE_CONTROL, DELTA_SECONDS_MAX, DirectiveSource, Heuristic, RequestDirectives,
    ResponseDirectives, Settings, StatusMatch, UseStale, age_value, client_not_modified, evaluate,
    freshen, invalidation, lifetime_of, not_modified_headers, revalidation_headers,
};
use crate::proptest_config::cases;

/// Bytes a field value can hold, biased towards what these parsers look for.
fn field_value() -> impl Strategy<Value = HeaderValue> {
    let words = proptest::sample::select(vec![
        "max-age",
        "s-maxage",
        "no-cache",
        "no-store",
        "private",
        "public",
        "must-revalidate",
        "stale-while-revalidate",
        "stale-if-error",
        "max-stale",
        "min-fresh",
        "only-if-cached",
        "=",
        ",",
        ";",
        "\"",
        "\\",
        "?0",
        "?1",
        "(",
        ")",
        ":",
        "*",
        "W/",
        " ",
        "0",
        "60",
        "2147483648",
        "99999999999999999999",
        "-1",
        "1.5",
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "/a/../b",
        "//h/p",
        "?q",
        "http://example.com",
        "https://x:443/",
        "#f",
        ".",
    ]);
    let piece = prop_oneof![
        words.prop_map(|w| w.as_bytes().to_vec()),
        proptest::collection::vec(prop_oneof![Just(b'\t'), 0x20u8..=0x7e, 0x80u8..=0xff], 0..4),
    ];
    proptest::collection::vec(piece, 0..8)
        .prop_map(|pieces| HeaderValue::from_bytes(&pieces.concat()).unwrap())
}

/// Headers the rules read, each line any value.
fn fields() -> impl Strategy<Value = HeaderMap> {
    let name = proptest::sample::select(vec![
        http::header::CACHE_CONTROL,
        CDN_CACHE_CONTROL,
        crate::policy::SLUICE_CACHE_CONTROL,
        http::header::PRAGMA,
        http::header::AGE,
        http::header::DATE,
        http::header::EXPIRES,
        http::header::LAST_MODIFIED,
        http::header::ETAG,
        http::header::IF_NONE_MATCH,
        http::header::IF_MODIFIED_SINCE,
        http::header::LOCATION,
        http::header::CONTENT_LOCATION,
        http::header::SET_COOKIE,
        http::header::VARY,
    ]);
    proptest::collection::vec((name, field_value()), 0..10).prop_map(|pairs| {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, value);
        }
        headers
    })
}

/// Any instant a clock may read, the epoch and far futures included.
fn instant() -> impl Strategy<Value = SystemTime> {
    prop_oneof![
        (0u64..(1 << 34)).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s)),
        (1_700_000_000u64..1_700_100_000).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s)),
        Just(UNIX_EPOCH),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..100_000).prop_map(Duration::from_secs),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

/// Zone settings, including nonsense an API caller could build (a NaN or negative fraction).
fn settings() -> impl Strategy<Value = Settings> {
    let fraction = prop_oneof![
        0.0f64..1.0,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-1.0),
        Just(f64::MAX)
    ];
    let heuristic = proptest::option::of(
        (fraction, duration()).prop_map(|(fraction, max)| Heuristic { fraction, max }),
    );
    let valid = proptest::collection::vec(
        (
            prop_oneof![
                Just(StatusMatch::Any),
                (200u16..600).prop_map(|s| StatusMatch::Code(StatusCode::from_u16(s).unwrap()))
            ],
            duration(),
        ),
        0..3,
    );
    let stale = (
        proptest::option::of(duration()),
        proptest::option::of(duration()),
    );
    (heuristic, valid, any::<bool>(), stale).prop_map(
        |(heuristic, valid, store_set_cookie, (updating, error))| Settings {
            valid,
            heuristic,
            store_set_cookie,
            use_stale: UseStale { updating, error },
            ..Settings::default()
        },
    )
}

fn status() -> impl Strategy<Value = StatusCode> {
    (100u16..600).prop_map(|s| StatusCode::from_u16(s).unwrap())
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Any fields, settings and clocks: every rule answers, and the numbers it answers with are
    /// within what the RFC lets them be.
    #[test]
    fn any_fields_and_clocks_give_an_answer(
        stored in fields(),
        request in fields(),
        reply_304 in fields(),
        status in status(),
        settings in settings(),
        (request_time, response_time, now) in (instant(), instant(), instant()),
    ) {
        let mut meta = meta_status(status.as_u16(), &[]);
        meta.headers = stored.clone();
        meta.request_time = request_time;
        meta.response_time = response_time;

        let directives = ResponseDirectives::parse(&stored, &settings);
        let cap = Duration::from_secs(DELTA_SECONDS_MAX);
        for delta in [
            directives.max_age,
            directives.s_maxage,
            directives.stale_while_revalidate,
            directives.stale_if_error,
        ] {
            prop_assert!(delta.is_none_or(|d| d <= cap));
        }
        RequestDirectives::parse(&request);
        lifetime_of(status, &stored, response_time, &settings);

        let evaluation = evaluate(&meta, &request, &settings, now);
        if evaluation.reuse == crate::policy::Reuse::Fresh {
            prop_assert!(evaluation.is_fresh());
        }
        // §1.2.2 / §5.1: Age is delta-seconds, at most 2^31.
        let age = age_value(&meta, now);
        let age: u64 = age.to_str().unwrap().parse().unwrap();
        prop_assert!(age <= DELTA_SECONDS_MAX);

        client_not_modified(&meta, &Method::GET, &request);
        not_modified_headers(&meta);
        let revalidation = revalidation_headers(&meta);
        prop_assert!(revalidation.len() <= 2);
        if let Some(fresh) = freshen(&meta, &reply_304, request_time, response_time) {
            // §3.2: the stored body's length and coding do not change with a 304.
            for name in [http::header::CONTENT_LENGTH, http::header::CONTENT_ENCODING] {
                prop_assert_eq!(fresh.headers.get(&name), meta.headers.get(&name));
            }
        }
    }

    /// §4.4: any `Location` / `Content-Location` on any unsafe request: the request's own URI
    /// comes first, and every other result is an absolute path or an absolute URI without dot
    /// segments (RFC 3986 §5.2.4).
    #[test]
    fn invalidation_resolves_any_reference(
        resp in fields(),
        method in proptest::sample::select(vec![Method::POST, Method::PUT, Method::DELETE, Method::GET]),
        status in status(),
        base in proptest::sample::select(vec![
            "/", "/a/b/c?x=1", "http://example.com/a/b", "https://example.com:8443/d/e/",
        ]),
    ) {
        let base: Uri = base.parse().unwrap();
        let targets = invalidation(&method, status, &base, &resp);
        if let Some(first) = targets.first() {
            prop_assert_eq!(first, &base);
        }
        for target in targets.iter().skip(1) {
            let path = target.path();
            prop_assert!(path.starts_with('/'), "{target}");
            prop_assert!(
                !path.split('/').any(|segment| segment == "." || segment == ".."),
                "{target}"
            );
        }
    }

    #[test]
    fn any_reference_resolves_or_is_refused(
        reference in "\\PC{0,30}",
        base in proptest::sample::select(vec!["/", "/a/b/c?x=1", "http://example.com/a/b"]),
    ) {
        let base: Uri = base.parse().unwrap();
        if let Some(uri) = resolve_reference(&base, &reference) {
            prop_assert!(uri.path().starts_with('/'), "{uri}");
        }
    }
}

/// One well-formed `Cache-Control` directive (§5.2): a name and an argument, before spelling.
#[derive(Debug, Clone)]
enum Arg {
    None,
    /// delta-seconds, as a token or a quoted-string (§5.2: both forms are accepted).
    Delta(u128, bool),
    /// Any other token or quoted-string, e.g. a field-name list.
    Other(&'static str),
}

const NAMES: [&str; 14] = [
    "no-store",
    "no-cache",
    "private",
    "public",
    "must-revalidate",
    "proxy-revalidate",
    "must-understand",
    "no-transform",
    "immutable",
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
    "community",
];

fn directive() -> impl Strategy<Value = (&'static str, Arg)> {
    let arg = prop_oneof![
        Just(Arg::None),
        (
            prop_oneof![0u128..1000, 0u128..(1 << 40), any::<u128>()],
            any::<bool>()
        )
            .prop_map(|(n, quoted)| Arg::Delta(n, quoted)),
        proptest::sample::select(vec![
            "abc",
            "\"Set-Cookie, Vary\"",
            "\"\"",
            "-1",
            "1.5",
            "\"a\\\"b\""
        ])
        .prop_map(Arg::Other),
    ];
    (proptest::sample::select(NAMES.to_vec()), arg)
}

/// The directives as §5.2.2 reads them, from the list rather than from the parser: flags are
/// set by any occurrence; a delta-seconds directive takes its first occurrence's value (§4.2.1)
/// clamped to 2^31 (§1.2.2), 0 when that argument is not delta-seconds.
fn expected(list: &[(&'static str, Arg)]) -> ResponseDirectives {
    let has = |name: &str| list.iter().any(|(n, _)| *n == name);
    let delta = |name: &str| {
        let values: Vec<u64> = list
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, arg)| match arg {
                Arg::Delta(n, _) => u64::try_from(*n).unwrap_or(u64::MAX).min(DELTA_SECONDS_MAX),
                Arg::None | Arg::Other(_) => 0,
            })
            .collect();
        Some(Duration::from_secs(*values.first()?))
    };
    ResponseDirectives {
        source: DirectiveSource::CacheControl,
        no_store: has("no-store"),
        no_cache: has("no-cache"),
        private: has("private"),
        public: has("public"),
        must_revalidate: has("must-revalidate"),
        proxy_revalidate: has("proxy-revalidate"),
        must_understand: has("must-understand"),
        no_transform: has("no-transform"),
        immutable: has("immutable"),
        max_age: delta("max-age"),
        s_maxage: delta("s-maxage"),
        stale_while_revalidate: delta("stale-while-revalidate"),
        stale_if_error: delta("stale-if-error"),
    }
}

fn spell((name, arg): &(&'static str, Arg), upper: bool, pad: &str) -> String {
    // §5.2: "Cache directives are identified by a token, to be compared case-insensitively".
    let name = if upper {
        name.to_ascii_uppercase()
    } else {
        (*name).to_owned()
    };
    let arg = match arg {
        Arg::None => String::new(),
        Arg::Delta(n, false) => format!("={n}"),
        Arg::Delta(n, true) => format!("=\"{n}\""),
        Arg::Other(other) => format!("={other}"),
    };
    format!("{pad}{name}{arg}{pad}")
}

/// An RFC 8941 bare item and what the targeted-field parser reduces it to.
fn sf_item() -> impl Strategy<Value = (String, SfValue)> {
    prop_oneof![
        (-999_999_999_999_999i64..=999_999_999_999_999)
            .prop_map(|n| (n.to_string(), SfValue::Integer(n))),
        any::<bool>().prop_map(|b| (format!("?{}", u8::from(b)), SfValue::Boolean(b))),
        (-999_999_999_999i64..=999_999_999_999, 0u16..1000)
            .prop_map(|(i, f)| (format!("{i}.{f}"), SfValue::Other)),
        "[ -!#-\\[\\]-~]{0,6}".prop_map(|s| (format!("\"{s}\""), SfValue::Other)),
        "[a-zA-Z*][a-zA-Z0-9!#$%&'*+.^_`|~:/-]{0,6}".prop_map(|s| (s, SfValue::Other)),
        "[a-zA-Z0-9+/]{0,8}".prop_map(|s| (format!(":{s}:"), SfValue::Other)),
        Just(("(1 \"a\" tok);p=?0".to_owned(), SfValue::Other)),
    ]
}

fn sf_key() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec!["max-age", "s-maxage", "no-store", "private", "a"])
            .prop_map(str::to_owned),
        "[a-z*][a-z0-9_.*-]{0,6}",
    ]
}

/// One dictionary member: its key, its value as text and as parsed (`None` for a bare key,
/// which is `true`), and whether it carries a parameter.
type SfMember = (String, Option<(String, SfValue)>, bool);

/// Members serialised per RFC 8941 §4.1.2.
fn sf_dictionary() -> impl Strategy<Value = Vec<SfMember>> {
    proptest::collection::vec(
        (sf_key(), proptest::option::of(sf_item()), any::<bool>()),
        1..6,
    )
}

proptest! {
    #![proptest_config(cases(5000))]

    /// A well-formed `Cache-Control` list, in any case and whitespace and split into any number
    /// of field lines (§5.3), reads as §5.2.2 says.
    #[test]
    fn well_formed_cache_control_follows_rfc_9111_5_2(
        list in proptest::collection::vec(directive(), 0..8),
        upper in proptest::collection::vec(any::<bool>(), 8),
        pads in proptest::collection::vec(proptest::sample::select(vec!["", " ", "\t "]), 8),
        cuts in proptest::collection::vec(any::<bool>(), 8),
    ) {
        let mut headers = HeaderMap::new();
        let mut line = String::new();
        for (i, directive) in list.iter().enumerate() {
            if !line.is_empty() {
                line.push(',');
            }
            line.push_str(&spell(directive, upper[i], pads[i]));
            if cuts[i] {
                headers.append(http::header::CACHE_CONTROL, HeaderValue::from_str(&line).unwrap());
                line.clear();
            }
        }
        if !line.is_empty() {
            headers.append(http::header::CACHE_CONTROL, HeaderValue::from_str(&line).unwrap());
        }
        let parsed = ResponseDirectives::parse(&headers, &Settings::default());
        prop_assert_eq!(parsed, expected(&list), "{:?}", headers);
    }

    /// Any bytes as a dictionary: parsed or refused, never a panic.
    #[test]
    fn any_bytes_as_a_dictionary_parse_or_are_refused(
        bytes in proptest::collection::vec(
            prop_oneof![any::<u8>(), proptest::sample::select(b"a=1,;?()\" :*-.".to_vec())],
            0..48,
        ),
    ) {
        if let Some(members) = parse_dictionary(&bytes) {
            prop_assert!(!members.is_empty());
        }
    }

    /// RFC 8941 §4.2.2: a serialised dictionary parses back, a key seen twice keeping its last
    /// value in its first position; and §4.2: any trailing comma or uppercase key refuses it.
    #[test]
    fn serialised_dictionaries_parse_back(
        members in sf_dictionary(),
        ows in proptest::sample::select(vec!["", " ", "\t", "  "]),
    ) {
        let text: Vec<String> = members
            .iter()
            .map(|(key, value, param)| {
                let param = if *param { ";p=1" } else { "" };
                match value {
                    None => format!("{key}{param}"),
                    Some((item, _)) => format!("{key}={item}{param}"),
                }
            })
            .collect();
        let text = text.join(&format!(",{ows}"));
        let mut expected: Vec<(String, SfValue)> = Vec::new();
        for (key, value, _) in &members {
            let value = value.as_ref().map_or(SfValue::Boolean(true), |(_, v)| *v);
            match expected.iter_mut().find(|(k, _)| k == key) {
                Some(member) => member.1 = value,
                None => expected.push((key.clone(), value)),
            }
        }
        prop_assert_eq!(parse_dictionary(text.as_bytes()), Some(expected), "{}", text);
        prop_assert_eq!(parse_dictionary(format!("{text},").as_bytes()), None);
        prop_assert_eq!(parse_dictionary(format!("A{text}").as_bytes()), None);

        // RFC 9213 §2.2: a valid targeted field replaces Cache-Control.
        let mut headers = HeaderMap::new();
        headers.insert(CDN_CACHE_CONTROL, HeaderValue::from_str(&text).unwrap());
        headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let directives = ResponseDirectives::parse(&headers, &Settings::default());
        prop_assert_eq!(directives.source, DirectiveSource::Targeted(CDN_CACHE_CONTROL));
    }

    /// Stored metadata: what `encode` writes `decode` reads back; any other blob, and any
    /// damage to a real one, is an error or some metadata, never a panic.
    #[test]
    fn meta_blobs_round_trip_and_damaged_ones_never_panic(
        stored in fields(),
        status in status(),
        (request_time, response_time) in (instant(), instant()),
        body_len in any::<u64>(),
        damage in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in proptest::option::of(any::<usize>()),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut meta = meta_status(status.as_u16(), &[]);
        meta.headers = stored;
        meta.request_time = request_time;
        meta.response_time = response_time;
        meta.body_len = body_len;
        let blob = meta.encode();
        prop_assert_eq!(Meta::decode(&blob), Ok(meta));

        let mut damaged = blob.to_vec();
        for (at, byte) in damage {
            let at = at % damaged.len();
            damaged[at] ^= byte;
        }
        if let Some(cut) = cut {
            damaged.truncate(cut % (damaged.len() + 1));
        }
        let _ = Meta::decode(&damaged);
        let _ = Meta::decode(&noise);
    }
}
