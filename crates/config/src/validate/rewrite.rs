//! `strip_prefix` / `replace_prefix` of a proxy: the path the upstream sees (nginx's
//! `proxy_pass http://app/v2/;` under `location /api/`, Caddy's `handle_path`).
//!
//! Both prefixes are written the same way: starting with `/`, without a trailing `/` (prefixes
//! are whole path segments, and the rest of the path brings its own `/`), and only with
//! characters a request path can carry, percent-encoded as clients send them (the comparison is
//! on the path being forwarded, never decoded). A `strip_prefix` that no path of the route can start
//! with is refused: it would silently do nothing.

use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use crate::model::{PathMatch, PathRewrite};
use crate::path::KeyPath;
use crate::raw::RawProxy;

/// The proxy's rewrite, `None` when it has neither key (or a bad one, which is reported).
pub(super) fn rewrite(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawProxy,
    route: Option<&PathMatch>,
) -> Option<PathRewrite> {
    let strip_prefix = raw
        .strip_prefix
        .as_ref()
        .and_then(|value| prefix(cx, &path.key("strip_prefix"), value, Key::Strip));
    let replace_prefix = raw
        .replace_prefix
        .as_ref()
        .and_then(|value| prefix(cx, &path.key("replace_prefix"), value, Key::Replace));
    if let (Some(strip), Some(route), Some(value)) = (&strip_prefix, route, &raw.strip_prefix)
        && let Err((message, hint)) = reachable(strip, route)
    {
        cx.r.error(&path.key("strip_prefix"), Some(value.span()), message, hint);
        return None;
    }
    if strip_prefix.is_none() && replace_prefix.is_none() {
        return None;
    }
    Some(PathRewrite {
        strip_prefix,
        replace_prefix,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Strip,
    Replace,
}

impl Key {
    fn name(self) -> &'static str {
        match self {
            Key::Strip => "strip_prefix",
            Key::Replace => "replace_prefix",
        }
    }
}

fn prefix(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>, key: Key) -> Option<String> {
    parse_prefix(value.get_ref(), key)
        .map_err(|(message, hint)| cx.r.error(path, Some(value.span()), message, hint))
        .ok()
}

/// `text` without its `{name}` placeholders (a name of letters, digits and `_`).
fn strip_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A prefix as written in the file, or why it is refused.
fn parse_prefix(text: &str, key: Key) -> Result<String, Rejection> {
    let name = key.name();
    let refuse = |message: String, hint: String| Err((message, Some(hint)));
    if text.is_empty() {
        return refuse(
            format!("`{name}` is empty"),
            r#"leave it out, or write a path prefix such as "/api""#.into(),
        );
    }
    if text.contains("://") {
        return refuse(
            format!("`{name}` must start with `/`, found `{text}`"),
            "write only the path of the URL; the upstream's address is in `upstream` or `to`"
                .into(),
        );
    }
    if !text.starts_with('/') {
        return refuse(
            format!("`{name}` must start with `/`, found `{text}`"),
            format!(r#"write "/{text}""#),
        );
    }
    if let Some(at) = text.find(['?', '#']) {
        let path = &text[..at];
        return refuse(
            format!("`{name}` is a path: it cannot hold a query (`?`) or a fragment (`#`)"),
            format!(
                r#"write "{path}"; the query is forwarded as the client sent it"#,
                path = path.trim_end_matches('/')
            ),
        );
    }
    if text == "/" {
        let why = match key {
            Key::Strip => "every path starts with `/`",
            Key::Replace => "every path already starts with `/`",
        };
        return refuse(
            format!(r#"`{name} = "/"` changes nothing"#),
            format!("{why}: leave it out"),
        );
    }
    if let Some(stem) = text.strip_suffix('*') {
        let stem = stem.trim_end_matches('/');
        return refuse(
            format!("`{name}` has no wildcards, found `{text}`"),
            format!(r#"{name} = "{stem}" applies to every path below it"#),
        );
    }
    if let Some(trimmed) = text.strip_suffix('/') {
        let hint = match key {
            Key::Strip => format!(
                r#"write "{trimmed}": a prefix is stripped as whole segments, so "{trimmed}" turns "{trimmed}/users" into "/users""#
            ),
            Key::Replace => format!(
                r#"write "{trimmed}": the rest of the path brings its own `/`, so "/users" becomes "{trimmed}/users""#
            ),
        };
        return refuse(format!("`{name}` ends with `/`, found `{text}`"), hint);
    }
    // `{name}`: a capture of the route's `path_regex` (filled in before the path is sent).
    let without_captures = match key {
        Key::Replace => strip_placeholders(text),
        Key::Strip => text.to_owned(),
    };
    if let Some(bad) = without_captures.chars().find(|&c| !path_char(c)) {
        let shown = if bad == ' ' {
            "a space".into()
        } else {
            format!("`{bad}`")
        };
        return refuse(
            format!("`{name}` contains {shown}, which a request path cannot carry"),
            "percent-encode it as clients send it, e.g. `%20` for a space".into(),
        );
    }
    if !percent_encoding_ok(text) {
        return refuse(
            format!("`{name}` has a `%` that is not followed by two hex digits"),
            "write `%25` for a literal `%`".into(),
        );
    }
    if text.split('/').any(|s| s == "." || s == "..") {
        return refuse(
            format!("`{name}` has a `.` or `..` segment"),
            "write the prefix without dot segments: servers resolve them differently".into(),
        );
    }
    Ok(text.to_owned())
}

/// RFC 3986 `pchar` (unreserved, sub-delims, `:`, `@`; `%` checked apart) and `/`.
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/%".contains(c)
}

fn percent_encoding_ok(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    })
}

/// Whether some path the route matches starts with `strip` as whole segments.
fn reachable(strip: &str, route: &PathMatch) -> Result<(), Rejection> {
    let under = |p: &str| {
        p.strip_prefix(strip)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    let (ok, matched, key) = match route {
        PathMatch::Exact(p) => (under(p), p, "path"),
        // A longer prefix is fine: paths below it are stripped, the others forwarded unchanged.
        PathMatch::Prefix(p) => (under(p) || strip.starts_with(p.as_str()), p, "path_prefix"),
    };
    if ok {
        return Ok(());
    }
    let stem = matched.trim_end_matches('/');
    let hint = if stem.is_empty() {
        "leave it out".to_owned()
    } else {
        format!(
            r#"a prefix is stripped as whole segments: to strip the route's own {key}, write strip_prefix = "{stem}""#
        )
    };
    Err((
        format!(
            "`strip_prefix = \"{strip}\"` never applies: this route matches {key} = \"{matched}\""
        ),
        Some(hint),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str, key: Key) -> String {
        parse_prefix(text, key).unwrap_err().0
    }

    #[test]
    fn good_prefixes_are_kept_as_written() {
        for text in ["/api", "/a/b", "/caf%C3%A9", "/v2;x=1", "/~user"] {
            assert_eq!(parse_prefix(text, Key::Strip).unwrap(), text);
        }
    }

    #[test]
    fn bad_prefixes_are_refused() {
        assert!(message("api", Key::Strip).contains("must start with `/`"));
        assert!(message("http://x/api", Key::Replace).contains("must start with `/`"));
        assert!(message("/api?x=1", Key::Strip).contains("query"));
        assert!(message("/api#top", Key::Replace).contains("fragment"));
        assert!(message("/", Key::Strip).contains("changes nothing"));
        assert!(message("/api/", Key::Replace).contains("ends with `/`"));
        assert!(message("/api/*", Key::Strip).contains("wildcards"));
        assert!(message("/a b", Key::Strip).contains("a space"));
        assert!(message("/a%2", Key::Strip).contains("two hex digits"));
        assert!(message("/a/../b", Key::Strip).contains("`..`"));
        assert!(message("", Key::Strip).contains("empty"));
    }

    #[test]
    fn strip_prefix_must_be_reachable_from_the_route() {
        let prefix = |p: &str| PathMatch::Prefix(p.into());
        assert!(reachable("/api", &prefix("/api/")).is_ok());
        assert!(reachable("/api", &prefix("/api")).is_ok());
        assert!(reachable("/api", &prefix("/api/v1")).is_ok());
        assert!(reachable("/api", &prefix("/")).is_ok());
        assert!(reachable("/api/v1", &prefix("/api/")).is_ok());
        assert!(reachable("/api", &prefix("/apiary")).is_err());
        assert!(reachable("/api", &prefix("/web/")).is_err());
        assert!(reachable("/api", &PathMatch::Exact("/api".into())).is_ok());
        assert!(reachable("/api", &PathMatch::Exact("/api/x".into())).is_ok());
        assert!(reachable("/api", &PathMatch::Exact("/apix".into())).is_err());
    }
}
