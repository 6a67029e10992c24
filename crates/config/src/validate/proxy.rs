//! The `proxy` action: where it forwards (a named upstream group, or one inline address), the
//! `Host` it sees, header edits on the way in and out, and the path it forwards (in
//! [`super::rewrite`]). Everything is checked even when the upstream is unknown, so all mistakes
//! show at once.
//!
//! An inline `to = "host:port"` becomes an upstream group of its own with default settings, named
//! [`inline_name`] after the route, so the server only ever sees named groups.

use http::header::{HeaderName, HeaderValue};
use toml::Spanned;

use super::Cx;
use super::actions::WithInline;
use super::address::{Rejection, Scheme};
use super::routes::quoted_list;
use crate::model::{
    Action, DecompressRequests, ForwardPath, HeaderEdits, HostHeader, PathMatch, Proxy, Upstream,
    UpstreamServer, UpstreamTls,
};
use crate::path::{KeyPath, TomlKey};
use crate::raw::{Entries, OneOrMany, RawDecompress, RawHeaderEdits, RawProxy};
use crate::schema::closest;

/// Headers that describe one connection or the body's framing: sluice writes them itself, so a
/// proxy may neither set nor remove them.
const MANAGED: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

const HOST_MODES: [&str; 2] = ["pass", "upstream"];

/// What a route's `proxy` may forward to.
pub(super) struct Targets<'a> {
    /// Every `[upstreams.NAME]` in the file, valid or not.
    pub defined: &'a [String],
    /// The route's name, which names the group an inline `to` becomes.
    pub route: &'a str,
    /// What the route matches, if valid: a `strip_prefix` must be able to apply to it.
    pub path: Option<&'a PathMatch>,
}

/// The name of the upstream group made from the inline `to` of route `route`. A bare TOML key
/// cannot contain `:`; a quoted one can, so a clash with a table is checked for.
pub(super) fn inline_name(route: &str) -> String {
    format!("route:{route}")
}

/// The proxy action and, for an inline `to`, the upstream group made for it.
pub(super) fn proxy(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawProxy,
    targets: &Targets<'_>,
) -> Option<WithInline> {
    let host = match &raw.host {
        Some(value) => host_header(cx, &path.key("host"), value),
        None => Some(HostHeader::Pass),
    };
    let request_headers = raw
        .request_headers
        .as_ref()
        .map_or_else(HeaderEdits::default, |r| {
            header_edits(cx, &path.key("request_headers"), r, true)
        });
    let response_headers = raw
        .response_headers
        .as_ref()
        .map_or_else(HeaderEdits::default, |r| {
            header_edits(cx, &path.key("response_headers"), r, false)
        });
    let decompress_requests = raw
        .decompress_requests
        .as_ref()
        .map(|r| decompress(cx, &path.key("decompress_requests"), r));
    let rewrite = super::rewrite::rewrite(cx, path, raw, targets.path);
    let forward_path = match &raw.forward_path {
        Some(value) => forward_path(cx, &path.key("forward_path"), value)?,
        None => ForwardPath::AsReceived,
    };
    let upgrade = super::upgrade::upgrade(cx, path, raw);
    let (upstream, inline) = target(cx, path, raw, targets)?;
    let proxy = Proxy {
        upstream,
        host: host?,
        request_headers,
        response_headers,
        decompress_requests,
        rewrite,
        forward_path,
        upgrade,
    };
    Some((Action::Proxy(proxy), inline))
}

