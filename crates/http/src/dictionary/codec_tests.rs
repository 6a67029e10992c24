use std::io::Read;

use super::*;
use zstd::zstd_safe::DCtx;

/// A ~100 KB "bundle": pseudo-random identifiers (so it does not compress to nothing on its
/// own), the same for every release of one `seed` except a few edits that depend on `n`.
fn bundle(seed: u64, n: u32) -> Vec<u8> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut text = String::new();
    for i in 0..4_000 {
        let name: String = (0..6)
            .map(|_| char::from(b'a' + (next() % 26) as u8))
            .collect();
        let edit = if i % 500 == 0 { n } else { 0 };
        text.push_str(&format!(
            "function {name}{i}(a){{return a*{}+{edit}}}\n",
            next() % 1000
        ));
    }
    text.into_bytes()
}

fn release(n: u32) -> Vec<u8> {
    bundle(1, n)
}

/// Decode a `dcz` body with zstd reading `dict` as raw content (a prefix), after checking the
/// header.
fn decode_dcz(body: &[u8], dict: &[u8]) -> Vec<u8> {
    assert_eq!(&body[..8], &DCZ_MAGIC);
    assert_eq!(&body[8..40], &DictionaryHash::of(dict).0);
    let mut dctx = DCtx::create();
    dctx.ref_prefix(dict).unwrap();
    let mut out = Vec::with_capacity(4 << 20);
    dctx.decompress(&mut out, &body[40..]).unwrap();
    out
}

fn decode_dcb(body: &[u8], dict: &[u8]) -> Vec<u8> {
    assert_eq!(&body[..4], &DCB_MAGIC);
    assert_eq!(&body[4..36], &DictionaryHash::of(dict).0);
    let mut out = Vec::new();
    brotli::Decompressor::new_with_custom_dict(&body[36..], 4096, dict.to_vec().into())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The window a zstd frame header declares (RFC 8878 §3.1.1.1.2).
fn zstd_window(frame: &[u8]) -> u64 {
    let descriptor = frame[4];
    let single_segment = descriptor & 0x20 != 0;
    if !single_segment {
        let w = frame[5];
        let exponent = u64::from(w >> 3);
        let base = 1u64 << (10 + exponent);
        return base + (base / 8) * u64::from(w & 7);
    }
    // Single segment: the window is the content size.
    let fcs_flag = descriptor >> 6;
    let dict_id_len = [0usize, 1, 2, 4][usize::from(descriptor & 3)];
    let at = 5 + dict_id_len;
    match fcs_flag {
        0 => u64::from(frame[at]),
        1 => u64::from(u16::from_le_bytes([frame[at], frame[at + 1]])) + 256,
        2 => u64::from(u32::from_le_bytes(frame[at..at + 4].try_into().unwrap())),
        _ => u64::from_le_bytes(frame[at..at + 8].try_into().unwrap()),
    }
}

#[test]
fn deltas_decode_to_the_new_release_and_are_far_smaller() {
    let (v1, v2) = (release(1), release(2));
    let dictionary = Dictionary::new(Bytes::from(v1.clone()));
    let plain = zstd::bulk::compress(&v2, 19).unwrap();
    for coding in DictionaryCoding::ALL {
        let level = if coding == DictionaryCoding::Dcb {
            11
        } else {
            19
        };
        let body = encode(coding, &dictionary, &v2, level).unwrap();
        let decoded = match coding {
            DictionaryCoding::Dcz => decode_dcz(&body, &v1),
            DictionaryCoding::Dcb => decode_dcb(&body, &v1),
        };
        assert_eq!(decoded, v2, "{coding}");
        assert!(
            body.len() * 4 < plain.len(),
            "{coding}: {} bytes vs zstd-19 alone {}",
            body.len(),
            plain.len()
        );
    }
}

#[test]
fn a_prepared_dictionary_is_reused_and_gives_the_same_bytes_as_a_prefix() {
    let (v1, v2) = (release(1), release(2));
    let dictionary = Dictionary::new(Bytes::from(v1.clone()));
    let first = encode(DictionaryCoding::Dcz, &dictionary, &v2, 19).unwrap();
    assert!(dictionary.prepared(19).is_some(), "prepared once, kept");
    let again = encode(DictionaryCoding::Dcz, &dictionary, &v2, 19).unwrap();
    assert_eq!(first, again);
    assert_eq!(decode_dcz(&first, &v1), v2);
    // Another level than the prepared one falls back to a prefix, still raw content.
    let other = encode(DictionaryCoding::Dcz, &dictionary, &v2, 3).unwrap();
    assert_eq!(decode_dcz(&other, &v1), v2);
}

#[test]
fn a_dictionary_starting_with_zstd_magic_is_still_raw_content() {
    // RFC 9842 §2.1.4: `raw` only. Bytes that look like a formatted zstd dictionary must not
    // be parsed as one: a decoder attaching them as raw content must get the body back.
    let mut v1 = ZSTD_DICTIONARY_MAGIC.to_vec();
    v1.extend_from_slice(&release(1));
    let mut v2 = ZSTD_DICTIONARY_MAGIC.to_vec();
    v2.extend_from_slice(&release(2));
    let dictionary = Dictionary::new(Bytes::from(v1.clone()));
    assert!(dictionary.has_zstd_magic());
    let body = encode(DictionaryCoding::Dcz, &dictionary, &v2, 19).unwrap();
    assert!(
        dictionary.prepared(19).is_none(),
        "never prepared as a zstd dictionary"
    );
    assert_eq!(decode_dcz(&body, &v1), v2);
    assert!(
        body.len() < 2_000,
        "the dictionary was used: {} bytes",
        body.len()
    );
    let body = encode(DictionaryCoding::Dcb, &dictionary, &v2, 11).unwrap();
    assert_eq!(decode_dcb(&body, &v1), v2);
}

#[test]
fn a_wrong_dictionary_does_not_decode_to_the_body() {
    let (v1, v2) = (release(1), release(2));
    let dictionary = Dictionary::new(Bytes::from(v1));
    let body = encode(DictionaryCoding::Dcz, &dictionary, &v2, 19).unwrap();
    let other = bundle(2, 1);
    let mut dctx = DCtx::create();
    dctx.ref_prefix(&other[..]).unwrap();
    let mut out = Vec::with_capacity(4 << 20);
    let decoded = dctx.decompress(&mut out, &body[40..]);
    assert!(decoded.is_err() || out != v2);
}

#[test]
fn the_zstd_window_stays_within_rfc_9842s_limit_and_covers_the_body() {
    assert_eq!(zstd_window_log(100_000, 150_000), 18);
    assert_eq!(zstd_window_log(100_000, 10), 10);
    // Body larger than the limit: the window stops at max(8 MiB, 1.25 × dictionary).
    assert_eq!(zstd_window_log(1 << 20, 64 << 20), 23);
    assert_eq!(zstd_window_log(40 << 20, 64 << 20), 25);
    assert_eq!(zstd_window_log(200 << 20, 1 << 30), 27);
    let (v1, v2) = (release(1), release(2));
    let dictionary = Dictionary::new(Bytes::from(v1));
    let body = encode(DictionaryCoding::Dcz, &dictionary, &v2, 19).unwrap();
    let window = zstd_window(&body[40..]);
    assert!(window >= v2.len() as u64 && window <= 8 << 20, "{window}");
}
