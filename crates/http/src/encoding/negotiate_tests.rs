use super::*;
use ContentCoding::{Br, Deflate, Gzip, Identity, Zstd};

const OFFERED: [ContentCoding; 3] = [Zstd, Br, Gzip];

fn pick(field: &str) -> Negotiated {
    let value = HeaderValue::from_str(field).unwrap();
    negotiate(Some(&value), &OFFERED)
}

fn uses(field: &str) -> ContentCoding {
    match pick(field) {
        Negotiated::Use(encoding) => encoding,
        Negotiated::NotAcceptable => panic!("{field:?}: not acceptable"),
    }
}

#[test]
fn absent_or_empty_field_means_identity() {
    assert_eq!(negotiate(None, &OFFERED), Negotiated::Use(Identity));
    assert_eq!(uses(""), Identity);
    assert_eq!(uses("   "), Identity);
}

#[test]
fn highest_q_wins_for_each_coding() {
    assert_eq!(uses("gzip;q=1, br;q=0.5, zstd;q=0.2"), Gzip);
    assert_eq!(uses("gzip;q=0.3, br;q=0.9, zstd;q=0.8"), Br);
    assert_eq!(uses("gzip;q=0.3, br;q=0.5, zstd;q=0.501"), Zstd);
    assert_eq!(
        uses("deflate, gzip;q=0.999"),
        Gzip,
        "deflate is not offered"
    );
    assert_eq!(
        uses("gzip;q=0.001"),
        Gzip,
        "any q > 0 beats unnamed identity"
    );
}

#[test]
fn ties_go_to_server_preference() {
    assert_eq!(uses("gzip, deflate, br, zstd"), Zstd);
    assert_eq!(uses("gzip, br"), Br);
    assert_eq!(uses("gzip;q=0.5, br;q=0.5, zstd;q=0.4"), Br);
    assert_eq!(
        uses("gzip, identity"),
        Gzip,
        "identity not offered: it ties last"
    );
    let value = HeaderValue::from_static("gzip, identity");
    assert_eq!(
        negotiate(Some(&value), &[Identity, Gzip]),
        Negotiated::Use(Identity)
    );
    assert_eq!(
        negotiate(Some(&value), &[Gzip, Identity]),
        Negotiated::Use(Gzip)
    );
    let value = HeaderValue::from_static("gzip, deflate");
    assert_eq!(
        negotiate(Some(&value), &[Deflate, Gzip]),
        Negotiated::Use(Deflate)
    );
}

#[test]
fn nothing_offered_matches_falls_back_to_identity() {
    assert_eq!(uses("deflate"), Identity);
    assert_eq!(uses("compress, x-unknown"), Identity);
    assert_eq!(
        negotiate(Some(&HeaderValue::from_static("gzip")), &[]),
        Negotiated::Use(Identity)
    );
}

#[test]
fn identity_refused() {
    assert_eq!(uses("gzip, identity;q=0"), Gzip);
    assert_eq!(pick("identity;q=0"), Negotiated::NotAcceptable);
    assert_eq!(pick("deflate, identity;q=0"), Negotiated::NotAcceptable);
    assert_eq!(pick("identity;q=0.000"), Negotiated::NotAcceptable);
}

#[test]
fn star_q0_refuses_identity_unless_named() {
    assert_eq!(pick("*;q=0"), Negotiated::NotAcceptable);
    assert_eq!(uses("br, *;q=0"), Br);
    assert_eq!(uses("*;q=0, identity"), Identity);
    assert_eq!(uses("*;q=0, identity;q=0.1"), Identity);
    assert_eq!(pick("*;q=0, gzip;q=0"), Negotiated::NotAcceptable);
}

#[test]
fn star_matches_unnamed_codings() {
    assert_eq!(uses("*"), Zstd);
    assert_eq!(uses("zstd;q=0, *"), Br);
    assert_eq!(uses("zstd;q=0, br;q=0, *;q=0.5"), Gzip);
    assert_eq!(uses("gzip, *;q=0.1"), Gzip);
    // `*` covers identity too, so it can outrank a named coding.
    assert_eq!(uses("*;q=0.5, gzip;q=0.3"), Zstd);
    let value = HeaderValue::from_static("*;q=0.5, gzip;q=0.3");
    assert_eq!(negotiate(Some(&value), &[Gzip]), Negotiated::Use(Identity));
}

#[test]
fn case_and_whitespace_tolerated() {
    assert_eq!(uses("GZIP"), Gzip);
    assert_eq!(uses("  Br ;  Q=0.7 ,\tgzip ; q = 0.5 "), Br);
    assert_eq!(uses("X-GZIP"), Gzip);
    assert_eq!(uses("gzip;q=0.5,zstd;q=0.6"), Zstd);
    assert_eq!(pick("IDENTITY;Q=0"), Negotiated::NotAcceptable);
}

