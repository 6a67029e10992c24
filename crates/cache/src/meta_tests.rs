//! Tests of [`super`]: round trips, and every malformed blob is an error, never a panic.

use super::*;
use http::header;

fn sample() -> Meta {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    headers.append(header::SET_COOKIE, HeaderValue::from_static("a=1"));
    headers.append(header::SET_COOKIE, HeaderValue::from_static("b=2"));
    headers.insert(
        HeaderName::from_static("x-latin1"),
        HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
    Meta {
        status: StatusCode::NOT_FOUND,
        headers,
        request_time: UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789),
        response_time: UNIX_EPOCH + Duration::new(1_700_000_001, 5),
        primary_key: "http://example.com/a?x=1 header:x-tenant=acme".into(),
        vary: VaryRule::Names(vec![header::ACCEPT_ENCODING, header::ACCEPT_LANGUAGE]),
        vary_key: VaryKey::from_canonical("accept-encoding:br\naccept-language\n".into()),
        variant: "br".into(),
        body_len: 300_000,
    }
}

#[test]
fn meta_round_trips_with_repeated_and_non_utf8_headers() {
    let meta = sample();
    let decoded = Meta::decode(&meta.encode()).unwrap();
    assert_eq!(decoded, meta);
    let cookies: Vec<_> = decoded.headers.get_all(header::SET_COOKIE).iter().collect();
    assert_eq!(cookies, ["a=1", "b=2"]);

    for vary in [VaryRule::None, VaryRule::Star] {
        let meta = Meta {
            vary,
            vary_key: VaryKey::empty(),
            headers: HeaderMap::new(),
            ..sample()
        };
        assert_eq!(Meta::decode(&meta.encode()).unwrap(), meta);
    }
}

#[test]
fn meta_times_before_the_epoch_are_stored_as_the_epoch() {
    let meta = Meta {
        request_time: UNIX_EPOCH - Duration::from_secs(10),
        ..sample()
    };
    assert_eq!(
        Meta::decode(&meta.encode()).unwrap().request_time,
        UNIX_EPOCH
    );
}

#[test]
fn meta_every_truncation_fails_cleanly() {
    let blob = sample().encode();
    for len in 0..blob.len() {
        assert!(
            Meta::decode(&blob[..len]).is_err(),
            "prefix of {len} of {} bytes decoded",
            blob.len()
        );
    }
}

#[test]
fn meta_trailing_bytes_magic_and_version_are_checked() {
    let blob = sample().encode();
    let mut long = blob.to_vec();
    long.push(0);
    assert_eq!(Meta::decode(&long), Err(MetaError::TrailingBytes));
    let mut magic = blob.to_vec();
    magic[0] = b'X';
    assert_eq!(Meta::decode(&magic), Err(MetaError::BadMagic));
    let mut version = blob.to_vec();
    version[4] = 9;
    assert_eq!(
        Meta::decode(&version),
        Err(MetaError::UnsupportedVersion(9))
    );
    let mut status = blob.to_vec();
    status[5..7].copy_from_slice(&1000u16.to_be_bytes());
    assert_eq!(Meta::decode(&status), Err(MetaError::BadStatus(1000)));
}

#[test]
fn meta_out_of_range_times_and_lengths_are_errors_not_panics() {
    let blob = sample().encode();
    // Request time: seconds at offset 7, nanoseconds at 15.
    let mut nanos = blob.to_vec();
    nanos[15..19].copy_from_slice(&u32::MAX.to_be_bytes());
    nanos[7..15].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(Meta::decode(&nanos), Err(MetaError::BadTime));
    let mut secs = blob.to_vec();
    secs[7..15].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(Meta::decode(&secs), Err(MetaError::BadTime));
    // body_len (offset 31) as an eleven-byte varint.
    let mut var = blob[..31].to_vec();
    var.extend_from_slice(&[0xff; 11]);
    assert_eq!(Meta::decode(&var), Err(MetaError::BadLength));
}

#[test]
fn meta_corrupted_blobs_never_panic() {
    let blob = sample().encode();
    // Every byte replaced by a few interesting values, then pseudo-random multi-byte damage.
    for i in 0..blob.len() {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff, b'A', b'\n'] {
            let mut bad = blob.to_vec();
            bad[i] = value;
            let _ = Meta::decode(&bad);
        }
    }
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut bad = blob.to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % bad.len() as u64) as usize;
            bad[at] = next() as u8;
        }
        let cut = (next() % (bad.len() as u64 + 1)) as usize;
        let _ = Meta::decode(&bad[..cut]);
    }
    let noise: Vec<u8> = (0..4096).map(|_| next() as u8).collect();
    assert!(Meta::decode(&noise).is_err());
}

#[test]
fn meta_header_names_must_be_lowercase_tokens() {
    let mut meta = sample();
    meta.headers = HeaderMap::new();
    meta.headers
        .insert(header::ETAG, HeaderValue::from_static("\"x\""));
    let mut blob = meta.encode().to_vec();
    let at = blob.windows(4).position(|w| w == b"etag").unwrap();
    blob[at] = b'E';
    assert_eq!(Meta::decode(&blob), Err(MetaError::BadHeaderName));
    blob[at] = b' ';
    assert_eq!(Meta::decode(&blob), Err(MetaError::BadHeaderName));
}
