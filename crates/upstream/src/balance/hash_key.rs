//! The request key the hash policy hashes, and the hash function itself.
//!
//! Keys, as configured by [`HashKey`], are the bytes nginx's variables hold, so that a key hashes
//! as it does under `hash $key consistent`:
//! - `ClientIp`: the address as text, like `$remote_addr` (an IPv4-mapped IPv6 address is read
//!   as IPv4, so dual-stack listeners agree; nginx would write `::ffff:192.0.2.7` there);
//! - `Uri`: path and query, like `$request_uri`;
//! - `Header(name)`: the first value of the header (`$http_name`; nginx 1.23+ joins repeated
//!   lines with `, `);
//! - `Cookie(name)`: the value of the first cookie of that name, across all `Cookie` headers
//!   (HTTP/2 sends one per cookie), like `$cookie_name`.
//!
//! A missing or empty header or cookie gives no key at all (`None`): the caller then balances by
//! round robin instead of hashing an empty string, which is what nginx does and which sends every
//! keyless request (say, a first visit before the session cookie is set) to the same one peer.
//!
//! The hash is CRC-32 (IEEE, the one of gzip and zlib), as nginx's `ngx_crc32_long`: *stable*,
//! defined by a standard rather than by the standard library (whose `DefaultHasher` may change
//! between Rust versions), so every sluice instance of a fleet, whatever it was built with, maps a
//! key to the same server as the others and as nginx, and a restart does not reshuffle the keys.
//! It is `crc32fast`'s (35 ns for a 30-byte key; zlib-rs's CRC-32, linked for gzip, took 1 µs).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};

use http::HeaderMap;
use sluice_config::HashKey;

use crate::group::PickContext;

/// The hash of the request's key, or `None` when the request has no such key.
pub fn key_hash(key: &HashKey, ctx: &PickContext<'_>) -> Option<u32> {
    match key {
        HashKey::ClientIp => match ctx.client_ip.to_canonical() {
            IpAddr::V4(v4) => {
                let mut text = [0u8; 15];
                let len = ipv4_text(v4, &mut text);
                Some(hash(text.get(..len)?))
            }
            IpAddr::V6(v6) => {
                // The longest text of an IPv6 address is 45 bytes (with an IPv4 tail).
                let mut text = [0u8; 45];
                let mut cursor = std::io::Cursor::new(&mut text[..]);
                write!(cursor, "{v6}").ok()?;
                let len = usize::try_from(cursor.position()).ok()?;
                Some(hash(text.get(..len)?))
            }
        },
        HashKey::Uri => Some(hash(
            ctx.uri
                .path_and_query()
                .map_or(ctx.uri.path(), |pq| pq.as_str())
                .as_bytes(),
        )),
        HashKey::Header(name) => ctx
            .headers
            .get(name)
            .map(|v| v.as_bytes())
            .filter(|v| !v.is_empty())
            .map(hash),
        HashKey::Cookie(name) => cookie(ctx.headers, name.as_bytes()).map(hash),
    }
}

/// `a.b.c.d` into `out`, its length returned: what `Display` writes, without the formatting
/// machinery, which tripled the cost of a client-IP pick.
fn ipv4_text(ip: Ipv4Addr, out: &mut [u8; 15]) -> usize {
    let mut len = 0;
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out[len] = b'.';
            len += 1;
        }
        if octet >= 100 {
            out[len] = b'0' + octet / 100;
            len += 1;
        }
        if octet >= 10 {
            out[len] = b'0' + octet / 10 % 10;
            len += 1;
        }
        out[len] = b'0' + octet % 10;
        len += 1;
    }
    len
}

/// The value of the first cookie called `name`, if non-empty.
fn cookie<'h>(headers: &'h HeaderMap, name: &[u8]) -> Option<&'h [u8]> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (key, value) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
            (key == name).then_some(value)
        })
        .filter(|value| !value.is_empty())
}

