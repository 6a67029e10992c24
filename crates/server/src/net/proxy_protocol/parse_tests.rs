#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn source(header: &[u8]) -> Option<SocketAddr> {
    let parsed = parse(header).unwrap().expect("a complete header");
    assert_eq!(parsed.len, header.len(), "the header is all of the input");
    parsed.source
}

fn addr(text: &str) -> Option<SocketAddr> {
    Some(text.parse().unwrap())
}

/// A v2 header: version 2, `command`, `family_transport`, then `body`.
fn v2(command: u8, family_transport: u8, body: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x20 | command);
    out.push(family_transport);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn v4_body() -> Vec<u8> {
    let mut body = vec![1, 2, 3, 4, 5, 6, 7, 8];
    body.extend_from_slice(&1111u16.to_be_bytes());
    body.extend_from_slice(&2222u16.to_be_bytes());
    body
}

fn v6_body() -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
    let mut body = src.octets().to_vec();
    body.extend_from_slice(&dst.octets());
    body.extend_from_slice(&1111u16.to_be_bytes());
    body.extend_from_slice(&2222u16.to_be_bytes());
    body
}

#[test]
fn v1_tcp4() {
    let header = b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n";
    assert_eq!(source(header), addr("1.2.3.4:1111"));
}

#[test]
fn v1_tcp6() {
    let header = b"PROXY TCP6 2001:db8::1 2001:db8::2 1111 2222\r\n";
    assert_eq!(source(header), addr("[2001:db8::1]:1111"));
}

#[test]
fn v1_unknown_keeps_the_connection_address() {
    assert_eq!(source(b"PROXY UNKNOWN\r\n"), None);
    // Anything after UNKNOWN is to be ignored.
    assert_eq!(source(b"PROXY UNKNOWN 1.2.3.4 x y z\r\n"), None);
}

#[test]
fn v1_bytes_after_the_header_are_not_part_of_it() {
    let input = b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\nGET / HTTP/1.1\r\n\r\n";
    let parsed = parse(input).unwrap().unwrap();
    assert_eq!(&input[parsed.len..], b"GET / HTTP/1.1\r\n\r\n");
}

#[test]
fn v1_longest_line_is_accepted() {
    let long = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    // The spec's worst case: UNKNOWN followed by the longest TCP6 fields.
    let header = format!("PROXY UNKNOWN {long} {long} 65535 65535\r\n");
    assert_eq!(header.len(), V1_MAX_LEN);
    assert_eq!(source(header.as_bytes()), None);
    let header = format!("PROXY TCP6 {long} {long} 65535 65535\r\n");
    assert!(source(header.as_bytes()).is_some());
}

#[test]
fn every_prefix_of_a_valid_header_needs_more() {
    let v1 = b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n".to_vec();
    let v2 = v2(1, 0x11, &v4_body());
    for header in [v1, v2] {
        for cut in 0..header.len() {
            assert_eq!(parse(&header[..cut]), Ok(None), "cut at {cut}");
        }
    }
}

#[test]
fn v1_malformed_lines_are_refused() {
    let cases: &[&[u8]] = &[
        b"PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222 9\r\n",
        b"PROXY TCP4 1.2.3.4  5.6.7.8 1111 2222\r\n",
        b"PROXY TCP4 1.2.3.256 5.6.7.8 1111 2222\r\n",
        b"PROXY TCP4 2001:db8::1 5.6.7.8 1111 2222\r\n",
        b"PROXY TCP6 1.2.3.4 5.6.7.8 1111 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\n\r\n",
        b"PROXY \r\n",
        b"PROXY TCP4 \xff.2.3.4 5.6.7.8 1111 2222\r\n",
        b"proxy TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n",
    ];
    for case in cases {
        assert!(parse(case).is_err(), "{}", String::from_utf8_lossy(case));
    }
}

#[test]
fn v1_line_over_107_bytes_is_refused() {
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(V1_MAX_LEN, b'x');
    assert!(parse(&long).is_err());
    // Even when the CRLF follows just past the limit.
    long.extend_from_slice(b"\r\n");
    assert!(parse(&long).is_err());
}

