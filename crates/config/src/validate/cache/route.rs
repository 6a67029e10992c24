//! A route's `cache` option: which zone, the key, fallback lifetimes, the request conditions
//! that skip the cache, request collapsing, methods, the status header and the levels of stored
//! compressed variants. Every key but `zone` is optional; defaults are [`RouteCache::new`]'s.
//!
//! Only a proxy's responses are cached: static files have their own memory cache
//! (`static.memory_cache`) and fixed responses and redirects are made in memory anyway.

use std::collections::BTreeMap;
use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::super::Cx;
use super::super::routes::quoted_list;
use super::words;
use crate::model::{
    CacheKeyPart, CacheMethods, CompressLevels, FallbackLifetime, RequestCondition, RouteCache,
    StatusMatch,
};
use crate::path::{KeyPath, TomlKey};
use crate::raw::{OneOrMany, RawRouteCache, Scalar};
use crate::schema::closest;

/// What the `cache` option needs to know about its route.
pub(in crate::validate) struct RouteFacts<'a> {
    /// Every `[caches.NAME]` in the file, valid or not.
    pub zones: &'a [String],
    /// The route's action (`"proxy"`, `"static"`, ...) when it has exactly one.
    pub action: Option<&'static str>,
    /// Whether the route has `compress`, which is what `levels` are for.
    pub compress: bool,
    /// Whether the route matches one path exactly (`path`), so a key may leave the path out.
    pub exact_path: bool,
}

/// The route's cache settings; `None` when the zone is missing or unknown (reported). Other bad
/// values were reported and stand at their defaults.
pub(in crate::validate) fn route_cache(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawRouteCache,
    facts: &RouteFacts<'_>,
) -> Option<RouteCache> {
    if let Some(action) = facts.action.filter(|a| *a != "proxy") {
        not_a_proxy(cx, path, action);
    }
    let zone = match &raw.zone {
        Some(value) => zone(cx, &path.key("zone"), value, facts.zones),
        None => {
            let hint = match facts.zones.first() {
                Some(first) => format!(r#"e.g. zone = "{first}", naming a [caches.NAME] table"#),
                None => r#"e.g. zone = "api", with a [caches.api] table defining it"#.into(),
            };
            cx.r.missing(path, "zone", Some(hint));
            None
        }
    };
    let d = RouteCache::new("");
    let key = match &raw.key {
        Some(value) => key(cx, &path.key("key"), value, facts.exact_path).unwrap_or(d.key),
        None => d.key,
    };
    let valid = raw
        .valid
        .as_ref()
        .map_or_else(Vec::new, |table| valid(cx, &path.key("valid"), table));
    let mut conditions = |name: &str, value: &Option<Spanned<OneOrMany>>| {
        value
            .as_ref()
            .map_or_else(Vec::new, |value| conditions(cx, &path.key(name), value))
    };
    let bypass = conditions("bypass", &raw.bypass);
    let no_store = conditions("no_store", &raw.no_store);
    let min_uses = cx.count(
        &path.key("min_uses"),
        raw.min_uses.as_ref(),
        u64::from(d.min_uses),
        (1, u64::from(u32::MAX)),
        Some("1 stores a response the first time it is fetched"),
    );
    let lock_timeout = match &raw.lock_timeout {
        None => d.lock_timeout,
        // "0s" is meaningful here: it turns collapsing off.
        Some(value) => {
            let default = RouteCache::DEFAULT_LOCK_TIMEOUT;
            let timeout =
                cx.duration_or_zero(&path.key("lock_timeout"), Some(value), default, None);
            (!timeout.is_zero()).then_some(timeout)
        }
    };
    let methods = raw
        .methods
        .as_ref()
        .and_then(|value| methods(cx, &path.key("methods"), value))
        .unwrap_or(d.methods);
    let status_header = match &raw.status_header {
        None => d.status_header,
        Some(value) => status_header(cx, &path.key("status_header"), value, d.status_header),
    };
    let levels = match &raw.levels {
        None => d.levels,
        Some(levels) => {
            let key = path.key("levels");
            if !facts.compress {
                let hint = "they are the levels of the compressed copies stored when the route also has `compress`: add compress = {}, or remove `levels`";
                cx.r.error(
                    &key,
                    None,
                    "`levels` is only used with `compress`",
                    Some(hint.into()),
                );
            }
            with_defaults(super::super::compress::levels(cx, &key, levels))
        }
    };
    Some(RouteCache {
        zone: zone?,
        key,
        valid,
        bypass,
        no_store,
        min_uses: u32::try_from(min_uses).unwrap_or(d.min_uses),
        lock_timeout,
        methods,
        status_header,
        levels,
    })
}

fn not_a_proxy(cx: &mut Cx<'_>, path: &KeyPath, action: &str) {
    let why = match action {
        "static" => "static files are kept in memory by `static.memory_cache` already",
        _ => "its response is made in memory on every request, with nothing to save",
    };
    let message = format!("`cache` is only for `proxy` routes; this one is `{action}`");
    let hint = format!("{why}: remove `cache`");
    cx.r.error(path, None, message, Some(hint));
}

/// `zone = "NAME"`, which must name a `[caches.NAME]` table.
fn zone(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<String>,
    zones: &[String],
) -> Option<String> {
    let name = value.get_ref();
    if zones.contains(name) {
        return Some(name.clone());
    }
    let hint = match closest(name, zones.iter().map(String::as_str)) {
        _ if zones.is_empty() => format!(
            r#"no zone is defined: add [caches.{}] with e.g. memory = "64MiB""#,
            TomlKey(name)
        ),
        Some(best) => format!(
            "did you mean `{best}`? defined zones: {}",
            quoted_list(zones)
        ),
        None => format!("defined zones: {}", quoted_list(zones)),
    };
    let message = format!("unknown cache zone `{name}`");
    cx.r.error(path, Some(value.span()), message, Some(hint));
    None
}

/// The key's parts, each once, never empty; without `path`, every path of a prefix route would
/// share one stored response, which is refused.
fn key(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<OneOrMany>,
    exact_path: bool,
) -> Option<Vec<CacheKeyPart>> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = r#"leave `key` out for ["scheme", "host", "path", "query"], or list the parts"#;
        cx.r.error(
            path,
            Some(value.span()),
            "the cache key is empty",
            Some(hint.into()),
        );
        return None;
    }
    let mut parts = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in &items {
        match words::key_part(item.get_ref()) {
            Ok(part) if parts.contains(&part) => {
                let message = format!("`{}` is listed twice", item.get_ref().trim());
                let hint = Some("name each part of the key once".into());
                cx.r.error(path, Some(item.span()), message, hint);
                ok = false;
            }
            Ok(part) => parts.push(part),
            Err((message, hint)) => {
                cx.r.error(path, Some(item.span()), message, hint);
                ok = false;
            }
        }
    }
    if ok && !exact_path && !parts.contains(&CacheKeyPart::Path) {
        let hint = r#"every path of this route would share one stored response: add "path" (a route with an exact `path` may leave it out)"#;
        let message = "the cache key has no `path`";
        cx.r.error(path, Some(value.span()), message, Some(hint.into()));
        ok = false;
    }
    ok.then_some(parts)
}

