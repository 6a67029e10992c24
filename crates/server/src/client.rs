//! What the connection knows about the client, handed to every request on it.
//!
//! A module of its own, at the bottom of the server's module graph: the connection creates it,
//! the request context carries it, and the proxy reads it (for `X-Forwarded-*` and hash
//! balancing) without any of them importing the others.

use std::net::SocketAddr;

/// The client of one connection. `Copy`: a few words, passed by value into every request.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub remote: SocketAddr,
    /// The address the client connected to (ours); a PROXY header sent upstream names it.
    pub local: SocketAddr,
    /// The connection is TLS (for `X-Forwarded-Proto`).
    pub tls: bool,
}
