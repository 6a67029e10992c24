//! The automatic mode: recognising that a path names one version of a resource, and the
//! `match` pattern that covers every version of it (its *series*), so the version a client
//! holds can be the dictionary for the next (RFC 9842 §2.1.1 "Versioned Directories" is the
//! RFC's own example).
//!
//! Recognised (and nothing else; `docs/compression.md` lists the same):
//! - a **content hash** in the file name: a token of 6–64 hex digits with at least one digit
//!   (`app.3f9c2e.js`, `main-0a1b2c3d.css`), or of 8–64 letters and digits with at least one
//!   of each (`index-BfX3k9Qz.js`, vite's; a hash that happens to have no digit is missed,
//!   since `myComponent` must stay a name); tokens are split
//!   at `.`, `-`, `_`;
//! - a **version number** in the file name: `v` and digits (`lib.v12.js`), or two or more
//!   dot-separated numbers (`jquery-3.7.1.min.js`);
//! - a **version directory**: a whole segment that is a version (`/v1.4.2/lib.js`, `/1.4.2/`,
//!   `/v2/`), or `name@version` (`/npm/vue@3.5.13/dist/vue.js`);
//! - a **version query**: the only query parameter is `v`, `ver`, `version`, `rev` or `hash`
//!   (`/lib.js?v=12`).
//!
//! Each recognised part becomes `*` in the pattern; the rest is kept literally. A plain number
//! segment (`/2024/`) is not a version: dated paths name different documents, not versions.

use super::MatchPattern;

/// The series pattern of `path` (normal form) and `query`, when they name a version.
pub fn series(path: &str, query: Option<&str>) -> Option<MatchPattern> {
    if path.contains(['*', ':', '(', ')', '\\', '{', '}', '+', '#', '?']) {
        // Characters the pattern syntax reserves: no series rather than a wrong one.
        return None;
    }
    let (dir, file) = path.rsplit_once('/')?;
    let mut changed = false;
    let mut out = String::with_capacity(path.len() + 8);
    for segment in dir.split('/') {
        if !out.is_empty() || !segment.is_empty() {
            out.push('/');
        }
        if is_version(segment) {
            out.push('*');
            changed = true;
        } else if let Some((name, version)) = segment.split_once('@')
            && !name.is_empty()
            && is_version(version)
        {
            out.push_str(name);
            out.push_str("@*");
            changed = true;
        } else {
            out.push_str(segment);
        }
    }
    out.push('/');
    match file_name_series(file) {
        Some(file) => {
            out.push_str(&file);
            changed = true;
        }
        None => out.push_str(file),
    }
    if let Some(query) = query
        && let Some((key, value)) = query.split_once('=')
        && !value.is_empty()
        && !value.contains('&')
        && ["v", "ver", "version", "rev", "hash"].contains(&key)
    {
        out.push('?');
        out.push_str(key);
        out.push_str("=*");
        changed = true;
    }
    if !changed {
        return None;
    }
    let pattern = MatchPattern::parse(&out).ok()?;
    pattern.matches(path, query).then_some(pattern)
}

