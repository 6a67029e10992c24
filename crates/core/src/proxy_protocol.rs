//! The PROXY protocol's one constant both sides share: the listener's parser (server crate) and
//! the header a group with `send_proxy_protocol` writes (`sluice-upstream`).
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt> §2.2.

/// The 12-byte signature every v2 header starts with: chosen by the spec so that it can never
/// start a v1 header or an HTTP, TLS or SSH client's first bytes.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
