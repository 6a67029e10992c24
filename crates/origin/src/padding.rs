//! The filler text of `/stream` elements: realistic, moderately compressible, generated once.
//!
//! Compression benchmarks need a body that compresses like real JSON (seed 004's stream gzipped
//! about 3.5x), not a run of one repeated byte (1000x) nor random bytes (1x). Words drawn uniformly
//! from a small vocabulary by a fixed pseudo-random generator give that, deterministically, so runs
//! are comparable. The text is generated once per process into a 2 MiB template; each element
//! copies its padding from a pseudo-random offset in it, so neighbouring elements differ and a
//! compressor's 32 KiB window does not find them to be copies of each other.

use std::sync::OnceLock;

/// Template length: at least the largest element (1 MiB) plus room for the offsets to vary.
pub(crate) const TEMPLATE_LEN: usize = 2 * 1024 * 1024;

/// Words that could plausibly appear in an API's string fields; all lower-case ASCII letters, so
/// any slice of the template is a valid JSON string body with nothing to escape.
const WORDS: &[&str] = &[
    "account", "active", "address", "admin", "alpha", "amount", "archive", "balance", "batch",
    "billing", "branch", "bucket", "build", "cache", "card", "cart", "channel", "city", "client",
    "cluster", "comment", "config", "country", "created", "customer", "data", "default", "delta",
    "deploy", "device", "disabled", "email", "enabled", "event", "failed", "feature", "file",
    "filter", "group", "health", "host", "image", "index", "invoice", "item", "label", "level",
    "limit", "location", "message", "metric", "mode", "name", "network", "node", "order", "owner",
    "page", "payment", "pending", "phone", "policy", "price", "product", "profile", "project",
    "queue", "region", "release", "report", "request", "role", "route", "sample", "schema",
    "search", "secret", "server", "service", "session", "shipping", "source", "status", "stock",
    "stream", "street", "success", "tag", "target", "team", "tenant", "ticket", "token", "total",
    "update", "user", "value", "version", "volume", "warning", "window", "zone",
];

/// The shared template, built on first use (a few milliseconds).
pub(crate) fn template() -> &'static [u8] {
    static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();
    TEMPLATE.get_or_init(build)
}

/// Where element `index` takes `len` bytes of padding from: pseudo-random but deterministic.
pub(crate) fn offset(index: u64, len: usize) -> usize {
    let room = TEMPLATE_LEN.saturating_sub(len) as u64 + 1;
    (splitmix64(index) % room) as usize
}

fn build() -> Vec<u8> {
    let mut out = Vec::with_capacity(TEMPLATE_LEN + 16);
    let mut state = 0x5EED_u64;
    while out.len() < TEMPLATE_LEN {
        state = splitmix64(state);
        let word = WORDS[(state % WORDS.len() as u64) as usize];
        out.extend_from_slice(word.as_bytes());
        // A sprinkle of digits, like ids and counts in real payloads.
        if state >> 60 == 0 {
            out.extend_from_slice(&[
                b'0' + (state >> 32) as u8 % 10,
                b'0' + (state >> 40) as u8 % 10,
            ]);
        }
        out.push(b' ');
    }
    out.truncate(TEMPLATE_LEN);
    out
}

/// SplitMix64: a tiny, well-mixed generator; good enough for filler text and offsets.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_is_deterministic_json_safe_text() {
        let t = template();
        assert_eq!(t.len(), TEMPLATE_LEN);
        assert_eq!(t, build().as_slice());
        assert!(
            t.iter()
                .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ')
        );
    }

    #[test]
    fn offsets_leave_room_for_the_padding() {
        for len in [0, 1, 1000, TEMPLATE_LEN / 2, TEMPLATE_LEN] {
            for index in 0..100 {
                assert!(offset(index, len) + len <= TEMPLATE_LEN);
            }
        }
        assert_ne!(offset(1, 100), offset(2, 100));
    }
}
