//! Forwarding a request that asks to switch protocols (RFC 9110 §7.8), and the switch itself.
//!
//! - HTTP/1.1 `Upgrade` (WebSocket, RFC 6455 §4, and whatever else the route's `upgrade`
//!   allows): `Upgrade`, narrowed to the protocols the route allows, and `Connection: upgrade`
//!   are forwarded; everything else of the handshake (`Sec-WebSocket-*`) is end to end and passes
//!   untouched. A request whose protocols the route does not allow goes upstream as an ordinary
//!   request, its `Upgrade` dropped like any hop-by-hop field: a server may always ignore
//!   `Upgrade` (§7.8), and that is what sluice then does. `h2c` never passes (it switches one
//!   connection to HTTP/2: hop-by-hop by nature).
//! - HTTP/2 extended CONNECT (RFC 8441 §4, `:protocol`): HTTP/2 has no `Upgrade`, so the request
//!   becomes the HTTP/1.1 handshake the upstream expects: `GET` with `Upgrade: <protocol>`,
//!   `Connection: upgrade` and, for WebSocket, a `Sec-WebSocket-Key` made here (HTTP/2 clients
//!   send none, RFC 8441 §5) and a `Sec-WebSocket-Version: 13` if the client sent none. The
//!   upstream's `101` is checked (its `Sec-WebSocket-Accept` must match our key, RFC 6455 §4.1)
//!   and answered with `200` (RFC 8441 §5). A protocol the route does not allow is answered
//!   `501`: unlike an `Upgrade` header, a CONNECT cannot be ignored.
//!
//! A `101` is accepted only for a request that asked to switch, and only to a protocol it
//! offered; anything else is a 502. Any other answer to an upgrade request is passed back as a
//! normal response, except a 2xx to an extended CONNECT, which would tell the HTTP/2 client the
//! tunnel is open when the upstream never switched (502).
//!
//! Only HTTP/1.1 upstream groups can switch: an `http2 = true` group drops `Upgrade` (HTTP/2
//! forbids it, RFC 9113 §8.2.2), so upgrades through it are not forwarded.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use sluice_config::UpgradeProtocols;
use sluice_core::{Body, Error, ErrorKind, Side};
use sluice_upstream::InFlight;

/// RFC 6455 §1.3: appended to the key before hashing.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A request on its way to switch protocols.
pub(super) struct Switch {
    /// The client's connection, handed over by hyper once our answer has been sent.
    pub downstream: OnUpgrade,
    /// What the client's connection told the request (shutdown, idle watchdog).
    pub link: Option<crate::features::tunnel::ConnLink>,
    kind: Kind,
}

enum Kind {
    /// HTTP/1.1 `Upgrade`: its members the route allows, as forwarded.
    Http1 { offered: HeaderValue },
    /// HTTP/2 extended CONNECT, forwarded as an HTTP/1.1 `Upgrade` to `protocol`; `key` is the
    /// `Sec-WebSocket-Key` sent for WebSocket.
    Http2 {
        protocol: HeaderValue,
        key: Option<String>,
    },
}

/// What to do with a request, as far as switching goes.
pub(super) enum Prepared {
    /// Not an upgrade request (or one the route ignores): forward as usual.
    Ordinary,
    /// Forward it as an upgrade.
    Switch(Switch),
    /// An extended CONNECT this route does not forward: answer this.
    Refused(Response<Body>),
}

impl Switch {
    /// The protocol(s) switched to, for log lines.
    pub fn protocol(&self) -> &str {
        let value = match &self.kind {
            Kind::Http1 { offered } => offered,
            Kind::Http2 { protocol, .. } => protocol,
        };
        value.to_str().unwrap_or("?")
    }

    /// Whether the client came over HTTP/2 (and must get 200, not 101).
    fn http2(&self) -> bool {
        matches!(self.kind, Kind::Http2 { .. })
    }
}

