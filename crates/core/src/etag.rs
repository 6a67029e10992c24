//! Entity tags (RFC 9110 §8.8.3) and the lists of them that `If-Match` and `If-None-Match` carry
//! (§13.1.1, §13.1.2), read by the static file server's preconditions (`sluice-http`) and by the
//! cache answering a client's conditional request (`sluice-cache`).
//!
//! ```text
//! entity-tag = [ weak ] opaque-tag        weak = %s"W/"
//! opaque-tag = DQUOTE *etagc DQUOTE       etagc = %x21 / %x23-7E / obs-text
//! If-None-Match = "*" / #entity-tag
//! ```
//!
//! Hand-written because the `http` crate has no parser for them and the grammar has two traps: an
//! `etagc` may be a comma (so a list cannot be split on commas first) and an obs-text byte (so a
//! value cannot be required to be a `str`). Comparison is the caller's: strong (§8.8.3.2: both
//! strong, same opaque-tag) for `If-Match` and `If-Range`, weak (same opaque-tag) for
//! `If-None-Match`.

/// One `entity-tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// Written with the `W/` prefix.
    pub weak: bool,
    /// The opaque-tag, quotes included, so it compares directly with a stored `ETag` value.
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// A whole field value that is one entity tag (an `ETag`), surrounding whitespace allowed.
    pub fn parse(value: &'a [u8]) -> Option<Self> {
        let mut tags = EntityTags::new(value);
        match (tags.next(), tags.rest.trim_ascii().is_empty()) {
            (Some(Member::Tag(tag)), true) => Some(tag),
            _ => None,
        }
    }
}

/// One member of an `If-Match` / `If-None-Match` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    /// `*`: any current representation.
    Any,
    Tag(EntityTag<'a>),
}

/// The members of `"*" / #entity-tag`, in order, over all of one field line. Empty list elements
/// and whitespace between members are skipped (§5.6.1); iteration stops at the first malformed
/// member, so everything from there on matches nothing.
#[derive(Debug, Clone)]
pub struct EntityTags<'a> {
    rest: &'a [u8],
}

impl<'a> EntityTags<'a> {
    pub fn new(value: &'a [u8]) -> Self {
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
        let rest = self.rest.get(start..)?;
        if let Some(after) = rest.strip_prefix(b"*") {
            self.rest = after;
            return Some(Member::Any);
        }
        let (weak, tag) = match rest.strip_prefix(b"W/") {
            Some(tag) => (true, tag),
            None => (false, rest),
        };
        let close = tag
            .strip_prefix(b"\"")
            .and_then(|inner| inner.iter().position(|&b| b == b'"'));
        let Some((opaque, after)) =
            close.and_then(|c| Some((tag.get(..c + 2)?, tag.get(c + 2..)?)))
        else {
            self.rest = &[];
            return None;
        };
        self.rest = after;
        Some(Member::Tag(EntityTag { weak, opaque }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(weak: bool, opaque: &[u8]) -> Member<'_> {
        Member::Tag(EntityTag { weak, opaque })
    }

    /// §8.8.3: a comma is an `etagc`, so `"b,c"` is one tag; `*` may sit among tags here (the
    /// grammar allows it only alone, and a lone `*` is what senders write).
    #[test]
    fn lists_parse_with_commas_inside_quotes() {
        let members: Vec<_> = EntityTags::new(br#" W/"a", "b,c" ,*,"d""#).collect();
        assert_eq!(
            members,
            vec![
                tag(true, br#""a""#),
                tag(false, br#""b,c""#),
                Member::Any,
                tag(false, br#""d""#),
            ]
        );
    }

    /// §5.6.1: empty elements and optional whitespace are not members.
    #[test]
    fn empty_list_elements_are_skipped() {
        let members: Vec<_> = EntityTags::new(b",, \"a\" ,\t,\"b\",").collect();
        assert_eq!(members, vec![tag(false, b"\"a\""), tag(false, b"\"b\"")]);
        assert_eq!(EntityTags::new(b" , ").count(), 0);
    }

    /// obs-text is an `etagc`: the tag is not required to be UTF-8.
    #[test]
    fn obs_text_is_part_of_the_tag() {
        let members: Vec<_> = EntityTags::new(b"\"\xe9t\xe9\"").collect();
        assert_eq!(members, vec![tag(false, b"\"\xe9t\xe9\"")]);
    }

    #[test]
    fn parsing_stops_at_the_first_malformed_member() {
        assert_eq!(EntityTags::new(br#""a", bad, "c""#).count(), 1);
        assert_eq!(EntityTags::new(br#""unterminated"#).count(), 0);
        // `w/` is not the weak prefix (it is case-sensitive, %s"W/").
        assert_eq!(EntityTags::new(br#"w/"a""#).count(), 0);
    }

    #[test]
    fn a_whole_value_is_one_tag_or_none() {
        assert_eq!(
            EntityTag::parse(br#" W/"v1" "#),
            Some(EntityTag {
                weak: true,
                opaque: br#""v1""#
            })
        );
        assert_eq!(
            EntityTag::parse(br#""a,b""#).map(|t| t.opaque),
            Some(&br#""a,b""#[..])
        );
        for bad in [&b""[..], b"*", b"v1", br#""a", "b""#, br#""a" x"#, br#""a"#] {
            assert_eq!(EntityTag::parse(bad), None, "{bad:?}");
        }
    }
}
