//! Header rules for proxying (RFC 9110 §7.6): hop-by-hop fields are removed in both directions,
//! including every field named in `Connection`; `Via` is appended to, and so is
//! `X-Forwarded-For` when the peer is a trusted proxy (a field on several lines is one list);
//! from any other peer `X-Forwarded-For`, `-Proto` and `-Host` are replaced by what this hop
//! knows and `Forwarded` (RFC 7239, which sluice does not write) is removed, so a client cannot
//! forge its address, scheme or host;
//! `TE: trailers` alone survives as a hop-by-hop field; route edits (remove, then set) come last.

use std::net::IpAddr;

use bytes::BytesMut;
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

/// Append `value` to a comma-separated list field. A field sent on several lines is one list
/// (RFC 9110 §5.3): every line is kept, in order, and the result is one line. Without an
/// existing value, `value` is inserted as is (no copy).
pub fn append_list(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    let existing = headers.get_all(&name);
    let mut lines = existing.iter().filter(|v| !v.is_empty()).peekable();
    if lines.peek().is_none() {
        headers.insert(name, value);
        return;
    }
    let mut joined = BytesMut::new();
    for line in lines {
        joined.extend_from_slice(line.as_bytes());
        joined.extend_from_slice(b", ");
    }
    joined.extend_from_slice(value.as_bytes());
    // Valid lines joined by ", " are a valid value; the check cannot fail but costs little.
    if let Ok(v) = HeaderValue::from_maybe_shared(joined.freeze()) {
        headers.insert(name, v);
    }
}

/// What the forwarding headers say about this hop.
pub struct Hop {
    /// The address the request came from (the connection's peer).
    pub peer_ip: IpAddr,
    /// The peer is a trusted proxy: its `X-Forwarded-*` and `Forwarded` are kept.
    pub trusted: bool,
    pub tls: bool,
    /// The host the client asked for (`Host` or `:authority`).
    pub host: Option<HeaderValue>,
    /// The protocol version received, for `Via`.
    pub version: http::Version,
}

/// `X-Forwarded-For`, `-Proto`, `-Host` and `Via` of a request going upstream.
///
/// From a trusted proxy, the chain goes on: the peer is appended to `X-Forwarded-For`, and the
/// proxy's `X-Forwarded-Proto` and `-Host` (what the client used at the edge) are kept, set
/// from this hop only when absent. From anyone else, the three are this hop's alone (the
/// peer, this connection's scheme, the request's host) and `Forwarded` is dropped.
pub fn add_forwarded(headers: &mut HeaderMap, hop: Hop) {
    let proto = HeaderValue::from_static(if hop.tls { "https" } else { "http" });
    if hop.trusted {
        append_list(headers, X_FORWARDED_FOR, ip_value(hop.peer_ip));
        if !headers.contains_key(&X_FORWARDED_PROTO) {
            headers.insert(X_FORWARDED_PROTO, proto);
        }
        if let (false, Some(host)) = (headers.contains_key(&X_FORWARDED_HOST), hop.host) {
            headers.insert(X_FORWARDED_HOST, host);
        }
    } else {
        headers.insert(X_FORWARDED_FOR, ip_value(hop.peer_ip));
        headers.insert(X_FORWARDED_PROTO, proto);
        match hop.host {
            Some(host) => {
                headers.insert(X_FORWARDED_HOST, host);
            }
            None => {
                headers.remove(X_FORWARDED_HOST);
            }
        }
        headers.remove(header::FORWARDED);
    }
    add_via(headers, hop.version);
}

/// An IP address as a header value, written straight into its buffer (no `String` on the way).
fn ip_value(ip: IpAddr) -> HeaderValue {
    use std::fmt::Write as _;
    // The longest IPv6 text form is 45 bytes.
    let mut buf = BytesMut::with_capacity(48);
    let _ = write!(buf, "{ip}");
    HeaderValue::from_maybe_shared(buf.freeze())
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// Append this proxy to `Via` (RFC 9110 §7.6.3), for a message received with `version`.
pub fn add_via(headers: &mut HeaderMap, version: http::Version) {
    append_list(headers, header::VIA, via_value(version));
}

/// `Via`'s entry for this proxy, by the protocol version received (a static value, no
/// allocation).
fn via_value(version: http::Version) -> HeaderValue {
    HeaderValue::from_static(match version {
        http::Version::HTTP_10 => "1.0 sluice",
        http::Version::HTTP_2 => "2 sluice",
        http::Version::HTTP_3 => "3 sluice",
        _ => "1.1 sluice",
    })
}

/// The media type of a `Content-Type` value without its parameters (RFC 9110 §8.3.1: `type "/"
/// subtype`, compared case-insensitively by the callers), e.g. `text/html` of
/// `text/html; charset=utf-8`.
pub fn media_type(content_type: &HeaderValue) -> &[u8] {
    content_type
        .as_bytes()
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii()
}

/// Whether the response is a stream of messages each meant to reach the client as it comes:
/// server-sent events (`text/event-stream`, seed 005) or gRPC (`application/grpc`, with any
/// `+format` or `-web` suffix).
pub fn is_message_stream(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let media_type = media_type(value);
        is_event_stream_type(media_type)
            || media_type
                .get(..b"application/grpc".len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"application/grpc"))
    })
}

/// Whether the response is server-sent events.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    (headers.get(header::CONTENT_TYPE)).is_some_and(|value| is_event_stream_type(media_type(value)))
}

fn is_event_stream_type(media_type: &[u8]) -> bool {
    media_type.eq_ignore_ascii_case(b"text/event-stream")
}

/// Whether the client's `TE` says it accepts trailers (RFC 9110 §10.1.4); read before the
/// hop-by-hop fields go.
pub fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|member| {
            let coding = member.split(|&b| b == b';').next().unwrap_or_default();
            coding.trim_ascii().eq_ignore_ascii_case(b"trailers")
        })
}