/// Look at `parts` (before its hop-by-hop fields are removed) and, for an upgrade this route
/// forwards, turn an extended CONNECT into the HTTP/1.1 handshake. `http1_upstream` is false
/// for an HTTP/2 group.
pub(super) fn prepare(
    parts: &mut http::request::Parts,
    allowed: &UpgradeProtocols,
    http1_upstream: bool,
) -> Prepared {
    let requested = crate::features::tunnel::asks_to_switch(
        parts.version,
        &parts.method,
        &parts.headers,
        &parts.extensions,
    );
    if !requested {
        return Prepared::Ordinary;
    }
    if parts.version == http::Version::HTTP_2 {
        return prepare_connect(parts, allowed, http1_upstream);
    }
    if !http1_upstream {
        return Prepared::Ordinary;
    }
    let members: Vec<&str> = parts
        .headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|m| allowed.allows(m))
        .collect();
    if members.is_empty() {
        return Prepared::Ordinary;
    }
    let Ok(offered) = HeaderValue::from_str(&members.join(", ")) else {
        return Prepared::Ordinary;
    };
    match parts.extensions.remove::<OnUpgrade>() {
        Some(downstream) => Prepared::Switch(Switch {
            downstream,
            link: parts.extensions.remove(),
            kind: Kind::Http1 { offered },
        }),
        // The connection cannot hand itself over (not served with upgrades): stay HTTP.
        None => Prepared::Ordinary,
    }
}

/// An extended CONNECT: refused unless the route allows its protocol, else rewritten as the
/// HTTP/1.1 handshake (RFC 8441 §5).
fn prepare_connect(
    parts: &mut http::request::Parts,
    allowed: &UpgradeProtocols,
    http1_upstream: bool,
) -> Prepared {
    let protocol = parts
        .extensions
        .remove::<hyper::ext::Protocol>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let refuse = |why: String| {
        Prepared::Refused(crate::shared::error_page(
            StatusCode::NOT_IMPLEMENTED,
            Some(&why),
        ))
    };
    if !allowed.allows(&protocol) {
        return refuse(format!("this route does not forward `{protocol}`"));
    }
    if !http1_upstream {
        return refuse(format!(
            "`{protocol}` cannot be forwarded to this HTTP/2 upstream group"
        ));
    }
    let (Ok(value), Some(downstream)) = (
        HeaderValue::from_str(&protocol),
        parts.extensions.remove::<OnUpgrade>(),
    ) else {
        return refuse(format!("`{protocol}` cannot be forwarded"));
    };
    parts.method = http::Method::GET;
    let key = protocol.eq_ignore_ascii_case("websocket").then(|| {
        let key = websocket_key();
        if let Ok(v) = HeaderValue::from_str(&key) {
            parts.headers.insert(header::SEC_WEBSOCKET_KEY, v);
        }
        parts
            .headers
            .entry(header::SEC_WEBSOCKET_VERSION)
            .or_insert(HeaderValue::from_static("13"));
        key
    });
    Prepared::Switch(Switch {
        downstream,
        link: parts.extensions.remove(),
        kind: Kind::Http2 {
            protocol: value,
            key,
        },
    })
}

impl super::ProxyHandler {
    /// The upstream switched protocols: answer the client (101, or 200 to HTTP/2) and splice
    /// the two connections in a tunnel of their own once hyper hands them over. The upstream
    /// connection leaves hyper's pool for good: an upgraded connection is never reused.
    pub(super) fn switch(
        &self,
        switch: Switch,
        response: Response<Incoming>,
        guard: InFlight,
    ) -> Result<Response<Body>, Error> {
        let protocol = switch.protocol().to_owned();
        let (mut parts, upstream) = switched(&switch, response)?;
        sluice_http::headers::add_via(&mut parts.headers, parts.version);
        sluice_http::headers::apply_edits(&mut parts.headers, &self.route.response_headers);
        let (route, metrics) = match &self.tunnels {
            Some((route, metrics)) => (route.clone(), Some(metrics.clone())),
            None => (String::new(), None),
        };
        if let Some(link) = &switch.link {
            // Before the 101 goes out: from now on the client's bytes are the tunnel's, never a
            // request head for the header timer to time.
            link.conn.switched();
        }
        crate::features::tunnel::Tunnel {
            downstream: switch.downstream,
            upstream,
            idle_timeout: self.route.upgrade.idle_timeout,
            metrics,
            link: switch.link,
            route,
            protocol,
            hold: Box::new(guard),
        }
        .spawn();
        Ok(Response::from_parts(parts, Body::Empty))
    }
}

