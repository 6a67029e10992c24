//! Build the request state from a [`Config`]: upstream groups, cache zones, compiled routes,
//! the access log and each listener's [`ListenerState`] (TLS acceptor with its certificates read
//! from disk, limits, pipeline). No socket is bound and no task is spawned here, so a reload
//! can build a state and still be refused without anything having changed; start-up is the
//! same build with nothing before it.
//!
//! What outlives a config is taken from the previous state: upstream groups whose config is
//! unchanged (their pool, peers' health, health-check task: see `upstreams.rs`), cache zones
//! whose storage settings are unchanged (`cache/zones.rs`), the rate-limit buckets of routes
//! whose name and `rate_limit` are unchanged, the connection-limit semaphores whose limit is
//! unchanged (so connections opened before a reload still count against it), and the TLS
//! session ticket keys and cache of listeners whose certificates are unchanged (so clients
//! resume across a reload). Metrics live in the one process-wide [`Metrics`], which hands the
//! same series to a route or upstream of the same name.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::Config;
use tokio_rustls::TlsAcceptor;

use super::StartError;
use crate::features::cache::zones::Zones;
use crate::features::upstreams::{self, Upstreams};
use crate::net::conn::{ListenerState, ListenerTask};
use crate::net::limits::{ConnectionSlots, Limit};
use crate::net::tls;
use crate::pipeline::Pipeline;
use crate::pipeline::access_log::AccessLogger;
use crate::pipeline::acme::AcmeFront;
use crate::pipeline::limits::RequestLimits;
use crate::pipeline::router::{CompiledRoute, Router};
use crate::shared::acme::{AcmeCert, Http01Tokens};
use crate::shared::cpu::CpuLoad;
use crate::shared::metrics::Metrics;

/// The request state of one config, less the sockets.
#[derive(Default)]
pub(super) struct State {
    pub config: Option<Config>,
    pub upstreams: Upstreams,
    pub zones: Zones,
    pub routes: Vec<Arc<CompiledRoute>>,
    /// `[server] max_connections`, shared by every listener.
    pub server_slots: Option<Arc<Limit>>,
    /// Each listener's `max_connections`, by listener name.
    pub listener_slots: HashMap<String, ConnectionSlots>,
    /// Each TLS listener's session ticket keys and session cache, by listener name: kept while
    /// its certificates are, so clients resume across reloads (`tls::Resumption`).
    pub resumption: HashMap<String, tls::Resumption>,
    /// ACME certificates by their names (docs/acme.md): kept while a listener asks for the
    /// same names under the same `[acme]`, so a reload neither drops a certificate nor orders
    /// it again.
    pub acme_certs: AcmeCerts,
    /// HTTP-01 tokens, one set for the process (answered by every listener without TLS).
    pub acme_tokens: Arc<Http01Tokens>,
}