/// Send `TE: trailers` upstream, the one `TE` value worth forwarding: trailers pass through
/// sluice's bodies, so a client that accepts them can get the upstream's (gRPC's status lives
/// there). HTTP/2 allows no other value (RFC 9113 §8.2.2); on HTTP/1.1 `TE` is hop-by-hop and
/// its sender names it in `Connection` (RFC 9110 §10.1.4).
pub fn forward_te_trailers(headers: &mut HeaderMap, http1_upstream: bool) {
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if http1_upstream {
        headers.append(header::CONNECTION, HeaderValue::from_static("te"));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn event_streams_are_recognised_with_parameters_and_case() {
        assert!(is_event_stream(&typed("Text/Event-Stream; charset=utf-8")));
        assert!(!is_event_stream(&typed("text/plain")));
        assert!(!is_event_stream(&HeaderMap::new()));
    }

    #[test]
    fn message_streams_are_event_streams_and_grpc() {
        assert!(is_message_stream(&typed(
            " text/event-stream ;charset=utf-8"
        )));
        assert!(is_message_stream(&typed("application/grpc")));
        assert!(is_message_stream(&typed("Application/gRPC+proto")));
        assert!(is_message_stream(&typed("application/grpc-web-text")));
        assert!(!is_message_stream(&typed("application/json")));
        assert!(!is_message_stream(&typed("text/event-streams")));
        assert!(!is_message_stream(&HeaderMap::new()));
        assert_eq!(
            media_type(&HeaderValue::from_static(" text/html ; q=1")),
            b"text/html"
        );
    }

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
            peer_ip: "192.0.2.7".parse().unwrap(),
            trusted: true,
            tls: true,
            host: Some(HeaderValue::from_static("a.test")),
            version: http::Version::HTTP_2,
        };
        add_forwarded(&mut h, hop);
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "a.test");
        assert_eq!(h["via"], "1.1 edge, 2 sluice");
    }

    #[test]
    fn list_fields_on_several_lines_are_joined_in_order() {
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "10.0.0.1".parse().unwrap());
        h.append("x-forwarded-for", "".parse().unwrap());
        h.append("x-forwarded-for", "10.0.0.2, 10.0.0.3".parse().unwrap());
        h.append("via", "1.1 edge".parse().unwrap());
        h.append("via", "1.0 old".parse().unwrap());
        let hop = Hop {
            peer_ip: "2001:db8::7".parse().unwrap(),
            trusted: true,
            tls: false,
            host: None,
            version: http::Version::HTTP_11,
        };
        add_forwarded(&mut h, hop);
        let lines = |name: &str| h.get_all(name).iter().count();
        assert_eq!(lines("x-forwarded-for"), 1);
        assert_eq!(
            h["x-forwarded-for"],
            "10.0.0.1, 10.0.0.2, 10.0.0.3, 2001:db8::7"
        );
        assert_eq!(lines("via"), 1);
        assert_eq!(h["via"], "1.1 edge, 1.0 old, 1.1 sluice");
        assert_eq!(h["x-forwarded-proto"], "http");
    }

    #[test]
    fn a_trusted_proxys_scheme_and_host_are_kept() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.9".parse().unwrap());
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        h.insert("x-forwarded-host", "edge.test".parse().unwrap());
        h.insert("forwarded", "for=203.0.113.9;proto=https".parse().unwrap());
        let hop = Hop {
            peer_ip: "10.0.0.5".parse().unwrap(),
            trusted: true,
            tls: false,
            host: Some(HeaderValue::from_static("inner.test")),
            version: http::Version::HTTP_11,
        };
        add_forwarded(&mut h, hop);
        assert_eq!(h["x-forwarded-for"], "203.0.113.9, 10.0.0.5");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "edge.test");
        assert_eq!(h["forwarded"], "for=203.0.113.9;proto=https");
    }

    #[test]
    fn an_untrusted_peers_forwarding_headers_are_replaced() {
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "6.6.6.6".parse().unwrap());
        h.append("x-forwarded-for", "7.7.7.7".parse().unwrap());
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        h.insert("x-forwarded-host", "forged.test".parse().unwrap());
        h.insert("forwarded", "for=6.6.6.6;proto=https".parse().unwrap());
        let hop = Hop {
            peer_ip: "192.0.2.7".parse().unwrap(),
            trusted: false,
            tls: false,
            host: Some(HeaderValue::from_static("a.test")),
            version: http::Version::HTTP_11,
        };
        add_forwarded(&mut h, hop);
        assert_eq!(h.get_all("x-forwarded-for").iter().count(), 1);
        assert_eq!(h["x-forwarded-for"], "192.0.2.7");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "a.test");
        assert!(!h.contains_key("forwarded"));

        let mut h = HeaderMap::new();
        h.insert("x-forwarded-host", "forged.test".parse().unwrap());
        let hop = Hop {
            peer_ip: "192.0.2.7".parse().unwrap(),
            trusted: false,
            tls: true,
            host: None,
            version: http::Version::HTTP_2,
        };
        add_forwarded(&mut h, hop);
        assert!(!h.contains_key("x-forwarded-host"));
        assert_eq!(h["x-forwarded-proto"], "https");
    }

    #[test]
    fn only_the_trailers_member_of_te_counts() {
        let te = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("te", v.parse().unwrap());
            }
            accepts_trailers(&h)
        };
        assert!(te(&["trailers"]));
        assert!(te(&["gzip;q=0.5", " Trailers ;q=1"]));
        assert!(!te(&["gzip, deflate"]));
        assert!(!te(&["trailersx"]));
        assert!(!te(&[]));
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
