//! The request key the hash policy hashes, and the hash function itself.
//!
//! Keys, as configured by [`HashKey`]:
//! - `ClientIp`: the address octets (IPv4-mapped IPv6 read as IPv4, so dual-stack listeners agree);
//! - `Uri`: path and query, like nginx's `$request_uri`;
//! - `Header(name)`: the first value of the header;
//! - `Cookie(name)`: the value of the first cookie of that name, across all `Cookie` headers
//!   (HTTP/2 sends one per cookie).
//!
//! A missing or empty header or cookie gives no key at all (`None`): the caller then balances by
//! round robin instead of hashing an empty string, which is what nginx does and which sends every
//! keyless request (say, a first visit before the session cookie is set) to the same one peer.
//!
//! The hash is FNV-1a followed by MurmurHash3's 64-bit finaliser: small, allocation-free, and
//! *stable*, defined here rather than by the standard library (whose `DefaultHasher` may change
//! between Rust versions), so every sluice instance of a fleet, whatever it was built with, maps a
//! key to the same server, and a restart does not reshuffle the keys. FNV alone spreads similar
//! short inputs (`a:80#1`, `a:80#2`) poorly; the finaliser fixes that for the ring's points.

use http::HeaderMap;
use sluice_config::HashKey;

use crate::group::PickContext;

/// The hash of the request's key, or `None` when the request has no such key.
pub fn key_hash(key: &HashKey, ctx: &PickContext<'_>) -> Option<u64> {
    match key {
        HashKey::ClientIp => Some(match ctx.client_ip.to_canonical() {
            std::net::IpAddr::V4(v4) => hash(&v4.octets()),
            std::net::IpAddr::V6(v6) => hash(&v6.octets()),
        }),
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

/// Stable 64-bit hash of `bytes`.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = Fnv::new();
    h.write(bytes);
    h.finish()
}

/// FNV-1a, finished with MurmurHash3's `fmix64`.
#[derive(Debug, Clone)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv {
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    fn hash_is_stable() {
        // Pinned: a change here reshuffles every fleet's keys, so it must be deliberate.
        assert_eq!(hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(hash(b"/index.html"), hash(b"/index.html"));
        assert_ne!(hash(b"a:80#1"), hash(b"a:80#2"));
    }

    #[test]
    fn client_ip_reads_mapped_v6_as_v4() {
        let (uri, headers) = (Uri::from_static("/"), HeaderMap::new());
        let mut c = ctx(&uri, &headers);
        let v4 = key_hash(&HashKey::ClientIp, &c);
        c.client_ip = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        assert_eq!(key_hash(&HashKey::ClientIp, &c), v4);
        c.client_ip = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_ne!(key_hash(&HashKey::ClientIp, &c), v4);
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