#[test]
fn plain_http_tls_and_garbage_are_refused_on_their_first_bytes() {
    // `P` or `\r\n` could still become a header; one byte that cannot settles it.
    for first in [&b"G"[..], b"\x16", b"\0", b"PX", b"\r\nX"] {
        assert!(parse(first).is_err(), "{first:?}");
    }
    assert_eq!(parse(b"P"), Ok(None));
    assert!(parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").is_err());
}

#[test]
fn v2_proxy_tcp4() {
    assert_eq!(source(&v2(1, 0x11, &v4_body())), addr("1.2.3.4:1111"));
}

#[test]
fn v2_proxy_tcp6() {
    assert_eq!(source(&v2(1, 0x21, &v6_body())), addr("[2001:db8::1]:1111"));
}

#[test]
fn v2_local_keeps_the_connection_address() {
    assert_eq!(source(&v2(0, 0x00, &[])), None);
    // LOCAL with addresses: they are ignored.
    assert_eq!(source(&v2(0, 0x11, &v4_body())), None);
}

#[test]
fn v2_tlvs_are_skipped() {
    let mut body = v4_body();
    // PP2_TYPE_AUTHORITY "lb.test", then PP2_TYPE_NOOP of 3 bytes.
    body.extend_from_slice(&[0x02, 0, 7]);
    body.extend_from_slice(b"lb.test");
    body.extend_from_slice(&[0x04, 0, 3, 0, 0, 0]);
    let mut input = v2(1, 0x11, &body);
    let header_len = input.len();
    input.extend_from_slice(b"GET /");
    let parsed = parse(&input).unwrap().unwrap();
    assert_eq!(parsed.len, header_len);
    assert_eq!(parsed.source, addr("1.2.3.4:1111"));
}

#[test]
fn v2_families_without_a_tcp_client_keep_the_connection_address() {
    // UNSPEC, UDP over IPv4, UNIX stream.
    assert_eq!(source(&v2(1, 0x00, &[])), None);
    assert_eq!(source(&v2(1, 0x12, &v4_body())), None);
    assert_eq!(source(&v2(1, 0x31, &[0; 216])), None);
}

#[test]
fn v2_malformed_headers_are_refused() {
    let mut version_1 = v2(1, 0x11, &v4_body());
    version_1[12] = 0x11;
    let cases = [
        version_1,
        v2(2, 0x11, &v4_body()),
        v2(0xf, 0x11, &v4_body()),
        v2(1, 0x41, &v4_body()),
        v2(1, 0x13, &v4_body()),
        v2(1, 0x11, &v4_body()[..11]),
        v2(1, 0x21, &v6_body()[..35]),
        v2(1, 0x21, &v4_body()),
    ];
    for case in cases {
        assert!(parse(&case).is_err(), "{case:?}");
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small deterministic fuzz: every prefix of many pseudo-random inputs, some starting
    // with a real signature so the deeper branches are reached.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..2000 {
        let mut input = match round % 3 {
            0 => V2_SIGNATURE.to_vec(),
            1 => b"PROXY ".to_vec(),
            _ => Vec::new(),
        };
        let extra = usize::try_from(next() % 160).unwrap();
        input.extend((0..extra).map(|_| next().to_le_bytes()[0]));
        for cut in 0..=input.len() {
            let _ = parse(&input[..cut]);
        }
    }
}

/// What sluice sends upstream (`sluice_upstream::proxy_protocol`), sluice's listeners read back.
#[test]
fn headers_sent_upstream_read_back() {
    use sluice_upstream::proxy_protocol::{ClientAddresses, header};
    for (client, dst) in [
        ("192.0.2.1:56324", "10.0.0.1:443"),
        ("[2001:db8::1]:1000", "[2001:db8::2]:80"),
    ] {
        let sent = header(Some(ClientAddresses {
            source: client.parse().unwrap(),
            destination: dst.parse().unwrap(),
        }));
        assert_eq!(source(&sent), addr(client));
    }
    // A v4 client beside a v6 destination travels v4-mapped.
    let mixed = header(Some(ClientAddresses {
        source: "192.0.2.1:1".parse().unwrap(),
        destination: "[::1]:80".parse().unwrap(),
    }));
    assert_eq!(source(&mixed), addr("[::ffff:192.0.2.1]:1"));
    assert_eq!(source(&header(None)), None, "LOCAL");
}
