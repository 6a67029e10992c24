//! `[upstreams.NAME]`: groups of servers a proxy route forwards to. Names are the table keys, so
//! TOML already makes them unique. The servers are in [`super::servers`], the connection,
//! retry and health-check settings in [`super::upstream_settings`], TLS in
//! [`super::upstream_tls`]; the balancing policy is here.

use std::collections::BTreeMap;

use http::HeaderName;
use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use super::upstream_settings as settings;
use super::upstream_tls;
use crate::model::{BalancePolicy, HashKey, Upstream};
use crate::path::KeyPath;
use crate::raw::RawUpstream;
use crate::schema::{closest, name_hint};

pub(super) fn upstreams(cx: &mut Cx<'_>, raw: BTreeMap<String, RawUpstream>) -> Vec<Upstream> {
    let defaults = Upstream::new(String::new(), Vec::new());
    let mut valid = Vec::new();
    for (name, upstream) in raw {
        let path = KeyPath::root().key("upstreams").key(&name);
        if name.trim().is_empty() {
            cx.r.key_error(&path, "an upstream name cannot be empty", None);
        }
        let servers = super::servers::servers(cx, &path, &name, upstream.servers.as_deref());
        let tls = match &servers {
            Some((_, schemes)) => {
                let raw = upstream.tls.as_ref();
                upstream_tls::group_tls(cx, &path, &name, raw, schemes)
            }
            None => None,
        };
        if let Some((servers, _)) = &servers {
            upstream_tls::check_group(cx, &path, &name, tls.as_ref(), servers);
        }
        let http2 = upstream.http2.unwrap_or(defaults.http2);
        let send_proxy_protocol = upstream.send_proxy_protocol.unwrap_or(false);
        if send_proxy_protocol && http2 {
            let message = "send_proxy_protocol cannot be used with http2 = true";
            let hint = "a PROXY header describes one client, and an HTTP/2 connection carries many clients' requests at once: use HTTP/1.1 to this group (remove http2), or turn send_proxy_protocol off";
            let key = path.key("send_proxy_protocol");
            cx.r.error(&key, None, message, Some(hint.into()));
        }
        let policy = policy(cx, &path, &upstream);
        let max_conns = settings::max_conns(cx, &path, &upstream);
        let keepalive = settings::keepalive(cx, &path.key("keepalive"), upstream.keepalive);
        let timeouts = settings::timeouts(cx, &path.key("timeouts"), upstream.timeouts);
        let retry = settings::retry(cx, &path.key("retry"), upstream.retry);
        let health_check = upstream
            .health_check
            .map(|raw| settings::health_check(cx, &path.key("health_check"), raw));
        if let (Some((servers, _)), Some(policy)) = (servers, policy) {
            valid.push(Upstream {
                name,
                servers,
                policy,
                keepalive,
                timeouts,
                retry,
                health_check,
                http2,
                tls,
                send_proxy_protocol,
                max_conns,
                resolver: None,
            });
        }
    }
    valid
}

const POLICIES: [&str; 4] = ["round_robin", "least_conn", "p2c", "hash"];

/// `policy` and `hash_key` together: a key is required by `"hash"` and meaningless otherwise.
fn policy(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawUpstream) -> Option<BalancePolicy> {
    let key = raw
        .hash_key
        .as_ref()
        .map(|value| (value, hash_key(cx, &path.key("hash_key"), value)));
    let policy = match &raw.policy {
        None => BalancePolicy::default(),
        Some(value) => match value.get_ref().as_str() {
            "round_robin" => BalancePolicy::RoundRobin,
            "least_conn" => BalancePolicy::LeastConnections,
            "p2c" => BalancePolicy::PowerOfTwoChoices,
            "hash" => {
                let Some((_, key)) = key else {
                    if !cx.r.misspelt(path, &["hash_key"]) {
                        let hint = r#"add e.g. hash_key = "client_ip" (or "uri", "header:NAME", "cookie:NAME")"#;
                        let message = r#"policy "hash" needs a `hash_key`"#;
                        let span = Some(value.span());
                        cx.r.error(&path.key("policy"), span, message, Some(hint.into()));
                    }
                    return None;
                };
                return key.map(BalancePolicy::Hash);
            }
            other => {
                let message = format!("unknown balancing policy `{other}`");
                let hint = Some(policy_hint(other));
                cx.r.error(&path.key("policy"), Some(value.span()), message, hint);
                return None;
            }
        },
    };
    if let Some((value, _)) = key {
        let hint = match &raw.policy {
            Some(p) => format!(
                r#"remove it, or use policy = "hash" instead of "{}""#,
                p.get_ref()
            ),
            None => r#"add policy = "hash", or remove it"#.into(),
        };
        let message = r#"`hash_key` is only used with policy = "hash""#;
        let span = Some(value.span());
        cx.r.error(&path.key("hash_key"), span, message, Some(hint));
        return None;
    }
    Some(policy)
}

