//! The words of the cache settings, each parsed on its own (pure functions, unit-tested here):
//! `use_stale` conditions, cache key parts, request conditions (`bypass`, `no_store`) and the
//! statuses of `valid`. Mistakes get hints in the file's words; nginx users' spellings
//! (`$cookie_nocache`, `$request_uri`, `http_404`) get the sluice spelling of the same thing.

use http::{HeaderName, StatusCode};

use super::super::address::Rejection;
use crate::model::{CacheKeyPart, RequestCondition, StatusMatch, UseStale};
use crate::schema::closest;

/// A `use_stale` word.
pub(super) fn use_stale(token: &str) -> Result<UseStale, Rejection> {
    if let Some(word) = UseStale::from_token(token) {
        return Ok(word);
    }
    let lower = token.trim().to_ascii_lowercase();
    let tokens = UseStale::ALL.map(UseStale::token);
    let hint = match lower.as_str() {
        lower if UseStale::from_token(lower).is_some() => format!(r#"write "{lower}""#),
        "off" => "leave `use_stale` out (or write []) to never serve a stale response".into(),
        "invalid_header" => {
            r#"an unreadable upstream response counts as "error""#.into()
        }
        "http_403" | "http_404" | "http_429" => {
            "a stale response stands in for a failing upstream: http_500, http_502, http_503, http_504 (not nginx's http_403, http_404, http_429)".into()
        }
        _ => match closest(&lower, tokens) {
            Some(best) => format!("did you mean `{best}`?"),
            None => format!("the conditions are {}", quoted(&tokens)),
        },
    };
    Err((format!("unknown use_stale condition `{token}`"), Some(hint)))
}

/// The words of a key that are not `header:` or `cookie:`.
const KEY_WORDS: [&str; 5] = ["scheme", "host", "path", "query", "method"];

/// A cache key part: a word of [`KEY_WORDS`], `header:NAME` or `cookie:NAME`.
pub(super) fn key_part(text: &str) -> Result<CacheKeyPart, Rejection> {
    let t = text.trim();
    if let Some((kind, name)) = t.split_once(':') {
        let not_one = r#"the whole query is one part: "query""#;
        return named(t, kind, name, ("cache key part", not_one)).map(|named| match named {
            RequestCondition::Header(name) => CacheKeyPart::Header(name),
            RequestCondition::Cookie(name) => CacheKeyPart::Cookie(name),
        });
    }
    match t {
        "scheme" => return Ok(CacheKeyPart::Scheme),
        "host" => return Ok(CacheKeyPart::Host),
        "path" => return Ok(CacheKeyPart::Path),
        "query" => return Ok(CacheKeyPart::Query),
        "method" => return Ok(CacheKeyPart::Method),
        _ => {}
    }
    let lower = t.to_ascii_lowercase();
    let hint = if KEY_WORDS.contains(&lower.as_str()) {
        format!(r#"write "{lower}""#)
    } else if lower.starts_with('$') {
        nginx_variables(t)
    } else {
        match lower.as_str() {
            "uri" | "url" | "request_uri" => r#"write "path" and "query", two parts"#.into(),
            "header" | "cookie" => name_it(&lower),
            _ => match closest(&lower, KEY_WORDS) {
                Some(best) => format!("did you mean `{best}`?"),
                None => {
                    r#"the parts are "scheme", "host", "path", "query", "method", "header:NAME" and "cookie:NAME""#.into()
                }
            },
        }
    };
    Err((format!("unknown cache key part `{text}`"), Some(hint)))
}

const QUERY_NOT_TESTED: &str = "query arguments are not tested: use a header or a cookie";

/// A `bypass` / `no_store` condition: `header:NAME` or `cookie:NAME`.
pub(super) fn condition(text: &str) -> Result<RequestCondition, Rejection> {
    let t = text.trim();
    if let Some((kind, name)) = t.split_once(':') {
        return named(t, kind, name, ("request condition", QUERY_NOT_TESTED));
    }
    let lower = t.to_ascii_lowercase();
    let generic = r#"a condition is "header:NAME" or "cookie:NAME", e.g. "header:x-no-cache""#;
    let hint = match lower.as_str() {
        "header" | "cookie" => name_it(&lower),
        _ => match t.strip_prefix('$').and_then(nginx_variable) {
            Some(named) if named.contains(':') => format!(r#"write "{named}""#),
            _ if lower.starts_with("$arg_") => QUERY_NOT_TESTED.into(),
            _ => generic.into(),
        },
    };
    Err((format!("unknown request condition `{text}`"), Some(hint)))
}

/// `header:NAME` or `cookie:NAME`; `what` names the word in messages, `query_hint` answers
/// `arg:NAME` and its like.
fn named(
    text: &str,
    kind: &str,
    name: &str,
    (what, query_hint): (&str, &str),
) -> Result<RequestCondition, Rejection> {
    let name = name.trim();
    let kind = kind.trim().to_ascii_lowercase();
    if !matches!(kind.as_str(), "header" | "cookie") {
        let hint = match kind.as_str() {
            "arg" | "args" | "query" | "param" => query_hint.to_owned(),
            _ => match closest(&kind, ["header", "cookie"]) {
                Some(best) => format!(r#"did you mean "{best}:{name}"?"#),
                None => r#"only "header:NAME" and "cookie:NAME" name something"#.into(),
            },
        };
        return Err((format!("unknown {what} `{text}`"), Some(hint)));
    }
    if name.is_empty() {
        let message = format!("`{text}` names no {kind}");
        return Err((message, Some(name_it(&kind))));
    }
    if kind == "header" {
        return HeaderName::from_bytes(name.as_bytes())
            .map(RequestCondition::Header)
            .map_err(|_| {
                let hint = r#"header names are letters, digits and `-`, e.g. "x-no-cache""#;
                (format!("invalid header name `{name}`"), Some(hint.into()))
            });
    }
    // RFC 6265: a cookie name is a token (visible ASCII without separators).
    let token = name
        .chars()
        .all(|c| c.is_ascii_graphic() && !"()<>@,;:\\\"/[]?={}".contains(c));
    if !token {
        let hint = r#"cookie names are letters, digits and `-`, `_`, `.`, e.g. "session_id""#;
        return Err((format!("invalid cookie name `{name}`"), Some(hint.into())));
    }
    Ok(RequestCondition::Cookie(name.to_owned()))
}

fn name_it(kind: &str) -> String {
    if kind == "header" {
        r#"name the header: "header:NAME", e.g. "header:x-no-cache""#.into()
    } else {
        r#"name the cookie: "cookie:NAME", e.g. "cookie:nocache""#.into()
    }
}

/// The sluice spelling of nginx variables such as `$cookie_nocache` or `$scheme$host$uri`.
fn nginx_variables(text: &str) -> String {
    let parts: Option<Vec<String>> = text
        .split('$')
        // `$uri$is_args$args`: `?` between path and query, which a key needs no part for.
        .filter(|v| !v.is_empty() && *v != "is_args")
        .map(nginx_variable)
        .collect();
    match parts.as_deref() {
        Some([one]) => format!(r#"write "{one}""#),
        Some(many) if !many.is_empty() => {
            let list: Vec<String> = many.iter().map(|p| format!("\"{p}\"")).collect();
            format!("list the parts: [{}]", list.join(", "))
        }
        _ => r#"sluice names parts, not nginx variables: "scheme", "host", "path", "query", "method", "header:NAME", "cookie:NAME""#.into(),
    }
}

/// One nginx variable (without `$`) as a key part or condition.
fn nginx_variable(variable: &str) -> Option<String> {
    let word = match variable {
        "scheme" => "scheme",
        "host" | "http_host" | "proxy_host" | "server_name" => "host",
        "uri" | "document_uri" => "path",
        "args" | "query_string" => "query",
        "request_method" => "method",
        other => {
            if let Some(name) = other.strip_prefix("cookie_") {
                return Some(format!("cookie:{name}"));
            }
            // nginx writes request headers lowercase with `_` for `-`.
            return other
                .strip_prefix("http_")
                .map(|name| format!("header:{}", name.replace('_', "-")));
        }
    };
    Some(word.to_owned())
}

/// A key of `valid`: a status from 100 to 599, or `any`.
pub(super) fn valid_status(key: &str) -> Result<StatusMatch, Rejection> {
    let t = key.trim();
    if t == "any" {
        return Ok(StatusMatch::Any);
    }
    let one_each = r#"one status per key; "any" covers every status without an entry of its own"#;
    if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() {
        let status = t
            .parse::<u16>()
            .ok()
            .filter(|n| (100..=599).contains(n))
            .and_then(|n| StatusCode::from_u16(n).ok());
        return status.map(StatusMatch::Code).ok_or_else(|| {
            let hint = "statuses run from 100 to 599".to_owned();
            (format!("`{t}` is not an HTTP status"), Some(hint))
        });
    }
    let lower = t.to_ascii_lowercase();
    let hint = match lower.as_str() {
        "any" | "all" | "*" | "default" | "other" => r#"write "any""#.into(),
        _ if lower.contains('x') || lower.contains('-') => one_each.into(),
        _ => r#"a status such as "200", or "any""#.into(),
    };
    Err((format!("invalid status `{key}` in `valid`"), Some(hint)))
}

fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint<T: std::fmt::Debug>(result: Result<T, Rejection>) -> String {
        result.unwrap_err().1.unwrap()
    }

    #[test]
    fn use_stale_words_and_their_mistakes() {
        assert_eq!(use_stale("http_503").unwrap(), UseStale::Http503);
        assert_eq!(use_stale("updating").unwrap(), UseStale::Updating);
        assert_eq!(hint(use_stale("timout")), "did you mean `timeout`?");
        assert_eq!(hint(use_stale("Timeout")), r#"write "timeout""#);
        assert!(
            hint(use_stale("http_404")).contains("not nginx's"),
            "not http_504"
        );
        assert!(hint(use_stale("off")).contains("leave `use_stale` out"));
        assert!(hint(use_stale("zzz")).starts_with("the conditions are `error`"));
    }

    #[test]
    fn key_parts() {
        assert_eq!(key_part("query").unwrap(), CacheKeyPart::Query);
        assert_eq!(
            key_part("header:Accept-Language").unwrap(),
            CacheKeyPart::Header(HeaderName::from_static("accept-language"))
        );
        assert_eq!(
            key_part("cookie:Lang").unwrap(),
            CacheKeyPart::Cookie("Lang".into())
        );
        assert_eq!(hint(key_part("Host")), r#"write "host""#);
        assert_eq!(hint(key_part("hots")), "did you mean `host`?");
        assert!(hint(key_part("uri")).contains(r#""path" and "query""#));
        assert!(hint(key_part("header")).contains(r#""header:NAME""#));
        assert!(hint(key_part("arg:page")).contains("whole query"));
        assert_eq!(hint(key_part("heder:x")), r#"did you mean "header:x"?"#);
    }

    #[test]
    fn nginx_spellings_get_the_sluice_one() {
        assert_eq!(
            hint(key_part("$scheme$proxy_host$request_uri")),
            r#"sluice names parts, not nginx variables: "scheme", "host", "path", "query", "method", "header:NAME", "cookie:NAME""#
        );
        assert_eq!(
            hint(key_part("$scheme$host$uri$args")),
            r#"list the parts: ["scheme", "host", "path", "query"]"#
        );
        assert_eq!(
            hint(condition("$cookie_nocache")),
            r#"write "cookie:nocache""#
        );
        assert_eq!(
            hint(condition("$http_x_no_cache")),
            r#"write "header:x-no-cache""#
        );
        assert!(hint(condition("$arg_nocache")).contains("query arguments"));
        assert!(hint(condition("$scheme")).contains(r#""header:NAME""#));
        assert!(hint(condition("arg:nocache")).contains("query arguments"));
    }

    #[test]
    fn conditions_name_a_header_or_a_cookie() {
        assert_eq!(
            condition("header:X-No-Cache").unwrap(),
            RequestCondition::Header(HeaderName::from_static("x-no-cache"))
        );
        assert_eq!(
            condition(" cookie: nocache ").unwrap(),
            RequestCondition::Cookie("nocache".into())
        );
        assert!(hint(condition("cookie:")).contains("cookie:nocache"));
        assert!(hint(condition("header:a b")).contains("letters"));
        assert!(hint(condition("cookie:a;b")).contains("cookie names"));
        assert!(hint(condition("nocache")).contains(r#""cookie:NAME""#));
    }

    #[test]
    fn valid_statuses() {
        assert_eq!(
            valid_status("404").unwrap(),
            StatusMatch::Code(StatusCode::NOT_FOUND)
        );
        assert_eq!(valid_status("any").unwrap(), StatusMatch::Any);
        assert!(hint(valid_status("700")).contains("100 to 599"));
        assert!(hint(valid_status("2xx")).contains("one status per key"));
        assert!(hint(valid_status("200-299")).contains("one status per key"));
        assert_eq!(hint(valid_status("ANY")), r#"write "any""#);
        assert_eq!(hint(valid_status("all")), r#"write "any""#);
        assert!(hint(valid_status("ok")).contains(r#""200""#));
    }
}