/// CRC-32 of `bytes` (nginx's `ngx_crc32_long`).
pub fn hash(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use http::{HeaderName, HeaderValue, Uri};

    use super::*;

    fn ctx<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> PickContext<'a> {
        PickContext {
            client_ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
            uri,
            headers,
        }
    }

    #[test]
    fn hash_is_crc32() {
        // Pinned: a change here reshuffles every fleet's keys, so it must be deliberate. The
        // CRC-32 check value (of "123456789") and the empty input.
        assert_eq!(hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(hash(b""), 0);
    }

    #[test]
    fn ipv4_text_is_display() {
        for ip in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 0, 99, 100],
            [192, 168, 1, 9],
        ] {
            let ip = Ipv4Addr::from(ip);
            let mut text = [0u8; 15];
            let len = ipv4_text(ip, &mut text);
            assert_eq!(&text[..len], ip.to_string().as_bytes());
        }
    }

    #[test]
    fn client_ip_reads_mapped_v6_as_v4() {
        let (uri, headers) = (Uri::from_static("/"), HeaderMap::new());
        let mut c = ctx(&uri, &headers);
        let v4 = key_hash(&HashKey::ClientIp, &c);
        c.client_ip = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        assert_eq!(key_hash(&HashKey::ClientIp, &c), v4);
        assert_eq!(v4, Some(hash(b"192.0.2.7")), "the text, as $remote_addr");
        c.client_ip = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(key_hash(&HashKey::ClientIp, &c), Some(hash(b"::1")));
        c.client_ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xffff, 0xffff));
        assert_eq!(
            key_hash(&HashKey::ClientIp, &c),
            Some(hash(b"2001:db8::ffff:ffff"))
        );
    }

    #[test]
    fn uri_key_is_path_and_query() {
        let headers = HeaderMap::new();
        let a = Uri::from_static("http://one.example/p?q=1");
        let b = Uri::from_static("/p?q=1");
        let c = Uri::from_static("/p?q=2");
        let key = |u| key_hash(&HashKey::Uri, &ctx(u, &headers));
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&b), key(&c));
    }

    #[test]
    fn header_key_missing_or_empty_is_none() {
        let uri = Uri::from_static("/");
        let name = HeaderName::from_static("x-user");
        let mut headers = HeaderMap::new();
        assert_eq!(
            key_hash(&HashKey::Header(name.clone()), &ctx(&uri, &headers)),
            None
        );
        headers.insert(&name, HeaderValue::from_static(""));
        assert_eq!(
            key_hash(&HashKey::Header(name.clone()), &ctx(&uri, &headers)),
            None
        );
        headers.insert(&name, HeaderValue::from_static("42"));
        assert_eq!(
            key_hash(&HashKey::Header(name), &ctx(&uri, &headers)),
            Some(hash(b"42"))
        );
    }

    #[test]
    fn cookie_found_across_headers_and_pairs() {
        let uri = Uri::from_static("/");
        let mut headers = HeaderMap::new();
        headers.append(
            http::header::COOKIE,
            HeaderValue::from_static("theme=dark; sid_old=x"),
        );
        headers.append(
            http::header::COOKIE,
            HeaderValue::from_static("lang=en;  sid = abc ; sid=later"),
        );
        let key = |headers: &HeaderMap, name: &str| {
            key_hash(&HashKey::Cookie(name.into()), &ctx(&uri, headers))
        };
        assert_eq!(
            key(&headers, "sid"),
            Some(hash(b"abc")),
            "first match, whitespace trimmed"
        );
        assert_eq!(key(&headers, "theme"), Some(hash(b"dark")));
        assert_eq!(
            key(&headers, "Sid"),
            None,
            "cookie names are case-sensitive"
        );
        assert_eq!(key(&headers, "missing"), None);
        headers.insert(http::header::COOKIE, HeaderValue::from_static("sid="));
        assert_eq!(key(&headers, "sid"), None, "empty value is no key");
    }
}
