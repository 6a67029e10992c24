//! Servers discovered by DNS (`dns+a:NAME:PORT`, `dns+srv:NAME`) and the `[resolver]` table
//! that says how they are looked up. The addresses are parsed with the other server addresses
//! ([`super::address`] calls [`dns_address`]); [`attach`] then gives every group that has one
//! the resolver settings, so that a reload changing them rebuilds those groups.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use crate::model::{DnsRecords, Resolver, Upstream, UpstreamAddress};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawResolver};

/// `dns+KIND:REST` (`text` whole, `rest` after `dns+`).
pub(super) fn dns_address(text: &str, rest: &str) -> Result<DnsRecords, Rejection> {
    let bad = |hint: String| Err((format!("invalid upstream address `{text}`"), Some(hint)));
    let Some((kind, target)) = rest.split_once(':') else {
        return bad(
            r#"write "dns+a:NAME:PORT" (A/AAAA records) or "dns+srv:NAME" (SRV records)"#.into(),
        );
    };
    match kind {
        "a" => {
            let Some((name, port)) = target.rsplit_once(':') else {
                return bad(format!(
                    r#"A records carry no port: add the servers' port, e.g. "dns+a:{target}:8080""#
                ));
            };
            if !matches!(port.parse::<u16>(), Ok(1..)) {
                return bad("the port must be a number from 1 to 65535".into());
            }
            let name = dns_name(text, name)?;
            Ok(DnsRecords::Addresses {
                name,
                port: port.parse().unwrap_or(0),
            })
        }
        "srv" => {
            if let Some((name, port)) = target.rsplit_once(':')
                && port.chars().all(|c| c.is_ascii_digit())
            {
                return bad(format!(
                    r#"SRV records carry their own ports: write "dns+srv:{name}""#
                ));
            }
            let name = dns_name(text, target)?;
            if !name.starts_with('_') {
                let message = format!("invalid upstream address `{text}`");
                let hint = format!(
                    r#"an SRV name is "_service._proto.name", e.g. "dns+srv:_http._tcp.{name}" (or "dns+a:{name}:PORT" for A/AAAA records)"#
                );
                return Err((message, Some(hint)));
            }
            Ok(DnsRecords::Srv { name })
        }
        "aaaa" => bad(format!(
            r#"write "dns+a:{target}": it looks up both A and AAAA records"#
        )),
        other => bad(format!(
            r#"`dns+{other}` is not a kind of discovery: write "dns+a:NAME:PORT" (A/AAAA records) or "dns+srv:NAME" (SRV records)"#
        )),
    }
}

/// A DNS name: letters, digits, `-`, `_` and dots, not an IP address, at most 253 bytes.
fn dns_name(text: &str, name: &str) -> Result<String, Rejection> {
    let message = || format!("invalid upstream address `{text}`");
    if name.parse::<IpAddr>().is_ok()
        || name
            .strip_prefix('[')
            .is_some_and(|n| n.trim_end_matches(']').parse::<IpAddr>().is_ok())
    {
        let hint = "an IP address needs no DNS: write it as a plain server, \"IP:PORT\"";
        return Err((message(), Some(hint.into())));
    }
    let labels_ok = name
        .trim_end_matches('.')
        .split('.')
        .all(|label| (1..=63).contains(&label.len()));
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if name.is_empty() || name.len() > 253 || !labels_ok || !chars_ok {
        let hint = "write a DNS name, e.g. \"dns+a:app.internal:8080\"";
        return Err((message(), Some(hint.into())));
    }
    Ok(name.to_owned())
}

/// Validates `[resolver]` and gives its settings to every group with a `dns+` server. A group
/// with one and TLS is refused (not supported yet: each resolved address would need the name
/// to verify).
pub(super) fn attach(cx: &mut Cx<'_>, raw: Option<RawResolver>, upstreams: &mut [Upstream]) {
    let resolver = resolver(cx, raw);
    for upstream in upstreams {
        let dns = upstream
            .servers
            .iter()
            .any(|s| matches!(s.address, UpstreamAddress::Dns(_)));
        if !dns {
            continue;
        }
        if upstream.tls.is_some() {
            let path = KeyPath::root().key("upstreams").key(&upstream.name);
            let message = format!(
                "upstream `{}`: TLS to servers discovered by DNS is not supported yet",
                upstream.name
            );
            let hint = "list the servers as \"https://host:port\", or reach the dns+ servers in plain text";
            cx.r.error(&path, None, message, Some(hint.into()));
        }
        upstream.resolver = Some(resolver.clone());
    }
}

