//! `Range: bytes=...` for one file, RFC 9110 §14.
//!
//! Syntax is parsed by `http-range-header`; what a range *means* for a file of a given length is
//! decided here, because the crate's `validate` does not follow RFC 9110 where it matters to
//! clients: it rejects a suffix longer than the file (`bytes=-500` on 100 bytes must be the whole
//! file, §14.1.3) and cannot tell "unsatisfiable" (416) from "invalid" (ignore).
//!
//! Decisions:
//! - one satisfiable range -> 206 with exactly those bytes (an end past the file is clamped);
//! - a first position at or past the end (also `bytes=0-` of an empty file) -> 416;
//! - a suffix range of an empty file -> the whole (empty) file with 200: §14.1.1 calls it
//!   satisfiable, so not 416, but no `Content-Range` can describe zero bytes;
//! - a syntactically invalid header, another unit, or `last < first` -> the header is ignored
//!   (§14.2 lets a server ignore `Range`; §14.1.1 calls `last < first` invalid, not
//!   unsatisfiable). `bytes=-0` is among them: the parser rejects it, so it is ignored rather than
//!   answered with 416 (both are allowed);
//! - several ranges -> ignored, the whole file is sent with 200. `multipart/byteranges` is not
//!   implemented: real clients (browsers, video players, download resumers) ask for one range,
//!   and a single 200 costs less than building multipart bodies.

use std::borrow::Cow;

use http::{HeaderMap, header};
use http_range_header::{EndPosition, StartPosition, parse_range_header};

/// What to do with a request's `Range` header, given the file length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeDecision {
    /// Send the whole file with 200.
    Whole,
    /// Send bytes `start..=end` with 206.
    Partial { start: u64, end: u64 },
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// The request's `Range` value: `None` when absent, repeated (a malformed request) or not
/// visible ASCII, all of which mean "send the whole file".
pub fn header_value(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::RANGE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Decide for one `Range` header value (`None` if the header is absent or not ASCII).
pub fn decide(value: Option<&str>, len: u64) -> RangeDecision {
    let Some(value) = value else {
        return RangeDecision::Whole;
    };
    // Range units are case-insensitive (§14.1); the parser only knows lowercase `bytes=`.
    let Some((unit, set)) = value.split_once('=') else {
        return RangeDecision::Whole;
    };
    if !unit.eq_ignore_ascii_case("bytes") {
        return RangeDecision::Whole;
    }
    let normalised = if unit == "bytes" {
        Cow::Borrowed(value)
    } else {
        format!("bytes={set}").into()
    };
    let Ok(parsed) = parse_range_header(&normalised) else {
        return RangeDecision::Whole;
    };
    let [range] = parsed.ranges.as_slice() else {
        return RangeDecision::Whole;
    };

    match (range.start, range.end) {
        (StartPosition::Index(start), EndPosition::Index(end)) if end < start => {
            RangeDecision::Whole
        }
        // §14.1.1: "If the selected representation has zero length, the only satisfiable form
        // of range in a byte-range-spec is a suffix-range with a non-zero suffix-length": so
        // not a 416, yet no `Content-Range` can name bytes of nothing. The whole (empty)
        // representation with 200 is the answer (§14.2 lets a server ignore `Range`), as nginx
        // gives.
        (StartPosition::FromLast(_), _) if len == 0 => RangeDecision::Whole,
        _ if len == 0 => RangeDecision::Unsatisfiable,
        (StartPosition::Index(start), _) if start >= len => RangeDecision::Unsatisfiable,
        (StartPosition::Index(start), EndPosition::Index(end)) => RangeDecision::Partial {
            start,
            end: end.min(len - 1),
        },
        (StartPosition::Index(start), EndPosition::LastByte) => RangeDecision::Partial {
            start,
            end: len - 1,
        },
        // The parser only produces suffixes with a last byte, and never `-0`.
        (StartPosition::FromLast(suffix), _) => RangeDecision::Partial {
            start: len.saturating_sub(suffix),
            end: len - 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeDecision::*;

    fn d(value: &str, len: u64) -> RangeDecision {
        decide(Some(value), len)
    }

    #[test]
    fn single_ranges_of_every_form() {
        assert_eq!(d("bytes=0-9", 100), Partial { start: 0, end: 9 });
        assert_eq!(d("bytes=-10", 100), Partial { start: 90, end: 99 });
        assert_eq!(d("bytes=5-", 100), Partial { start: 5, end: 99 });
        assert_eq!(d("bytes=99-99", 100), Partial { start: 99, end: 99 });
        assert_eq!(d("BYTES=0-0", 100), Partial { start: 0, end: 0 });
    }

    #[test]
    fn ends_past_the_file_are_clamped_and_long_suffixes_mean_everything() {
        assert_eq!(d("bytes=90-1000", 100), Partial { start: 90, end: 99 });
        assert_eq!(d("bytes=-500", 100), Partial { start: 0, end: 99 });
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(d("bytes=100-", 100), Unsatisfiable);
        assert_eq!(d("bytes=100-200", 100), Unsatisfiable);
        assert_eq!(d("bytes=0-0", 0), Unsatisfiable);
    }

    /// Found by `range_proptest.rs` checked against §14.1.1: a suffix range of an empty
    /// representation is satisfiable, so it must not get 416.
    #[test]
    fn a_suffix_range_of_an_empty_file_is_the_whole_empty_file() {
        assert_eq!(d("bytes=-5", 0), Whole);
        assert_eq!(d("bytes=-1", 0), Whole);
        assert_eq!(d("bytes=0-", 0), Unsatisfiable);
    }

    #[test]
    fn invalid_foreign_or_multiple_ranges_are_ignored() {
        assert_eq!(decide(None, 100), Whole);
        for value in [
            "bytes=abc",
            "items=0-1",
            "bytes",
            "bytes=",
            "bytes=9-5",
            "bytes=-0",
            "bytes=0-1,5-6",
            "bytes=0-1, 1-2",
            "bytes= 0-1",
        ] {
            assert_eq!(d(value, 100), Whole, "{value}");
        }
    }
}

#[cfg(test)]
#[path = "range_proptest.rs"]
mod proptests;
