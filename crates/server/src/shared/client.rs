//! What the connection knows about the client, handed to every request on it, and who the
//! client is once the listener's `trusted_proxies` have had their say.
//!
//! A module of its own, at the bottom of the server's module graph: the connection creates it,
//! the request context carries it, and the proxy reads it (for `X-Forwarded-*` and hash
//! balancing) without any of them importing the others.
//!
//! The client address ([`Client::ip`]) follows nginx's realip module with `set_real_ip_from`
//! and `real_ip_recursive on`: when the peer is a trusted proxy, `X-Forwarded-For` is read from
//! the right, skipping trusted addresses, and the first untrusted one is the client (the
//! leftmost, when every one is trusted). Anything a client wrote further left is not believed.
//! From an untrusted peer the header is ignored: the peer is the client. Logs, rate limits and
//! hash balancing use that address; `X-Forwarded-For` sent upstream still names the peer as the
//! hop this request came from.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use sluice_config::TrustedProxies;

const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

/// The client of one connection, then of one request. `Copy`: passed by value into every
/// request.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    /// The peer of the connection (the PROXY protocol header's source, on listeners that take
    /// one).
    pub remote: SocketAddr,
    /// The address the client connected to (ours); a PROXY header sent upstream names it.
    pub local: SocketAddr,
    /// The connection is TLS (for `X-Forwarded-Proto`).
    pub tls: bool,
    /// The client's address: the peer's, or, when the peer is a trusted proxy, the one its
    /// `X-Forwarded-For` names (see the module docs). Set per request by [`Client::resolve`].
    pub ip: IpAddr,
    /// The peer is one of the listener's `trusted_proxies`: its `X-Forwarded-*` are kept.
    pub trusted_peer: bool,
}

impl Client {
    /// A connection's client, before any request: nobody is trusted yet.
    pub fn new(remote: SocketAddr, local: SocketAddr, tls: bool) -> Self {
        Self {
            remote,
            local,
            tls,
            ip: remote.ip(),
            trusted_peer: false,
        }
    }

    /// This client for a request with `headers`, on a listener trusting `trusted`.
    pub fn resolve(self, trusted: &TrustedProxies, headers: &HeaderMap) -> Self {
        let peer = self.remote.ip();
        let mut client = Self {
            ip: peer,
            trusted_peer: false,
            ..self
        };
        if trusted.is_empty() || !trusted.contains(peer) {
            return client;
        }
        client.trusted_peer = true;
        // Several lines are one list (RFC 9110 §5.3): the last line holds the rightmost hops.
        for line in headers.get_all(X_FORWARDED_FOR).iter().rev() {
            let Ok(text) = line.to_str() else {
                return client;
            };
            for item in text.rsplit(',').map(str::trim).filter(|i| !i.is_empty()) {
                // An entry that is not an address ends the walk: what lies left of it is
                // unreadable, and the last trusted hop is the best answer.
                let Some(ip) = forwarded_ip(item) else {
                    return client;
                };
                client.ip = ip;
                if !trusted.contains(ip) {
                    return client;
                }
            }
        }
        client
    }
}

/// An `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.7:4711`,
/// `[2001:db8::7]:443`) or in brackets, as some proxies write them.
fn forwarded_ip(item: &str) -> Option<IpAddr> {
    if let Ok(ip) = item.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = item.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    item.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn trusted(nets: &[&str]) -> TrustedProxies {
        TrustedProxies(nets.iter().map(|n| n.parse().unwrap()).collect())
    }

    fn resolve(peer: &str, trusted_nets: &[&str], xff: &[&str]) -> (String, bool) {
        let mut headers = HeaderMap::new();
        for line in xff {
            headers.append("x-forwarded-for", line.parse().unwrap());
        }
        let client = Client::new(
            format!("{peer}:4000").parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
            false,
        )
        .resolve(&trusted(trusted_nets), &headers);
        (client.ip.to_string(), client.trusted_peer)
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        assert_eq!(
            resolve("192.0.2.1", &[], &["1.1.1.1"]),
            ("192.0.2.1".into(), false)
        );
        assert_eq!(
            resolve("192.0.2.1", &["10.0.0.0/8"], &["1.1.1.1"]),
            ("192.0.2.1".into(), false)
        );
    }

    #[test]
    fn the_rightmost_untrusted_address_is_the_client() {
        let lb = ["10.0.0.0/8"];
        assert_eq!(
            resolve("10.0.0.5", &lb, &["203.0.113.9"]),
            ("203.0.113.9".into(), true)
        );
        // The client forged an entry on the left: the first untrusted from the right wins.
        assert_eq!(
            resolve("10.0.0.5", &lb, &["6.6.6.6, 203.0.113.9, 10.0.0.4"]),
            ("203.0.113.9".into(), true)
        );
        // Lines in order, the last one rightmost.
        assert_eq!(
            resolve("10.0.0.5", &lb, &["6.6.6.6", "203.0.113.9", "10.1.1.1"]),
            ("203.0.113.9".into(), true)
        );
        // Every hop trusted: the leftmost.
        assert_eq!(
            resolve("10.0.0.5", &lb, &["10.9.9.9, 10.0.0.4"]),
            ("10.9.9.9".into(), true)
        );
        // No header: the peer.
        assert_eq!(resolve("10.0.0.5", &lb, &[]), ("10.0.0.5".into(), true));
    }

    #[test]
    fn ports_brackets_and_garbage() {
        let lb = ["10.0.0.0/8", "2001:db8::/32"];
        assert_eq!(
            resolve("10.0.0.5", &lb, &["203.0.113.9:4711"]),
            ("203.0.113.9".into(), true)
        );
        assert_eq!(
            resolve("10.0.0.5", &lb, &["[2001:db9::7]:443"]),
            ("2001:db9::7".into(), true)
        );
        assert_eq!(
            resolve("10.0.0.5", &lb, &["[2001:db9::7]"]),
            ("2001:db9::7".into(), true)
        );
        // Unreadable: stop at the last trusted hop reached.
        assert_eq!(
            resolve("10.0.0.5", &lb, &["203.0.113.9, unknown, 10.0.0.3"]),
            ("10.0.0.3".into(), true)
        );
        assert_eq!(
            resolve("10.0.0.5", &lb, &["unknown"]),
            ("10.0.0.5".into(), true)
        );
    }
}
