//! The typed, validated configuration: what the server runs on.
//!
//! Everything here has been checked: addresses parse, files exist, names refer to things that are
//! defined, and a route has exactly one action. Code that receives a [`Config`] never re-validates.
//! The quick commands (`sluice file-server`, `sluice reverse-proxy`) build these types directly.
//!
//! One file per table, as in `raw/` and `validate/`, all re-exported here (users name them
//! `sluice_config::Route`, never by file): `server.rs` (`[server]`, `[log]`, `[admin]`),
//! `listener.rs` (`[[listeners]]`), `route.rs` (`[[routes]]` and their actions), `compress.rs`
//! (a route's `compress`), `proxy.rs` (a route's `proxy`), `upstream.rs` (`[upstreams.NAME]`),
//! `cache.rs` (`[caches.NAME]` and a route's `cache`), `rate_limit.rs` (a route's `rate_limit`),
//! `response.rs` (a route's `response_headers`, a static route's `max_age`), `dictionary.rs` (a
//! route's `dictionary`).

mod access;
mod acme;
mod cache;
mod compress;
mod dictionary;
mod discovery;
mod listener;
mod matchers;
mod proxy;
mod rate_limit;
mod response;
mod route;
mod server;
mod upstream;

pub use access::*;
pub use acme::*;
pub use cache::*;
pub use compress::*;
pub use dictionary::*;
pub use discovery::*;
pub use listener::*;
pub use matchers::*;
pub use proxy::*;
pub use rate_limit::*;
pub use response::*;
pub use route::*;
pub use server::*;
pub use upstream::*;

/// A whole, valid configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerSettings,
    pub log: LogSettings,
    pub listeners: Vec<Listener>,
    /// Routes in file order; the first that matches a request wins.
    pub routes: Vec<Route>,
    pub upstreams: Vec<Upstream>,
    /// Response cache storage zones (`[caches.NAME]`), sorted by name. A zone no route uses is
    /// allowed (and holds nothing).
    pub caches: Vec<CacheZone>,
    /// The admin listener (`/metrics`); `None` when not configured.
    pub admin: Option<Admin>,
    /// Automatic certificates (`[acme]`, docs/acme.md); `Some` when a listener has
    /// `tls = "acme"`.
    pub acme: Option<Acme>,
}
