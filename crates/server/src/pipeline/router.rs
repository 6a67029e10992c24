//! Routing: the first route (in file order) whose listener, host, path and matchers (methods,
//! headers, query, client, path regex) take the request.
//!
//! Each listener gets its own [`Router`] holding only the routes that apply to it, so the
//! listener filter costs nothing per request. Host matching needs no allocation when the host is
//! already lowercase, which is what clients send.

use std::net::IpAddr;
use std::sync::Arc;

use http::Request;
use sluice_config::{Action, FixedResponse, MatchInput, Redirect, Route};
use sluice_http::static_files::StaticFiles;

use crate::features::compress::RouteCompression;
pub use crate::pipeline::host::{invalid_host, request_host, request_host_parts};

/// What a matched route does, ready to run (static roots canonicalized, etc.).
pub enum Handler {
    Static(StaticFiles),
    Respond(FixedResponse),
    Redirect(Redirect),
    // Boxed: the handler holds a group config and a client, far larger than the other variants.
    Proxy(Arc<crate::features::proxy::ProxyHandler>),
}

/// A route with its handler.
pub struct CompiledRoute {
    pub config: Route,
    pub handler: Handler,
    /// Response compression, when the route has a `compress` option.
    pub compression: Option<RouteCompression>,
    /// The response cache, when the (proxy) route has a `cache` option.
    pub cache: Option<crate::features::cache::RouteCache>,
    /// Per-client rate limit, when the route has a `rate_limit` option. Shared so a reload can
    /// hand an unchanged route's buckets to its new compiled route.
    pub rate_limit: Option<Arc<crate::features::rate_limit::RouteRateLimit>>,
    /// Compression dictionaries, when the route has a `dictionary` option (and `compress`).
    /// Shared with the route's cache, which offers and makes deltas of stored responses.
    pub dictionaries: Option<Arc<crate::features::dictionary::RouteDictionaries>>,
    /// `response_headers` and a static route's `max_age`, when the route has either.
    pub response_headers: Option<crate::features::response_headers::RouteResponseHeaders>,
    /// `allow` / `deny`, `basic_auth`, `forward_auth`, when the route has any.
    pub access: Option<crate::features::access::RouteAccess>,
    /// Created at start-up so requests update them without a label lookup.
    pub metrics: crate::shared::metrics::RouteMetrics,
}

impl CompiledRoute {
    /// `upstreams` holds the running group and client of every upstream, by name; `metrics`
    /// hands out the route's metric handles; `cpu` samples the process for `max_cpu`.
    pub fn compile(
        route: &Route,
        upstreams: &crate::features::upstreams::Upstreams,
        zones: &crate::features::cache::zones::Zones,
        metrics: &crate::shared::metrics::Metrics,
        cpu: &crate::shared::cpu::CpuLoad,
    ) -> Result<Self, sluice_core::Error> {
        let handler = match &route.action {
            Action::Static(cfg) => {
                let prefix = match &route.path {
                    sluice_config::PathMatch::Prefix(p) | sluice_config::PathMatch::Exact(p) => p,
                };
                Handler::Static(StaticFiles::new(cfg, prefix)?)
            }
            Action::Respond(fixed) => Handler::Respond(fixed.clone()),
            Action::Redirect(redirect) => Handler::Redirect(redirect.clone()),
            Action::Proxy(proxy) => {
                let upstream = upstreams.get(&proxy.upstream).ok_or_else(|| {
                    sluice_core::Error::internal(
                        sluice_core::ErrorKind::Unavailable,
                        format!("upstream `{}` is not defined", proxy.upstream),
                    )
                })?;
                let decompress_metrics = proxy
                    .decompress_requests
                    .map(|_| metrics.decompress(&route.name));
                Handler::Proxy(Arc::new(
                    crate::features::proxy::ProxyHandler::new(
                        proxy.clone(),
                        upstream,
                        decompress_metrics,
                    )
                    .with_tunnels(&route.name, metrics.tunnels(&route.name)),
                ))
            }
        };
        let compression = route.compress.as_ref().map(|c| {
            let mut compression = RouteCompression::new(c, metrics.compress(&route.name));
            if let Some(max_cpu) = c.max_cpu {
                compression = compression.adapt_to_cpu(max_cpu, cpu, |algorithm| {
                    metrics.compress_level(&route.name, algorithm)
                });
            }
            match handler {
                // Static files are compressed once per coding and version, then served from
                // memory (compress once, serve many).
                Handler::Static(_) => {
                    compression.keep_variants(crate::features::compress::VARIANT_STORE_BYTES)
                }
                _ => compression,
            }
        });
        let dictionaries = route.dictionary.as_ref().map(|d| {
            Arc::new(crate::features::dictionary::RouteDictionaries::new(
                d,
                metrics.dictionary(&route.name),
            ))
        });
        let cache = match &route.cache {
            None => None,
            Some(config) => {
                let (zone, policy, use_stale) = zones.get(&config.zone).ok_or_else(|| {
                    sluice_core::Error::internal(
                        sluice_core::ErrorKind::Unavailable,
                        format!("cache zone `{}` is not defined", config.zone),
                    )
                })?;
                Some(
                    crate::features::cache::RouteCache::new(config, zone, policy, &use_stale)
                        .with_dictionaries(dictionaries.clone()),
                )
            }
        };
        let forward_auth = match &route.access.forward_auth {
            Some(auth) => {
                let upstream = upstreams.get(&auth.upstream).ok_or_else(|| {
                    sluice_core::Error::internal(
                        sluice_core::ErrorKind::Unavailable,
                        format!("upstream `{}` is not defined", auth.upstream),
                    )
                })?;
                Some(Arc::new(crate::features::proxy::ProxyHandler::new(
                    sluice_config::Proxy::to(auth.upstream.clone()),
                    upstream,
                    None,
                )))
            }
            None => None,
        };
        let access = crate::features::access::RouteAccess::new(
            &route.access,
            forward_auth,
            metrics.access(&route.name),
        )?;
        Ok(Self {
            config: route.clone(),
            access,
            handler,
            compression,
            cache,
            rate_limit: route.rate_limit.as_ref().map(|limit| {
                Arc::new(crate::features::rate_limit::RouteRateLimit::for_route(
                    limit,
                    &route.name,
                    metrics.rate_limited(&route.name),
                    metrics.rate_limit_fallbacks(&route.name),
                ))
            }),
            dictionaries,
            response_headers: crate::features::response_headers::RouteResponseHeaders::new(route),
            metrics: metrics.route(&route.name),
        })
    }
}