#[test]
fn bad_weights_drop_the_element() {
    assert_eq!(uses("gzip;q=abc, ;;, br;q=2"), Identity);
    assert_eq!(uses("br;q=2, gzip;q=0.5"), Gzip);
    assert_eq!(uses("br;q=1.001, gzip;q=0.5"), Gzip);
    assert_eq!(uses("br;q=0.5555, gzip;q=0.5"), Gzip);
    assert_eq!(uses("br;q=-1, br;q=.5, br;q=, gzip;q=0.1"), Gzip);
    assert_eq!(uses("br;q=1., gzip"), Br, "`1.` is a valid qvalue");
    assert_eq!(
        uses("identity;q=zero"),
        Identity,
        "a bad refusal is no refusal"
    );
}

#[test]
fn garbage_is_skipped() {
    assert_eq!(uses(",,, ;, =, ;q=1, gzip"), Gzip);
    assert_eq!(uses("gzip;level=9;q=0.2, br;foo;q=0.1"), Gzip);
    assert_eq!(
        uses("br;x=\"a, zstd\", gzip;q=0.5"),
        Br,
        "quoted comma does not split"
    );
    assert_eq!(
        uses("br;x=\"a\\\", zstd\""),
        Br,
        "escaped quote stays inside the string"
    );
    let raw: &[u8] = b"\xff\xfe, gzip;q=\xff, br";
    assert_eq!(negotiate_fields([raw], &OFFERED), Negotiated::Use(Br));
}

#[test]
fn first_weight_of_a_repeated_coding_wins() {
    assert_eq!(uses("br;q=0, br, gzip;q=0.5"), Gzip);
    assert_eq!(uses("gzip;q=0.9, x-gzip;q=0, br;q=0.5"), Gzip);
}

#[test]
fn several_field_lines_form_one_list() {
    let mut headers = HeaderMap::new();
    assert_eq!(
        negotiate_headers(&headers, &OFFERED),
        Negotiated::Use(Identity)
    );
    headers.append(ACCEPT_ENCODING, HeaderValue::from_static("gzip;q=0.5"));
    headers.append(
        ACCEPT_ENCODING,
        HeaderValue::from_static("br;q=0.8, identity;q=0"),
    );
    assert_eq!(negotiate_headers(&headers, &OFFERED), Negotiated::Use(Br));
}

#[test]
fn qvalue_grammar() {
    assert_eq!(parse_qvalue(b"0"), Some(0));
    assert_eq!(parse_qvalue(b"1"), Some(1000));
    assert_eq!(parse_qvalue(b"1.000"), Some(1000));
    assert_eq!(parse_qvalue(b"0.5"), Some(500));
    assert_eq!(parse_qvalue(b"0.05"), Some(50));
    assert_eq!(parse_qvalue(b"0.123"), Some(123));
    for bad in [
        &b""[..],
        b"1.5",
        b"2",
        b"01",
        b"0.1234",
        b".5",
        b"0,5",
        b"0.5x",
        b"+1",
    ] {
        assert_eq!(
            parse_qvalue(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// Stand-in for `fuzz/fuzz_targets/accept_encoding.rs`: deterministic pseudo-random fields,
/// biased towards the bytes the parser cares about, must never panic and must only ever pick an
/// offered coding or identity.
#[test]
fn random_fields_never_panic() {
    const ALPHABET: &[u8] = b"gzipbrzstdidentity*;,=q.0123456789 \t\"\\xXQ-\xff";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut field = Vec::with_capacity(64);
    for _ in 0..5000 {
        field.clear();
        let len = (next() % 48) as usize;
        for _ in 0..len {
            let r = next();
            let byte = if r % 4 == 0 {
                (r >> 8) as u8
            } else {
                ALPHABET[(r >> 8) as usize % ALPHABET.len()]
            };
            field.push(byte);
        }
        match negotiate_fields([field.as_slice()], &OFFERED) {
            Negotiated::Use(encoding) => {
                assert!(encoding == Identity || OFFERED.contains(&encoding))
            }
            Negotiated::NotAcceptable => {}
        }
    }
}

#[test]
fn listed_weight_counts_names_only_with_the_same_element_rules() {
    let w = |field: &'static str, token: &str| listed_weight([field.as_bytes()], token.as_bytes());
    assert_eq!(w("gzip, dcz", "dcz"), Some(1000));
    assert_eq!(w("gzip, DCZ;q=0.5", "dcz"), Some(500));
    assert_eq!(w("dcz;q=0", "dcz"), Some(0));
    assert_eq!(w("*", "dcz"), None, "`*` is not a listing");
    assert_eq!(
        w("dcz;q=abc, dcz;q=0.2", "dcz"),
        Some(200),
        "a bad weight is skipped"
    );
    assert_eq!(
        w("dcz;q=0.3, dcz", "dcz"),
        Some(300),
        "the first valid weight counts"
    );
    assert_eq!(
        w("\"dcz, x\";q=1, br", "dcz"),
        None,
        "no split inside quotes"
    );
    assert_eq!(
        listed_weight(["gzip".as_bytes(), "dcb".as_bytes()], b"dcb"),
        Some(1000),
        "several lines form one list"
    );
}
