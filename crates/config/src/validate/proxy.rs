//! The `proxy` action: which upstream group, the `Host` it sees, and header edits on the way in
//! and out. Everything is checked even when the upstream is unknown, so all mistakes show at once.

use http::header::{HeaderName, HeaderValue};
use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use super::routes::quoted_list;
use crate::model::{Action, HeaderEdits, HostHeader, Proxy};
use crate::path::{KeyPath, TomlKey};
use crate::raw::{OneOrMany, RawHeaderEdits, RawProxy};
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

pub(super) fn proxy(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawProxy,
    upstreams: &[String],
) -> Option<Action> {
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
    let upstream = upstream(cx, path, raw, upstreams)?;
    Some(Action::Proxy(Proxy {
        upstream,
        host: host?,
        request_headers,
        response_headers,
    }))
}

fn upstream(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawProxy,
    upstreams: &[String],
) -> Option<String> {
    let Some(upstream) = &raw.upstream else {
        cx.r.missing(
            path,
            "upstream",
            Some(r#"e.g. upstream = "api", naming an [upstreams.api] table"#.into()),
        );
        return None;
    };
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
    let mut edits = HeaderEdits::default();
    // The names as written, beside `edits.set`, for the hint about a name given twice.
    let mut written: Vec<&str> = Vec::new();
    for (name, value) in &raw.set.0 {
        let key = path.key("set").key(name);
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
        if let Some(i) = edits.set.iter().position(|(n, _)| *n == header_name) {
            let message = format!("header `{header_name}` is set twice");
            let first = written[i];
            let hint = format!("header names ignore case: `{first}` is the same header; keep one");
            cx.r.key_error(&key, message, Some(hint));
        } else if let Some(header_value) = header_value {
            edits.set.push((header_name, header_value));
            written.push(name);
        }
    }
    if let Some(value) = &raw.remove {
        for item in OneOrMany::items(value) {
            match header_name(item.get_ref(), request) {
                Ok(name) if edits.remove.contains(&name) => {}
                Ok(name) => edits.remove.push(name),
                Err((message, hint)) => {
                    cx.r.error(&path.key("remove"), Some(item.span()), message, hint)
                }
            }
        }
    }
    edits
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
#[allow(clippy::unwrap_used)]
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
