//! What an upgraded request knows of the connection it came in on, and whether a request asks
//! to switch protocols at all.
//!
//! The connection (`net::conn`) inserts a [`ConnLink`] into the extensions of each request that
//! [`requested`] says asks to switch; the proxy and the tunnel (`features::tunnel`) read it. It
//! sits here, below both, so that the connection layer knows no feature and the tunnel knows no
//! connection type: the connection's state is seen through [`LinkedConnection`].

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use http::{Request, header};
use tokio::sync::watch;

/// What a tunnel may do with the connection it came in on (implemented by the connection
/// layer's `net::idle::ConnState`).
pub trait LinkedConnection: Send + Sync {
    /// The connection's count of busy requests: its idle watchdog leaves it open while > 0.
    fn busy(&self) -> Arc<AtomicU64>;
    /// The connection switched protocols: its HTTP header timer stops.
    fn switched(&self);
}

/// What a connection hands a request that may become a tunnel (inserted into its extensions by
/// `conn`, only for requests [`requested`] says ask to switch).
#[derive(Clone)]
pub struct ConnLink {
    /// Flips to `true` when the server shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// The connection's state: its busy count (its idle watchdog leaves it open while > 0),
    /// the switch that stops its header timer, and what it holds for its life (its
    /// `max_connections` permits, its place in `sluice_connections_open`, its drain guard),
    /// which the tunnel keeps until it ends.
    pub conn: Arc<dyn LinkedConnection>,
}

/// Whether `req` asks to switch protocols: an HTTP/1.1 request with `Upgrade` and the `upgrade`
/// connection option (RFC 9110 §7.8: without the option, and in HTTP/1.0, `Upgrade` is
/// ignored), or an HTTP/2 extended CONNECT (RFC 8441 §4: a `:protocol`).
pub fn requested<B>(req: &Request<B>) -> bool {
    asks_to_switch(req.version(), req.method(), req.headers(), req.extensions())
}

/// [`requested`], for a request taken apart.
pub fn asks_to_switch(
    version: http::Version,
    method: &http::Method,
    headers: &http::HeaderMap,
    extensions: &http::Extensions,
) -> bool {
    match version {
        http::Version::HTTP_11 => {
            headers.contains_key(header::UPGRADE)
                && has_token(headers, header::CONNECTION, "upgrade")
        }
        http::Version::HTTP_2 => {
            method == http::Method::CONNECT && extensions.get::<hyper::ext::Protocol>().is_some()
        }
        _ => false,
    }
}

/// Whether the comma-separated list field `name` has `token` (case-insensitive), on any line.
pub fn has_token(headers: &http::HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(version: http::Version, headers: &[(&str, &str)]) -> Request<()> {
        let mut req = Request::builder().version(version);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(()).unwrap()
    }

    #[test]
    fn an_upgrade_needs_the_connection_option_and_http_1_1() {
        use http::Version;
        let ws = [
            ("upgrade", "websocket"),
            ("connection", "keep-alive, Upgrade"),
        ];
        assert!(requested(&request(Version::HTTP_11, &ws)));
        assert!(!requested(&request(Version::HTTP_10, &ws)), "RFC 9110 §7.8");
        assert!(!requested(&request(
            Version::HTTP_11,
            &[("upgrade", "websocket")]
        )));
        assert!(!requested(&request(
            Version::HTTP_11,
            &[("connection", "upgrade")]
        )));
        let mut connect = request(Version::HTTP_2, &[]);
        *connect.method_mut() = http::Method::CONNECT;
        assert!(!requested(&connect), "a plain CONNECT is not an upgrade");
        connect
            .extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        assert!(requested(&connect));
    }
}
