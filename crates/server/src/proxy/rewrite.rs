//! The forwarded request's path under a proxy's `strip_prefix` / `replace_prefix`.
//!
//! Pure string work on the target as received: the path is never decoded or re-encoded (a
//! `%2F` stays a `%2F`, so the upstream sees the bytes the client sent) and the query, `?`
//! included, is copied byte for byte. Prefixes match whole segments only: `/api` strips `/api`
//! and `/api/users`, never `/apiary`. A path the rewrite does not apply to is forwarded as is.

use http::uri::PathAndQuery;
use sluice_config::PathRewrite;

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
#[allow(clippy::unwrap_used)]
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
}
