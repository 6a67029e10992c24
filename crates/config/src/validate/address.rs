//! Socket addresses: what a listener binds (an IP and port, never a name: resolving at start-up
//! would make the bound address depend on DNS) and where an upstream server is (`host:port`,
//! resolved when connecting, or `unix:/path`).
//!
//! Both parsers return a message and a hint for the mistakes people make: a host name where an IP
//! is needed, a missing port, a URL scheme, IPv6 without brackets.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use crate::model::UpstreamAddress;

/// A rejected address: what is wrong, and how to write it instead.
pub(super) type Rejection = (String, Option<String>);

/// Parses a listener address such as `127.0.0.1:8080` or `[::1]:8080`. Port 0 is allowed (the
/// system picks one; tests use it).
pub(super) fn parse_listen_address(text: &str) -> Result<SocketAddr, Rejection> {
    let t = text.trim();
    if let Ok(addr) = t.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bad = |hint: String| Err((format!("invalid listen address `{t}`"), Some(hint)));
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        return bad(format!(r#"write the address without a scheme: "{rest}""#));
    }
    // `::1:8080` is itself a valid IPv6 address; a trailing decimal group after a valid IPv6
    // prefix is far more likely meant as the port.
    if let Some((host, port)) = t.rsplit_once(':')
        && !t.starts_with('[')
        && host.parse::<std::net::Ipv6Addr>().is_ok()
        && !port.is_empty()
        && port.chars().all(|c| c.is_ascii_digit())
    {
        return bad(format!(
            r#"put IPv6 addresses in brackets: "[{host}]:{port}""#
        ));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        let with_port = SocketAddr::new(ip, 8080);
        return bad(format!(r#"add a port, e.g. "{with_port}""#));
    }
    match t.rsplit_once(':') {
        None if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() => bad(format!(
            r#"write an IP and the port: "127.0.0.1:{t}" (this machine) or "0.0.0.0:{t}" (all interfaces)"#
        )),
        None => bad(r#"write an IP address and a port, e.g. "127.0.0.1:8080""#.into()),
        Some(("", port)) => bad(format!(
            r#"write "0.0.0.0:{port}" for all interfaces or "127.0.0.1:{port}" for this machine"#
        )),
        Some((_, port)) if port.parse::<u16>().is_err() => {
            bad("the port must be a number from 0 to 65535".into())
        }
        Some(("localhost", port)) => bad(format!(
            r#"host names are not resolved: write "127.0.0.1:{port}" (or "[::1]:{port}")"#
        )),
        Some((_, port)) => bad(format!(
            r#"host names are not resolved: write an IP address, e.g. "0.0.0.0:{port}" for all interfaces"#
        )),
    }
}

/// How a server address asks to be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scheme {
    /// `host:port` or `unix:/path`: plain, unless the group has a `tls` table.
    Plain,
    /// `https://host[:port]`: TLS (port 443 when none is written).
    Https,
}

/// Parses an upstream server address: `host:port` (a name or an IP, port 1-65535),
/// `https://host[:port]` (TLS), `unix:/absolute/path.sock`, or servers discovered by DNS
/// (`dns+a:NAME:PORT`, `dns+srv:NAME`; see [`super::resolver`]).
pub(super) fn parse_upstream_address(text: &str) -> Result<(UpstreamAddress, Scheme), Rejection> {
    let t = text.trim();
    let bad = |hint: String| Err((format!("invalid upstream address `{t}`"), Some(hint)));
    if let Some(rest) = t.strip_prefix("dns+") {
        return super::resolver::dns_address(t, rest)
            .map(|records| (UpstreamAddress::Dns(records), Scheme::Plain));
    }
    if let Some(path) = t.strip_prefix("unix:") {
        if path.starts_with("//") {
            return bad(format!(r#"write "unix:/{}""#, path.trim_start_matches('/')));
        }
        if !path.starts_with('/') {
            return bad(r#"a unix socket path must be absolute, e.g. "unix:/run/app.sock""#.into());
        }
        return Ok((UpstreamAddress::Unix(PathBuf::from(path)), Scheme::Plain));
    }
    if let Some(rest) = t.strip_prefix("https://") {
        // A trailing `/` is what a copied URL ends with; a path is something else.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if let Some((authority, _)) = rest.split_once('/') {
            return bad(format!(
                r#"a server is a host and port, without a path: "https://{authority}" (a route's `rewrite` changes paths)"#
            ));
        }
        // RFC 9110 §4.2.2: https without a port means 443.
        let with_port = if rest.ends_with(']') || !rest.contains(':') {
            format!("{rest}:443")
        } else {
            rest.to_owned()
        };
        return host_port(&with_port).map(|address| (address, Scheme::Https));
    }
    if let Some((scheme, rest)) = t.split_once("://") {
        let rest = rest.trim_end_matches('/');
        let hint = if rest.contains(':') {
            rest.to_owned()
        } else {
            format!("{rest}:80")
        };
        let hint = if scheme == "http" {
            format!(r#"write host:port without a scheme: "{hint}" (or "https://{rest}" for TLS)"#)
        } else {
            format!(
                r#"`{scheme}://` is not a way to reach a server: write "{hint}", or "https://{rest}" for TLS"#
            )
        };
        return bad(hint);
    }
    host_port(t).map(|address| (address, Scheme::Plain))
}

/// `host:port`, a name or an IP (IPv6 in brackets) and a port from 1 to 65535.
pub(super) fn host_port(t: &str) -> Result<UpstreamAddress, Rejection> {
    let bad = |hint: String| Err((format!("invalid upstream address `{t}`"), Some(hint)));
    let Some((host, port)) = t.rsplit_once(':') else {
        return bad(format!(r#"add a port: "{t}:80""#));
    };
    if host.contains(':') && !host.starts_with('[') {
        return bad(format!(
            r#"put IPv6 addresses in brackets: "[{host}]:{port}""#
        ));
    }
    if !matches!(port.parse::<u16>(), Ok(1..)) {
        return bad("the port must be a number from 1 to 65535".into());
    }
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        }
    };
    if !host_ok {
        return bad(r#"write a host name or IP and a port, e.g. "127.0.0.1:9001""#.into());
    }
    Ok(UpstreamAddress::Tcp(t.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen_hint(text: &str) -> String {
        parse_listen_address(text).unwrap_err().1.unwrap()
    }

    fn upstream_hint(text: &str) -> String {
        parse_upstream_address(text).unwrap_err().1.unwrap()
    }

    #[test]
    fn listen_addresses_are_ip_and_port() {
        assert_eq!(parse_listen_address("127.0.0.1:8080").unwrap().port(), 8080);
        assert!(parse_listen_address("[::1]:0").unwrap().is_ipv6());
        assert_eq!(parse_listen_address(" 0.0.0.0:80 ").unwrap().port(), 80);
    }

    #[test]
    fn listen_address_mistakes_get_hints() {
        assert!(listen_hint("localhost:8080").contains(r#""127.0.0.1:8080""#));
        assert!(listen_hint("example.com:80").starts_with("host names are not resolved"));
        assert_eq!(
            listen_hint("127.0.0.1"),
            r#"add a port, e.g. "127.0.0.1:8080""#
        );
        assert!(listen_hint(":8080").contains(r#""0.0.0.0:8080""#));
        assert!(listen_hint("8080").contains(r#""127.0.0.1:8080""#));
        assert!(listen_hint("::1:8080").contains("[::1]:8080"));
        assert!(listen_hint("http://127.0.0.1:80").contains(r#""127.0.0.1:80""#));
        assert!(listen_hint("127.0.0.1:99999").contains("0 to 65535"));
    }

    #[test]
    fn upstream_addresses() {
        let plain = |text| match parse_upstream_address(text).unwrap() {
            (address, Scheme::Plain) => address,
            other => panic!("{text}: {other:?}"),
        };
        let https = |text| match parse_upstream_address(text).unwrap() {
            (address, Scheme::Https) => address,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            plain("app.internal:9001"),
            UpstreamAddress::Tcp("app.internal:9001".into())
        );
        assert_eq!(
            plain("unix:/run/app.sock"),
            UpstreamAddress::Unix("/run/app.sock".into())
        );
        assert!(parse_upstream_address("[::1]:9001").is_ok());
        assert_eq!(
            https("https://api:8443"),
            UpstreamAddress::Tcp("api:8443".into())
        );
        assert_eq!(
            https("https://api/"),
            UpstreamAddress::Tcp("api:443".into())
        );
        assert_eq!(
            https("https://[::1]"),
            UpstreamAddress::Tcp("[::1]:443".into())
        );
    }

    #[test]
    fn upstream_address_mistakes_get_hints() {
        assert_eq!(
            upstream_hint("http://app:9001/"),
            r#"write host:port without a scheme: "app:9001" (or "https://app:9001" for TLS)"#
        );
        assert!(upstream_hint("tcp://app:1").starts_with("`tcp://` is not a way"));
        assert!(upstream_hint("https://app/api").contains(r#""https://app""#));
        assert!(upstream_hint("https://app:0").contains("1 to 65535"));
        assert_eq!(upstream_hint("app"), r#"add a port: "app:80""#);
        assert!(upstream_hint("app:http").contains("1 to 65535"));
        assert!(upstream_hint("app:0").contains("1 to 65535"));
        assert!(upstream_hint("unix:run/app.sock").contains("absolute"));
        assert_eq!(
            upstream_hint("unix:///run/app.sock"),
            r#"write "unix:/run/app.sock""#
        );
        assert!(upstream_hint("a b:80").contains("host name or IP"));
    }
}
