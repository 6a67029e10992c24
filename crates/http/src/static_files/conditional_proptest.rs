//! Property tests of preconditions (RFC 9110 §13): any `If-*` field values decide without a
//! panic; `If-None-Match` compares weakly (§13.1.2) and `If-Match` strongly (§13.1.1), whatever
//! else the lists hold.

use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;

use super::*;
use crate::proptest_config::cases;

const ETAG: &str = "\"6553f100-a\"";

fn validators() -> Validators {
    Validators {
        etag: ETAG.into(),
        last_modified: Some(HttpDate::from(
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        )),
    }
}

/// List members around the representation's tag: itself, weak, others, `*`, garbage.
fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(ETAG.to_owned()),
        Just(format!("W/{ETAG}")),
        Just("*".to_owned()),
        "\"[a-z0-9,]{0,4}\"",
        "W/\"[a-z0-9]{0,4}\"",
        "[ -~]{0,6}",
    ]
}

fn list() -> impl Strategy<Value = String> {
    proptest::collection::vec(member(), 0..4).prop_map(|m| m.join(", "))
}

fn date() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Tue, 14 Nov 2023 22:13:20 GMT".to_owned()),
        Just("Tue, 14 Nov 2023 22:13:19 GMT".to_owned()),
        "[ -~]{0,30}",
    ]
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn any_preconditions_decide(
        if_match in proptest::option::of(list()),
        if_none_match in proptest::option::of(list()),
        since in proptest::option::of(date()),
        unmodified in proptest::option::of(date()),
        if_range in proptest::option::of(prop_oneof![member(), date()]),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (header::IF_MATCH, &if_match),
            (header::IF_NONE_MATCH, &if_none_match),
            (header::IF_MODIFIED_SINCE, &since),
            (header::IF_UNMODIFIED_SINCE, &unmodified),
            (header::IF_RANGE, &if_range),
        ] {
            if let Some(value) = value {
                headers.insert(name, HeaderValue::from_str(value).unwrap());
            }
        }
        let v = validators();
        let outcome = evaluate(&headers, &v);
        if_range_allows(&headers, &v);

        // §13.1.1: If-Match fails unless a member is `*` or the tag, strongly compared.
        if let Some(list) = &if_match {
            let strong_hit = EntityTags::new(list.as_bytes())
                .any(|m| match m {
                    Member::Any => true,
                    Member::Tag(tag) => !tag.weak && tag.opaque == ETAG.as_bytes(),
                });
            prop_assert_eq!(outcome == Precondition::Failed, !strong_hit, "If-Match {:?}", list);
        }
        // §13.1.2: If-None-Match (when If-Match passed) is a 304 when any member matches weakly.
        if let (Some(list), false) = (&if_none_match, outcome == Precondition::Failed) {
            let weak_hit = EntityTags::new(list.as_bytes())
                .any(|m| match m {
                    Member::Any => true,
                    Member::Tag(tag) => tag.opaque == ETAG.as_bytes(),
                });
            prop_assert_eq!(outcome == Precondition::NotModified, weak_hit, "If-None-Match {:?}", list);
        }
    }
}