fn resolver(cx: &mut Cx<'_>, raw: Option<RawResolver>) -> Resolver {
    let defaults = Resolver::default();
    let Some(raw) = raw else { return defaults };
    let path = KeyPath::root().key("resolver");
    let servers = raw
        .servers
        .as_ref()
        .map(|value| name_servers(cx, &path.key("servers"), value))
        .unwrap_or_default();
    let timeout = raw
        .timeout
        .as_ref()
        .map(|v| cx.duration(&path.key("timeout"), Some(v), Duration::from_secs(5), false));
    let attempts = raw.attempts.as_ref().map(|v| {
        let n = cx.count(&path.key("attempts"), Some(v), 2, (1, 10), None);
        u32::try_from(n).unwrap_or(2)
    });
    let never_zero = Some(r#"lookups of a name would never pause: e.g. "1s""#);
    let min_ttl = cx.duration_or_zero(
        &path.key("min_ttl"),
        raw.min_ttl.as_ref(),
        defaults.min_ttl,
        never_zero,
    );
    let max_ttl = cx.duration_or_zero(
        &path.key("max_ttl"),
        raw.max_ttl.as_ref(),
        defaults.max_ttl,
        never_zero,
    );
    if max_ttl < min_ttl {
        let message =
            format!("resolver.max_ttl ({max_ttl:?}) is shorter than min_ttl ({min_ttl:?})");
        cx.r.error(
            &path.key("max_ttl"),
            None,
            message,
            Some("make max_ttl at least min_ttl".into()),
        );
    }
    let keep_last_good = cx.duration_or_zero(
        &path.key("keep_last_good"),
        raw.keep_last_good.as_ref(),
        defaults.keep_last_good,
        None,
    );
    Resolver {
        servers,
        timeout,
        attempts,
        min_ttl,
        max_ttl,
        keep_last_good,
    }
}

/// `servers`: `IP` (port 53) or `IP:PORT` each.
fn name_servers(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Vec<SocketAddr> {
    let mut servers = Vec::new();
    for item in OneOrMany::items(value) {
        let text = item.get_ref().trim();
        let parsed = text.parse::<SocketAddr>().ok().or_else(|| {
            text.parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, 53))
        });
        match parsed {
            Some(address) => servers.push(address),
            None => {
                let message = format!("invalid name server `{text}`");
                let hint =
                    r#"write an IP address and optional port, e.g. "10.0.0.2" or "127.0.0.1:5353""#;
                cx.r.error(path, Some(item.span()), message, Some(hint.into()));
            }
        }
    }
    servers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(text: &str) -> String {
        let rest = text.strip_prefix("dns+").unwrap();
        dns_address(text, rest).unwrap_err().1.unwrap()
    }

    #[test]
    fn dns_addresses() {
        assert_eq!(
            dns_address("dns+a:app.internal:8080", "a:app.internal:8080").unwrap(),
            DnsRecords::Addresses {
                name: "app.internal".into(),
                port: 8080
            }
        );
        assert_eq!(
            dns_address("dns+srv:_http._tcp.app", "srv:_http._tcp.app").unwrap(),
            DnsRecords::Srv {
                name: "_http._tcp.app".into()
            }
        );
        assert!(hint("dns+a:app.internal").contains("dns+a:app.internal:8080"));
        assert!(hint("dns+a:app.internal:0").contains("1 to 65535"));
        assert!(hint("dns+srv:_http._tcp.app:80").contains(r#""dns+srv:_http._tcp.app""#));
        assert!(hint("dns+srv:app.internal").contains("_http._tcp.app.internal"));
        assert!(hint("dns+mx:app").contains("not a kind of discovery"));
        assert!(hint("dns+aaaa:app:80").contains("dns+a:app:80"));
        assert!(hint("dns+a:10.0.0.1:80").contains("needs no DNS"));
        assert!(hint("dns+a:bad name:80").contains("DNS name"));
        assert!(hint("dns+app").contains("dns+srv:NAME"));
    }
}
