//! Entity-tag lists: the values of `If-Match` and `If-None-Match` (RFC 9110 §8.8.3, §13.1.1).
//!
//! Hand-written because the `http` crate has no parser for them and the grammar has two traps: an
//! `etagc` may be a comma (so the list cannot be split on commas first) or an obs-text byte (so
//! the value cannot be required to be a `str`).

/// One member of an `If-Match` / `If-None-Match` list.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Member<'a> {
    Any,
    /// `opaque` keeps its quotes so it compares directly with `Validators::etag`.
    Tag {
        weak: bool,
        opaque: &'a [u8],
    },
}

/// Iterates the members of `1#entity-tag` / `*` (§8.8.3). Works on bytes because `etagc`
/// allows obs-text, and cannot split on commas first because a comma is a valid `etagc`.
/// Stops at the first malformed member.
pub(crate) struct EntityTags<'a> {
    rest: &'a [u8],
}

impl<'a> EntityTags<'a> {
    pub(crate) fn new(value: &'a [u8]) -> Self {
        Self { rest: value }
    }
}

impl<'a> Iterator for EntityTags<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        let start = self
            .rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b','))?;
        let rest = &self.rest[start..];
        if let Some(after) = rest.strip_prefix(b"*") {
            self.rest = after;
            return Some(Member::Any);
        }
        let (weak, tag) = match rest.strip_prefix(b"W/") {
            Some(tag) => (true, tag),
            None => (false, rest),
        };
        let close = match tag.strip_prefix(b"\"") {
            Some(inner) => inner.iter().position(|&b| b == b'"'),
            None => None,
        };
        let Some(close) = close else {
            self.rest = &[];
            return None;
        };
        let (opaque, after) = tag.split_at(close + 2);
        self.rest = after;
        Some(Member::Tag { weak, opaque })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_tag_lists_parse_with_commas_inside_quotes() {
        let members: Vec<_> = EntityTags::new(br#" W/"a", "b,c" ,*,"d""#).collect();
        assert_eq!(
            members,
            vec![
                Member::Tag {
                    weak: true,
                    opaque: br#""a""#
                },
                Member::Tag {
                    weak: false,
                    opaque: br#""b,c""#
                },
                Member::Any,
                Member::Tag {
                    weak: false,
                    opaque: br#""d""#
                },
            ]
        );
        assert_eq!(EntityTags::new(br#""a", bad, "c""#).count(), 1);
        assert_eq!(EntityTags::new(br#""unterminated"#).count(), 0);
    }
}
