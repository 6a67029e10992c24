//! A route's action: exactly one of `static`, `respond`, `redirect` or `proxy` (the last in
//! [`super::proxy`]). Every action present is validated (so its own mistakes are reported too)
//! before "none" or "more than one" is reported. A proxy with an inline `to` also brings the
//! upstream group made for it.

use http::header::{HeaderName, HeaderValue};
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use sluice_core::SidecarCoding;
use toml::Spanned;

use super::Cx;
use super::files::Kind;
use super::proxy::Targets;
use crate::model::{Action, FixedResponse, Redirect, StaticFiles, Upstream};
use crate::path::{KeyPath, TomlKey};
use crate::raw::{BoolOrList, OneOrMany, RawRedirect, RawRespond, RawRoute, RawStatic};
use crate::schema::closest;

const ACTIONS: [&str; 4] = ["static", "respond", "redirect", "proxy"];

/// A route's action and, for a proxy with an inline `to`, the upstream group made for it.
pub(super) type WithInline = (Action, Option<Upstream>);

pub(super) fn action(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawRoute,
    targets: &Targets<'_>,
) -> Option<WithInline> {
    let mut actions: Vec<(&str, Option<WithInline>)> = Vec::new();
    let alone = |action: Option<Action>| action.map(|a| (a, None));
    if let Some(s) = &raw.static_files {
        actions.push(("static", alone(static_files(cx, &path.key("static"), s))));
    }
    if let Some(r) = &raw.respond {
        actions.push(("respond", alone(respond(cx, &path.key("respond"), r))));
    }
    if let Some(r) = &raw.redirect {
        actions.push(("redirect", alone(redirect(cx, &path.key("redirect"), r))));
    }
    if let Some(p) = &raw.proxy {
        actions.push((
            "proxy",
            super::proxy::proxy(cx, &path.key("proxy"), p, targets),
        ));
    }
    match actions.as_slice() {
        [] => {
            if !cx.r.misspelt(path, &ACTIONS) {
                let hint = "add one of `static`, `respond`, `redirect` or `proxy`, e.g. respond = { status = 204 }";
                cx.r.error(path, None, "this route has no action", Some(hint.into()));
            }
            None
        }
        [(_, action)] => action.clone(),
        [(first, _), (second, _), ..] => {
            let names: Vec<String> = actions.iter().map(|(n, _)| format!("`{n}`")).collect();
            let message = format!(
                "a route has exactly one action; this one has {}",
                names.join(" and ")
            );
            let hint = format!(
                "keep `{first}` or `{second}`, or split it into routes with different hosts or paths"
            );
            cx.r.error(&path.key(second), None, message, Some(hint));
            None
        }
    }
}

