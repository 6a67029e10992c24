//! `[upstreams.NAME]` and its sub-tables, as written. Like the rest of [`crate::raw`], every key
//! is optional and numbers and durations are [`Scalar`]s, so that validation judges them all.

use serde::Deserialize;
use toml::Spanned;

use super::{RawUpstreamServer, Scalar};

/// `[upstreams.NAME]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table with servers = [...]")]
pub(crate) struct RawUpstream {
    pub servers: Option<Vec<Spanned<RawUpstreamServer>>>,
    pub policy: Option<Spanned<String>>,
    pub hash_key: Option<Spanned<String>>,
    pub http2: Option<bool>,
    pub keepalive: Option<RawKeepalive>,
    pub timeouts: Option<RawUpstreamTimeouts>,
    pub retry: Option<RawRetry>,
    pub health_check: Option<RawHealthCheck>,
    pub tls: Option<Spanned<RawUpstreamTls>>,
    pub send_proxy_protocol: Option<bool>,
    pub max_conns: Option<Spanned<Scalar>>,
    pub queue_size: Option<Spanned<Scalar>>,
    pub queue_timeout: Option<Spanned<Scalar>>,
}

/// `[upstreams.NAME.tls]`: TLS to the group's servers. Its presence turns TLS on.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { ca = \"ca.pem\", server_name = \"api.internal\" }")]
pub(crate) struct RawUpstreamTls {
    pub ca: Option<Spanned<String>>,
    pub server_name: Option<Spanned<String>>,
    pub client_cert: Option<Spanned<String>>,
    pub client_key: Option<Spanned<String>>,
    pub insecure_skip_verify: Option<Spanned<bool>>,
}

/// The table form of an upstream server: `{ address = "...", weight = 3 }`.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { address = \"127.0.0.1:9001\", weight = 1 }")]
pub(crate) struct RawServerTable {
    pub address: Option<Spanned<String>>,
    pub weight: Option<Spanned<Scalar>>,
    pub max_fails: Option<Spanned<Scalar>>,
    pub fail_timeout: Option<Spanned<Scalar>>,
    pub backup: Option<bool>,
    pub down: Option<bool>,
}

/// `[upstreams.NAME.keepalive]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { max_idle = 64, idle_timeout = \"60s\" }")]
pub(crate) struct RawKeepalive {
    pub max_idle: Option<Spanned<Scalar>>,
    pub idle_timeout: Option<Spanned<Scalar>>,
    pub max_requests: Option<Spanned<Scalar>>,
}

/// `[upstreams.NAME.timeouts]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { connect = \"5s\", response_header = \"60s\" }")]
pub(crate) struct RawUpstreamTimeouts {
    pub connect: Option<Spanned<Scalar>>,
    pub response_header: Option<Spanned<Scalar>>,
    pub idle: Option<Spanned<Scalar>>,
}

/// `[upstreams.NAME.retry]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { tries = 3, budget = \"10s\" }")]
pub(crate) struct RawRetry {
    pub tries: Option<Spanned<Scalar>>,
    pub budget: Option<Spanned<Scalar>>,
}

/// `[upstreams.NAME.health_check]`; its presence turns active checks on.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { path = \"/health\", interval = \"5s\" }")]
pub(crate) struct RawHealthCheck {
    pub path: Option<Spanned<String>>,
    pub interval: Option<Spanned<Scalar>>,
    pub timeout: Option<Spanned<Scalar>>,
    pub expected_status: Option<Spanned<Scalar>>,
    pub rise: Option<Spanned<Scalar>>,
    pub fall: Option<Spanned<Scalar>>,
}
