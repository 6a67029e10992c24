//! `trusted_proxies`, in `[server]` (every listener) or on one `[[listeners]]` (replacing the
//! server's for it): the proxies whose `X-Forwarded-*` headers sluice believes. Each item is a
//! CIDR block (`"10.0.0.0/8"`, `"2001:db8::/32"`) or one address (`"192.0.2.7"`), as nginx's
//! `set_real_ip_from` takes them. A block with host bits set (`"10.0.0.1/8"`) is refused rather
//! than silently widened: it is usually a typo for the address alone.

use std::net::IpAddr;

use ipnet::IpNet;
use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use crate::model::TrustedProxies;
use crate::path::KeyPath;
use crate::raw::OneOrMany;

/// The list; the valid items of a list with bad ones (which are reported).
pub(super) fn trusted_proxies(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<OneOrMany>,
) -> TrustedProxies {
    let mut nets = Vec::new();
    for item in OneOrMany::items(value) {
        match parse(item.get_ref()) {
            Ok(net) => nets.push(net),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, hint),
        }
    }
    TrustedProxies(nets)
}

/// One item: a CIDR block or a single address.
pub(super) fn parse(text: &str) -> Result<IpNet, Rejection> {
    let trimmed = text.trim();
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    if let Ok(net) = trimmed.parse::<IpNet>() {
        if net.trunc() != net {
            return Err((
                format!(
                    "`{trimmed}` has bits set after its /{} prefix",
                    net.prefix_len()
                ),
                Some(format!(
                    r#"write "{}" for the block, or "{}" for the one address"#,
                    net.trunc(),
                    net.addr()
                )),
            ));
        }
        return Ok(net);
    }
    let hint = match trimmed.split_once('/') {
        Some((addr, len)) if addr.parse::<IpAddr>().is_ok() => {
            let max = if addr.contains(':') { 128 } else { 32 };
            format!("the prefix length `/{len}` must be a number from 0 to {max}")
        }
        _ if trimmed.contains(':')
            && trimmed.rsplit_once(':').is_some_and(|(a, p)| {
                a.trim_matches(['[', ']']).parse::<IpAddr>().is_ok()
                    && p.bytes().all(|b| b.is_ascii_digit())
            }) =>
        {
            "write the address without a port: a proxy is trusted whatever port it connects from"
                .into()
        }
        _ if trimmed.bytes().any(|b| b.is_ascii_alphabetic()) && !trimmed.contains(':') => {
            "write an address or a CIDR block: host names are not resolved".into()
        }
        _ => r#"write a CIDR block such as "10.0.0.0/8" or one address such as "192.0.2.7""#.into(),
    };
    Err((
        format!("`{text}` is not an IP address or CIDR block"),
        Some(hint),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_single_addresses() {
        assert_eq!(parse("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse("192.0.2.7").unwrap().to_string(), "192.0.2.7/32");
        assert_eq!(parse("::1").unwrap().to_string(), "::1/128");
        assert_eq!(parse("2001:db8::/32").unwrap().to_string(), "2001:db8::/32");
        assert_eq!(parse("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
    }

    #[test]
    fn mistakes_get_hints() {
        let hint = |t| parse(t).unwrap_err().1.unwrap();
        assert!(hint("10.0.0.1/8").contains(r#""10.0.0.0/8""#));
        assert!(hint("10.0.0.0/33").contains("0 to 32"));
        assert!(hint("127.0.0.1:8080").contains("without a port"));
        assert!(hint("[::1]:8080").contains("without a port"));
        assert!(hint("localhost").contains("not resolved"));
        assert!(hint("10.0.0/8").contains("CIDR"));
    }

    #[test]
    fn mapped_ipv4_peers_match_ipv4_blocks() {
        let trusted = TrustedProxies(vec![parse("127.0.0.0/8").unwrap()]);
        assert!(trusted.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(trusted.contains("127.0.0.1".parse().unwrap()));
        assert!(!trusted.contains("::1".parse().unwrap()));
    }
}
