//! Property tests of `Range` decisions (RFC 9110 §14): any header value and length decide without
//! a panic and never name a byte outside the representation; well-formed single ranges are
//! decided as §14.1.1–§14.1.3 say, with the choices documented in `range.rs` (`bytes=-0` and
//! several ranges ignored, a suffix of an empty representation answered with all of it).

use proptest::prelude::*;

use super::*;
use crate::proptest_config::cases;

/// Lengths around the interesting edges: empty, tiny, and near `u64::MAX`.
fn length() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4,
        0u64..10_000,
        any::<u64>(),
        (u64::MAX - 4)..=u64::MAX
    ]
}

/// Positions, biased like lengths so they meet them.
fn position() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4,
        0u64..10_000,
        any::<u64>(),
        (u64::MAX - 4)..=u64::MAX
    ]
}

/// One `byte-range-spec` (§14.1.2).
#[derive(Debug, Clone, Copy)]
enum Spec {
    /// `first-last`
    Int(u64, u64),
    /// `first-`
    From(u64),
    /// `-suffix`
    Suffix(u64),
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (position(), position()).prop_map(|(a, b)| Spec::Int(a, b)),
        position().prop_map(Spec::From),
        position().prop_map(Spec::Suffix),
    ]
}

fn spec_text(spec: Spec) -> String {
    match spec {
        Spec::Int(first, last) => format!("{first}-{last}"),
        Spec::From(first) => format!("{first}-"),
        Spec::Suffix(suffix) => format!("-{suffix}"),
    }
}

/// §14.1.1–§14.1.3 for one well-formed range over `len` bytes, with `range.rs`'s choices.
fn expected(spec: Spec, len: u64) -> RangeDecision {
    match spec {
        // §14.1.1: `last < first` is invalid: the header is ignored.
        Spec::Int(first, last) if last < first => RangeDecision::Whole,
        // The parser refuses `-0`, which is then ignored like any invalid header.
        Spec::Suffix(0) => RangeDecision::Whole,
        // §14.1.1: on a zero-length representation a suffix range is satisfiable, yet names no
        // byte: the whole (empty) representation.
        Spec::Suffix(_) if len == 0 => RangeDecision::Whole,
        _ if len == 0 => RangeDecision::Unsatisfiable,
        Spec::Int(first, _) | Spec::From(first) if first >= len => RangeDecision::Unsatisfiable,
        // §14.1.2: a last position past the end means "to the end".
        Spec::Int(first, last) => RangeDecision::Partial {
            start: first,
            end: last.min(len - 1),
        },
        Spec::From(first) => RangeDecision::Partial {
            start: first,
            end: len - 1,
        },
        // §14.1.2: a suffix longer than the representation means all of it.
        Spec::Suffix(suffix) => RangeDecision::Partial {
            start: len.saturating_sub(suffix),
            end: len - 1,
        },
    }
}

fn assert_inside(decision: RangeDecision, len: u64) -> Result<(), TestCaseError> {
    if let RangeDecision::Partial { start, end } = decision {
        prop_assert!(start <= end && end < len, "{decision:?} of {len} bytes");
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(5000))]

    #[test]
    fn any_value_decides_inside_the_representation(
        value in proptest::string::string_regex("[bytesBYTES=0-9, \\-x*]{0,40}").unwrap(),
        len in length(),
    ) {
        assert_inside(decide(Some(&value), len), len)?;
    }

    #[test]
    fn any_text_decides_inside_the_representation(value in "\\PC{0,40}", len in length()) {
        assert_inside(decide(Some(&value), len), len)?;
    }

    #[test]
    fn one_well_formed_range_follows_rfc_9110_14(
        spec in spec(),
        len in length(),
        unit in proptest::sample::select(vec!["bytes", "BYTES", "Bytes"]),
    ) {
        let value = format!("{unit}={}", spec_text(spec));
        prop_assert_eq!(decide(Some(&value), len), expected(spec, len), "{}", value);
    }

    /// `multipart/byteranges` is not produced: several ranges are ignored, whatever they are.
    #[test]
    fn several_ranges_get_the_whole_representation(
        specs in proptest::collection::vec(spec(), 2..5),
        len in length(),
    ) {
        let set: Vec<String> = specs.into_iter().map(spec_text).collect();
        let value = format!("bytes={}", set.join(","));
        let decision = decide(Some(&value), len);
        // The parser may refuse the set (overlaps, `-0`), which is ignored all the same.
        prop_assert_eq!(decision, RangeDecision::Whole, "{}", value);
    }
}

/// An entity tag, strong or weak, as a stored response or a client may send it.
fn entity_tag() -> impl Strategy<Value = String> {
    (any::<bool>(), "[a-c0-9]{0,3}").prop_map(|(weak, opaque)| {
        let tag = format!("\"{opaque}\"");
        if weak { format!("W/{tag}") } else { tag }
    })
}

proptest! {
    #![proptest_config(cases(2000))]

    /// RFC 9110 §13.1.5: an entity tag in `If-Range` allows the range only when it matches the
    /// representation's by strong comparison (§8.8.3.2: both strong, same opaque-tag); a weak
    /// tag on either side never does.
    #[test]
    fn if_range_compares_entity_tags_strongly(
        stored in proptest::option::of(entity_tag()),
        sent in entity_tag(),
    ) {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_RANGE, http::HeaderValue::from_str(&sent).unwrap());
        let allows = crate::static_files::if_range_allows_with(&headers, stored.as_deref(), None);
        let strong_match = stored.as_deref() == Some(sent.as_str()) && !sent.starts_with("W/");
        prop_assert_eq!(allows, strong_match, "stored {:?}, If-Range {:?}", stored, sent);
    }
}
