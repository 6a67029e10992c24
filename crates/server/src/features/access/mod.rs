//! A route's access control, run in the request phase after the rate limit and before the
//! cache and the action: `allow` / `deny` (403), then `basic_auth` (401), then `forward_auth`
//! (the auth service's answer). Each refusal carries its reason for the access log
//! (`deny=client`, `deny=auth`) and is counted in `sluice_access_denied_total{route,reason}`.
//!
//! - [`basic`]: the user file (read when the route is compiled: at start and on every reload),
//!   bcrypt / argon2 verification off the async threads, a per-client limit of failed attempts.
//! - [`forward`]: the subrequest to the auth service, through an upstream group.

pub mod basic;
pub mod forward;

use std::net::IpAddr;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use sluice_config::{Access, AccessRule};
use sluice_core::Body;

use crate::shared::client::Client;
use crate::shared::metrics::access::AccessMetrics;

/// Index of each reason in [`AccessMetrics::denied`].
const CLIENT: usize = 0;
const AUTH: usize = 1;
const AUTH_SLOWED: usize = 2;

/// A refused request: the response to send and the reason for the log.
pub struct Refused {
    pub response: Response<Body>,
    /// `client`, `auth` or `auth_slowed`.
    pub reason: &'static str,
}

/// One route's compiled access control.
pub struct RouteAccess {
    rules: Vec<AccessRule>,
    default_allow: bool,
    basic: Option<basic::BasicAuthCheck>,
    forward: Option<forward::ForwardAuthCheck>,
    metrics: AccessMetrics,
}

impl RouteAccess {
    /// `None` when the route has no access control. Reads the basic-auth user file: an error
    /// here fails the start or the reload, with the file's name.
    pub fn new(
        config: &Access,
        forward_upstream: Option<Arc<crate::features::proxy::ProxyHandler>>,
        metrics: AccessMetrics,
    ) -> Result<Option<Self>, sluice_core::Error> {
        if config.is_empty() {
            return Ok(None);
        }
        let basic = config
            .basic_auth
            .as_ref()
            .map(basic::BasicAuthCheck::new)
            .transpose()?;
        let forward = match (&config.forward_auth, forward_upstream) {
            (Some(cfg), Some(proxy)) => Some(forward::ForwardAuthCheck::new(cfg, proxy)),
            _ => None,
        };
        Ok(Some(Self {
            rules: config.rules.clone(),
            default_allow: config.default_allow,
            basic,
            forward,
            metrics,
        }))
    }

    /// `allow` / `deny`: the first rule whose network holds the client decides (nginx's
    /// order); none: [`Access::default_allow`].
    pub fn client_allowed(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.rules
            .iter()
            .find(|rule| rule.net.contains(&ip))
            .map_or(self.default_allow, |rule| rule.allow)
    }

    /// Every check of the route, in order; on success the request may have changed (the
    /// credentials removed, the auth service's headers copied onto it).
    pub async fn check<B>(&self, client: Client, req: &mut Request<B>) -> Result<(), Refused> {
        if !self.client_allowed(client.ip) {
            self.metrics.denied[CLIENT].inc();
            tracing::debug!(client = %client.ip, "access denied by allow/deny");
            return Err(Refused {
                response: crate::shared::error_page(StatusCode::FORBIDDEN, None),
                reason: "client",
            });
        }
        if let Some(basic) = &self.basic {
            match basic.check(client.ip, req).await {
                basic::Outcome::Allowed => {}
                basic::Outcome::Refused(response) => {
                    self.metrics.denied[AUTH].inc();
                    return Err(Refused {
                        response,
                        reason: "auth",
                    });
                }
                basic::Outcome::Slowed(response) => {
                    self.metrics.denied[AUTH_SLOWED].inc();
                    return Err(Refused {
                        response,
                        reason: "auth_slowed",
                    });
                }
            }
        }
        if let Some(forward) = &self.forward {
            match forward.check(client, req, &self.metrics.forward_auth).await {
                forward::Outcome::Allowed => {}
                forward::Outcome::Denied(response) => {
                    self.metrics.denied[AUTH].inc();
                    return Err(Refused {
                        response,
                        reason: "auth",
                    });
                }
                // Not the client's doing: no deny reason, a 500 the log says more of.
                forward::Outcome::Failed(response) => {
                    return Err(Refused {
                        response,
                        reason: "auth_error",
                    });
                }
            }
        }
        Ok(())
    }
}
