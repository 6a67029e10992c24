//! `[admin]`: the listener serving Prometheus metrics at `/metrics`. Its address must not be one
//! a `[[listeners]]` entry already binds, or one of the two binds would fail at start-up.

use std::net::{IpAddr, SocketAddr};

use super::Cx;
use super::listeners::listen_address;
use crate::model::{Admin, Listener};
use crate::path::KeyPath;
use crate::raw::RawAdmin;

/// The admin listener, or `None` when there is no `[admin]` table (or it was reported).
pub(super) fn admin(
    cx: &mut Cx<'_>,
    raw: Option<RawAdmin>,
    listeners: &[Listener],
) -> Option<Admin> {
    let raw = raw?;
    let path = KeyPath::root().key("admin");
    let Some(value) = &raw.address else {
        let hint = r#"e.g. address = "127.0.0.1:9901" (keep it private: it serves metrics)"#;
        cx.r.missing(&path, "address", Some(hint.into()));
        return None;
    };
    let key = path.key("address");
    let address = listen_address(cx, &key, value)?;
    if let Some(listener) = listeners.iter().find(|l| overlaps(address, l.address)) {
        let message = if listener.address == address {
            format!("listener `{}` already listens on {address}", listener.name)
        } else {
            format!(
                "the admin address {address} overlaps listener `{}` ({})",
                listener.name, listener.address
            )
        };
        let port = if address.port() == 9901 { 9902 } else { 9901 };
        let hint = format!(
            r#"the admin listener needs a port of its own, e.g. "{}""#,
            SocketAddr::new(address.ip(), port)
        );
        cx.r.error(&key, Some(value.span()), message, Some(hint));
        return None;
    }
    Some(Admin { address })
}

/// Whether binding both addresses would clash: same port (not 0, which the system picks) and the
/// same IP, or one of them a wildcard that covers the other.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || covers(a.ip(), b.ip()) || covers(b.ip(), a.ip()))
}

/// `0.0.0.0` covers every IPv4 address; `[::]` (dual-stack by default on Linux) covers all.
fn covers(wildcard: IpAddr, other: IpAddr) -> bool {
    wildcard.is_unspecified() && (wildcard.is_ipv6() || other.is_ipv4())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn clashes_are_same_port_and_covering_ips() {
        assert!(overlaps(a("127.0.0.1:9901"), a("127.0.0.1:9901")));
        assert!(overlaps(a("127.0.0.1:9901"), a("0.0.0.0:9901")));
        assert!(overlaps(a("[::]:9901"), a("127.0.0.1:9901")));
        assert!(!overlaps(a("0.0.0.0:9901"), a("[::1]:9901")));
        assert!(!overlaps(a("127.0.0.1:9901"), a("127.0.0.2:9901")));
        assert!(!overlaps(a("127.0.0.1:9901"), a("127.0.0.1:9902")));
        assert!(!overlaps(a("127.0.0.1:0"), a("127.0.0.1:0")));
    }
}
