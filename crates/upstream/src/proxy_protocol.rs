//! The PROXY protocol v2 header a group with `send_proxy_protocol = true` writes at the start of
//! every connection (before TLS), as HAProxy's `send-proxy-v2` does: the server then sees the
//! client's address as if the client had connected to it.
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt> §2.2. Only what we send
//! is written here: `PROXY` with TCP over IPv4 or IPv6 for a client's connection, `LOCAL` for
//! connections the proxy makes for itself (health checks, §2.2: "the connection was established
//! on purpose by the proxy without being relayed"). The encoder is a few lines of fixed layout;
//! the crates that exist for it parse too and would add more than they save. The listener's
//! parser (in the server crate) reads these headers back in its tests.

use std::net::{IpAddr, SocketAddr};

use sluice_core::proxy_protocol::V2_SIGNATURE;

/// The addresses of the client's connection: where it came from and where it connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientAddresses {
    pub source: SocketAddr,
    pub destination: SocketAddr,
}

/// The v2 header for a relayed client connection, or `LOCAL` for `None`.
pub fn header(client: Option<ClientAddresses>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 36);
    out.extend_from_slice(&V2_SIGNATURE);
    let Some(client) = client else {
        // Version 2, command LOCAL; family UNSPEC; no addresses.
        out.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
        return out;
    };
    // Version 2, command PROXY.
    out.push(0x21);
    let (source, destination) = (client.source.ip(), client.destination.ip());
    match (source, destination) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // TCP over IPv4: 4 + 4 address bytes and two ports.
            out.extend_from_slice(&[0x11, 0x00, 12]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        _ => {
            // TCP over IPv6; a v4 address beside a v6 one is written v4-mapped, since one
            // header has one family.
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            out.extend_from_slice(&[0x21, 0x00, 36]);
            out.extend_from_slice(&v6(source).octets());
            out.extend_from_slice(&v6(destination).octets());
        }
    }
    out.extend_from_slice(&client.source.port().to_be_bytes());
    out.extend_from_slice(&client.destination.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(source: &str, destination: &str) -> ClientAddresses {
        ClientAddresses {
            source: source.parse().unwrap(),
            destination: destination.parse().unwrap(),
        }
    }

    #[test]
    fn ipv4_layout() {
        let h = header(Some(addresses("192.0.2.1:56324", "10.0.0.1:443")));
        assert_eq!(&h[..12], &V2_SIGNATURE);
        assert_eq!(h[12..16], [0x21, 0x11, 0, 12]);
        assert_eq!(h[16..20], [192, 0, 2, 1]);
        assert_eq!(h[20..24], [10, 0, 0, 1]);
        assert_eq!(h[24..26], 56324u16.to_be_bytes());
        assert_eq!(h[26..28], 443u16.to_be_bytes());
        assert_eq!(h.len(), 28);
    }

    #[test]
    fn ipv6_and_mixed_families() {
        let h = header(Some(addresses("[2001:db8::1]:1000", "[2001:db8::2]:80")));
        assert_eq!(h[12..16], [0x21, 0x21, 0, 36]);
        assert_eq!(h.len(), 16 + 36);
        let mixed = header(Some(addresses("192.0.2.1:1000", "[::1]:80")));
        assert_eq!(mixed[12..16], [0x21, 0x21, 0, 36]);
        let mapped: std::net::Ipv6Addr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(mixed[16..32], mapped.octets());
    }

    #[test]
    fn local_has_no_addresses() {
        let h = header(None);
        assert_eq!(h[12..], [0x20, 0x00, 0, 0]);
    }
}
