//! `[[listeners]]`: addresses, protocols, limits and TLS, then the checks across listeners
//! (unique names and addresses, at least one listener).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::Cx;
use super::address::parse_listen_address;
use crate::model::{Http3, Listener, ListenerLimits, Protocols, TrustedProxies};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawListener, Scalar};

/// hyper refuses an HTTP/1 read buffer smaller than this, and a header block must fit in it.
const MIN_HEADER_SIZE: u64 = 8 * 1024;

/// The valid listeners, and the names of all of them (valid or not) for routes to refer to.
/// `trusted` is `[server]`'s `trusted_proxies`, for listeners without their own (an empty list
/// of their own trusts nobody on that listener).
pub(super) fn listeners(
    cx: &mut Cx<'_>,
    raw: Vec<RawListener>,
    trusted: &TrustedProxies,
) -> (Vec<Listener>, Vec<String>) {
    let root = KeyPath::root().key("listeners");
    if raw.is_empty() {
        let hint = r#"add a [[listeners]] table, e.g. address = "127.0.0.1:8080""#;
        let message = "no listeners: sluice would accept no connections";
        cx.r.error(&root, None, message, Some(hint.into()));
    }
    let mut valid = Vec::new();
    let mut identities = Vec::new();
    for (i, raw) in raw.iter().enumerate() {
        let path = root.index(i);
        let address = address(cx, &path, raw);
        let name = name(cx, &path, raw);
        let protocols = protocols(cx, &path, raw);
        let limits = limits(cx, &path, raw);
        let mut tls = super::tls::tls(cx, &path.key("tls"), raw.tls.as_ref());
        super::acme::listed_names(cx, &path, raw.acme_names.as_ref(), tls.as_mut());
        let session_ticket_keys = super::tls::ticket_keys(cx, &path.key("tls"), raw.tls.as_ref());
        let proxy_protocol = proxy_protocol(cx, &path, raw);
        let trusted_proxies = raw
            .trusted_proxies
            .as_ref()
            .map(|v| super::trusted::trusted_proxies(cx, &path.key("trusted_proxies"), v))
            .unwrap_or_else(|| trusted.clone());
        let http3 = http3(cx, &path, raw, protocols, tls.is_some(), proxy_protocol);
        if let Some(address) = address {
            let name = name.clone();
            valid.push(Listener {
                name,
                address,
                protocols,
                tls,
                limits,
                proxy_protocol,
                trusted_proxies,
                session_ticket_keys,
                http3,
            });
        }
        identities.push(Identity { name, raw, address });
    }
    report_duplicates(cx, &root, &identities);
    (valid, identities.into_iter().map(|id| id.name).collect())
}

/// What must be unique about a listener.
struct Identity<'a> {
    name: String,
    raw: &'a RawListener,
    address: Option<SocketAddr>,
}

/// Each later listener reusing an address or a name is reported, pointing at the first.
fn report_duplicates(cx: &mut Cx<'_>, root: &KeyPath, identities: &[Identity<'_>]) {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut addresses: HashMap<SocketAddr, usize> = HashMap::new();
    for (i, id) in identities.iter().enumerate() {
        let path = root.index(i);
        let mut reported = false;
        // Port 0 asks the OS for a fresh port each time, so those never clash.
        if let (Some(address), Some(value)) = (id.address, &id.raw.address)
            && address.port() != 0
            && let Some(&first) = addresses.get(&address)
        {
            let hint = format!(
                "listeners[{first}] already listens there; each listener needs its own address"
            );
            let message = format!("address {address} is used by two listeners");
            cx.r.error(
                &path.key("address"),
                Some(value.span()),
                message,
                Some(hint),
            );
            reported = true;
        }
        if let Some(address) = id.address {
            addresses.entry(address).or_insert(i);
        }
        if id.name.is_empty() {
            continue;
        }
        // A defaulted name is the address: a duplicate one was just reported as such.
        if let Some(&first) = names.get(id.name.as_str()).filter(|_| !reported) {
            let span = id.raw.name.as_ref().map(|n| n.span());
            let hint = format!("listeners[{first}] is already called that; names must be unique");
            let message = format!("listener name `{}` is used twice", id.name);
            cx.r.error(&path.key("name"), span, message, Some(hint));
        }
        names.entry(id.name.as_str()).or_insert(i);
    }
}

