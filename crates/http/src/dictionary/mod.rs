//! Compression dictionaries (RFC 9842, <https://www.rfc-editor.org/rfc/rfc9842>): the protocol
//! pieces, free of any server state, so each is tested with plain values.
//!
//! - [`hash`]: the SHA-256 that names a dictionary, and the `Available-Dictionary` field that
//!   carries it (§2.2, a Structured Field Byte Sequence).
//! - [`codec`]: the `dcb` and `dcz` codings (§4, §5): the fixed header naming the dictionary,
//!   then a brotli stream or zstd frame made with the dictionary as raw content, in the window
//!   the RFC allows.
//! - [`MatchPattern`] (in `sluice_core`, as the config validates it): the `match` URL pattern of
//!   `Use-As-Dictionary` (§2.1.1), for the paths and
//!   queries sluice writes and checks.
//! - [`readable`]: whether a request may get a dictionary-compressed response at all (§9.3,
//!   "Security Mitigations": same origin, CORS, never `no-cors` from another site).
//! - [`versioned`]: the automatic mode: which paths name a version of a resource (a content
//!   hash, a version number, a `?v=` query), and the pattern covering every version.
//! - [`choose`]: the dictionary coding a request gets, joined to `Accept-Encoding`
//!   negotiation (`crate::encoding`).

pub mod codec;
pub mod hash;

pub mod readable;
pub mod versioned;

pub use codec::{Dictionary, encode};
pub use hash::DictionaryHash;
pub use sluice_core::match_pattern::{MatchPattern, PatternError};

use http::HeaderMap;
use http::header::{ACCEPT_ENCODING, HeaderName, HeaderValue};
use sluice_core::DictionaryCoding;

/// `Available-Dictionary` (RFC 9842 §2.2).
pub static AVAILABLE_DICTIONARY: HeaderName = HeaderName::from_static("available-dictionary");
/// `Use-As-Dictionary` (RFC 9842 §2.1).
pub static USE_AS_DICTIONARY: HeaderName = HeaderName::from_static("use-as-dictionary");
/// `Dictionary-ID` (RFC 9842 §2.3).
pub static DICTIONARY_ID: HeaderName = HeaderName::from_static("dictionary-id");

/// The dictionary coding for a request whose `Accept-Encoding` lists one (by name, q > 0) among
/// `offered` (sluice's preference order): the highest weight, ties to `offered`'s order.
/// `None`: the request gets the route's normal negotiation. RFC 9842 §6.1: the coding is
/// negotiated through `Accept-Encoding` like any other; the dictionary separately.
pub fn choose(headers: &HeaderMap, offered: &[DictionaryCoding]) -> Option<DictionaryCoding> {
    let mut best: Option<(DictionaryCoding, u16)> = None;
    for &coding in offered {
        let lines = headers
            .get_all(ACCEPT_ENCODING)
            .iter()
            .map(HeaderValue::as_bytes);
        let weight = crate::encoding::listed_weight(lines, coding.as_str().as_bytes());
        if let Some(q) = weight.filter(|&q| q > 0)
            && best.is_none_or(|(_, top)| q > top)
        {
            best = Some((coding, q));
        }
    }
    best.map(|(coding, _)| coding)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn a_dictionary_coding_is_chosen_only_when_listed_by_name() {
        let both = DictionaryCoding::ALL;
        let chrome = accept("gzip, deflate, br, zstd, dcb, dcz");
        assert_eq!(choose(&chrome, &both), Some(DictionaryCoding::Dcz));
        assert_eq!(
            choose(&chrome, &[DictionaryCoding::Dcb]),
            Some(DictionaryCoding::Dcb)
        );
        assert_eq!(choose(&accept("gzip, br, *"), &both), None);
        assert_eq!(choose(&accept("gzip, dcz;q=0"), &both), None);
        assert_eq!(
            choose(&accept("dcz;q=0.5, DCB"), &both),
            Some(DictionaryCoding::Dcb)
        );
        assert_eq!(choose(&HeaderMap::new(), &both), None);
    }
}
