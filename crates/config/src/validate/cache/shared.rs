//! `[caches.NAME.shared]`: the URL of the shared tier and its limits. The URL is checked for
//! what can be known without connecting (`sluice check` never opens a socket): a scheme sluice
//! speaks, a host or socket path. `rediss://` (TLS) is refused for now: the `redis` crate's
//! TLS feature is not enabled nor tested yet (docs/fleet.md).

use super::Cx;
use super::positive_size;
use crate::model::CacheShared;
use crate::path::KeyPath;
use crate::raw::RawCacheShared;

pub(super) fn shared(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawCacheShared) -> Option<CacheShared> {
    let redis = match &raw.redis {
        Some(value) => url(cx, &path.key("redis"), value),
        None => {
            let hint = r#"e.g. redis = "redis://127.0.0.1:6379", the server every instance shares"#;
            cx.r.missing(path, "redis", Some(hint.into()));
            None
        }
    };
    let deadline = cx.duration(
        &path.key("deadline"),
        raw.deadline.as_ref(),
        CacheShared::DEFAULT_DEADLINE,
        false,
    );
    let object_hint = "larger responses stay in this instance's tiers: e.g. \"1MiB\"";
    let max_object_size = positive_size(
        cx,
        &path.key("max_object_size"),
        raw.max_object_size.as_ref(),
        object_hint,
    )
    .unwrap_or(CacheShared::DEFAULT_MAX_OBJECT_SIZE);
    let max_ttl = cx.duration(
        &path.key("max_ttl"),
        raw.max_ttl.as_ref(),
        CacheShared::DEFAULT_MAX_TTL,
        false,
    );
    Some(CacheShared {
        redis: redis?,
        deadline,
        max_object_size,
        max_ttl,
    })
}

/// What is wrong with `host[:port]`, if anything.
fn host_problem(host: &str) -> Option<(&'static str, Option<&'static str>)> {
    let port_ok = match host.rsplit_once(':') {
        Some((_, port)) if !host.ends_with(']') => port.parse::<u16>().is_ok(),
        _ => true,
    };
    if host.is_empty() || host.starts_with(':') {
        Some(("the URL names no host", None))
    } else if !port_ok {
        Some(("the URL's port is not a number from 0 to 65535", None))
    } else {
        None
    }
}

pub(in crate::validate) fn url(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &toml::Spanned<String>,
) -> Option<String> {
    let written = value.get_ref().trim();
    let problem = if let Some(rest) = written.strip_prefix("redis://") {
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        host_problem(authority.rsplit('@').next().unwrap_or_default())
    } else if let Some(rest) = written.strip_prefix("redis+cluster://") {
        // Seed nodes of a Redis Cluster: the client learns the others from them.
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let hosts = authority.rsplit('@').next().unwrap_or_default();
        let path = &rest[authority.len()..];
        if !matches!(path.trim_start_matches('/'), "" | "0") && !path.starts_with('?') {
            Some((
                "a Redis Cluster has one database (0): the URL names another",
                Some("remove the /DB part"),
            ))
        } else {
            hosts.split(',').map(str::trim).find_map(host_problem)
        }
    } else if let Some(socket) = written.strip_prefix("redis+unix://") {
        (!socket.starts_with('/')).then_some(("a unix socket URL needs an absolute path", None))
    } else if written.starts_with("rediss://") {
        Some((
            "TLS to the shared tier (rediss://) is not supported yet",
            Some(
                "reach Redis on a private network or through a local TLS tunnel (stunnel, spiped), as redis://",
            ),
        ))
    } else {
        Some((
            "expected a redis://, redis+unix:// or redis+cluster:// URL",
            Some(
                r#"e.g. "redis://127.0.0.1:6379/0", or a Cluster's seed nodes "redis+cluster://10.0.0.1:6379,10.0.0.2:6379""#,
            ),
        ))
    };
    match problem {
        None => Some(written.to_string()),
        Some((message, hint)) => {
            cx.r.error(
                path,
                Some(value.span()),
                message.to_string(),
                hint.map(str::to_string),
            );
            None
        }
    }
}
