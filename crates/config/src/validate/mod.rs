//! Validation: raw configuration in, typed [`Config`] out, every problem reported.
//!
//! Each part of the file has its own module; each validates what it can and reports the rest into
//! the shared [`Reporter`], returning a default or `None` where a value was bad, so that checking
//! goes on. A [`Config`] is only built when nothing was reported, so the defaults never escape.
//! Cross-references (a route's listeners, upstream and cache zone) are checked against the *names* found in
//! the file, valid or not, so one mistake is not reported again at every use.
//!
//! A proxy's inline `to` becomes an upstream group of its own (see [`proxy`]), added to
//! [`Config::upstreams`], which stays sorted by name.

mod access;
mod acme;
mod actions;
mod address;
mod admin;
mod cache;
mod compress;
mod dictionary;
mod files;
mod hosts;
mod listeners;
mod matchers;
mod proxy;
mod rate_limit;
mod resolver;
mod response;
mod rewrite;
mod routes;
mod server;
mod servers;
mod tls;
mod trusted;
mod upgrade;
mod upstream_settings;
mod upstream_tls;
mod upstreams;
mod values;

use std::path::PathBuf;

use crate::model::Config;
use crate::raw::RawConfig;
use crate::report::Reporter;

/// What every validation step needs: where to report, and where relative paths start.
pub(crate) struct Cx<'a> {
    pub r: &'a mut Reporter,
    /// The config file's directory as given (possibly relative, possibly empty for the current
    /// directory); shown in hints so that they match what the user typed.
    pub base: PathBuf,
}

/// Validates the whole file. `None` when anything was reported, before or during validation.
pub(crate) fn config(raw: RawConfig, cx: &mut Cx<'_>) -> Option<Config> {
    let server = server::server(cx, raw.server);
    let log = server::log(cx, raw.log);
    let (mut listeners, listener_names) =
        listeners::listeners(cx, raw.listeners, &server.trusted_proxies);
    let upstream_names: Vec<String> = raw.upstreams.keys().cloned().collect();
    let mut upstreams = upstreams::upstreams(cx, raw.upstreams);
    let zone_names: Vec<String> = raw.caches.keys().cloned().collect();
    let caches = cache::zones(cx, raw.caches);
    let names = routes::Defined {
        listeners: &listener_names,
        upstreams: &upstream_names,
        zones: &zone_names,
    };
    let (routes, inline_upstreams) = routes::routes(cx, raw.routes, &names);
    upstreams.extend(inline_upstreams);
    upstreams.sort_by(|a, b| a.name.cmp(&b.name));
    resolver::attach(cx, raw.resolver, &mut upstreams);
    let admin = admin::admin(cx, raw.admin, &listeners);
    acme::resolve_names(cx, &mut listeners, &routes);
    let acme = acme::acme(cx, raw.acme, &listeners);
    cx.r.is_empty().then_some(Config {
        server,
        log,
        listeners,
        routes,
        upstreams,
        caches,
        admin,
        acme,
    })
}
