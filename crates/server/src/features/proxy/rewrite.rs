//! The forwarded request's path: which one (`forward_path`), and its rewrite under a proxy's
//! `strip_prefix` / `replace_prefix`.
//!
//! `forward_path = "as_received"` (the default) forwards the target as the client sent it
//! ([`ReceivedTarget`], kept by the pipeline when it put the path in normal form);
//! `"normalized"` forwards the normal form the route matched.
//!
//! The rewrite is pure string work on the path being forwarded: it is never decoded or
//! re-encoded (a `%2F` stays a `%2F`) and the query, `?` included, is copied byte for byte.
//! Prefixes match whole segments only: `/api` strips `/api` and `/api/users`, never `/apiary`.
//! When forwarding as received and the received path does not start with `strip_prefix` but
//! its normal form does (`/%61pi/x`, `/x/../api/x` on a `/api` route), the normal form is
//! rewritten and forwarded: the prefix the route matched is always stripped, and no spelling
//! of it reaches the upstream unstripped. A path neither form of which the rewrite applies to
//! is forwarded unchanged.

use http::uri::PathAndQuery;
use sluice_config::{ForwardPath, PathRewrite, Proxy};

use crate::shared::request::ReceivedTarget;

/// The target to send upstream instead of the request's URI (which holds the normal form), or
/// `None` to send that.
pub(super) fn forwarded_target(
    parts: &http::request::Parts,
    route: &Proxy,
) -> Option<PathAndQuery> {
    let normal = parts.uri.path_and_query();
    let received = match route.forward_path {
        ForwardPath::AsReceived => parts.extensions.get::<ReceivedTarget>().map(|r| &r.0),
        ForwardPath::Normalized => None,
    };
    let Some(rw) = &route.rewrite else {
        return received.cloned();
    };
    received
        .and_then(|target| rewrite(target, rw))
        .or_else(|| normal.and_then(|target| rewrite(target, rw)))
        .or_else(|| received.cloned())
}

/// On a route with a `path_regex` that matched from the path's start, the forwarded target when
/// the proxy has a `replace_prefix` (and no `strip_prefix`): the match replaced by
/// `replace_prefix` with its `{name}`s filled from the captures, the rest of the normal-form
/// path and the query kept. `None`: the usual rules apply.
pub(super) fn captured_target(
    parts: &http::request::Parts,
    route: &Proxy,
    captures: &crate::shared::request::PathCaptures,
) -> Option<PathAndQuery> {
    let rw = route.rewrite.as_ref()?;
    let (None, Some(replace), Some(end)) = (&rw.strip_prefix, &rw.replace_prefix, captures.end)
    else {
        return None;
    };
    let path = parts.uri.path();
    let rest = path.get(end..)?;
    let mut out = sluice_config::expand_captures(replace, &captures.values);
    out.push_str(rest);
    if out.is_empty() {
        out.push('/');
    }
    if let Some(query) = parts.uri.query() {
        out.push('?');
        out.push_str(query);
    }
    // A capture holds only what the normal-form path did; anything that still does not parse
    // leaves the usual rewrite to decide.
    PathAndQuery::try_from(out).ok()
}

/// `request_headers.set` values with `{name}`s filled from the captures (set again over the
/// literal values `apply_edits` wrote).
pub(super) fn captured_headers(
    headers: &mut http::HeaderMap,
    route: &Proxy,
    captures: &crate::shared::request::PathCaptures,
) {
    for (name, value) in &route.request_headers.set {
        let Ok(text) = value.to_str() else { continue };
        if !text.contains('{') {
            continue;
        }
        let filled = sluice_config::expand_captures(text, &captures.values);
        if let Ok(filled) = http::HeaderValue::try_from(filled) {
            headers.insert(name.clone(), filled);
        }
    }
}

