//! A route's `compress` option: which algorithms in which order, their levels, the minimum
//! length, the type allow-list and the flush delay. Every key is optional; `compress = {}` is
//! the defaults of [`Compress`].

use sluice_core::Compression;
use toml::Spanned;

use super::Cx;
use super::routes::quoted_list;
use crate::model::{Compress, CompressLevels, CpuShare};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawCompress, RawCompressLevels, Scalar};
use crate::schema::closest;

/// The route's compression settings; defaults stand in for bad values (they were reported).
pub(super) fn compress(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawCompress) -> Compress {
    let d = Compress::default();
    let algorithms = match &raw.algorithms {
        Some(value) => algorithms(cx, &path.key("algorithms"), value).unwrap_or(d.algorithms),
        None => d.algorithms,
    };
    let levels = raw
        .levels
        .as_ref()
        .map_or_else(CompressLevels::default, |l| {
            levels(cx, &path.key("levels"), l)
        });
    let min_length = cx.size(
        &path.key("min_length"),
        raw.min_length.as_ref(),
        d.min_length,
        0,
    );
    let types = raw
        .types
        .as_ref()
        .and_then(|value| types(cx, &path.key("types"), value));
    let flush_delay = cx.duration_or_zero(
        &path.key("flush_delay"),
        raw.flush_delay.as_ref(),
        d.flush_delay,
        None,
    );
    let max_cpu = raw
        .max_cpu
        .as_ref()
        .and_then(|value| max_cpu(cx, &path.key("max_cpu"), value));
    Compress {
        algorithms,
        levels,
        min_length,
        types,
        flush_delay,
        max_cpu,
    }
}

/// `max_cpu = "80%"`: a whole percentage of the workers' CPU, `1%` to `100%`. The `%` is
/// required so the unit is on the page (a bare `80` or `0.8` could be read either way).
fn max_cpu(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<Scalar>) -> Option<CpuShare> {
    const SHARE: &str = "100% is every worker thread busy";
    let (message, hint) = match value.get_ref() {
        Scalar::Str(text) => {
            let text = text.trim();
            match text.strip_suffix('%').map(str::trim_end) {
                Some(number) => match number.parse::<u64>() {
                    Ok(0) => (
                        "max_cpu must be more than 0%".to_owned(),
                        "0% would never compress: leave `max_cpu` out to always compress, or remove `compress`".to_owned(),
                    ),
                    Ok(n) if n <= 100 => {
                        // In 1..=100, so both conversions succeed.
                        return u8::try_from(n).ok().and_then(CpuShare::from_percent);
                    }
                    Ok(n) => (
                        format!("max_cpu must be at most 100%, found {n}%"),
                        format!("{SHARE}; e.g. \"80%\""),
                    ),
                    Err(_) if number.parse::<f64>().is_ok_and(f64::is_finite) => (
                        format!("max_cpu must be a whole percentage, found `{text}`"),
                        format!("write e.g. \"{}%\"", number.parse::<f64>().unwrap_or(80.0).round()),
                    ),
                    Err(_) => (
                        format!("expected a percentage, found string {text:?}"),
                        format!("write a share of the workers' CPU, e.g. \"80%\" ({SHARE})"),
                    ),
                },
                None if text.parse::<f64>().is_ok() => (
                    format!("a CPU share needs a `%`, found string {text:?}"),
                    format!("write \"{text}%\""),
                ),
                None => (
                    format!("expected a percentage, found string {text:?}"),
                    format!("write a share of the workers' CPU, e.g. \"80%\" ({SHARE})"),
                ),
            }
        }
        Scalar::Int(n) => (
            format!("a CPU share needs a `%`, found integer `{n}`"),
            format!("write \"{n}%\""),
        ),
        Scalar::Float(x) if (0.0..=1.0).contains(x) => (
            format!("a CPU share needs a `%`, found number `{x}`"),
            format!("write \"{}%\"", (x * 100.0).round()),
        ),
        other => (
            format!("expected a percentage, found {}", other.describe()),
            format!("write a share of the workers' CPU, e.g. \"80%\" ({SHARE})"),
        ),
    };
    cx.r.error(path, Some(value.span()), message, Some(hint));
    None
}

