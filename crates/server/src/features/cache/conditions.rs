//! The route's request conditions (`bypass`, `no_store`) and key parts, converted from the
//! config once.

use http::HeaderMap;
use sluice_cache::key::{KeyPart, cookie};
use sluice_config::{CacheKeyPart, RequestCondition};

/// A request header or cookie that, when present and neither empty nor "0", triggers the
/// condition (nginx's `proxy_cache_bypass` / `proxy_no_cache` semantics).
pub(super) enum Condition {
    Header(http::HeaderName),
    Cookie(String),
}

impl From<&RequestCondition> for Condition {
    fn from(condition: &RequestCondition) -> Self {
        match condition {
            RequestCondition::Header(name) => Condition::Header(name.clone()),
            RequestCondition::Cookie(name) => Condition::Cookie(name.clone()),
        }
    }
}

impl Condition {
    pub(super) fn matches(&self, headers: &HeaderMap) -> bool {
        match self {
            Condition::Header(name) => headers.get_all(name).iter().any(|v| is_set(v.as_bytes())),
            Condition::Cookie(name) => cookie(headers, name).is_some_and(is_set),
        }
    }
}

fn is_set(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    !value.is_empty() && value != b"0"
}

pub(super) fn key_part(part: &CacheKeyPart) -> KeyPart {
    match part {
        CacheKeyPart::Scheme => KeyPart::Scheme,
        CacheKeyPart::Host => KeyPart::Host,
        CacheKeyPart::Path => KeyPart::Path,
        CacheKeyPart::Query => KeyPart::Query,
        CacheKeyPart::Method => KeyPart::Method,
        CacheKeyPart::Header(name) => KeyPart::Header(name.clone()),
        CacheKeyPart::Cookie(name) => KeyPart::Cookie(name.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn conditions_need_a_value_that_is_not_empty_or_zero() {
        let mut headers = HeaderMap::new();
        let bypass = Condition::Header(http::HeaderName::from_static("x-no-cache"));
        let cookie = Condition::Cookie("nocache".into());
        assert!(!bypass.matches(&headers));
        headers.insert("x-no-cache", HeaderValue::from_static("0"));
        assert!(!bypass.matches(&headers));
        headers.insert("x-no-cache", HeaderValue::from_static("1"));
        assert!(bypass.matches(&headers));
        headers.insert("cookie", HeaderValue::from_static("a=1; nocache=yes"));
        assert!(cookie.matches(&headers));
        headers.insert("cookie", HeaderValue::from_static("nocache=; b=2"));
        assert!(!cookie.matches(&headers));
    }
}