/// `v12`, `1.4.2`, `v1.4.2`, `1.4.2-beta.1`: a version segment. A lone number is not.
fn is_version(text: &str) -> bool {
    let (core, _pre) = text.split_once(['-', '+']).unwrap_or((text, ""));
    let (prefixed, numbers) = match core.strip_prefix(['v', 'V']) {
        Some(rest) => (true, rest),
        None => (false, core),
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric && (prefixed || parts.len() >= 2)
}

/// The file name with its version part replaced by `*`, keeping the extension.
fn file_name_series(file: &str) -> Option<String> {
    let (stem, ext) = file.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    // A run of dot-separated numbers (`3.7.1`) spans several `.` tokens: find it first.
    if let Some((start, end)) = dotted_version(stem) {
        return Some(format!("{}*{}.{ext}", &stem[..start], &stem[end..]));
    }
    let mut start = 0;
    for token in stem.split(['.', '-', '_']) {
        let end = start + token.len();
        if is_hash(token) || (token.len() > 1 && is_version(token) && token.starts_with(['v', 'V']))
        {
            return Some(format!("{}*{}.{ext}", &stem[..start], &stem[end..]));
        }
        start = end + 1;
    }
    None
}

/// The byte span of `N.N[.N...]` (optionally `v`-prefixed) in `stem`, at a token boundary.
fn dotted_version(stem: &str) -> Option<(usize, usize)> {
    let bytes = stem.as_bytes();
    let boundary = |i: usize| i == 0 || matches!(bytes[i - 1], b'.' | b'-' | b'_' | b'@');
    let mut i = 0;
    while i < bytes.len() {
        if boundary(i)
            && (bytes[i].is_ascii_digit()
                || (matches!(bytes[i], b'v' | b'V')
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            let start = i;
            let mut j = if bytes[i].is_ascii_digit() { i } else { i + 1 };
            let mut dots = 0;
            loop {
                let digits = bytes[j..].iter().take_while(|b| b.is_ascii_digit()).count();
                if digits == 0 {
                    break;
                }
                j += digits;
                if bytes.get(j) == Some(&b'.') && bytes.get(j + 1).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                    dots += 1;
                } else {
                    break;
                }
            }
            let ends_token = j == bytes.len() || matches!(bytes[j], b'.' | b'-' | b'_');
            if dots >= 1 && ends_token {
                return Some((start, j));
            }
        }
        i += 1;
    }
    None
}

/// A content hash: 6–64 hex digits with a digit, or 8–64 letters and digits with at least one
/// of each.
fn is_hash(token: &str) -> bool {
    let len = token.len();
    if !(6..=64).contains(&len) || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let digit = token.bytes().any(|b| b.is_ascii_digit());
    let lower = token.bytes().any(|b| b.is_ascii_lowercase());
    let upper = token.bytes().any(|b| b.is_ascii_uppercase());
    let hex = token.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && digit && !upper {
        return true;
    }
    // A digit is required: `myComponent` is a name, not a hash.
    len >= 8 && digit && (lower || upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(path: &str, query: Option<&str>) -> Option<String> {
        series(path, query).map(|p| p.as_str().to_owned())
    }

    #[test]
    fn versions_and_hashes_become_wildcards() {
        assert_eq!(
            s("/assets/app.3f9c2e.js", None).as_deref(),
            Some("/assets/app.*.js")
        );
        assert_eq!(
            s("/assets/index-BfX3k9Qz.js", None).as_deref(),
            Some("/assets/index-*.js")
        );
        assert_eq!(
            s("/js/jquery-3.7.1.min.js", None).as_deref(),
            Some("/js/jquery-*.min.js")
        );
        assert_eq!(s("/v1.4.2/lib.js", None).as_deref(), Some("/*/lib.js"));
        assert_eq!(
            s("/lib/1.4.2/lib.js", None).as_deref(),
            Some("/lib/*/lib.js")
        );
        assert_eq!(
            s("/npm/vue@3.5.13/dist/vue.global.prod.js", None).as_deref(),
            Some("/npm/vue@*/dist/vue.global.prod.js")
        );
        assert_eq!(s("/lib.js", Some("v=12")).as_deref(), Some("/lib.js?v=*"));
        assert_eq!(s("/vue.3.5.12.js", None).as_deref(), Some("/vue.*.js"));
        assert_eq!(s("/lib.v12.js", None).as_deref(), Some("/lib.*.js"));
    }

    #[test]
    fn plain_names_numbers_and_other_queries_are_not_versions() {
        for path in [
            "/app.js",
            "/jquery.min.js",
            "/2024/05/post.html",
            "/index.html",
            "/favicon.ico",
            "/styles/main.css",
            "/deadbeef.js.map",
        ] {
            assert_eq!(s(path, None), None, "{path}");
        }
        assert_eq!(s("/lib.js", Some("page=2")), None);
        assert_eq!(s("/lib.js", Some("v=1&x=2")), None);
        assert_eq!(s("/a:b/1.2.3/x.js", None), None);
    }

    #[test]
    fn every_version_of_a_series_gets_the_same_pattern() {
        let a = series("/assets/app.3f9c2e.js", None).unwrap();
        let b = series("/assets/app.9a8b7c.js", None).unwrap();
        assert_eq!(a, b);
        assert!(a.matches("/assets/app.9a8b7c.js", None));
    }
}
