//! `[[routes]]`: what a route matches (hosts, path, listeners) and the checks across routes.
//! Its action is in [`super::actions`], its `compress` option in [`super::compress`], its
//! `cache` option in [`super::cache`], its `rate_limit` in [`super::rate_limit`].

use std::collections::HashMap;

use super::Cx;
use super::cache::{RouteFacts, route_cache};
use super::proxy::Targets;
use crate::model::{BodyLimits, PathMatch, Route, Upstream};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawRoute};
use crate::schema::closest;

/// Every name defined in the file that routes refer to, valid or not, so that a reference to a
/// listener (upstream, zone) that is itself invalid is not reported twice.
pub(super) struct Defined<'a> {
    pub listeners: &'a [String],
    pub upstreams: &'a [String],
    pub zones: &'a [String],
}

/// The valid routes, in file order, and the upstream groups made for their proxies' inline `to`.
pub(super) fn routes(
    cx: &mut Cx<'_>,
    raw: Vec<RawRoute>,
    defined: &Defined<'_>,
) -> (Vec<Route>, Vec<Upstream>) {
    let root = KeyPath::root().key("routes");
    let mut valid = Vec::new();
    let mut inline_upstreams = Vec::new();
    let mut seen_names: HashMap<String, usize> = HashMap::new();
    for (i, raw) in raw.iter().enumerate() {
        let path = root.index(i);
        let name = match &raw.name {
            Some(name) => cx
                .non_empty(&path.key("name"), name, "a route name")
                .unwrap_or_default(),
            None => format!("route {}", i + 1),
        };
        if let Some(&first) = seen_names.get(&name) {
            let span = raw.name.as_ref().map(|n| n.span());
            let hint = format!(
                "routes[{first}] is already called that; names must be unique (logs and metrics use them)"
            );
            cx.r.error(
                &path.key("name"),
                span,
                format!("route name `{name}` is used twice"),
                Some(hint),
            );
        } else {
            seen_names.insert(name.clone(), i);
        }
        let hosts = match &raw.host {
            Some(host) => cx.host_patterns(&path.key("host"), host),
            None => Vec::new(),
        };
        let path_match = path_match(cx, &path, raw);
        let route_listeners = route_listeners(cx, &path, raw, defined.listeners);
        let targets = Targets {
            defined: defined.upstreams,
            route: &name,
            path: path_match.as_ref(),
        };
        let action = super::actions::action(cx, &path, raw, &targets);
        let compress = raw
            .compress
            .as_ref()
            .map(|c| super::compress::compress(cx, &path.key("compress"), c));
        let facts = RouteFacts {
            zones: defined.zones,
            action: sole_action(raw),
            compress: raw.compress.is_some(),
            exact_path: raw.path.is_some() && raw.path_prefix.is_none(),
        };
        let cache = raw
            .cache
            .as_ref()
            .and_then(|c| route_cache(cx, &path.key("cache"), c, &facts));
        let rate_limit = raw
            .rate_limit
            .as_ref()
            .and_then(|l| super::rate_limit::rate_limit(cx, &path.key("rate_limit"), l));
        let body = body_limits(cx, &path, raw);
        let response_headers = raw
            .response_headers
            .as_ref()
            .map(|r| super::response::response_headers(cx, &path.key("response_headers"), r));
        let dictionary = raw.dictionary.as_ref().and_then(|d| {
            let facts = super::dictionary::RouteFacts {
                compress: raw.compress.is_some(),
                action: sole_action(raw),
                cache: raw.cache.is_some(),
                cacheable: browser_cacheable(raw),
            };
            super::dictionary::dictionary(cx, &path.key("dictionary"), d, &facts)
        });
        let matchers = super::matchers::route_matchers(cx, &path, raw);
        let access = super::access::access(cx, &path, raw, defined.upstreams, &name);
        if let (Some(path_match), Some((action, inline)), Some((access, auth_inline))) =
            (path_match, action, access)
        {
            inline_upstreams.extend(inline);
            inline_upstreams.extend(auth_inline);
            valid.push(Route {
                name,
                hosts,
                path: path_match,
                listeners: route_listeners,
                matchers,
                access,
                action,
                compress,
                cache,
                rate_limit,
                body,
                response_headers,
                dictionary,
            });
        }
    }
    (valid, inline_upstreams)
}

/// Whether the route itself says browsers may keep its responses: a static `max_age` other
/// than `0s`, or a `Cache-Control` set or added in `response_headers`. A proxy route's
/// responses carry their origin's `Cache-Control`, which only the origin knows.
fn browser_cacheable(raw: &RawRoute) -> bool {
    let max_age = raw
        .static_files
        .as_ref()
        .and_then(|s| s.max_age.as_ref())
        .is_some_and(|m| !matches!(m.get_ref(), crate::raw::Scalar::Str(t) if t.trim() == "0s"));
    let edits = raw.response_headers.as_ref().is_some_and(|r| {
        r.set.0.iter().chain(&r.add.0).any(|(name, value)| {
            name.eq_ignore_ascii_case("cache-control")
                && !value.get_ref().to_ascii_lowercase().contains("no-store")
        })
    });
    let removed = raw.response_headers.as_ref().is_some_and(|r| {
        r.remove.as_ref().is_some_and(|list| {
            OneOrMany::items(list)
                .iter()
                .any(|n| n.get_ref().eq_ignore_ascii_case("cache-control"))
        })
    });
    raw.proxy.is_some() && !removed || max_age || edits
}

