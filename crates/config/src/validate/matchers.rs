//! A route's request matchers: `methods`, `headers`, `query`, `client`, `path_regex`, and the
//! same keys under `not = { ... }`. A regex that does not compile is pointed at the column of
//! its error inside the string; a network that is not a CIDR block gets the trusted-proxies
//! hints.

use std::ops::Range;

use http::{HeaderName, Method};
use ipnet::IpNet;
use regex::Regex;
use toml::Spanned;

use super::Cx;
use crate::model::{Matchers, RouteMatchers, ValueMatch};
use crate::path::KeyPath;
use crate::raw::{Entries, OneOrMany, RawNot, RawRoute};

/// The route's matchers; bad ones are reported and left out (the route is then not built).
pub(super) fn route_matchers(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRoute) -> RouteMatchers {
    let must = matchers(
        cx,
        path,
        Keys {
            methods: raw.methods.as_ref(),
            headers: raw.headers.as_ref(),
            query: raw.query.as_ref(),
            client: raw.client.as_ref(),
            path_regex: raw.path_regex.as_ref(),
        },
    );
    let not = match &raw.not {
        Some(not) => {
            let RawNot {
                methods,
                headers,
                query,
                client,
                path_regex,
            } = not;
            matchers(
                cx,
                &path.key("not"),
                Keys {
                    methods: methods.as_ref(),
                    headers: headers.as_ref(),
                    query: query.as_ref(),
                    client: client.as_ref(),
                    path_regex: path_regex.as_ref(),
                },
            )
        }
        None => Matchers::default(),
    };
    RouteMatchers { must, not }
}

struct Keys<'a> {
    methods: Option<&'a Spanned<OneOrMany>>,
    headers: Option<&'a Spanned<Entries>>,
    query: Option<&'a Spanned<Entries>>,
    client: Option<&'a Spanned<OneOrMany>>,
    path_regex: Option<&'a Spanned<String>>,
}

fn matchers(cx: &mut Cx<'_>, path: &KeyPath, keys: Keys<'_>) -> Matchers {
    let methods = keys.methods.map(|v| methods(cx, &path.key("methods"), v));
    let headers = keys
        .headers
        .map(|v| headers(cx, &path.key("headers"), v))
        .unwrap_or_default();
    let query = keys
        .query
        .map(|v| query(cx, &path.key("query"), v))
        .unwrap_or_default();
    let client = keys.client.map(|v| networks(cx, &path.key("client"), v));
    let path_regex = keys
        .path_regex
        .and_then(|v| regex(cx, &path.key("path_regex"), v.get_ref(), v.span()));
    Matchers {
        methods,
        headers,
        query,
        client,
        path_regex,
    }
}

fn methods(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Vec<Method> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = "list at least one, e.g. methods = [\"GET\", \"POST\"]";
        cx.r.error(
            path,
            Some(value.span()),
            "the method list is empty",
            Some(hint.into()),
        );
    }
    let mut out = Vec::new();
    for item in items {
        let text = item.get_ref();
        let upper = text.to_ascii_uppercase();
        // RFC 9110 §9.1: the method token is case-sensitive; `get` is another method, which
        // no client sends by mistake, so it is refused rather than never matched.
        if text.is_empty() || text != &upper {
            let hint = format!(r#"methods are case-sensitive (RFC 9110 §9.1): write "{upper}""#);
            let message = format!("`{text}` is not a method as clients send them");
            cx.r.error(path, Some(item.span()), message, Some(hint));
            continue;
        }
        match Method::from_bytes(text.as_bytes()) {
            Ok(m) => out.push(m),
            Err(_) => cx.r.error(
                path,
                Some(item.span()),
                format!("`{text}` is not a method token"),
                Some("write e.g. \"GET\", \"POST\", \"DELETE\"".into()),
            ),
        }
    }
    out
}

fn headers(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<Entries>,
) -> Vec<(HeaderName, ValueMatch)> {
    let mut out = Vec::new();
    for (name, cond) in &value.get_ref().0 {
        let key = path.key(name);
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            let message = format!("`{name}` is not a header name");
            cx.r.error(&key, Some(cond.span()), message, None);
            continue;
        };
        if let Some(cond) = value_match(cx, &key, cond) {
            out.push((header, cond));
        }
    }
    out
}

fn query(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<Entries>) -> Vec<(String, ValueMatch)> {
    let mut out = Vec::new();
    for (name, cond) in &value.get_ref().0 {
        let key = path.key(name);
        if name.is_empty() {
            cx.r.error(
                &key,
                Some(cond.span()),
                "a query parameter name is empty",
                None,
            );
            continue;
        }
        if let Some(cond) = value_match(cx, &key, cond) {
            out.push((name.clone(), cond));
        }
    }
    out
}

