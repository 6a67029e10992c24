//! Host patterns of routes and certificates: `example.com` (exact) or `*.example.com` (any
//! subdomain), compared case-insensitively and without the port, as [`HostMatch`] does.
//!
//! Only a whole leading label may be a wildcard: `foo.*.com` or `*example.com` would need a
//! matching rule nobody can guess, so they are refused with the form that works.

use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use crate::model::HostMatch;
use crate::path::KeyPath;
use crate::raw::OneOrMany;

/// Parses one host pattern; the result is lowercase.
pub(super) fn parse_host_pattern(text: &str) -> Result<HostMatch, Rejection> {
    let t = text.trim().to_ascii_lowercase();
    let bad = |message: &str, hint: String| Err((format!("{message} `{t}`"), Some(hint)));
    if t.is_empty() {
        return Err((
            "empty host".into(),
            Some("omit `host` to match every host".into()),
        ));
    }
    if let Some((_, rest)) = t.split_once("://") {
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        return bad(
            "invalid host",
            format!(r#"write only the host name: "{host}""#),
        );
    }
    if let Some((host, _)) = t.split_once('/') {
        return bad(
            "invalid host",
            format!(r#"a host has no path: write "{host}" and match the path with `path_prefix`"#),
        );
    }
    if t == "*" {
        return bad("invalid host", "omit `host` to match every host".into());
    }
    if let Some(v6) = t.strip_prefix('[') {
        return match v6.strip_suffix(']').map(str::parse::<std::net::Ipv6Addr>) {
            Some(Ok(_)) => Ok(HostMatch::Exact(t)),
            _ => bad(
                "invalid host",
                r#"hosts are matched without the port: write e.g. "[::1]""#.into(),
            ),
        };
    }
    if let Some((host, port)) = t.rsplit_once(':') {
        if port.chars().all(|c| c.is_ascii_digit()) && !host.contains(':') {
            return bad(
                "invalid host",
                format!(r#"hosts are matched without the port: write "{host}""#),
            );
        }
        return bad(
            "invalid host",
            format!(r#"write IPv6 addresses in brackets: "[{t}]""#),
        );
    }
    let (suffix, name) = match t.strip_prefix("*.") {
        Some(name) => (true, name),
        None => (false, t.as_str()),
    };
    if name.contains('*') || (!suffix && t.contains('*')) {
        // Only a leading wildcard has an obvious fix; elsewhere, widening the pattern would
        // match far more than was meant, so show the form instead.
        let hint = match t.starts_with('*') {
            true => {
                let rest = t
                    .rsplit('*')
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches('.');
                format!(r#"a wildcard can only be the whole first label: write "*.{rest}""#)
            }
            false => {
                r#"a wildcard can only be the whole first label, as in "*.example.com""#.into()
            }
        };
        return bad("invalid wildcard host", hint);
    }
    if let Some(stripped) = name.strip_suffix('.') {
        return bad(
            "invalid host",
            format!(r#"remove the trailing dot: "{stripped}""#),
        );
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    };
    if !name.split('.').all(label_ok) {
        let hint =
            "use letters, digits, `-` and `.` only, e.g. \"example.com\" or \"*.example.com\"";
        return bad("invalid host", hint.into());
    }
    Ok(if suffix {
        HostMatch::Suffix(format!(".{name}"))
    } else {
        HostMatch::Exact(t)
    })
}

impl Cx<'_> {
    /// Every host pattern of a `host`/`hosts` value; an empty list is reported.
    pub(super) fn host_patterns(
        &mut self,
        path: &KeyPath,
        value: &Spanned<OneOrMany>,
    ) -> Vec<HostMatch> {
        let items = OneOrMany::items(value);
        if items.is_empty() {
            let hint = Some("list at least one host, or leave the key out".into());
            self.r
                .error(path, Some(value.span()), "the host list is empty", hint);
        }
        let mut hosts = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_path = if matches!(value.get_ref(), OneOrMany::One(_)) {
                path.clone()
            } else {
                path.index(i)
            };
            match parse_host_pattern(item.get_ref()) {
                Ok(host) => hosts.push(host),
                Err((message, hint)) => self.r.error(&item_path, Some(item.span()), message, hint),
            }
        }
        hosts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(text: &str) -> String {
        parse_host_pattern(text).unwrap_err().1.unwrap()
    }

    #[test]
    fn exact_and_wildcard_hosts_are_lowercased() {
        assert_eq!(
            parse_host_pattern("Example.COM").unwrap(),
            HostMatch::Exact("example.com".into())
        );
        assert_eq!(
            parse_host_pattern("*.Example.com").unwrap(),
            HostMatch::Suffix(".example.com".into())
        );
        assert_eq!(
            parse_host_pattern("127.0.0.1").unwrap(),
            HostMatch::Exact("127.0.0.1".into())
        );
        assert_eq!(
            parse_host_pattern("[::1]").unwrap(),
            HostMatch::Exact("[::1]".into())
        );
        assert_eq!(
            parse_host_pattern("localhost").unwrap(),
            HostMatch::Exact("localhost".into())
        );
    }

    #[test]
    fn parsed_patterns_match_as_documented() {
        let wildcard = parse_host_pattern("*.example.com").unwrap();
        assert!(wildcard.matches("api.example.com"));
        assert!(wildcard.matches("a.b.example.com"));
        assert!(!wildcard.matches("example.com"));
        assert!(!wildcard.matches("badexample.com"));
        let exact = parse_host_pattern("Example.com").unwrap();
        assert!(exact.matches("example.com"));
        assert!(!exact.matches("www.example.com"));
    }

    #[test]
    fn bad_wildcards_show_the_form_that_works() {
        assert_eq!(
            hint("foo.*.com"),
            r#"a wildcard can only be the whole first label, as in "*.example.com""#
        );
        assert_eq!(
            hint("*example.com"),
            r#"a wildcard can only be the whole first label: write "*.example.com""#
        );
        assert_eq!(
            hint("*.*.example.com"),
            r#"a wildcard can only be the whole first label: write "*.example.com""#
        );
        assert_eq!(hint("*"), "omit `host` to match every host");
    }

    #[test]
    fn ports_schemes_and_paths_are_refused() {
        assert_eq!(
            hint("example.com:8080"),
            r#"hosts are matched without the port: write "example.com""#
        );
        assert_eq!(
            hint("https://example.com/x"),
            r#"write only the host name: "example.com""#
        );
        assert!(hint("example.com/api").contains("path_prefix"));
        assert!(hint("exa mple.com").contains("letters, digits"));
        assert!(hint("example.com.").contains("trailing dot"));
        assert!(parse_host_pattern("").is_err());
        assert!(parse_host_pattern("a..b").is_err());
    }
}