fn static_files(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawStatic) -> Option<Action> {
    let root = match &raw.root {
        Some(root) => cx.existing(&path.key("root"), root, "static root", Kind::Dir),
        None => {
            cx.r.missing(
                path,
                "root",
                Some(r#"e.g. root = "public", the directory to serve"#.into()),
            );
            None
        }
    };
    // Checked even when the root is bad, so that its mistakes show up in the same round.
    let mut index = StaticFiles::new(std::path::PathBuf::new()).index; // the model's default
    if let Some(value) = &raw.index {
        index = Vec::new();
        for item in OneOrMany::items(value) {
            let name = item.get_ref();
            if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
                let message = format!("invalid index file name `{name}`");
                let hint =
                    Some(r#"a file name inside the requested directory, e.g. "index.html""#.into());
                cx.r.error(&path.key("index"), Some(item.span()), message, hint);
            }
            index.push(name.clone());
        }
    }
    let precompressed = match &raw.precompressed {
        Some(value) => sidecar_codings(cx, &path.key("precompressed"), value),
        None => Vec::new(),
    };
    let memory_cache = cx.size(
        &path.key("memory_cache"),
        raw.memory_cache.as_ref(),
        StaticFiles::DEFAULT_MEMORY_CACHE,
        0,
    );
    let memory_cache_recheck = memory_cache_recheck(cx, path, raw);
    let max_age = raw
        .max_age
        .as_ref()
        .and_then(|value| super::response::max_age(cx, &path.key("max_age"), value));
    Some(Action::Static(StaticFiles {
        root: root?,
        index,
        strip_prefix: raw.strip_prefix.unwrap_or(false),
        follow_symlinks_outside_root: raw.follow_symlinks_outside_root.unwrap_or(false),
        precompressed,
        memory_cache,
        memory_cache_recheck,
        sendfile: raw.sendfile.unwrap_or(true),
        max_age,
    }))
}

/// `memory_cache_recheck`: a duration from 0s (a `stat` before every hit) to 1s (the age at
/// which an entry is looked up afresh anyway, so a longer one would mean nothing).
fn memory_cache_recheck(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawStatic) -> Duration {
    let key = path.key("memory_cache_recheck");
    let default = StaticFiles::DEFAULT_MEMORY_CACHE_RECHECK;
    let value = raw.memory_cache_recheck.as_ref();
    let recheck = cx.duration_or_zero(&key, value, default, None);
    let max = StaticFiles::MAX_MEMORY_CACHE_RECHECK;
    if recheck <= max {
        return recheck;
    }
    let message = format!("memory_cache_recheck must be at most 1s, found {recheck:?}");
    let hint = "entries are looked up afresh after 1s anyway; e.g. \"100ms\", or \"0s\" to check before every hit";
    cx.r.error(&key, value.map(|v| v.span()), message, Some(hint.into()));
    default
}

/// `precompressed = true` (every sidecar coding, zstd > br > gzip), `false`, or a list of
/// tokens in the server's order of preference.
fn sidecar_codings(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<BoolOrList>,
) -> Vec<SidecarCoding> {
    let items = match value.get_ref() {
        BoolOrList::Bool(true) => return SidecarCoding::ALL.to_vec(),
        BoolOrList::Bool(false) => return Vec::new(),
        BoolOrList::List(items) => items,
    };
    if items.is_empty() {
        // Silently off would look like a typo that works; `compress.algorithms = []` errs too.
        let hint = r#"list at least one of "zstd", "br", "gzip", or write `precompressed = false`"#;
        cx.r.error(
            path,
            Some(value.span()),
            "the precompressed coding list is empty",
            Some(hint.into()),
        );
        return Vec::new();
    }
    let tokens = SidecarCoding::ALL.map(SidecarCoding::as_str);
    let mut codings = Vec::with_capacity(items.len());
    for item in items {
        let token = item.get_ref();
        let Some(coding) = sidecar(token) else {
            let hint = match token.to_ascii_lowercase().as_str() {
                "deflate" => {
                    "deflate has no sidecar file (gzip serves the same clients): use \"gzip\""
                        .to_owned()
                }
                lower if sidecar(lower).is_some() => {
                    format!("write \"{lower}\" in lower case")
                }
                _ => match closest(token, tokens) {
                    Some(best) => format!("did you mean \"{best}\"?"),
                    None => r#"the codings are "zstd", "br" and "gzip""#.into(),
                },
            };
            let message = format!("unknown precompressed coding `{token}`");
            cx.r.error(path, Some(item.span()), message, Some(hint));
            continue;
        };
        if codings.contains(&coding) {
            let message = format!("`{token}` is listed twice");
            let hint = Some("list each coding once, most preferred first".into());
            cx.r.error(path, Some(item.span()), message, hint);
            continue;
        }
        codings.push(coding);
    }
    codings
}

/// A sidecar coding's token exactly as written: lower case, no `x-gzip` (unlike
/// `Content-Encoding`, the config has one spelling per coding).
fn sidecar(token: &str) -> Option<SidecarCoding> {
    SidecarCoding::ALL.into_iter().find(|c| c.as_str() == token)
}

fn respond(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRespond) -> Option<Action> {
    // 1xx statuses are interim: a response cannot end with one.
    let allowed: (&dyn Fn(u16) -> bool, &str) =
        (&|n| (200..=599).contains(&n), "a status from 200 to 599");
    let status = cx.status(
        &path.key("status"),
        raw.status.as_ref(),
        StatusCode::OK,
        allowed,
    );
    let body = raw.body.clone().unwrap_or_default();
    if !body.is_empty() && (status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED)
    {
        let message = format!("a {} response has no body", status.as_u16());
        let hint = Some("remove `body`, or use another status such as 200".into());
        cx.r.error(&path.key("body"), None, message, hint);
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &raw.headers {
        let key = path.key("headers").key(name);
        let header_name = HeaderName::from_bytes(name.as_bytes());
        if header_name.is_err() {
            let hint =
                Some("header names are letters, digits and `-`, e.g. \"content-type\"".into());
            cx.r.key_error(&key, format!("invalid header name {}", TomlKey(name)), hint);
        }
        let header_value = HeaderValue::from_str(value.get_ref());
        if header_value.is_err() {
            let hint = Some("use visible ASCII characters, without line breaks".into());
            cx.r.error(
                &key,
                Some(value.span()),
                format!("invalid value for header `{name}`"),
                hint,
            );
        }
        if let (Ok(name), Ok(value)) = (header_name, header_value) {
            headers.append(name, value);
        }
    }
    Some(Action::Respond(FixedResponse {
        status,
        headers,
        body: body.into(),
    }))
}

/// The placeholders a redirect target may use; see [`Redirect`].
const PLACEHOLDERS: [&str; 3] = ["uri", "path", "host"];

fn redirect(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRedirect) -> Option<Action> {
    let allowed: (&dyn Fn(u16) -> bool, &str) = (
        &|n| matches!(n, 301 | 302 | 303 | 307 | 308),
        "301, 302, 303, 307 or 308",
    );
    let status = cx.status(
        &path.key("status"),
        raw.status.as_ref(),
        StatusCode::FOUND,
        allowed,
    );
    let Some(to) = &raw.to else {
        cx.r.missing(
            path,
            "to",
            Some(r#"e.g. to = "https://example.com{uri}""#.into()),
        );
        return None;
    };
    let target = cx.non_empty(&path.key("to"), to, "a redirect target")?;
    for word in placeholders(&target) {
        if !PLACEHOLDERS.contains(&word) {
            let hint = match closest(word, PLACEHOLDERS) {
                Some(best) => format!("did you mean `{{{best}}}`?"),
                None => "the placeholders are {uri}, {path} and {host}".into(),
            };
            cx.r.error(
                &path.key("to"),
                Some(to.span()),
                format!("unknown placeholder `{{{word}}}`"),
                Some(hint),
            );
        }
    }
    Some(Action::Redirect(Redirect { to: target, status }))
}

/// The words between `{` and `}` that look like placeholders (braces around anything else are
/// left alone: they may be part of a URL).
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split('{').skip(1).filter_map(|rest| {
        let (word, _) = rest.split_once('}')?;
        let plausible =
            !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        plausible.then_some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_placeholder_words_only() {
        let found: Vec<&str> = placeholders("https://x{uri}?a={b}&c={}&d={not a word}").collect();
        assert_eq!(found, ["uri", "b"]);
    }
}