/// `valid = { "200" = "5m", "any" = "10s" }`: one lifetime per status, in status order, `any`
/// last. Zero is allowed: "do not store these".
fn valid(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    table: &BTreeMap<String, Spanned<Scalar>>,
) -> Vec<FallbackLifetime> {
    let mut found: Vec<(FallbackLifetime, &str)> = Vec::new();
    for (key, value) in table {
        let entry = path.key(key);
        let status = match words::valid_status(key) {
            Ok(status) => Some(status),
            Err((message, hint)) => {
                cx.r.key_error(&entry, message, hint);
                None
            }
        };
        let reported = cx.r.len();
        let lifetime = cx.duration_or_zero(&entry, Some(value), Duration::ZERO, None);
        let Some(status) = status.filter(|_| cx.r.len() == reported) else {
            continue;
        };
        // "200" and "0200" are different TOML keys for one status.
        if let Some((_, first)) = found.iter().find(|(v, _)| v.status == status) {
            let message = format!("status {} is given twice", key.trim());
            let hint = format!("`{first}` is the same status: keep one");
            cx.r.key_error(&entry, message, Some(hint));
            continue;
        }
        found.push((FallbackLifetime { status, lifetime }, key));
    }
    let mut lifetimes: Vec<FallbackLifetime> = found.into_iter().map(|(v, _)| v).collect();
    lifetimes.sort_by_key(|v| match v.status {
        StatusMatch::Code(code) => code.as_u16(),
        StatusMatch::Any => u16::MAX,
    });
    lifetimes
}

