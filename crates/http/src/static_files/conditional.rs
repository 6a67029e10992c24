//! Validators (`ETag`, `Last-Modified`) and conditional requests, RFC 9110 §8.8 and §13.
//!
//! The ETag is nginx's: `"<mtime seconds hex>-<size hex>"`, strong. It changes whenever the
//! file's modification time (whole seconds) or its size changes, so it is cheap (no hashing) and
//! identical across restarts and across servers that share the files with the same mtimes. Two
//! different contents written within the same second with the same size share an ETag: the same
//! trade-off nginx makes.
//!
//! A precompressed variant's tag also names its coding, `"<mtime hex>-<size hex>-br"`: it must
//! differ from the original's and from the other variants', and `sluice precompress` gives every
//! variant the original's mtime, so two of them may well share mtime and size.
//!
//! Preconditions are evaluated in the order of RFC 9110 §13.2.2: `If-Match`, else
//! `If-Unmodified-Since` (412 on failure); then `If-None-Match`, else `If-Modified-Since` (304 on
//! a match for GET/HEAD). `If-Range` (§13.1.5) is step 5 and lives in [`if_range_allows`].

use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue};
use httpdate::HttpDate;

use sluice_core::ContentCoding;
use sluice_core::etag::{EntityTags, Member};

/// The validators of one version of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Validators {
    /// The strong entity tag, quotes included: `"65f1c2a0-1f4"`.
    pub(crate) etag: String,
    /// `None` when the file system reports no modification time.
    pub(crate) last_modified: Option<HttpDate>,
}

impl Validators {
    /// Validators of a file of `len` bytes in `encoding` (`Identity` for the file itself, else
    /// a sidecar's coding) last modified at `mtime`, as seen at `now`.
    pub(crate) fn new(
        mtime: Option<SystemTime>,
        len: u64,
        encoding: ContentCoding,
        now: SystemTime,
    ) -> Self {
        let secs = mtime
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let etag = match encoding {
            ContentCoding::Identity => format!("\"{secs:x}-{len:x}\""),
            coded => format!("\"{secs:x}-{len:x}-{coded}\""),
        };
        Self {
            etag,
            // RFC 9110 §8.8.2.1: never announce a modification in the future (a clock skewed
            // copy, `touch -d tomorrow`); clamp to the time of the response.
            last_modified: mtime.map(|t| HttpDate::from(t.min(now))),
        }
    }

    pub(crate) fn etag_header(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.etag).ok()
    }

    pub(crate) fn last_modified_header(&self) -> Option<HeaderValue> {
        self.last_modified
            .and_then(|d| HeaderValue::from_str(&d.to_string()).ok())
    }
}

/// The outcome of steps 1–4 of RFC 9110 §13.2.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precondition {
    /// Serve the representation (possibly a range of it).
    Proceed,
    /// `304 Not Modified` (only for GET and HEAD, which are all this handler serves).
    NotModified,
    /// `412 Precondition Failed`.
    Failed,
}

/// Evaluate `If-Match`, `If-Unmodified-Since`, `If-None-Match` and `If-Modified-Since`.
pub(crate) fn evaluate(headers: &HeaderMap, v: &Validators) -> Precondition {
    if headers.contains_key(header::IF_MATCH) {
        // Strong comparison: a weak tag never satisfies If-Match (§13.1.1).
        if !list_matches(headers, header::IF_MATCH, &v.etag, false) {
            return Precondition::Failed;
        }
    } else if let (Some(since), Some(modified)) = (
        single_date(headers, header::IF_UNMODIFIED_SINCE),
        v.last_modified,
    ) && modified > since
    {
        return Precondition::Failed;
    }

    if headers.contains_key(header::IF_NONE_MATCH) {
        // Weak comparison (§13.1.2): `W/"x"` matches `"x"`; a cache revalidating a
        // compressed variant whose tag was weakened still gets its 304.
        if list_matches(headers, header::IF_NONE_MATCH, &v.etag, true) {
            return Precondition::NotModified;
        }
    } else if let (Some(since), Some(modified)) = (
        single_date(headers, header::IF_MODIFIED_SINCE),
        v.last_modified,
    ) && modified <= since
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether a `Range` may be honoured given `If-Range` (§13.1.5): true without `If-Range`; with
/// it, an entity tag must match strongly and a date must equal `Last-Modified` exactly.
/// Anything else (stale, weak, unparsable) means "send the whole representation".
pub(crate) fn if_range_allows(headers: &HeaderMap, v: &Validators) -> bool {
    let mut values = headers.get_all(header::IF_RANGE).iter();
    let Some(value) = values.next() else {
        return true;
    };
    if values.next().is_some() {
        return false;
    }
    let bytes = value.as_bytes();
    if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
        // §13.1.5: "the condition is true if the entity-tag matches using strong comparison",
        // and strong comparison (§8.8.3.2) needs both tags strong: a weak `If-Range` never
        // matches, not even the same weak tag stored by the cache.
        return bytes.starts_with(b"\"") && bytes == v.etag.as_bytes();
    }
    let date = value
        .to_str()
        .ok()
        .and_then(|s| HttpDate::from_str(s.trim()).ok());
    date.is_some() && date == v.last_modified
}