/// nginx's and other proxies' names for the same policies, then the closest spelling.
fn policy_hint(other: &str) -> String {
    let lower = other.to_ascii_lowercase().replace('-', "_");
    match lower.as_str() {
        "least_connections" | "leastconn" | "least_connection" | "leastconnections" => {
            r#"write "least_conn""#.into()
        }
        "ip_hash" => r#"write policy = "hash" with hash_key = "client_ip""#.into(),
        "consistent_hash" | "ring_hash" | "maglev" => {
            r#"write policy = "hash" with a hash_key"#.into()
        }
        "random" | "power_of_two" | "power_of_two_choices" | "random_two" => {
            r#"write "p2c" (two random servers, the less busy one wins)"#.into()
        }
        "weighted_round_robin" | "wrr" | "roundrobin" => r#"write "round_robin""#.into(),
        _ => name_hint(other, &POLICIES).1,
    }
}

fn hash_key(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<HashKey> {
    parse_hash_key(value.get_ref())
        .map_err(|(message, hint)| cx.r.error(path, Some(value.span()), message, hint))
        .ok()
}

/// `client_ip`, `uri`, `header:NAME` or `cookie:NAME`.
fn parse_hash_key(text: &str) -> Result<HashKey, Rejection> {
    let unknown = |hint: String| Err((format!("unknown hash key `{text}`"), Some(hint)));
    let Some((kind, name)) = text.split_once(':') else {
        return match text {
            "client_ip" => Ok(HashKey::ClientIp),
            "uri" => Ok(HashKey::Uri),
            "header" | "cookie" => unknown(format!(
                r#"name the {text}: "{text}:NAME", e.g. "{}""#,
                example(text)
            )),
            _ => match closest(text, ["client_ip", "uri"]) {
                Some(best) => unknown(format!("did you mean `{best}`?")),
                None => unknown(
                    "expected one of `client_ip`, `uri`, `header:NAME`, `cookie:NAME`".into(),
                ),
            },
        };
    };
    let name = name.trim();
    if !matches!(kind, "header" | "cookie") {
        return match closest(kind, ["header", "cookie"]) {
            Some(best) => unknown(format!(r#"did you mean "{best}:{name}"?"#)),
            None => unknown("a named key is `header:NAME` or `cookie:NAME`".into()),
        };
    }
    if name.is_empty() {
        let message = format!("the hash key `{text}` names no {kind}");
        return Err((message, Some(format!(r#"e.g. "{}""#, example(kind)))));
    }
    if kind == "header" {
        return HeaderName::from_bytes(name.as_bytes())
            .map(HashKey::Header)
            .map_err(|_| {
                let hint = "header names are letters, digits and `-`, e.g. \"x-user-id\"";
                (format!("invalid header name `{name}`"), Some(hint.into()))
            });
    }
    // RFC 6265: a cookie name is a token (visible ASCII without separators).
    let token = name
        .chars()
        .all(|c| c.is_ascii_graphic() && !"()<>@,;:\\\"/[]?={}".contains(c));
    if !token {
        let hint = "cookie names are letters, digits and `-`, `_`, `.`, e.g. \"session_id\"";
        return Err((format!("invalid cookie name `{name}`"), Some(hint.into())));
    }
    Ok(HashKey::Cookie(name.to_owned()))
}

fn example(kind: &str) -> &'static str {
    if kind == "header" {
        "header:x-user-id"
    } else {
        "cookie:session_id"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_keys() {
        assert_eq!(parse_hash_key("client_ip").unwrap(), HashKey::ClientIp);
        assert_eq!(parse_hash_key("uri").unwrap(), HashKey::Uri);
        assert_eq!(
            parse_hash_key("header:X-User").unwrap(),
            HashKey::Header(HeaderName::from_static("x-user"))
        );
        assert_eq!(
            parse_hash_key("cookie:sid").unwrap(),
            HashKey::Cookie("sid".into())
        );
    }

    #[test]
    fn hash_key_mistakes_get_hints() {
        let hint = |text| parse_hash_key(text).unwrap_err().1.unwrap();
        assert_eq!(hint("client-ip"), "did you mean `client_ip`?");
        assert!(hint("header").contains(r#""header:NAME""#));
        assert!(hint("header:").contains("header:x-user-id"));
        assert!(hint("header:a b").contains("letters"));
        assert!(hint("cookie:a;b").contains("cookie names"));
        assert_eq!(hint("heder:x"), r#"did you mean "header:x"?"#);
        assert!(hint("zzz").starts_with("expected one of"));
    }

    #[test]
    fn policy_aliases() {
        assert_eq!(policy_hint("least_connections"), r#"write "least_conn""#);
        assert!(policy_hint("ip_hash").contains("client_ip"));
        assert_eq!(policy_hint("round-robin"), "did you mean `round_robin`?");
        assert_eq!(policy_hint("hsah"), "did you mean `hash`?");
    }
}