/// `"value"`, `"=value"`, `"prefix*"`, `"~regex"`, `"present"`, `"absent"`.
fn value_match(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<ValueMatch> {
    let text = value.get_ref();
    Some(match text.as_str() {
        "present" => ValueMatch::Present,
        "absent" => ValueMatch::Absent,
        _ if text.starts_with('=') => ValueMatch::Exact(text[1..].to_owned()),
        _ if text.starts_with('~') => {
            // The regex starts one byte into the string: its columns shift by one.
            let span = value.span();
            let plain = span.len() == text.len() + 2;
            let inner = if plain {
                (span.start + 2)..(span.end - 1)
            } else {
                span
            };
            ValueMatch::Regex(regex_in(cx, path, &text[1..], inner, plain)?)
        }
        _ if text.ends_with('*') => ValueMatch::Prefix(text[..text.len() - 1].to_owned()),
        _ => ValueMatch::Exact(text.clone()),
    })
}

fn networks(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Vec<IpNet> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = "list at least one network, e.g. [\"10.0.0.0/8\"]";
        cx.r.error(
            path,
            Some(value.span()),
            "the network list is empty",
            Some(hint.into()),
        );
    }
    let mut nets = Vec::new();
    for item in items {
        match network(item.get_ref()) {
            Ok(found) => nets.extend(found),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, hint),
        }
    }
    nets
}

/// A CIDR block, one address, or `all` (every IPv4 and IPv6 address, as nginx's `all`).
pub(super) fn network(text: &str) -> Result<Vec<IpNet>, super::address::Rejection> {
    if text.trim() == "all" {
        let v4: IpNet = "0.0.0.0/0".parse().map_err(|_| (String::new(), None))?;
        let v6: IpNet = "::/0".parse().map_err(|_| (String::new(), None))?;
        return Ok(vec![v4, v6]);
    }
    super::trusted::parse(text).map(|net| vec![net])
}

/// A `path_regex` (whose string, quotes included, is at `span`).
fn regex(cx: &mut Cx<'_>, path: &KeyPath, text: &str, span: Range<usize>) -> Option<Regex> {
    let plain = span.len() == text.len() + 2;
    let inner = if plain {
        (span.start + 1)..(span.end - 1)
    } else {
        span.clone()
    };
    let re = regex_in(cx, path, text, inner, plain)?;
    if !text.starts_with('^') {
        // Unanchored is legal (nginx's `location ~` is too), but `/admin` also matching
        // `/public/admin` surprises: say so, without refusing.
        let hint = format!(r#"write "^{text}" to match from the start of the path"#);
        let message = "`path_regex` is not anchored: it matches anywhere in the path";
        cx.r.warn(path, Some(span), message, Some(hint));
    }
    Some(re)
}

/// Compiles `text`. On a syntax error, the diagnostic points at the error's column inside the
/// string when the string is written without escapes (`plain`: its source is the pattern
/// itself between quotes, starting at `start.start`), and at the whole string otherwise; the
/// message names the column either way.
fn regex_in(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    text: &str,
    start: Range<usize>,
    plain: bool,
) -> Option<Regex> {
    // regex-syntax's parser says where the error is (regex::Error only has a message).
    if let Err(err) = regex_syntax::ParserBuilder::new().build().parse(text) {
        let (span, detail) = match &err {
            regex_syntax::Error::Parse(e) => (*e.span(), e.kind().to_string()),
            regex_syntax::Error::Translate(e) => (*e.span(), e.kind().to_string()),
            _ => (
                regex_syntax::ast::Span::splat(regex_syntax::ast::Position::new(0, 1, 1)),
                err.to_string(),
            ),
        };
        let column = span.start.column;
        let at = if plain {
            let from = start.start + span.start.offset;
            let to = (start.start + span.end.offset.max(span.start.offset + 1)).min(start.end);
            from..to.max(from)
        } else {
            start
        };
        let message = format!("the regex does not compile at column {column}: {detail}");
        let hint = "the syntax is Rust's regex crate's (Perl-like, no look-around or \
                    backreferences); name a capture with (?P<name>...)";
        cx.r.error(path, Some(at), message, Some(hint.into()));
        return None;
    }
    match Regex::new(text) {
        Ok(re) => Some(re),
        Err(err) => {
            let message = format!("the regex does not compile: {err}");
            cx.r.error(path, Some(start), message, None);
            None
        }
    }
}
