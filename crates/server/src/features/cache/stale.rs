//! Which upstream failures a stale response may answer for.

use http::StatusCode;
use sluice_cache::policy::{self, RequestDirectives};
use sluice_config::UseStale;
use sluice_core::ErrorKind;

use super::RouteCache;

/// Whether a failed revalidation may be answered with the stale response (once the policy
/// said stale-on-error is allowed at all, windows included): `stale-if-error` from the stored
/// response or the request covers connection failures, timeouts and 500/502/503/504 (RFC 5861
/// §4); the zone's `use_stale` covers what it lists.
pub(super) fn stale_on_failure(
    cache: &RouteCache,
    meta: &sluice_cache::meta::Meta,
    request: &http::HeaderMap,
    failure: Failure,
) -> bool {
    let directive = policy::ResponseDirectives::parse(&meta.headers, &cache.policy)
        .stale_if_error
        .is_some()
        || RequestDirectives::parse(request).stale_if_error.is_some();
    let listed = match failure {
        Failure::Error(ErrorKind::GatewayTimeout) => UseStale::Timeout,
        Failure::Error(_) => UseStale::Error,
        Failure::Status(status) => match status.as_u16() {
            500 => UseStale::Http500,
            502 => UseStale::Http502,
            503 => UseStale::Http503,
            504 => UseStale::Http504,
            _ => return false,
        },
    };
    let rfc5861 = matches!(failure, Failure::Error(_))
        || matches!(
            failure,
            Failure::Status(s) if matches!(s.as_u16(), 500 | 502 | 503 | 504)
        );
    (directive && rfc5861) || cache.use_stale.contains(&listed)
}

/// How a trip upstream failed.
#[derive(Clone, Copy)]
pub(crate) enum Failure {
    Error(ErrorKind),
    Status(StatusCode),
}
