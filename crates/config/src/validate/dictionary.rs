//! A route's `dictionary` (RFC 9842 compression dictionaries): `"auto"`, or a table with a
//! `match` pattern (managed) or `auto = true`, and the bounds on what is kept and made.

use sluice_core::DictionaryCoding;
use sluice_core::match_pattern::MatchPattern;
use toml::Spanned;

use super::Cx;
use crate::model::{Dictionaries, DictionaryMode};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawDictionary, RawDictionaryTable};

/// What the rest of the route says about where dictionaries can work.
pub(super) struct RouteFacts {
    /// The route has `compress`, which dictionaries build on (the same negotiation, types and
    /// minimum length decide which responses are compressed at all).
    pub compress: bool,
    /// Its one action, when it has exactly one.
    pub action: Option<&'static str>,
    /// It has `cache` (a proxy route keeps the versions it offers in its cache).
    pub cache: bool,
    /// Its responses may be kept by browsers, as far as the route can tell.
    pub cacheable: bool,
}

/// The route's dictionaries; `None` when the mode is missing or wrong (reported).
pub(super) fn dictionary(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &Spanned<RawDictionary>,
    facts: &RouteFacts,
) -> Option<Dictionaries> {
    let dictionaries = match raw.get_ref() {
        RawDictionary::Shorthand(text) if text == "auto" => {
            Some(Dictionaries::new(DictionaryMode::Auto))
        }
        RawDictionary::Shorthand(text) => {
            let hint = if text.starts_with('/') {
                format!(r#"a pattern goes in a table: dictionary = {{ match = "{text}" }}"#)
            } else {
                r#"write dictionary = "auto", or a table with `match`"#.into()
            };
            cx.r.error(
                path,
                Some(raw.span()),
                format!("unknown dictionary shorthand `{text}`"),
                Some(hint),
            );
            None
        }
        RawDictionary::Table(table) => table_form(cx, path, table),
    }?;
    let refused = match facts.action {
        Some("respond" | "redirect") => Some((
            "`dictionary` applies to static files and cached proxy routes".to_owned(),
            "move it to the route that serves the files or proxies to them".to_owned(),
        )),
        Some("proxy") if !facts.cache => Some((
            "`dictionary` on a proxy route needs `cache` on it".to_owned(),
            "sluice keeps the versions it offers as dictionaries in the route's cache: add `cache = { zone = \"...\" }`".to_owned(),
        )),
        _ if !facts.compress => Some((
            "`dictionary` needs `compress` on the same route".to_owned(),
            "dictionary compression joins the route's compression: add `compress = {}`".to_owned(),
        )),
        _ => None,
    };
    if let Some((message, hint)) = refused {
        cx.r.error(path, Some(raw.span()), message, Some(hint));
        return None;
    }
    if !facts.cacheable {
        let hint = r#"browsers keep a dictionary only in their HTTP cache: give the files a lifetime, e.g. static = { ..., max_age = "1h" } ("immutable" for content-hashed names), or set Cache-Control in response_headers"#;
        cx.r.warn(
            path,
            Some(raw.span()),
            "no response of this route can be cached by a browser, so none will be used as a dictionary",
            Some(hint.into()),
        );
    }
    Some(dictionaries)
}

fn table_form(cx: &mut Cx<'_>, path: &KeyPath, t: &RawDictionaryTable) -> Option<Dictionaries> {
    let auto = t.auto.as_ref().is_some_and(|a| *a.get_ref());
    let mode = match (&t.match_, auto) {
        (Some(pattern), true) => {
            let hint =
                "`match` names the dictionaries yourself; `auto` finds versioned files: keep one";
            cx.r.error(
                &path.key("match"),
                Some(pattern.span()),
                "`match` and `auto = true` cannot be used together",
                Some(hint.into()),
            );
            None
        }
        (Some(pattern), false) => managed(cx, path, pattern, t),
        (None, true) => Some(DictionaryMode::Auto),
        (None, false) => {
            cx.r.missing(
                path,
                "match",
                Some(r#"e.g. match = "/assets/app.*.js", or auto = true"#.into()),
            );
            None
        }
    };
    let mut d = Dictionaries::new(mode?);
    if let Some(value) = &t.codings {
        let mut codings = Vec::new();
        for item in OneOrMany::items(value) {
            match DictionaryCoding::from_token_bytes(item.get_ref().as_bytes()) {
                Some(c) if !codings.contains(&c) => codings.push(c),
                Some(_) => {}
                None => cx.r.error(
                    &path.key("codings"),
                    Some(item.span()),
                    format!("unknown dictionary coding `{}`", item.get_ref()),
                    Some(r#"write "dcz" (zstd) or "dcb" (brotli)"#.into()),
                ),
            }
        }
        if codings.is_empty() {
            cx.r.error(
                &path.key("codings"),
                Some(value.span()),
                "`codings` lists no dictionary coding",
                Some(r#"e.g. codings = ["dcz", "dcb"]"#.into()),
            );
        } else {
            d.codings = codings;
        }
    }
    if let Some(levels) = &t.levels {
        let lp = path.key("levels");
        let hint = Some("a delta is made once and served many times: high levels pay");
        d.dcz_level = cx.count(
            &lp.key("dcz"),
            levels.dcz.as_ref(),
            u64::from(d.dcz_level),
            (1, 19),
            hint,
        ) as u32;
        d.dcb_level = cx.count(
            &lp.key("dcb"),
            levels.dcb.as_ref(),
            u64::from(d.dcb_level),
            (0, 11),
            hint,
        ) as u32;
    }
    // 16 MiB at most: `dcb`'s window holds the dictionary and the body (RFC 9842 §4).
    d.max_size = cx.size(&path.key("max_size"), t.max_size.as_ref(), d.max_size, 1024);
    if d.max_size > 8 * 1024 * 1024 {
        cx.r.error(
            &path.key("max_size"),
            t.max_size.as_ref().map(Spanned::span),
            "a dictionary (and a response compressed with one) is at most 8 MiB here",
            Some("a `dcb` window of 16 MiB holds the dictionary and the response together".into()),
        );
        d.max_size = Dictionaries::DEFAULT_MAX_SIZE;
    }
    d.memory = cx.size(&path.key("memory"), t.memory.as_ref(), d.memory, 0);
    if d.memory < d.max_size.saturating_mul(2) {
        cx.r.error(
            &path.key("memory"),
            t.memory.as_ref().map(Spanned::span),
            "`memory` must hold at least a dictionary and a delta of `max_size` each",
            Some(format!(
                "use at least {} bytes, or lower `max_size`",
                d.max_size * 2
            )),
        );
        d.memory = Dictionaries::DEFAULT_MEMORY.max(d.max_size * 2);
    }
    d.deltas_per_response = cx.count(
        &path.key("deltas_per_response"),
        t.deltas_per_response.as_ref(),
        d.deltas_per_response as u64,
        (1, 64),
        Some("a client presents the one dictionary it holds; a few recent ones cover most clients"),
    ) as usize;
    Some(d)
}

fn managed(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    pattern: &Spanned<String>,
    t: &RawDictionaryTable,
) -> Option<DictionaryMode> {
    let parsed = match MatchPattern::parse(pattern.get_ref()) {
        Ok(parsed) => Some(parsed),
        Err(err) => {
            // Point at the character: the span's start plus the quote.
            let span = pattern.span();
            let at = span.start + 1 + err.at;
            cx.r.error(
                &path.key("match"),
                Some(at..(at + 1).min(span.end)),
                err.message,
                Some(
                    r#"e.g. match = "/assets/app.*.js": `*` is any text, `:name` one path segment"#
                        .into(),
                ),
            );
            None
        }
    };
    let match_dest = match &t.match_dest {
        Some(value) => OneOrMany::items(value)
            .into_iter()
            .map(|item| item.into_inner())
            .collect(),
        None => Vec::new(),
    };
    let id = t.id.as_ref().map(|id| id.get_ref().clone());
    if let Some(id) = &t.id
        && (id.get_ref().len() > 1024 || !id.get_ref().chars().all(|c| (' '..='~').contains(&c)))
    {
        cx.r.error(
            &path.key("id"),
            Some(id.span()),
            "a dictionary `id` is at most 1,024 visible ASCII characters (RFC 9842 §2.1.3)",
            None,
        );
    }
    Some(DictionaryMode::Managed {
        pattern: parsed?,
        match_dest,
        id,
    })
}
