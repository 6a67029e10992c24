//! Building the big JSON arrays of seed 003: one element repeated thousands of times.
//!
//! Both `/what-date-is-it` and `/what-is-my-name` answer `[e,e,e,...]` with 10,000 copies of one
//! element. Copying the element 10,000 times one by one costs 10,000 small `memcpy`s; doubling the
//! already-written run with `extend_from_within` needs only ~14 large ones, so a 340 KB body is
//! built at memory bandwidth.

use bytes::Bytes;

/// How many records both seed-003 endpoints return.
pub(crate) const RECORDS: usize = 10_000;

/// `[element,element,...]` with `count` copies of `element` (which must itself be valid JSON).
pub(crate) fn repeated_array(element: &[u8], count: usize) -> Bytes {
    if count == 0 {
        return Bytes::from_static(b"[]");
    }
    let unit = element.len() + 1; // each copy after the first is preceded by a comma
    let mut out = Vec::with_capacity(1 + element.len() + (count - 1) * unit + 1);
    out.push(b'[');
    out.extend_from_slice(element);
    let start = out.len();
    let wanted = (count - 1) * unit;
    if wanted > 0 {
        out.push(b',');
        out.extend_from_slice(element);
    }
    // Double the run of ",element" until it is long enough; the last copy may be partial in
    // elements but never in bytes, because every step copies whole units.
    while out.len() - start < wanted {
        let have = out.len() - start;
        let take = have.min(wanted - have);
        out.extend_from_within(start..start + take);
    }
    out.push(b']');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(element: &str, count: usize) -> String {
        format!("[{}]", vec![element; count].join(","))
    }

    #[test]
    fn matches_the_naive_join_for_every_small_count() {
        for count in 0..70 {
            let got = repeated_array(br#"{"a":1}"#, count);
            assert_eq!(got, naive(r#"{"a":1}"#, count).as_bytes(), "count {count}");
        }
    }

    #[test]
    fn builds_ten_thousand_records_exactly() {
        let element = br#"{"year":2026,"month":11,"day":22}"#;
        let got = repeated_array(element, RECORDS);
        // Seed 003's Go origin sent 340,001 bytes for this date: same compact format.
        assert_eq!(got.len(), 340_001);
        let parsed: Vec<serde_json::Value> = serde_json::from_slice(&got).unwrap_or_default();
        assert_eq!(parsed.len(), RECORDS);
        assert!(parsed.iter().all(|v| v["day"] == 22));
    }
}