/// `bypass` / `no_store`: request headers and cookies, each once. An empty list is none.
fn conditions(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<OneOrMany>,
) -> Vec<RequestCondition> {
    let mut found = Vec::new();
    for item in OneOrMany::items(value) {
        match words::condition(item.get_ref()) {
            Ok(condition) if found.contains(&condition) => {
                let message = format!("`{}` is listed twice", item.get_ref().trim());
                let hint = Some("header names ignore case; list each condition once".into());
                cx.r.error(path, Some(item.span()), message, hint);
            }
            Ok(condition) => found.push(condition),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, hint),
        }
    }
    found
}

/// `["GET", "HEAD"]`, `["GET"]`: only these, since HEAD is answered from a stored GET and other
/// methods' responses are not reusable by a later GET.
fn methods(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Option<CacheMethods> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint =
            r#"list "GET" and "HEAD" (the default), or "GET"; to cache nothing, remove `cache`"#;
        cx.r.error(
            path,
            Some(value.span()),
            "the method list is empty",
            Some(hint.into()),
        );
        return None;
    }
    let (mut get, mut head, mut ok) = (false, false, true);
    for item in &items {
        let method = item.get_ref().trim();
        let seen = match method {
            "GET" => std::mem::replace(&mut get, true),
            "HEAD" => std::mem::replace(&mut head, true),
            other => {
                let upper = other.to_ascii_uppercase();
                let hint = if matches!(upper.as_str(), "GET" | "HEAD") {
                    format!(r#"method names are case-sensitive: write "{upper}""#)
                } else {
                    "only GET and HEAD use the cache: other methods change things, and a later GET may not reuse their responses".into()
                };
                let message = format!("method `{other}` cannot use the cache");
                cx.r.error(path, Some(item.span()), message, Some(hint));
                ok = false;
                continue;
            }
        };
        if seen {
            let message = format!("`{method}` is listed twice");
            cx.r.error(
                path,
                Some(item.span()),
                message,
                Some("list each method once".into()),
            );
            ok = false;
        }
    }
    if ok && head && !get {
        let hint = r#"HEAD is answered from a stored GET: write ["GET", "HEAD"]"#;
        cx.r.error(
            path,
            Some(value.span()),
            "HEAD alone caches nothing",
            Some(hint.into()),
        );
        return None;
    }
    ok.then_some(if head {
        CacheMethods::GetAndHead
    } else {
        CacheMethods::Get
    })
}

/// Headers whose meaning to clients and caches a status word would break.
const RESERVED: [&str; 16] = [
    "age",
    "cache-control",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "date",
    "etag",
    "expires",
    "keep-alive",
    "last-modified",
    "location",
    "set-cookie",
    "transfer-encoding",
    "upgrade",
    "vary",
];

/// A header name, `false` (none) or `true` (the default name).
fn status_header(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<Scalar>,
    default: Option<HeaderName>,
) -> Option<HeaderName> {
    let problem = match value.get_ref() {
        Scalar::Bool(false) => return None,
        Scalar::Bool(true) => return default,
        Scalar::Str(text) => match HeaderName::from_bytes(text.trim().as_bytes()) {
            Ok(name) if RESERVED.contains(&name.as_str()) => (
                format!("`{name}` cannot carry the cache status"),
                r#"it already means something to clients and caches: use a header of its own, e.g. "x-cache-status""#.to_owned(),
            ),
            Ok(name) => return Some(name),
            Err(_) if text.trim().is_empty() => (
                "the status header name is empty".to_owned(),
                "write status_header = false to send none".to_owned(),
            ),
            Err(_) => (
                format!("invalid header name `{text}`"),
                r#"header names are letters, digits and `-`, e.g. "x-cache-status""#.to_owned(),
            ),
        },
        other => (
            format!("expected a header name or false, found {}", other.describe()),
            r#"e.g. status_header = "x-cache-status", or false to send none"#.to_owned(),
        ),
    };
    cx.r.error(path, Some(value.span()), problem.0, Some(problem.1));
    default
}

/// The written levels over [`RouteCache::DEFAULT_LEVELS`].
fn with_defaults(written: CompressLevels) -> CompressLevels {
    let d = RouteCache::DEFAULT_LEVELS;
    CompressLevels {
        gzip: written.gzip.or(d.gzip),
        deflate: written.deflate.or(d.deflate),
        br: written.br.or(d.br),
        zstd: written.zstd.or(d.zstd),
    }
}
