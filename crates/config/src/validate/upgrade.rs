//! `upgrade` and `tunnel_idle_timeout` of a proxy: which HTTP Upgrade protocols the route
//! forwards (RFC 9110 §7.8), and how long a tunnel may go without a byte.
//!
//! `upgrade = true` forwards any protocol, `false` none, a list just those; without the key,
//! WebSocket alone (what Caddy and HAProxy users expect from a proxy; nginx makes every location
//! ask for it). `h2c` (and `h2`, which is not an Upgrade token at all, RFC 9113 §3.1) switch one
//! connection to HTTP/2 and are never forwarded, so listing them is an error.

use toml::Spanned;

use super::Cx;
use crate::model::{Upgrade, UpgradeProtocols};
use crate::path::KeyPath;
use crate::raw::{BoolOrList, RawProxy};

/// The proxy's upgrade settings, defaults where keys are absent.
pub(super) fn upgrade(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawProxy) -> Upgrade {
    let protocols = match &raw.upgrade {
        None => UpgradeProtocols::default(),
        Some(value) => protocols(cx, &path.key("upgrade"), value),
    };
    let idle_key = path.key("tunnel_idle_timeout");
    if let (UpgradeProtocols::None, Some(idle)) = (&protocols, &raw.tunnel_idle_timeout) {
        let hint = r#"remove it, or let the route forward upgrades: upgrade = ["websocket"]"#;
        cx.r.error(
            &idle_key,
            Some(idle.span()),
            "`tunnel_idle_timeout` has no effect with `upgrade = false`",
            Some(hint.into()),
        );
    }
    let idle_timeout = cx.duration_or_zero(
        &idle_key,
        raw.tunnel_idle_timeout.as_ref(),
        Upgrade::DEFAULT_IDLE_TIMEOUT,
        Some(r#"a tunnel must be allowed some quiet time; e.g. "10m""#),
    );
    Upgrade {
        protocols,
        idle_timeout,
    }
}

fn protocols(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<BoolOrList>) -> UpgradeProtocols {
    let items = match value.get_ref() {
        BoolOrList::Bool(true) => return UpgradeProtocols::Any,
        BoolOrList::Bool(false) => return UpgradeProtocols::None,
        BoolOrList::List(items) => items,
    };
    if items.is_empty() {
        // Silently off would look like a typo that works.
        let hint = r#"list the protocols, e.g. ["websocket"], or write `upgrade = false`"#;
        let message = "the upgrade protocol list is empty";
        cx.r.error(path, Some(value.span()), message, Some(hint.into()));
        return UpgradeProtocols::None;
    }
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let written = item.get_ref();
        match protocol_name(written) {
            Ok(name) if names.contains(&name) => {
                let message = format!("`{written}` is listed twice");
                let hint = "protocol names ignore case: list each once".to_owned();
                cx.r.error(path, Some(item.span()), message, Some(hint));
            }
            Ok(name) => names.push(name),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, Some(hint)),
        }
    }
    UpgradeProtocols::Only(names)
}

/// A protocol name as the route will match it: a token (RFC 9110 §5.6.2), lowercased, no
/// version, and not `h2c` / `h2`.
fn protocol_name(written: &str) -> Result<String, (String, String)> {
    let (name, version) = match written.split_once('/') {
        Some((name, version)) => (name, Some(version)),
        None => (written, None),
    };
    let lower = name.to_ascii_lowercase();
    if lower == "h2c" || lower == "h2" {
        return Err((
            format!("`{written}` is never forwarded"),
            "an upgrade to HTTP/2 is about one connection (hop-by-hop): clients reach HTTP/2 \
             through the listener's `protocols` instead"
                .into(),
        ));
    }
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(name) {
        return Err((
            format!("invalid protocol name `{written}`"),
            r#"a protocol name is one word of letters, digits and `-`, e.g. "websocket""#.into(),
        ));
    }
    if version.is_some() {
        return Err((
            format!("`{written}` names a protocol version"),
            format!(r#"list the protocol's name alone: "{lower}" allows every version of it"#),
        ));
    }
    Ok(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercased_tokens() {
        assert_eq!(protocol_name("WebSocket").unwrap(), "websocket");
        assert_eq!(protocol_name("foo-bar").unwrap(), "foo-bar");
        assert!(protocol_name("h2c").unwrap_err().0.contains("never"));
        assert!(protocol_name("H2").unwrap_err().0.contains("never"));
        assert!(protocol_name("web socket").is_err());
        assert!(protocol_name("").is_err());
        assert!(protocol_name("foo/2").unwrap_err().1.contains(r#""foo""#));
    }

    #[test]
    fn h2c_is_never_allowed() {
        assert!(!UpgradeProtocols::Any.allows("h2c"));
        assert!(!UpgradeProtocols::Any.allows("H2C"));
        assert!(UpgradeProtocols::Any.allows("foo/1"));
        let only = UpgradeProtocols::Only(vec!["websocket".into(), "h2c".into()]);
        assert!(only.allows("WebSocket"));
        assert!(!only.allows("h2c"));
        assert!(!only.allows("foo"));
        assert!(!UpgradeProtocols::None.allows("websocket"));
    }
}