fn address(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawListener) -> Option<SocketAddr> {
    let Some(value) = &raw.address else {
        cx.r.missing(
            path,
            "address",
            Some(r#"e.g. address = "127.0.0.1:8080""#.into()),
        );
        return None;
    };
    listen_address(cx, &path.key("address"), value)
}

/// An address to listen on (a listener's, or the admin one's); `None` (reported) when bad.
pub(super) fn listen_address(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &toml::Spanned<Scalar>,
) -> Option<SocketAddr> {
    let result = match value.get_ref() {
        Scalar::Str(text) => parse_listen_address(text),
        Scalar::Int(port) => Err((
            format!("expected an address string, found integer `{port}`"),
            Some(format!(
                r#"write "127.0.0.1:{port}" (this machine) or "0.0.0.0:{port}" (all interfaces)"#
            )),
        )),
        other => Err((
            format!("expected an address string, found {}", other.describe()),
            None,
        )),
    };
    result
        .map_err(|(message, hint)| cx.r.error(path, Some(value.span()), message, hint))
        .ok()
}

/// The explicit name, or the address as written.
fn name(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawListener) -> String {
    if let Some(name) = &raw.name {
        return cx
            .non_empty(&path.key("name"), name, "a listener name")
            .unwrap_or_default();
    }
    match raw.address.as_ref().map(|a| a.get_ref()) {
        Some(Scalar::Str(text)) => text.trim().to_owned(),
        Some(other) => other.describe(),
        None => String::new(),
    }
}

fn protocols(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawListener) -> Protocols {
    let Some(value) = &raw.protocols else {
        return Protocols::default();
    };
    let path = path.key("protocols");
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = r#"write ["http/1.1", "h2"], or leave `protocols` out for both"#;
        cx.r.error(
            &path,
            Some(value.span()),
            "a listener needs at least one protocol",
            Some(hint.into()),
        );
    }
    let mut protocols = Protocols {
        http1: false,
        http2: false,
        http3: false,
    };
    for item in &items {
        match item.get_ref().as_str() {
            "http/1.1" => protocols.http1 = true,
            "h2" => protocols.http2 = true,
            "h3" => protocols.http3 = true,
            other => {
                let message = format!("unknown protocol `{other}`");
                cx.r.error(
                    &path,
                    Some(item.span()),
                    message,
                    Some(protocol_hint(other)),
                );
            }
        }
    }
    protocols
}

/// The usual other spellings of the two protocol names (their ALPN ids are the canonical ones).
fn protocol_hint(other: &str) -> String {
    let lower = other.to_ascii_lowercase();
    match lower.as_str() {
        "h2c" => {
            r#"write "h2": without TLS it is served as h2c (HTTP/2 by prior knowledge)"#.into()
        }
        "http/2" | "http2" | "http/2.0" | "h2" => r#"write "h2""#.into(),
        "h1" | "http1" | "http/1" | "http1.1" | "http/1.1" | "http/1.0" | "http1.0" => {
            r#"write "http/1.1""#.into()
        }
        "http/3" | "http3" | "http/3.0" | "quic" => r#"write "h3""#.into(),
        _ => r#"the protocols are "http/1.1", "h2" and "h3""#.into(),
    }
}

/// The HTTP/3 side of a listener: `h3` needs TLS (QUIC is TLS 1.3 inside, RFC 9001) and a
/// listener without a PROXY protocol header (it is a TCP preamble; QUIC is UDP), and with TCP
/// protocols beside it (the UDP socket shares their address; an h3-only listener would leave
/// clients nothing to learn `Alt-Svc` from). `alt_svc_max_age` is read either way, so a typo is
/// reported even while h3 is off.
fn http3(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawListener,
    protocols: Protocols,
    tls: bool,
    proxy_protocol: bool,
) -> Http3 {
    let default = Http3::default();
    let max_age = cx.duration(
        &path.key("alt_svc_max_age"),
        raw.alt_svc_max_age.as_ref(),
        default.alt_svc_max_age.unwrap_or_default(),
        true,
    );
    if protocols.http3 {
        let span = raw.protocols.as_ref().map(|p| p.span());
        let key = path.key("protocols");
        if !tls {
            let hint =
                "add `tls = \"self-signed\"` or a certificate: QUIC always runs over TLS 1.3";
            cx.r.error(
                &key,
                span.clone(),
                "`h3` needs TLS on the listener",
                Some(hint.into()),
            );
        }
        if proxy_protocol {
            let hint =
                "the PROXY protocol header is a TCP preamble; serve h3 on a listener without it";
            cx.r.error(
                &key,
                span.clone(),
                "`h3` cannot be combined with `proxy_protocol = true`",
                Some(hint.into()),
            );
        }
        if !protocols.http1 && !protocols.http2 {
            let hint = r#"write ["http/1.1", "h2", "h3"]: clients learn of h3 from the TCP side's Alt-Svc"#;
            cx.r.error(
                &key,
                span,
                "`h3` needs \"http/1.1\" or \"h2\" beside it",
                Some(hint.into()),
            );
        }
    }
    Http3 {
        alt_svc_max_age: Some(max_age).filter(|d| !d.is_zero()),
    }
}