/// The target to forward instead of `target`, or `None` to forward `target` unchanged.
pub(super) fn rewrite(target: &PathAndQuery, rewrite: &PathRewrite) -> Option<PathAndQuery> {
    let text = target.as_str();
    // Split by hand rather than with `path()`/`query()`: those drop an empty `?`, which the
    // upstream must still see.
    let (path, query) = text.split_at(text.find('?').unwrap_or(text.len()));
    // `*` (OPTIONS *) and anything else that is not an origin-form path has no prefix.
    if !path.starts_with('/') {
        return None;
    }
    let rest = match &rewrite.strip_prefix {
        Some(strip) => match path.strip_prefix(strip.as_str()) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => return None,
        },
        None => path,
    };
    let replace = rewrite.replace_prefix.as_deref().unwrap_or("");
    let mut out = String::with_capacity(replace.len() + rest.len() + query.len() + 1);
    out.push_str(replace);
    out.push_str(rest);
    if out.is_empty() {
        // The whole path was the stripped prefix: the upstream's root.
        out.push('/');
    }
    out.push_str(query);
    // Every piece was valid in a target (the prefix is checked like one when the config is
    // loaded), so this does not fail; if it ever did, the path is better forwarded unchanged
    // than the request refused.
    PathAndQuery::try_from(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(strip: Option<&str>, replace: Option<&str>, target: &str) -> String {
        let rw = PathRewrite {
            strip_prefix: strip.map(str::to_owned),
            replace_prefix: replace.map(str::to_owned),
        };
        let target = PathAndQuery::try_from(target).unwrap();
        match rewrite(&target, &rw) {
            Some(new) => new.as_str().to_owned(),
            None => target.as_str().to_owned(),
        }
    }

    #[test]
    fn strip_removes_whole_segments() {
        let strip = |t| apply(Some("/api"), None, t);
        assert_eq!(strip("/api/users?x=1"), "/users?x=1");
        assert_eq!(strip("/api"), "/");
        assert_eq!(strip("/api/"), "/");
        assert_eq!(strip("/api?x=1"), "/?x=1");
        assert_eq!(strip("/apiary"), "/apiary");
        assert_eq!(strip("/web/api"), "/web/api");
        assert_eq!(strip("/API/users"), "/API/users");
    }

    #[test]
    fn replace_takes_the_stripped_prefix_place() {
        let both = |t| apply(Some("/api"), Some("/v2"), t);
        assert_eq!(both("/api/users"), "/v2/users");
        assert_eq!(both("/api"), "/v2");
        assert_eq!(both("/api/"), "/v2/");
        assert_eq!(both("/apiary"), "/apiary");
        assert_eq!(both("/other"), "/other");
    }

    #[test]
    fn replace_alone_is_prepended() {
        let add = |t| apply(None, Some("/v2"), t);
        assert_eq!(add("/users"), "/v2/users");
        assert_eq!(add("/"), "/v2/");
        assert_eq!(add("*"), "*");
    }

    #[test]
    fn query_and_encoding_are_kept_byte_for_byte() {
        let strip = |t| apply(Some("/api"), None, t);
        assert_eq!(strip("/api/a%2Fb%20c?a=1&b=%20x"), "/a%2Fb%20c?a=1&b=%20x");
        assert_eq!(strip("/api/x?"), "/x?");
        assert_eq!(strip("/api?"), "/?");
        assert_eq!(strip("/api/x??a=/api"), "/x??a=/api");
        // The prefix is compared with the path as received, not decoded.
        assert_eq!(strip("/%61pi/x"), "/%61pi/x");
    }

    /// What goes upstream for `target` (normalised by the pipeline first) on a proxy with
    /// `forward_path` and an optional `strip_prefix`.
    fn forwarded(forward: ForwardPath, strip: Option<&str>, target: &str) -> String {
        let mut req = http::Request::builder().uri(target).body(()).unwrap();
        crate::pipeline::target::normalize(&mut req).unwrap();
        let (parts, ()) = req.into_parts();
        let mut route = Proxy::to("backend");
        route.forward_path = forward;
        route.rewrite = strip.map(|s| PathRewrite {
            strip_prefix: Some(s.to_owned()),
            replace_prefix: None,
        });
        match forwarded_target(&parts, &route) {
            Some(new) => new.as_str().to_owned(),
            None => parts.uri.to_string(),
        }
    }

    #[test]
    fn the_received_target_goes_unless_normalized_is_asked_for() {
        use ForwardPath::{AsReceived, Normalized};
        assert_eq!(
            forwarded(AsReceived, None, "/%61pi/./x?q=%61"),
            "/%61pi/./x?q=%61"
        );
        assert_eq!(
            forwarded(Normalized, None, "/%61pi/./x?q=%61"),
            "/api/x?q=%61"
        );
        assert_eq!(forwarded(AsReceived, None, "/api/x"), "/api/x");
    }

    #[test]
    fn a_prefix_spelt_otherwise_is_stripped_from_the_normal_form() {
        use ForwardPath::{AsReceived, Normalized};
        // Received with the prefix as written: the received bytes, stripped.
        assert_eq!(
            forwarded(AsReceived, Some("/api"), "/api/a%2fb/%7e"),
            "/a%2fb/%7e"
        );
        // The prefix only visible once normalised: the normal form, stripped.
        assert_eq!(forwarded(AsReceived, Some("/api"), "/%61pi/x?y"), "/x?y");
        assert_eq!(forwarded(AsReceived, Some("/api"), "/z/../api/x"), "/x");
        assert_eq!(forwarded(Normalized, Some("/api"), "/api/%7e"), "/~");
        // Neither form has it: forwarded as received.
        assert_eq!(
            forwarded(AsReceived, Some("/api"), "/other/%7e"),
            "/other/%7e"
        );
    }
}
