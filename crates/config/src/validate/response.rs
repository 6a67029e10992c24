//! A route's `response_headers` (every action) and a static route's `max_age`.

use std::time::Duration;

use toml::Spanned;

use super::Cx;
use super::proxy::{header_entries, header_names};
use crate::model::{MaxAge, ResponseHeaders};
use crate::path::KeyPath;
use crate::raw::{RawResponseHeaders, Scalar};

/// `response_headers = { set, add, remove, always }`. A name both set and added is refused:
/// `set` replaces what `add` would add to, so one of them is a mistake.
pub(super) fn response_headers(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawResponseHeaders,
) -> ResponseHeaders {
    let set = header_entries(cx, &path.key("set"), &raw.set, false);
    let add = header_entries(cx, &path.key("add"), &raw.add, false);
    let remove = header_names(cx, &path.key("remove"), raw.remove.as_ref(), false);
    for (name, _) in &add {
        if set.iter().any(|(n, _)| n == name) {
            let hint = "`set` replaces the header's values and `add` adds one more: keep one";
            cx.r.key_error(
                &path.key("add").key(name.as_str()),
                format!("header `{name}` is both set and added"),
                Some(hint.into()),
            );
        }
    }
    ResponseHeaders {
        set,
        add,
        remove,
        always: raw.always.unwrap_or(false),
    }
}

/// `max_age = "7d"`, `"0s"` (`no-cache`) or `"immutable"`.
pub(super) fn max_age(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<Scalar>) -> Option<MaxAge> {
    if let Scalar::Str(text) = value.get_ref()
        && text.trim().eq_ignore_ascii_case("immutable")
    {
        return Some(MaxAge::Immutable);
    }
    if let Scalar::Str(text) = value.get_ref()
        && ["epoch", "off", "max"].contains(&text.trim())
    {
        let hint = r#"write a lifetime such as "1h" or "30d", "0s" for no-cache, or "immutable" for a year with content-hashed names (nginx's `expires max`)"#;
        cx.r.error(
            path,
            Some(value.span()),
            format!("`{}` is nginx's word; sluice writes lifetimes", text.trim()),
            Some(hint.into()),
        );
        return None;
    }
    let sentinel = Duration::from_secs(u64::MAX);
    let lifetime = cx.duration_or_zero(path, Some(value), sentinel, None);
    if lifetime == sentinel {
        return None;
    }
    if lifetime > MaxAge::YEAR {
        let hint = r#"a year is the longest lifetime caches are asked to keep (RFC 9111 §5.3); write "365d" or "immutable""#;
        cx.r.error(
            path,
            Some(value.span()),
            "max_age is longer than a year",
            Some(hint.into()),
        );
        return None;
    }
    Some(MaxAge::Lifetime(lifetime))
}