/// `if_range_allows` for a representation that is not a file (a stored response of the
/// cache): its `ETag` (quotes included) and `Last-Modified`, when it has them.
pub fn if_range_allows_with(
    headers: &HeaderMap,
    etag: Option<&str>,
    last_modified: Option<HttpDate>,
) -> bool {
    let validators = Validators {
        // No entity tag matches the empty string: an If-Range with a tag is refused.
        etag: etag.unwrap_or_default().to_string(),
        last_modified,
    };
    if etag.is_none() && headers.contains_key(header::IF_RANGE) {
        let value = headers.get(header::IF_RANGE).map(|v| v.as_bytes());
        if value.is_some_and(|v| v.starts_with(b"\"") || v.starts_with(b"W/")) {
            return false;
        }
    }
    if_range_allows(headers, &validators)
}

/// Whether any member of the list header `name` (all its lines) matches `etag`: `*` matches
/// any current representation; malformed members match nothing.
fn list_matches(headers: &HeaderMap, name: HeaderName, etag: &str, weak: bool) -> bool {
    headers.get_all(name).iter().any(|value| {
        EntityTags::new(value.as_bytes()).any(|member| match member {
            Member::Any => true,
            Member::Tag(tag) => (weak || !tag.weak) && tag.opaque == etag.as_bytes(),
        })
    })
}