/// Put the upgrade back on the request going upstream, after hop-by-hop removal.
pub(super) fn forward_headers(switch: &Switch, headers: &mut HeaderMap) {
    let upgrade = match &switch.kind {
        Kind::Http1 { offered } => offered.clone(),
        Kind::Http2 { protocol, .. } => protocol.clone(),
    };
    headers.insert(header::UPGRADE, upgrade);
    headers.append(header::CONNECTION, HeaderValue::from_static("upgrade"));
}

/// The upstream answered `101`: check it switched to what was asked, and make the client's
/// answer (101 for HTTP/1.1, 200 for HTTP/2) from its head. Returns that head and the
/// upstream's connection, handed over by hyper.
pub(super) fn switched(
    switch: &Switch,
    mut response: Response<Incoming>,
) -> Result<(http::response::Parts, OnUpgrade), Error> {
    let upstream = hyper::upgrade::on(&mut response);
    let (mut parts, _empty) = response.into_parts();
    let bad = |what: String| Error::new(ErrorKind::BadGateway, Side::Upstream, what);
    let switched_to = parts.headers.get(header::UPGRADE).cloned();
    // RFC 9110 §7.8: the 101 names the protocol(s) switched to, which the client offered.
    let offered = match &switch.kind {
        Kind::Http1 { offered } => offered,
        Kind::Http2 { protocol, .. } => protocol,
    };
    let fits = switched_to.as_ref().is_some_and(|to| {
        let offered = names(offered);
        !names(to).is_empty() && names(to).iter().all(|n| offered.contains(n))
    });
    if !fits {
        return Err(bad(format!(
            "the upstream switched to {:?}, not to what was asked ({offered:?})",
            switched_to
        )));
    }
    if let Kind::Http2 { key: Some(key), .. } = &switch.kind {
        let expected = websocket_accept(key);
        let accept = parts.headers.get(header::SEC_WEBSOCKET_ACCEPT);
        if accept.is_none_or(|a| a.as_bytes() != expected.as_bytes()) {
            return Err(bad(
                "the upstream's Sec-WebSocket-Accept does not match the key sent".into(),
            ));
        }
    }
    sluice_http::headers::remove_hop_by_hop(&mut parts.headers);
    if switch.http2() {
        // RFC 8441 §5: the HTTP/2 client sent no key, so it gets no accept; 200 opens the stream.
        parts.headers.remove(header::SEC_WEBSOCKET_ACCEPT);
        parts.status = StatusCode::OK;
    } else if let Some(to) = switched_to {
        parts.headers.insert(header::UPGRADE, to);
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    Ok((parts, upstream))
}

/// An upgrade request got an answer that is not `101`: whether it may be passed back. A 2xx to
/// an extended CONNECT would open a tunnel the upstream never agreed to (RFC 9110 §9.3.6).
pub(super) fn check_refusal(switch: &Switch, status: StatusCode) -> Result<(), Error> {
    if switch.http2() && status.is_success() {
        return Err(Error::new(
            ErrorKind::BadGateway,
            Side::Upstream,
            format!("the upstream answered {status} instead of switching protocols"),
        ));
    }
    Ok(())
}

/// The lowercase protocol names (versions dropped) of an `Upgrade` value.
fn names(value: &HeaderValue) -> Vec<String> {
    value
        .to_str()
        .unwrap_or_default()
        .split(',')
        .map(|m| {
            m.split('/')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64 (RFC 6455 §4.1).
fn websocket_key() -> String {
    use ring::rand::SecureRandom as _;
    let mut nonce = [0u8; 16];
    // The system's random source failing is not something to serve requests through; a fixed
    // nonce still yields a valid handshake (the key only guards against confused caches).
    let _ = ring::rand::SystemRandom::new().fill(&mut nonce);
    STANDARD.encode(nonce)
}

/// The `Sec-WebSocket-Accept` a server answers `key` with (RFC 6455 §4.2.2).
fn websocket_accept(key: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(WEBSOCKET_GUID.as_bytes());
    STANDARD.encode(ctx.finish().as_ref())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accept_matches_the_rfc_example() {
        // RFC 6455 §1.3.
        assert_eq!(
            websocket_accept("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let key = websocket_key();
        assert_eq!(STANDARD.decode(&key).unwrap().len(), 16);
        assert_ne!(key, websocket_key());
    }

    #[test]
    fn upgrade_names_drop_versions_and_case() {
        let v = HeaderValue::from_static("WebSocket, foo/2 , ");
        assert_eq!(names(&v), ["websocket", "foo"]);
    }
}