/// The route's action when it has exactly one (none and several are reported by
/// [`super::actions`]).
fn sole_action(raw: &RawRoute) -> Option<&'static str> {
    let present = [
        ("static", raw.static_files.is_some()),
        ("respond", raw.respond.is_some()),
        ("redirect", raw.redirect.is_some()),
        ("proxy", raw.proxy.is_some()),
    ];
    match present
        .iter()
        .filter(|(_, is)| *is)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [(action, _)] => Some(action),
        _ => None,
    }
}

fn path_match(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRoute) -> Option<PathMatch> {
    let (value, key, exact) = match (&raw.path, &raw.path_prefix) {
        (Some(_), Some(prefix)) => {
            let hint =
                "`path` matches one path exactly, `path_prefix` every path below it: keep one";
            let message = "`path` and `path_prefix` cannot be used together";
            cx.r.error(
                &path.key("path_prefix"),
                Some(prefix.span()),
                message,
                Some(hint.into()),
            );
            return None;
        }
        (Some(exact), None) => (exact, "path", true),
        (None, Some(prefix)) => (prefix, "path_prefix", false),
        (None, None) => return Some(PathMatch::Prefix("/".into())),
    };
    let text = value.get_ref();
    let start = format!("`{key}` must start with `/`, found `{text}`");
    let problem = if text.contains("://") {
        Some((
            start,
            "write only the path of the URL; match the host with `host`".to_owned(),
        ))
    } else if !text.starts_with('/') {
        Some((start, format!(r#"write "/{text}""#)))
    } else if let Some(stem) = text.strip_suffix('*') {
        let hint = format!(r#"path_prefix = "{stem}" matches every path below it"#);
        Some((format!("`{key}` has no wildcards, found `{text}`"), hint))
    } else {
        not_normal(key, text)
    };
    if let Some((message, hint)) = problem {
        cx.r.error(&path.key(key), Some(value.span()), message, Some(hint));
        return None;
    }
    Some(if exact {
        PathMatch::Exact(text.clone())
    } else {
        PathMatch::Prefix(text.clone())
    })
}

/// Requests are routed on their normal form (`sluice_core::uri_path`): a path written any
/// other way would never match, so it is refused with the form to write.
fn not_normal(key: &str, text: &str) -> Option<(String, String)> {
    use sluice_core::uri_path::{PathError, normalize};
    match normalize(text) {
        Ok(normal) if normal == text => None,
        Ok(normal) => Some((
            format!(
                "`{key}` is not in normal form: requests are matched once `{text}` reads `{normal}`"
            ),
            format!(
                r#"write "{normal}" (encoded letters, digits and `-._~` are decoded, other escapes get uppercase hex, `.` and `..` segments are resolved)"#
            ),
        )),
        Err(PathError::BadEscape) => Some((
            format!("`{key}` has a `%` that is not followed by two hex digits"),
            "write `%25` for a literal `%`".to_owned(),
        )),
        Err(PathError::AboveRoot) => Some((
            format!("`{key}` climbs above the root with `..`, found `{text}`"),
            "such requests are refused with 400; write the path without `..`".to_owned(),
        )),
    }
}

fn route_listeners(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawRoute,
    defined: &[String],
) -> Vec<String> {
    let Some(value) = &raw.listeners else {
        return Vec::new();
    };
    let key = path.key("listeners");
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = "name at least one listener, or leave `listeners` out to use all of them";
        cx.r.error(
            &key,
            Some(value.span()),
            "the listener list is empty",
            Some(hint.into()),
        );
    }
    let mut names = Vec::new();
    for item in items {
        let name = item.get_ref();
        if defined.contains(name) {
            names.push(name.clone());
            continue;
        }
        let hint = match closest(name, defined.iter().map(String::as_str)) {
            Some(best) => format!("did you mean `{best}`?"),
            None if defined.is_empty() => "no listener is defined".into(),
            None => format!("defined listeners: {}", quoted_list(defined)),
        };
        cx.r.error(
            &key,
            Some(item.span()),
            format!("unknown listener `{name}`"),
            Some(hint),
        );
    }
    names
}

/// `` `a`, `b` `` for hints listing names.
pub(super) fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `max_body_size` (0: no limit) and `body_timeout` ("0s": no limit) of a route.
fn body_limits(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRoute) -> BodyLimits {
    let d = BodyLimits::default();
    let max_size = cx.size(
        &path.key("max_body_size"),
        raw.max_body_size.as_ref(),
        d.max_size.unwrap_or(0),
        0,
    );
    let timeout = cx.duration(
        &path.key("body_timeout"),
        raw.body_timeout.as_ref(),
        d.timeout.unwrap_or_default(),
        true,
    );
    BodyLimits {
        max_size: Some(max_size).filter(|n| *n > 0),
        timeout: Some(timeout).filter(|t| !t.is_zero()),
    }
}
