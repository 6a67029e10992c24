//! The `match` of `Use-As-Dictionary` (RFC 9842 §2.1.1, compression dictionaries): a URL Pattern
//! (<https://urlpattern.spec.whatwg.org/>) relative to the dictionary's own URL, so on its
//! origin. sluice writes and checks the subset that names paths: a pathname where `*` stands
//! for any run of characters (slashes included) and `:name` for one path segment, optionally
//! followed by `?` and a search pattern with `*`. Regexp groups (`(...)`) are refused, as the
//! RFC requires of clients (§2.1.1: a pattern with regexp groups MUST NOT be used); so are
//! absolute URLs (another origin could never match: §2.2.2) and the escapes and modifiers
//! (`\`, `{`, `}`, `+`, `?` after a group) sluice has no use for.
//!
//! A pattern without a search part matches any query, so the server's check never refuses a
//! dictionary the client found to match; the client's own matching is the strict one.

use std::fmt;

/// A validated `match` pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct MatchPattern {
    text: String,
    path: Vec<Piece>,
    search: Option<Vec<Piece>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    /// `*`: any characters.
    Any,
    /// `:name`: one or more characters other than `/`.
    Segment,
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    pub message: String,
    /// Byte offset in the pattern where the problem is.
    pub at: usize,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at character {})", self.message, self.at + 1)
    }
}

impl MatchPattern {
    /// Parse `text`, e.g. `/assets/app.*.js` or `/lib.js?v=*`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let err = |message: &str, at: usize| PatternError {
            message: message.to_owned(),
            at,
        };
        if !text.starts_with('/') {
            return Err(err(
                "a dictionary's `match` is a path on the same origin and starts with `/`",
                0,
            ));
        }
        if let Some(at) = text.find(['(', ')']) {
            return Err(err(
                "regular-expression groups are not allowed in `match` (RFC 9842 §2.1.1)",
                at,
            ));
        }
        if let Some(at) = text.find(['\\', '{', '}', '+', '#']) {
            return Err(err(
                "write `match` with literal text, `*` and `:name` only",
                at,
            ));
        }
        let (path, search) = match text.split_once('?') {
            Some((path, search)) => (path, Some(search)),
            None => (text, None),
        };
        let path = pieces(path, true).map_err(|at| err("`:` must start a segment name", at))?;
        let search = match search {
            Some(search) => Some(
                pieces(search, false)
                    .map_err(|at| err("`:` names only path segments", at + path_len(text)))?,
            ),
            None => None,
        };
        Ok(Self {
            text: text.to_owned(),
            path,
            search,
        })
    }

    /// The pattern as written (what `Use-As-Dictionary: match="..."` carries).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a request for `path` with `query` (without `?`) is covered.
    pub fn matches(&self, path: &str, query: Option<&str>) -> bool {
        if !matches_pieces(&self.path, path) {
            return false;
        }
        match &self.search {
            None => true,
            Some(search) => matches_pieces(search, query.unwrap_or_default()),
        }
    }

    /// The `Use-As-Dictionary` value for this pattern, with `match-dest` when not empty and
    /// `id` when set (RFC 9842 §2.1). The pattern is an sf-string: `"` and `\` are escaped
    /// (neither can be in a valid pattern, but the field must stay well-formed).
    pub fn header_value(&self, match_dest: &[String], id: Option<&str>) -> String {
        let mut value = format!("match={}", sf_string(&self.text));
        if !match_dest.is_empty() {
            let dests: Vec<String> = match_dest.iter().map(|d| sf_string(d)).collect();
            value.push_str(&format!(", match-dest=({})", dests.join(" ")));
        }
        if let Some(id) = id {
            value.push_str(&format!(", id={}", sf_string(id)));
        }
        value
    }
}

impl fmt::Debug for MatchPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MatchPattern({:?})", self.text)
    }
}

fn path_len(text: &str) -> usize {
    text.find('?').map_or(text.len(), |q| q + 1)
}

fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        // sf-string is printable ASCII only; anything else is dropped rather than sent broken.
        if (' '..='~').contains(&c) {
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Split into literals, `*` and `:name`; `Err(offset)` for a `:` not followed by a name (or
/// any `:name` when `names` is false).
fn pieces(text: &str, names: bool) -> Result<Vec<Piece>, usize> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '*' => {
                if !literal.is_empty() {
                    out.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                out.push(Piece::Any);
            }
            ':' if names => {
                let mut name = 0;
                while chars
                    .peek()
                    .is_some_and(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
                {
                    chars.next();
                    name += 1;
                }
                if name == 0 {
                    return Err(at);
                }
                if !literal.is_empty() {
                    out.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                out.push(Piece::Segment);
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        out.push(Piece::Literal(literal));
    }
    Ok(out)
}

/// Backtracking match; patterns are short and written by the operator or by sluice, and the
/// input is a request path bounded by the listener's limits.
fn matches_pieces(pieces: &[Piece], input: &str) -> bool {
    match pieces.split_first() {
        None => input.is_empty(),
        Some((Piece::Literal(lit), rest)) => input
            .strip_prefix(lit.as_str())
            .is_some_and(|tail| matches_pieces(rest, tail)),
        Some((Piece::Any, rest)) => {
            // Consecutive stars are one star.
            if rest.first() == Some(&Piece::Any) {
                return matches_pieces(rest, input);
            }
            input
                .char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(input.len()))
                .any(|i| matches_pieces(rest, &input[i..]))
        }
        Some((Piece::Segment, rest)) => {
            let end = input.find('/').unwrap_or(input.len());
            (1..=end)
                .filter(|&i| input.is_char_boundary(i))
                .any(|i| matches_pieces(rest, &input[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> MatchPattern {
        MatchPattern::parse(text).unwrap()
    }

    #[test]
    fn wildcards_segments_and_queries_match_as_written() {
        assert!(p("/assets/app.*.js").matches("/assets/app.3f9c2e.js", None));
        assert!(p("/assets/app.*.js").matches("/assets/app.a/b.js", None));
        assert!(!p("/assets/app.*.js").matches("/assets/app.3f9c2e.css", None));
        assert!(!p("/assets/app.*.js").matches("/other/app.1.js", None));
        assert!(p("/app/*/main.js").matches("/app/v2/main.js", None));
        assert!(p("/lib/:version/lib.js").matches("/lib/1.4.2/lib.js", None));
        assert!(!p("/lib/:version/lib.js").matches("/lib/1/4/lib.js", None));
        assert!(!p("/lib/:version/lib.js").matches("/lib//lib.js", None));
        assert!(p("/lib.js?v=*").matches("/lib.js", Some("v=12")));
        assert!(!p("/lib.js?v=*").matches("/lib.js", Some("x=12")));
        assert!(!p("/lib.js?v=*").matches("/lib.js", None));
        // No search part: any query.
        assert!(p("/product/*").matches("/product/a", Some("x=1")));
        assert!(p("/a**b").matches("/a-x-b", None));
    }

    #[test]
    fn refused_patterns_say_where() {
        let e = MatchPattern::parse("/app/(\\d+)/main.js").unwrap_err();
        assert_eq!(e.at, 5);
        assert!(e.message.contains("regular-expression"));
        assert_eq!(MatchPattern::parse("app.js").unwrap_err().at, 0);
        assert!(MatchPattern::parse("https://other.example/app.js").is_err());
        assert_eq!(MatchPattern::parse("/a/:/b").unwrap_err().at, 3);
        assert!(MatchPattern::parse("/a{b}").is_err());
    }

    #[test]
    fn the_header_value_is_a_structured_field_dictionary() {
        assert_eq!(
            p("/app.*.js").header_value(&[], None),
            r#"match="/app.*.js""#
        );
        assert_eq!(
            p("/app.*.js").header_value(&["script".into(), "style".into()], Some("app v1")),
            r#"match="/app.*.js", match-dest=("script" "style"), id="app v1""#
        );
    }
}
