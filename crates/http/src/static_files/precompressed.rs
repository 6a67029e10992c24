//! Which precompressed sidecars a request may get: the route's sidecar codings that the client
//! accepts, best first, by the same negotiation as on-the-fly compression (client q-values
//! first, then the route's preference order). Decided before the trip to the blocking pool, so
//! a request that accepts none costs no extra file-system call.

use http::HeaderMap;
use http::header::ACCEPT_ENCODING;

use crate::encoding::{Negotiated, negotiate_headers};
use sluice_core::ContentCoding;

/// Sidecar codings (zstd, br, gzip): at most three, kept inline so that no request allocates.
const MAX: usize = 3;

/// The acceptable sidecar codings of one request, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Accepted {
    codings: [ContentCoding; MAX],
    len: usize,
}

impl Accepted {
    pub(crate) const NONE: Accepted = Accepted {
        codings: [ContentCoding::Identity; MAX],
        len: 0,
    };

    pub(crate) fn as_slice(&self) -> &[ContentCoding] {
        &self.codings[..self.len]
    }
}

/// Rank `offered` (the route's sidecar codings, most preferred first) for this request. The
/// ranking stops where identity would win: `gzip;q=0.5, identity` prefers the original to the
/// gzip sidecar, so no sidecar is tried at all.
pub(crate) fn accepted(headers: &HeaderMap, offered: &[ContentCoding]) -> Accepted {
    let mut accepted = Accepted::NONE;
    if offered.is_empty() || !headers.contains_key(ACCEPT_ENCODING) {
        return accepted;
    }
    let mut remaining = Accepted::NONE;
    for &encoding in offered.iter().take(MAX) {
        remaining.codings[remaining.len] = encoding;
        remaining.len += 1;
    }
    // Negotiating again without the winner gives the runner-up: at most three passes over a
    // short header, cheaper than a ranking API that would allocate.
    while remaining.len > 0 {
        let best = match negotiate_headers(headers, remaining.as_slice()) {
            Negotiated::Use(ContentCoding::Identity) | Negotiated::NotAcceptable => break,
            Negotiated::Use(best) => best,
        };
        let Some(at) = remaining.as_slice().iter().position(|&e| e == best) else {
            break;
        };
        remaining.codings.copy_within(at + 1..remaining.len, at);
        remaining.len -= 1;
        accepted.codings[accepted.len] = best;
        accepted.len += 1;
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;
    use ContentCoding::{Br, Gzip, Zstd};
    use http::HeaderValue;

    fn rank(
        accept_encoding: Option<&'static str>,
        offered: &[ContentCoding],
    ) -> Vec<ContentCoding> {
        let mut headers = HeaderMap::new();
        if let Some(value) = accept_encoding {
            headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(value));
        }
        accepted(&headers, offered).as_slice().to_vec()
    }

    #[test]
    fn client_weights_first_then_the_route_order() {
        let all = [Zstd, Br, Gzip];
        assert_eq!(rank(Some("gzip, br, zstd"), &all), [Zstd, Br, Gzip]);
        assert_eq!(
            rank(Some("gzip;q=0.5, br;q=0.9, zstd;q=0.1"), &all),
            [Br, Gzip, Zstd]
        );
        assert_eq!(rank(Some("gzip, deflate, br"), &[Gzip, Br]), [Gzip, Br]);
        assert_eq!(rank(Some("*"), &all), [Zstd, Br, Gzip]);
        assert_eq!(rank(Some("*, br;q=0"), &all), [Zstd, Gzip]);
    }

    #[test]
    fn nothing_when_identity_wins_or_nothing_is_accepted() {
        let all = [Zstd, Br, Gzip];
        assert_eq!(rank(None, &all), []);
        assert_eq!(rank(Some(""), &all), []);
        assert_eq!(rank(Some("identity"), &all), []);
        assert_eq!(rank(Some("deflate"), &all), []);
        assert_eq!(rank(Some("gzip"), &[]), []);
        // Identity above gzip: the original is preferred, gzip would only be a fallback.
        assert_eq!(rank(Some("identity, gzip;q=0.5"), &all), []);
        assert_eq!(rank(Some("br, identity;q=0.8, gzip;q=0.5"), &all), [Br]);
        assert_eq!(rank(Some("gzip;q=0, br"), &all), [Br]);
    }
}
