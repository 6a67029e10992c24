//! Request path -> a relative path that cannot leave the served root.
//!
//! This is the first of two traversal guards (the second is the canonical-root check in
//! [`super::resolve`], which catches symbolic links). It works on the *decoded* path because
//! that is what the file system sees: `%2e%2e` is `..` and `%2f` is `/` once decoded, so checking
//! the raw string would let `/..%2f..%2fetc/passwd` through.
//!
//! Rules:
//! - the route prefix is removed first, on the path as routes matched it: the pipeline has put
//!   it in normal form (`sluice_core::uri_path`: unreserved characters decoded, dot segments
//!   resolved, `..` above the root refused), so `..` only arrives here encoded with an encoded
//!   `/` next to it (`..%2F`), which this module still refuses;
//! - invalid UTF-8 after decoding, a NUL byte, or any `..` segment is a `400 Bad Request`
//!   (never "normalised away": a client sending `..` is either broken or probing);
//! - empty and `.` segments are skipped (`//a/./b` is `a/b`);
//! - every remaining segment must be exactly one *normal* path component, so the joined path
//!   has no way to climb up or restart at an absolute path on any platform. On Unix a backslash
//!   is an ordinary file-name character and stays one.

use std::path::{Component, Path, PathBuf};

use percent_encoding::percent_decode_str;
use sluice_core::{Error, ErrorKind};

/// A request path, decoded and checked: safe to join onto the root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RelPath {
    /// Only normal components; empty for the root itself.
    pub(crate) path: PathBuf,
    /// The (decoded) request path ended in `/`: the client asks for a directory.
    pub(crate) trailing_slash: bool,
}

/// The part of `raw_path` the file system should see: `raw_path` without `prefix` when
/// `strip_prefix` is on. `None` if the path does not start with the prefix (the router should
/// never send such a request here; answering 404 is the safe choice if it does).
pub(crate) fn strip_route_prefix<'a>(
    raw_path: &'a str,
    prefix: &str,
    strip_prefix: bool,
) -> Option<&'a str> {
    if strip_prefix {
        raw_path.strip_prefix(prefix)
    } else {
        Some(raw_path)
    }
}

/// Decode and check `raw` (the path after prefix stripping, still percent-encoded).
pub(crate) fn to_rel_path(raw: &str) -> Result<RelPath, Error> {
    let decoded = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| bad_request("request path is not valid UTF-8"))?;
    if decoded.contains('\0') {
        return Err(bad_request("request path contains a NUL byte"));
    }

    let mut path = PathBuf::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(bad_request("request path contains a `..` segment")),
            _ => {}
        }
        // Belt and braces: on Unix a segment without `/` is always one normal component, but
        // this keeps the guarantee if the code ever runs where `\` or `C:` mean something.
        let mut components = Path::new(segment).components();
        match (components.next(), components.next()) {
            (Some(Component::Normal(_)), None) => path.push(segment),
            _ => return Err(bad_request("request path has an invalid segment")),
        }
    }

    Ok(RelPath {
        path,
        trailing_slash: decoded.ends_with('/'),
    })
}

fn bad_request(message: &str) -> Error {
    Error::downstream(ErrorKind::BadRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(raw: &str) -> Result<RelPath, ErrorKind> {
        to_rel_path(raw).map_err(|e| e.kind())
    }

    fn ok(path: &str, trailing_slash: bool) -> Result<RelPath, ErrorKind> {
        Ok(RelPath {
            path: PathBuf::from(path),
            trailing_slash,
        })
    }

    #[test]
    fn plain_paths_decode_and_skip_empty_and_dot_segments() {
        assert_eq!(rel("/"), ok("", true));
        assert_eq!(rel(""), ok("", false));
        assert_eq!(rel("/a/b.txt"), ok("a/b.txt", false));
        assert_eq!(rel("//a/./b/"), ok("a/b", true));
        assert_eq!(rel("/hello%20world.txt"), ok("hello world.txt", false));
        assert_eq!(rel("/caf%C3%A9"), ok("café", false));
        assert_eq!(rel("/a%2Fb"), ok("a/b", false));
    }

    #[test]
    fn dot_dot_in_any_encoding_is_a_bad_request() {
        for raw in [
            "/../etc/passwd",
            "/%2e%2e/",
            "/%2E%2E%2F",
            "/..%2f..%2fetc%2fpasswd",
            "/a/../../x",
            "/a/..",
            "..",
            "/.%2e/x",
        ] {
            assert_eq!(rel(raw), Err(ErrorKind::BadRequest), "{raw}");
        }
    }

    #[test]
    fn names_that_merely_contain_dots_are_files() {
        assert_eq!(rel("/.../x"), ok(".../x", false));
        assert_eq!(rel("/..a"), ok("..a", false));
        assert_eq!(rel("/.hidden"), ok(".hidden", false));
    }

    #[test]
    fn nul_and_invalid_utf8_are_bad_requests() {
        assert_eq!(rel("/a%00b"), Err(ErrorKind::BadRequest));
        assert_eq!(rel("/%ff"), Err(ErrorKind::BadRequest));
        assert_eq!(rel("/%C3"), Err(ErrorKind::BadRequest));
    }

    #[cfg(unix)]
    #[test]
    fn backslash_is_an_ordinary_character_on_unix() {
        assert_eq!(rel("/a\\..\\b"), ok("a\\..\\b", false));
        assert_eq!(rel("/%5c..%5cetc"), ok("\\..\\etc", false));
    }

    #[test]
    fn prefix_is_stripped_only_when_asked() {
        assert_eq!(
            strip_route_prefix("/static/a.css", "/static", true),
            Some("/a.css")
        );
        assert_eq!(
            strip_route_prefix("/static/a.css", "/static", false),
            Some("/static/a.css")
        );
        assert_eq!(strip_route_prefix("/other", "/static", true), None);
    }
}