fn algorithms(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<OneOrMany>,
) -> Option<Vec<Compression>> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = "list at least one of `zstd`, `br`, `gzip`, `deflate`, or remove `compress` to turn compression off";
        cx.r.error(
            path,
            Some(value.span()),
            "the algorithm list is empty",
            Some(hint.into()),
        );
        return None;
    }
    let mut found = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in &items {
        let token = item.get_ref();
        let Some(algorithm) = algorithm(token) else {
            let message = format!("unknown compression algorithm `{token}`");
            cx.r.error(
                path,
                Some(item.span()),
                message,
                Some(algorithm_hint(token)),
            );
            ok = false;
            continue;
        };
        if found.contains(&algorithm) {
            let message = format!("`{}` is listed twice", algorithm.as_str());
            let hint = "the list is an order of preference: name each algorithm once";
            cx.r.error(path, Some(item.span()), message, Some(hint.into()));
            ok = false;
            continue;
        }
        found.push(algorithm);
    }
    ok.then_some(found)
}

/// A content-coding token; tokens are case-insensitive (RFC 9110 §8.4.1). Only the registered
/// names: `x-gzip` and `identity` get a hint instead (`ContentCoding::from_token` would take the
/// first, and the second is not a compression).
fn algorithm(token: &str) -> Option<Compression> {
    Compression::ALL
        .into_iter()
        .find(|a| a.as_str().eq_ignore_ascii_case(token.trim()))
}

fn algorithm_hint(token: &str) -> String {
    let valid = Compression::ALL.map(|a| a.as_str().to_owned());
    let list = quoted_list(&valid);
    let lower = token.trim().to_ascii_lowercase();
    match lower.as_str() {
        "brotli" => "brotli's content coding is called `br`".into(),
        "x-gzip" => "write `gzip`".into(),
        "identity" => "identity is always available; list only the codings to compress with".into(),
        _ => match closest(&lower, valid.iter().map(String::as_str)) {
            Some(best) => format!("did you mean `{best}`? valid: {list}"),
            None => format!("valid algorithms: {list}"),
        },
    }
}

/// A level per algorithm, each in its range (also the levels of a route cache's stored variants).
pub(super) fn levels(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawCompressLevels) -> CompressLevels {
    let mut level = |algorithm: Compression, value: &Option<Spanned<Scalar>>| {
        let value = value.as_ref()?;
        let (min, max) = algorithm.levels();
        let hint = format!(
            "{} levels go from {min} (fastest) to {max} (smallest output)",
            algorithm.as_str()
        );
        let key = path.key(algorithm.as_str());
        // A bad value was reported; `u64::MAX` makes it `None` below, the default level.
        let n = cx.count(
            &key,
            Some(value),
            u64::MAX,
            (u64::from(min), u64::from(max)),
            Some(&hint),
        );
        u32::try_from(n).ok()
    };
    CompressLevels {
        gzip: level(Compression::GZIP, &raw.gzip),
        deflate: level(Compression::DEFLATE, &raw.deflate),
        br: level(Compression::BR, &raw.br),
        zstd: level(Compression::ZSTD, &raw.zstd),
    }
}

/// Media types without parameters: `type/subtype` or `type/*`, stored lowercase.
fn types(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Option<Vec<String>> {
    let items = OneOrMany::items(value);
    if items.is_empty() {
        let hint = "leave `types` out for the built-in list of text-like types";
        cx.r.error(
            path,
            Some(value.span()),
            "the type list is empty",
            Some(hint.into()),
        );
        return None;
    }
    let mut valid = Vec::with_capacity(items.len());
    for item in &items {
        let text = item.get_ref().trim().to_ascii_lowercase();
        let problem = if text.contains(';') {
            let essence = text.split(';').next().unwrap_or_default().trim();
            Some((
                format!("`{text}` has parameters"),
                format!(r#"types are compared without parameters: write "{essence}""#),
            ))
        } else if text == "*/*" || text == "*" {
            Some((
                format!("`{text}` would compress everything"),
                "images, video and archives are compressed already: list text-like types, e.g. \"text/*\"".to_owned(),
            ))
        } else if !is_media_type(&text) {
            Some((
                format!("`{text}` is not a media type"),
                r#"write "type/subtype" or "type/*", e.g. "application/json" or "text/*""#
                    .to_owned(),
            ))
        } else {
            None
        };
        match problem {
            Some((message, hint)) => cx.r.error(path, Some(item.span()), message, Some(hint)),
            None => valid.push(text),
        }
    }
    (valid.len() == items.len()).then_some(valid)
}

fn is_media_type(text: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match text.split_once('/') {
        Some((top, sub)) => token(top) && (sub == "*" || token(sub)),
        None => false,
    }
}