/// Build the state of `config`, reusing what `previous` has that is still valid. Returns it
/// with one [`ListenerState`] per listener, in file order.
pub(super) async fn build(
    config: &Config,
    metrics: &Metrics,
    cpu: &CpuLoad,
    previous: &State,
) -> Result<(State, Vec<ListenerState>), StartError> {
    let upstreams = config
        .upstreams
        .iter()
        .map(|upstream| {
            let running = match previous.upstreams.get(&upstream.name) {
                Some(old) if old.serves(upstream) => old.clone(),
                old => upstreams::build_after(upstream, metrics, old).map_err(StartError)?,
            };
            Ok((upstream.name.clone(), running))
        })
        .collect::<Result<Upstreams, StartError>>()?;
    let zones = Zones::reopen(config, &previous.zones)
        .await
        .map_err(StartError)?;
    let old_routes: HashMap<&str, &CompiledRoute> = previous
        .routes
        .iter()
        .map(|r| (r.config.name.as_str(), r.as_ref()))
        .collect();
    let routes = config
        .routes
        .iter()
        .map(|route| {
            let mut compiled = CompiledRoute::compile(route, &upstreams, &zones, metrics, cpu)
                .map_err(|e| StartError(format!("route `{}`: {e}", route.name)))?;
            // The same limit on the same route keeps its clients' buckets: a reload must not
            // hand every client a fresh burst.
            if let Some(old) = old_routes.get(route.name.as_str())
                && old.config.rate_limit == route.rate_limit
            {
                compiled.rate_limit = old.rate_limit.clone();
            }
            Ok(Arc::new(compiled))
        })
        .collect::<Result<Vec<_>, StartError>>()?;
    // Opened again on every reload: moving the file away and reloading rotates the log.
    let access_log =
        AccessLogger::open(&config.log, metrics.access_log_dropped()).map_err(|e| {
            StartError(format!(
                "opening the access log {:?}: {e}",
                config.log.access
            ))
        })?;
    // Connection limits are kept and resized in place: connections opened before this config
    // go on counting against them, and a raised limit wakes an accept loop waiting at the old.
    let server_slots = match &previous.server_slots {
        Some(slots) => {
            slots.resize(config.server.max_connections);
            slots.clone()
        }
        None => ConnectionSlots::server_wide(config.server.max_connections),
    };
    let (acme_certs, acme_tokens) = acme_certs(config, previous)?;
    let mut listener_slots = HashMap::with_capacity(config.listeners.len());
    let mut resumption = HashMap::new();
    let mut tasks = Vec::with_capacity(config.listeners.len());
    for listener in &config.listeners {
        let max = listener.limits.max_connections;
        let slots = match previous.listener_slots.get(&listener.name) {
            Some(slots) => {
                slots.listener_limit().resize(max);
                slots.clone()
            }
            None => ConnectionSlots::new(max, server_slots.clone()),
        };
        listener_slots.insert(listener.name.clone(), slots.clone());
        // Certificates are read here, so a reload rotates them for new handshakes.
        let mut h3 = None;
        let acceptor = match &listener.tls {
            Some(t) => {
                let failed = |e| StartError(format!("listener `{}`: {e}", listener.name));
                let kept = previous.resumption.get(&listener.name);
                let sessions = tls::Resumption::keep_or_new_with(
                    kept,
                    t,
                    listener.session_ticket_keys.as_deref(),
                )
                .map_err(failed)?;
                let acme = match t {
                    sluice_config::Tls::Acme { names } => acme_certs.get(names).cloned(),
                    _ => None,
                };
                let config = tls::server_config_with(t, listener.protocols, &sessions, acme)
                    .map_err(failed)?;
                resumption.insert(listener.name.clone(), sessions);
                if listener.protocols.http3 {
                    let settings =
                        crate::net::h3::Settings::new(&config, &listener.limits, &listener.http3)
                            .map_err(failed)?;
                    h3 = Some(settings);
                }
                Some(TlsAcceptor::from(config))
            }
            None => None,
        };
        let pipeline = Pipeline {
            router: Router::for_listener(&routes, &listener.name),
            server_header: config.server.server_header.clone(),
            access_log: access_log.clone(),
            unmatched: metrics.route(crate::shared::metrics::UNMATCHED_ROUTE),
            trusted_proxies: listener.trusted_proxies.clone(),
            limits: RequestLimits::new(&listener.limits, metrics.request_limits(&listener.name)),
            acme: acme_front(config, listener, &acme_tokens),
        };
        let task = ListenerTask::new(
            listener.name.clone(),
            acceptor,
            listener.protocols,
            listener.limits.clone(),
            listener.proxy_protocol,
            metrics.listener(&listener.name),
        )
        .with_h3(h3);
        tasks.push(ListenerState {
            task: Arc::new(task),
            pipeline: Arc::new(pipeline),
            slots,
        });
    }
    let state = State {
        config: Some(config.clone()),
        upstreams,
        zones,
        routes,
        server_slots: Some(server_slots),
        listener_slots,
        resumption,
        acme_certs,
        acme_tokens,
    };
    Ok((state, tasks))
}

/// ACME certificates by the names they cover.
pub(super) type AcmeCerts = HashMap<Vec<String>, Arc<AcmeCert>>;

/// The ACME certificate of each set of names the listeners ask for: the previous state's when
/// the `[acme]` settings are unchanged, else a new one (the stored certificate, or a self-signed
/// stand-in: a start never waits for, or fails on, the CA).
fn acme_certs(
    config: &Config,
    previous: &State,
) -> Result<(AcmeCerts, Arc<Http01Tokens>), StartError> {
    let mut certs = HashMap::new();
    let tokens = previous.acme_tokens.clone();
    let Some(settings) = &config.acme else {
        return Ok((certs, tokens));
    };
    let same_settings = previous
        .config
        .as_ref()
        .is_some_and(|c| c.acme.as_ref() == Some(settings));
    for listener in &config.listeners {
        let Some(sluice_config::Tls::Acme { names }) = &listener.tls else {
            continue;
        };
        if certs.contains_key(names) {
            continue;
        }
        let cert = match previous.acme_certs.get(names) {
            Some(kept) if same_settings => kept.clone(),
            _ => crate::ops::acme::new_cert(settings, names)
                .map_err(|e| StartError(format!("listener `{}`: {e}", listener.name)))?,
        };
        certs.insert(names.clone(), cert);
    }
    Ok((certs, tokens))
}

/// What a listener without TLS does for ACME: answer HTTP-01 challenges, and redirect to the
/// HTTPS port of an ACME listener on the same address (or a wildcard one) with the
/// configured status. No redirect when that port is 0 (known only once bound).
fn acme_front(
    config: &Config,
    listener: &sluice_config::Listener,
    tokens: &Arc<Http01Tokens>,
) -> Option<AcmeFront> {
    let settings = config.acme.as_ref()?;
    if listener.tls.is_some() {
        return None;
    }
    let paired = config.listeners.iter().find(|l| {
        matches!(l.tls, Some(sluice_config::Tls::Acme { .. }))
            && (l.address.ip() == listener.address.ip()
                || l.address.ip().is_unspecified()
                || listener.address.ip().is_unspecified())
    });
    let redirect = match (settings.http_redirect, paired) {
        (Some(status), Some(tls)) if tls.address.port() != 0 => {
            let port = tls.address.port();
            Some((status, (port != 443).then_some(port)))
        }
        _ => None,
    };
    Some(AcmeFront {
        tokens: tokens.clone(),
        redirect,
    })
}