/// `forward_path = "as_received" | "normalized"`; the British spelling is understood for a hint.
fn forward_path(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<ForwardPath> {
    let text = value.get_ref().as_str();
    match text {
        "as_received" => return Some(ForwardPath::AsReceived),
        "normalized" => return Some(ForwardPath::Normalized),
        _ => {}
    }
    let hint = match text.trim().to_ascii_lowercase().replace(['-', ' '], "_").as_str() {
        "normalised" | "normal" | "normalize" | "normalise" => r#"write "normalized""#.to_owned(),
        "as_is" | "raw" | "received" | "original" | "as_recieved" => {
            r#"write "as_received""#.to_owned()
        }
        _ => r#"write "as_received" (the path as the client sent it, the default) or "normalized" (the form routes matched)"#.to_owned(),
    };
    cx.r.error(
        path,
        Some(value.span()),
        format!("unknown `forward_path` `{text}`"),
        Some(hint),
    );
    None
}

/// Request-body decompression limits; defaults from the model.
fn decompress(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawDecompress) -> DecompressRequests {
    let d = DecompressRequests::default();
    let max_size = cx.size(&path.key("max_size"), raw.max_size.as_ref(), d.max_size, 1);
    let max_ratio = cx.count(
        &path.key("max_ratio"),
        raw.max_ratio.as_ref(),
        d.max_ratio,
        (1, 1_000_000),
        Some("decoded bytes per encoded byte; gzip of JSON is about 5-20, bombs are 1000+"),
    );
    DecompressRequests {
        max_size,
        max_ratio,
    }
}

/// Exactly one of `upstream` and `to`: the group's name, and the group itself when it is inline.
pub(super) fn target(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawProxy,
    targets: &Targets<'_>,
) -> Option<(String, Option<Upstream>)> {
    match (&raw.upstream, &raw.to) {
        (Some(upstream), None) => named(cx, path, upstream, targets.defined).map(|n| (n, None)),
        (None, Some(to)) => inline(cx, path, to, targets),
        (Some(_), Some(to)) => {
            let message = "`upstream` and `to` cannot be used together";
            let hint = "`upstream` names an [upstreams.NAME] group, `to` is one server's address: keep one";
            cx.r.error(&path.key("to"), Some(to.span()), message, Some(hint.into()));
            None
        }
        (None, None) => {
            if !cx.r.misspelt(path, &["upstream", "to"]) {
                let hint = r#"add upstream = "api", naming an [upstreams.api] table, or to = "127.0.0.1:9001", one server's address"#;
                let message = format!("missing `upstream` or `to` in {path}");
                cx.r.error(path, None, message, Some(hint.into()));
            }
            None
        }
    }
}

/// `upstream = "NAME"`, which must name an `[upstreams.NAME]` table.
fn named(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    upstream: &Spanned<String>,
    upstreams: &[String],
) -> Option<String> {
    let name = upstream.get_ref();
    if upstreams.contains(name) {
        return Some(name.clone());
    }
    let hint = match closest(name, upstreams.iter().map(String::as_str)) {
        Some(best) => format!("did you mean `{best}`?"),
        None if upstreams.is_empty() => format!(
            "define it: [upstreams.{}] with servers = [...]",
            TomlKey(name)
        ),
        None => format!("defined upstreams: {}", quoted_list(upstreams)),
    };
    cx.r.error(
        &path.key("upstream"),
        Some(upstream.span()),
        format!("unknown upstream `{name}`"),
        Some(hint),
    );
    None
}

/// `to = "host:port"` (or `"unix:/path"`): one server, parsed like those of `servers`, in a
/// group of its own with default settings.
fn inline(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    to: &Spanned<String>,
    targets: &Targets<'_>,
) -> Option<(String, Option<Upstream>)> {
    let key = path.key("to");
    let address = super::servers::address(cx, &key, to.get_ref(), to.span());
    let name = inline_name(targets.route);
    if targets.defined.contains(&name) {
        let message = format!(
            "`to` would make an upstream group `{name}`, but [upstreams.{}] is already defined",
            TomlKey(&name)
        );
        let hint = format!(
            r#"`to` names its group "route:" and the route's name: rename the table or the route, or drop `to` and use upstream = "{name}""#
        );
        cx.r.error(&key, Some(to.span()), message, Some(hint));
        return None;
    }
    let (address, scheme) = address?;
    let mut upstream = Upstream::new(name.clone(), vec![UpstreamServer::new(address)]);
    if scheme == Scheme::Https {
        upstream.tls = Some(UpstreamTls::default());
    }
    Some((name, Some(upstream)))
}

fn host_header(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<HostHeader> {
    parse_host_header(value.get_ref())
        .map_err(|(message, hint)| cx.r.error(path, Some(value.span()), message, hint))
        .ok()
}

/// `"pass"`, `"upstream"`, or a fixed `host[:port]`.
fn parse_host_header(text: &str) -> Result<HostHeader, Rejection> {
    match text {
        "pass" => return Ok(HostHeader::Pass),
        "upstream" => return Ok(HostHeader::Upstream),
        _ => {}
    }
    let t = text.trim();
    let bad = |hint: String| Err((format!("invalid Host value `{text}`"), Some(hint)));
    if t.is_empty() {
        let hint = r#""pass" sends the client's Host, "upstream" the server's address"#;
        return Err(("the Host value is empty".into(), Some(hint.into())));
    }
    if let Some((_, rest)) = t.split_once("://") {
        let host = rest.split('/').next().unwrap_or_default();
        return bad(format!(r#"write only the host (and port): "{host}""#));
    }
    if let Some((host, _)) = t.split_once('/') {
        return bad(format!(r#"a Host has no path: write "{host}""#));
    }
    // A bare word next to a mode is a typo, not a one-label host name someone wants to send.
    let plain_word = !t.contains(['.', ':', '[']);
    if let (true, Some(meant)) = (plain_word, closest(t, HOST_MODES)) {
        let hint = if t.eq_ignore_ascii_case(meant) {
            format!(r#"write "{meant}", in lowercase"#)
        } else {
            format!(r#"did you mean "{meant}"?"#)
        };
        return Err((format!("unknown Host mode `{text}`"), Some(hint)));
    }
    let host_like = t
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'));
    match HeaderValue::from_str(t) {
        Ok(value) if host_like => Ok(HostHeader::Set(value)),
        _ => bad(r#"a host name with an optional port, e.g. "api.internal:8080""#.into()),
    }
}

/// `set` and `remove` of `request_headers` (`request = true`) or `response_headers`.
fn header_edits(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawHeaderEdits,
    request: bool,
) -> HeaderEdits {
    HeaderEdits {
        set: header_entries(cx, &path.key("set"), &raw.set, request),
        remove: header_names(cx, &path.key("remove"), raw.remove.as_ref(), request),
    }
}

/// The names and values of a `set` (or `add`) table at `path`: each name one a proxy may
/// edit, each value a valid field value, no name twice (names ignore case).
pub(super) fn header_entries(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    entries: &Entries,
    request: bool,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut valid: Vec<(HeaderName, HeaderValue)> = Vec::new();
    // The names as written, beside `valid`, for the hint about a name given twice.
    let mut written: Vec<&str> = Vec::new();
    for (name, value) in &entries.0 {
        let key = path.key(name);
        let header_name = match header_name(name, request) {
            Ok(header_name) => Some(header_name),
            Err((message, hint)) => {
                cx.r.key_error(&key, message, hint);
                None
            }
        };
        let header_value = HeaderValue::from_str(value.get_ref()).ok();
        if header_value.is_none() {
            let hint = Some("use visible ASCII characters, without line breaks".into());
            let message = format!("invalid value for header `{name}`");
            cx.r.error(&key, Some(value.span()), message, hint);
        }
        let Some(header_name) = header_name else {
            continue;
        };
        if let Some(i) = valid.iter().position(|(n, _)| *n == header_name) {
            let message = format!("header `{header_name}` is set twice");
            let first = written[i];
            let hint = format!("header names ignore case: `{first}` is the same header; keep one");
            cx.r.key_error(&key, message, Some(hint));
        } else if let Some(header_value) = header_value {
            valid.push((header_name, header_value));
            written.push(name);
        }
    }
    valid
}

/// The names of a `remove` list at `path`, each one a proxy may edit, without repeats.
pub(super) fn header_names(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: Option<&Spanned<OneOrMany>>,
    request: bool,
) -> Vec<HeaderName> {
    let mut names = Vec::new();
    let Some(value) = value else {
        return names;
    };
    for item in OneOrMany::items(value) {
        match header_name(item.get_ref(), request) {
            Ok(name) if names.contains(&name) => {}
            Ok(name) => names.push(name),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, hint),
        }
    }
    names
}

/// A header name a proxy may edit.
fn header_name(text: &str, request: bool) -> Result<HeaderName, Rejection> {
    let Ok(name) = HeaderName::from_bytes(text.as_bytes()) else {
        let hint = "header names are letters, digits and `-`, e.g. \"x-request-id\"";
        return Err((
            format!("invalid header name {}", TomlKey(text)),
            Some(hint.into()),
        ));
    };
    if request && name == http::header::HOST {
        let hint =
            r#"use `host` in the proxy table: host = "api.internal" (or "pass", "upstream")"#;
        return Err((
            "the Host header is not edited here".into(),
            Some(hint.into()),
        ));
    }
    if MANAGED.contains(&name.as_str()) {
        let hint = "it belongs to one connection or to the body's framing, which sluice handles";
        return Err((
            format!("header `{name}` is managed by sluice"),
            Some(hint.into()),
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_modes_and_fixed_values() {
        assert_eq!(parse_host_header("pass").unwrap(), HostHeader::Pass);
        assert_eq!(parse_host_header("upstream").unwrap(), HostHeader::Upstream);
        assert_eq!(
            parse_host_header("api.internal:8080").unwrap(),
            HostHeader::Set(HeaderValue::from_static("api.internal:8080"))
        );
        assert_eq!(
            parse_host_header("localhost").unwrap(),
            HostHeader::Set(HeaderValue::from_static("localhost"))
        );
    }

    #[test]
    fn host_mistakes_get_hints() {
        let hint = |text| parse_host_header(text).unwrap_err().1.unwrap();
        assert!(hint("upsteam").contains(r#""upstream""#));
        assert_eq!(hint("Pass"), r#"write "pass", in lowercase"#);
        assert!(hint("https://api.example.com/v1").contains(r#""api.example.com""#));
        assert!(hint("api.example.com/v1").contains("no path"));
        assert!(hint("a b.example").contains("host name"));
        assert!(hint("").contains(r#""pass""#));
    }

    #[test]
    fn managed_headers_are_refused() {
        assert!(header_name("Transfer-Encoding", false).is_err());
        assert!(header_name("host", true).is_err());
        assert_eq!(header_name("Host", false).unwrap(), http::header::HOST);
        assert_eq!(header_name("X-Env", true).unwrap().as_str(), "x-env");
        assert!(header_name("bad header", true).is_err());
    }
}