/// `proxy_protocol = true | false`; a quoted or versioned spelling gets a hint, since both
/// header versions are always accepted.
fn proxy_protocol(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawListener) -> bool {
    let Some(value) = &raw.proxy_protocol else {
        return false;
    };
    if let Scalar::Bool(on) = value.get_ref() {
        return *on;
    }
    let hint = match value.get_ref() {
        Scalar::Str(text) if matches!(text.trim(), "true" | "false") => {
            format!("write proxy_protocol = {} without quotes", text.trim())
        }
        Scalar::Str(_) | Scalar::Int(_) => {
            "write proxy_protocol = true: PROXY protocol v1 and v2 headers are both accepted".into()
        }
        Scalar::Float(_) | Scalar::Bool(_) => "write proxy_protocol = true or false".into(),
    };
    let message = format!(
        "`proxy_protocol` must be true or false, found {}",
        value.get_ref().describe()
    );
    cx.r.error(
        &path.key("proxy_protocol"),
        Some(value.span()),
        message,
        Some(hint),
    );
    false
}

fn limits(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawListener) -> ListenerLimits {
    let d = ListenerLimits::default();
    let mut timeout = |key: &str, value: Option<&toml::Spanned<Scalar>>, default: Duration| {
        cx.duration(&path.key(key), value, default, false)
    };
    let header_read_timeout = timeout(
        "header_read_timeout",
        raw.header_read_timeout.as_ref(),
        d.header_read_timeout,
    );
    let idle_timeout = timeout("idle_timeout", raw.idle_timeout.as_ref(), d.idle_timeout);
    let tls_handshake_timeout = timeout(
        "tls_handshake_timeout",
        raw.tls_handshake_timeout.as_ref(),
        d.tls_handshake_timeout,
    );
    let max_header_size = cx.size(
        &path.key("max_header_size"),
        raw.max_header_size.as_ref(),
        d.max_header_size as u64,
        MIN_HEADER_SIZE,
    );
    let max_headers = cx.count(
        &path.key("max_headers"),
        raw.max_headers.as_ref(),
        d.max_headers as u64,
        (1, 10_000),
        None,
    );
    let max_concurrent_streams = cx.count(
        &path.key("max_concurrent_streams"),
        raw.max_concurrent_streams.as_ref(),
        u64::from(d.max_concurrent_streams),
        (1, u64::from(u32::MAX)),
        None,
    );
    let max_connections = cx.count(
        &path.key("max_connections"),
        raw.max_connections.as_ref(),
        d.max_connections as u64,
        (1, 10_000_000),
        None,
    );
    // Shorter than this and ordinary paths would be refused; nginx's smallest is 1 KiB.
    let max_uri_length = cx.size(
        &path.key("max_uri_length"),
        raw.max_uri_length.as_ref(),
        d.max_uri_length as u64,
        256,
    );
    let max_content_codings = cx.count(
        &path.key("max_content_codings"),
        raw.max_content_codings.as_ref(),
        d.max_content_codings as u64,
        (1, 16),
        Some("a handful is plenty: real clients send one coding"),
    );
    let h2_keep_alive_interval = cx.duration(
        &path.key("h2_keep_alive_interval"),
        raw.h2_keep_alive_interval.as_ref(),
        d.h2_keep_alive_interval.unwrap_or_default(),
        true,
    );
    let h2_keep_alive_timeout = cx.duration(
        &path.key("h2_keep_alive_timeout"),
        raw.h2_keep_alive_timeout.as_ref(),
        d.h2_keep_alive_timeout,
        false,
    );
    ListenerLimits {
        header_read_timeout,
        idle_timeout,
        max_header_size: usize::try_from(max_header_size).unwrap_or(usize::MAX),
        max_headers: usize::try_from(max_headers).unwrap_or(usize::MAX),
        max_concurrent_streams: u32::try_from(max_concurrent_streams).unwrap_or(u32::MAX),
        tls_handshake_timeout,
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
        max_uri_length: usize::try_from(max_uri_length).unwrap_or(usize::MAX),
        max_content_codings: usize::try_from(max_content_codings).unwrap_or(usize::MAX),
        // "0s" turns the pings off.
        h2_keep_alive_interval: Some(h2_keep_alive_interval).filter(|d| !d.is_zero()),
        h2_keep_alive_timeout,
    }
}