/// The routes of one listener, in file order, indexed by host and path
/// ([`RouteIndex`](crate::pipeline::route_index::RouteIndex)).
#[derive(Clone)]
pub struct Router {
    routes: Arc<[Arc<CompiledRoute>]>,
    index: Arc<crate::pipeline::route_index::RouteIndex>,
}

impl Router {
    /// Keep the routes that apply to `listener`.
    pub fn for_listener(all: &[Arc<CompiledRoute>], listener: &str) -> Self {
        let routes: Arc<[Arc<CompiledRoute>]> = all
            .iter()
            .filter(|r| {
                r.config.listeners.is_empty() || r.config.listeners.iter().any(|l| l == listener)
            })
            .cloned()
            .collect();
        let index = crate::pipeline::route_index::RouteIndex::new(routes.iter().map(|r| &r.config));
        Self {
            routes,
            index: Arc::new(index),
        }
    }

    /// The route for a request from `client` (resolved through `trusted_proxies`), if any, by
    /// its path as it is (the pipeline has put it in normal form).
    pub fn route<B>(&self, req: &Request<B>, client: IpAddr) -> Option<&Arc<CompiledRoute>> {
        self.route_for(request_host(req).as_deref(), req.uri().path(), req, client)
    }

    /// [`Router::route`], refusing a path whose other reading (`uri_path::alternate`: an
    /// encoded `/` or `\` as a separator, a NUL as the end, `;params` dropped, `//` merged)
    /// would take another route: a server behind the proxy that reads it that way would be
    /// reached past the route meant for that path (`/public/..%2Fadmin` is `/admin` to some).
    pub fn route_checked<B>(
        &self,
        req: &Request<B>,
        client: IpAddr,
    ) -> Result<Option<&Arc<CompiledRoute>>, Ambiguous> {
        let host = request_host(req);
        let route = self.route_for(host.as_deref(), req.uri().path(), req, client);
        let Some(other) = sluice_core::uri_path::alternate(req.uri().path()) else {
            return Ok(route);
        };
        let other = other.map_err(|_| Ambiguous)?;
        let same = match (route, self.route_for(host.as_deref(), &other, req, client)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if same { Ok(route) } else { Err(Ambiguous) }
    }

    fn route_for<B>(
        &self,
        host: Option<&str>,
        path: &str,
        req: &Request<B>,
        client: IpAddr,
    ) -> Option<&Arc<CompiledRoute>> {
        // `OPTIONS *` (asterisk-form, RFC 9112 §3.2.4) asks about the server as a whole: it
        // goes where the root would.
        let path = if path == "*" { "/" } else { path };
        let input = MatchInput {
            method: req.method(),
            headers: req.headers(),
            query: req.uri().query(),
            client,
            path,
        };
        self.routes.get(self.index.find(host, &input)?)
    }
}

/// A path that two servers could read as two routes' (see [`Router::route_checked`]): 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ambiguous;

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the request path has an encoded `/`, `\\` or NUL, a `;` or `//` that would take it \
             to another route when read as a separator, an end or a parameter",
        )
    }
}
