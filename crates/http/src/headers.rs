//! Header rules for proxying (RFC 9110 §7.6): hop-by-hop fields are removed in both directions,
//! including every field named in `Connection`; `X-Forwarded-For`, `-Proto`, `-Host` and `Via`
//! are appended so the upstream sees the whole chain; route edits (remove, then set) come last.

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use sluice_config::HeaderEdits;

/// Fields that describe one connection, never forwarded (RFC 9110 §7.6.1, plus the legacy
/// `Proxy-Connection` and the proxy credentials, which belong to this hop).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Remove hop-by-hop fields, including those listed in `Connection`.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // Names listed in Connection are only known at run time; collect them before removing it.
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// Append `value` to a comma-separated field, or set it when absent.
pub fn append_list(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    let joined = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(existing) if !existing.is_empty() => format!("{existing}, {value}"),
        _ => value.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&joined) {
        headers.insert(name, v);
    }
}

/// What the forwarding headers say about this hop.
pub struct Hop<'a> {
    pub client_ip: IpAddr,
    pub tls: bool,
    /// The host the client asked for (`Host` or `:authority`).
    pub host: Option<&'a str>,
    /// The protocol version received, as `Via` writes it (`1.1`, `2`).
    pub version: &'static str,
}

/// Append `X-Forwarded-For`, `-Proto`, `-Host` and `Via` to a request going upstream.
pub fn add_forwarded(headers: &mut HeaderMap, hop: &Hop<'_>) {
    append_list(headers, X_FORWARDED_FOR, &hop.client_ip.to_string());
    append_list(
        headers,
        X_FORWARDED_PROTO,
        if hop.tls { "https" } else { "http" },
    );
    if let Some(host) = hop.host {
        append_list(headers, X_FORWARDED_HOST, host);
    }
    add_via(headers, hop.version);
}

/// Append this proxy to `Via` (RFC 9110 §7.6.3).
pub fn add_via(headers: &mut HeaderMap, version: &'static str) {
    append_list(headers, header::VIA, &format!("{version} sluice"));
}

/// Apply a route's edits: removals first, then sets (replacing existing values).
pub fn apply_edits(headers: &mut HeaderMap, edits: &HeaderEdits) {
    for name in &edits.remove {
        headers.remove(name);
    }
    for (name, value) in &edits.set {
        headers.insert(name.clone(), value.clone());
    }
}

/// Join an HTTP/2 client's separate `cookie` fields into one, as RFC 9113 §8.2.3 requires before
/// forwarding to HTTP/1.1 (many servers read only the first `Cookie` line).
pub fn merge_cookies(headers: &mut HeaderMap) {
    let mut values = headers.get_all(header::COOKIE).iter();
    let (Some(first), Some(_)) = (values.next(), values.next()) else {
        return;
    };
    let mut joined = first.as_bytes().to_vec();
    for value in headers.get_all(header::COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

/// `Via`'s protocol version for an HTTP version.
pub fn via_version(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_listed_fields_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", "keep-alive, X-Secret".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("upgrade", "websocket".parse().unwrap());
        h.insert("x-kept", "1".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn forwarded_headers_append_to_the_chain() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "10.0.0.1".parse().unwrap());
        h.insert("via", "1.1 edge".parse().unwrap());
        let hop = Hop {
            client_ip: "192.0.2.7".parse().unwrap(),
            tls: true,
            host: Some("a.test"),
            version: "2",
        };
        add_forwarded(&mut h, &hop);
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "a.test");
        assert_eq!(h["via"], "1.1 edge, 2 sluice");
    }

    #[test]
    fn split_cookies_are_joined() {
        let mut h = HeaderMap::new();
        h.append("cookie", "a=1".parse().unwrap());
        h.append("cookie", "b=2".parse().unwrap());
        merge_cookies(&mut h);
        assert_eq!(h.get_all("cookie").iter().count(), 1);
        assert_eq!(h["cookie"], "a=1; b=2");
        let mut one = HeaderMap::new();
        one.insert("cookie", "a=1".parse().unwrap());
        merge_cookies(&mut one);
        assert_eq!(one["cookie"], "a=1");
    }

    #[test]
    fn edits_remove_then_set() {
        let mut h = HeaderMap::new();
        h.insert("x-a", "old".parse().unwrap());
        h.insert("x-b", "gone".parse().unwrap());
        let edits = HeaderEdits {
            set: vec![(
                HeaderName::from_static("x-a"),
                HeaderValue::from_static("new"),
            )],
            remove: vec![
                HeaderName::from_static("x-b"),
                HeaderName::from_static("x-a"),
            ],
        };
        apply_edits(&mut h, &edits);
        assert_eq!(h["x-a"], "new");
        assert!(!h.contains_key("x-b"));
    }
}