/// A date header that must appear once and parse (§13.1.3/§13.1.4: otherwise it is ignored).
fn single_date(headers: &HeaderMap, name: HeaderName) -> Option<HttpDate> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    HttpDate::from_str(value.to_str().ok()?.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn validators() -> Validators {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        Validators {
            etag: "\"6553f100-a\"".into(),
            last_modified: Some(HttpDate::from(t)),
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn eval(pairs: &[(&'static str, &'static str)]) -> Precondition {
        evaluate(&headers(pairs), &validators())
    }

    const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    const BEFORE: &str = "Tue, 14 Nov 2023 22:13:19 GMT";
    const AFTER: &str = "Tue, 14 Nov 2023 22:13:21 GMT";

    #[test]
    fn if_none_match_compares_weakly_and_accepts_lists_and_star() {
        assert_eq!(
            eval(&[("if-none-match", r#""6553f100-a""#)]),
            Precondition::NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", r#"W/"6553f100-a""#)]),
            Precondition::NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", r#""x", "6553f100-a""#)]),
            Precondition::NotModified
        );
        assert_eq!(eval(&[("if-none-match", "*")]), Precondition::NotModified);
        assert_eq!(eval(&[("if-none-match", r#""x""#)]), Precondition::Proceed);
    }

    #[test]
    fn if_match_compares_strongly() {
        assert_eq!(
            eval(&[("if-match", r#""6553f100-a""#)]),
            Precondition::Proceed
        );
        assert_eq!(eval(&[("if-match", "*")]), Precondition::Proceed);
        assert_eq!(
            eval(&[("if-match", r#"W/"6553f100-a""#)]),
            Precondition::Failed
        );
        assert_eq!(eval(&[("if-match", r#""other""#)]), Precondition::Failed);
    }

    #[test]
    fn if_match_wins_over_if_unmodified_since() {
        let pairs = [
            ("if-match", r#""6553f100-a""#),
            ("if-unmodified-since", BEFORE),
        ];
        assert_eq!(eval(&pairs), Precondition::Proceed);
        assert_eq!(
            eval(&[("if-unmodified-since", BEFORE)]),
            Precondition::Failed
        );
        assert_eq!(eval(&[("if-unmodified-since", LM)]), Precondition::Proceed);
        assert_eq!(
            eval(&[("if-unmodified-since", "garbage")]),
            Precondition::Proceed
        );
    }

    #[test]
    fn if_modified_since_is_ignored_when_if_none_match_is_present() {
        assert_eq!(
            eval(&[("if-modified-since", LM)]),
            Precondition::NotModified
        );
        assert_eq!(
            eval(&[("if-modified-since", AFTER)]),
            Precondition::NotModified
        );
        assert_eq!(
            eval(&[("if-modified-since", BEFORE)]),
            Precondition::Proceed
        );
        assert_eq!(
            eval(&[("if-modified-since", "yesterday")]),
            Precondition::Proceed
        );
        let pairs = [("if-none-match", r#""x""#), ("if-modified-since", LM)];
        assert_eq!(eval(&pairs), Precondition::Proceed);
    }

    #[test]
    fn if_range_needs_a_strong_etag_or_the_exact_date() {
        let v = validators();
        assert!(if_range_allows(&headers(&[]), &v));
        assert!(if_range_allows(
            &headers(&[("if-range", r#""6553f100-a""#)]),
            &v
        ));
        assert!(!if_range_allows(
            &headers(&[("if-range", r#"W/"6553f100-a""#)]),
            &v
        ));
        assert!(!if_range_allows(
            &headers(&[("if-range", r#""stale""#)]),
            &v
        ));
        assert!(if_range_allows(&headers(&[("if-range", LM)]), &v));
        assert!(!if_range_allows(&headers(&[("if-range", AFTER)]), &v));
        assert!(!if_range_allows(&headers(&[("if-range", "nonsense")]), &v));
    }

    /// Found by `range_proptest.rs`: a stored response with a weak tag (a compressed variant)
    /// answered `If-Range: W/"x"` with a 206, though §13.1.5 compares strongly.
    #[test]
    fn if_range_with_the_same_weak_tag_sends_the_whole_representation() {
        let weak = headers(&[("if-range", r#"W/"6553f100-a""#)]);
        assert!(!if_range_allows_with(
            &weak,
            Some(r#"W/"6553f100-a""#),
            None
        ));
        let strong = headers(&[("if-range", r#""6553f100-a""#)]);
        assert!(!if_range_allows_with(
            &strong,
            Some(r#"W/"6553f100-a""#),
            None
        ));
        assert!(if_range_allows_with(&strong, Some(r#""6553f100-a""#), None));
    }

    #[test]
    fn etag_is_mtime_and_size_in_hex() {
        let mtime = UNIX_EPOCH + Duration::new(1_700_000_000, 999_000_000);
        let now = mtime + Duration::from_secs(60);
        let v = Validators::new(Some(mtime), 10, ContentCoding::Identity, now);
        assert_eq!(v, validators());
        let v = Validators::new(None, 255, ContentCoding::Identity, now);
        assert_eq!((v.etag.as_str(), v.last_modified), ("\"0-ff\"", None));
        let br = Validators::new(Some(mtime), 10, ContentCoding::Br, now);
        assert_eq!(br.etag, "\"6553f100-a-br\"");
        let zstd = Validators::new(Some(mtime), 10, ContentCoding::Zstd, now);
        assert_eq!(zstd.etag, "\"6553f100-a-zstd\"");
    }

    #[test]
    fn last_modified_is_clamped_to_now() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let future = now + Duration::from_secs(3_600);
        let v = Validators::new(Some(future), 0, ContentCoding::Identity, now);
        assert_eq!(v.last_modified, Some(HttpDate::from(now)));
        assert_eq!(v.etag, "\"11f8-0\"");
    }
}

#[cfg(test)]
#[path = "conditional_proptest.rs"]
mod proptests;
