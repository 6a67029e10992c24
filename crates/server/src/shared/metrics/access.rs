//! The metrics of access control: requests a route refused (`sluice_access_denied_total`, by
//! route and reason: `client` for allow/deny, `auth` for basic auth and a denying auth service,
//! `auth_slowed` for a client over its rate of failed basic-auth attempts) and forward-auth
//! subrequests by outcome (`sluice_forward_auth_requests_total`: `allowed`, `denied`, `error`,
//! `timeout`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::register;

pub const ACCESS_DENIED_TOTAL: &str = "sluice_access_denied_total";
pub const FORWARD_AUTH_REQUESTS_TOTAL: &str = "sluice_forward_auth_requests_total";

/// Every name of this file, for [`super::ALL_NAMES`].
pub const NAMES: [&str; 2] = [ACCESS_DENIED_TOTAL, FORWARD_AUTH_REQUESTS_TOTAL];

/// The `reason` values of `sluice_access_denied_total`.
pub const DENY_REASONS: [&str; 3] = ["client", "auth", "auth_slowed"];
/// The `outcome` values of `sluice_forward_auth_requests_total`.
pub const FORWARD_AUTH_OUTCOMES: [&str; 4] = ["allowed", "denied", "error", "timeout"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteReasonLabels {
    route: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteOutcomeLabels {
    route: String,
    outcome: &'static str,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct AccessFamilies {
    denied: Family<RouteReasonLabels, Counter>,
    forward_auth: Family<RouteOutcomeLabels, Counter>,
}

/// One route's handles: a counter per deny reason and per forward-auth outcome, in the order
/// of [`DENY_REASONS`] and [`FORWARD_AUTH_OUTCOMES`].
#[derive(Clone, Debug)]
pub struct AccessMetrics {
    pub denied: [Counter; 3],
    pub forward_auth: [Counter; 4],
}

impl AccessFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            denied: register(
                r,
                ACCESS_DENIED_TOTAL,
                "Requests refused by a route's access control, by reason (client: allow/deny 403; auth: 401/403 of basic or forward auth; auth_slowed: 429 for too many failed basic-auth attempts)",
            ),
            forward_auth: register(
                r,
                FORWARD_AUTH_REQUESTS_TOTAL,
                "Forward-auth subrequests by outcome (allowed: 2xx, denied: 401/403, error: anything else or no answer, timeout)",
            ),
        }
    }

    /// A route's handles; every series exists from the start.
    pub(super) fn route(&self, route: &str) -> AccessMetrics {
        AccessMetrics {
            denied: DENY_REASONS.map(|reason| {
                self.denied.get_or_create_owned(&RouteReasonLabels {
                    route: route.to_owned(),
                    reason,
                })
            }),
            forward_auth: FORWARD_AUTH_OUTCOMES.map(|outcome| {
                self.forward_auth.get_or_create_owned(&RouteOutcomeLabels {
                    route: route.to_owned(),
                    outcome,
                })
            }),
        }
    }
}
