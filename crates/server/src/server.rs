//! Start-up and shutdown: turn a validated [`Config`] into bound listeners and running accept
//! loops, and drain them on request.
//!
//! Start-up does every check that can fail (binding, certificates, static roots) before the first
//! connection is accepted, so a broken config never half-starts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_config::Config;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::access_log::AccessLogger;
use crate::conn::{ListenerTask, accept_loop};
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;
use crate::router::{CompiledRoute, Router};
use crate::{tls, upstreams};

/// Why the server could not start.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// A listener that is accepting connections.
#[derive(Debug, Clone)]
pub struct BoundListener {
    pub name: String,
    /// The actual address (the real port when the config asked for port 0).
    pub address: SocketAddr,
    pub tls: bool,
}

/// A running server. Dropping it does not stop it; call [`RunningServer::shutdown`].
pub struct RunningServer {
    listeners: Vec<BoundListener>,
    admin_address: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    drained: mpsc::Receiver<()>,
}

/// Bind every listener and start serving.
pub async fn start(config: &Config) -> Result<RunningServer, StartError> {
    let (shutdown, shutdown_rx) = watch::channel(false);
    let metrics = Metrics::new();
    // Bind the admin listener first: a clash should stop start-up before anything runs.
    let admin = match &config.admin {
        Some(admin) => Some(TcpListener::bind(admin.address).await.map_err(|e| {
            StartError(format!(
                "admin listener: cannot listen on {}: {e}",
                admin.address
            ))
        })?),
        None => None,
    };
    let admin_address = admin.as_ref().and_then(|l| l.local_addr().ok());
    let upstreams = upstreams::start(config, &metrics, &shutdown_rx);
    let zones = crate::cache::zones::Zones::open(config)
        .await
        .map_err(StartError)?;
    for zone in zones.iter() {
        metrics.watch_cache_zone(zone.clone());
    }
    let routes = config
        .routes
        .iter()
        .map(|route| {
            CompiledRoute::compile(route, &upstreams, &zones, &metrics)
                .map(Arc::new)
                .map_err(|e| StartError(format!("route `{}`: {e}", route.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let access_log =
        AccessLogger::open(&config.log, metrics.access_log_dropped()).map_err(|e| {
            StartError(format!(
                "opening the access log {:?}: {e}",
                config.log.access
            ))
        })?;

    let server_slots = crate::limits::ConnectionSlots::server_wide(config.server.max_connections);
    let mut tasks = Vec::with_capacity(config.listeners.len());
    let mut bound = Vec::with_capacity(config.listeners.len());
    for listener in &config.listeners {
        let socket = TcpListener::bind(listener.address).await.map_err(|e| {
            StartError(format!(
                "listener `{}`: cannot listen on {}: {e}{}",
                listener.name,
                listener.address,
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    " (is another server running on that port? change `address`)"
                } else {
                    ""
                }
            ))
        })?;
        let address = socket.local_addr().map_err(|e| StartError(e.to_string()))?;
        let acceptor = match &listener.tls {
            Some(t) => Some(TlsAcceptor::from(
                tls::server_config(t, listener.protocols)
                    .map_err(|e| StartError(format!("listener `{}`: {e}", listener.name)))?,
            )),
            None => None,
        };
        bound.push(BoundListener {
            name: listener.name.clone(),
            address,
            tls: acceptor.is_some(),
        });
        tasks.push((
            socket,
            ListenerTask {
                name: listener.name.clone(),
                tls: acceptor,
                protocols: listener.protocols,
                limits: listener.limits.clone(),
                proxy_protocol: listener.proxy_protocol,
                metrics: metrics.listener(&listener.name),
                pipeline: Arc::new(Pipeline {
                    router: Router::for_listener(&routes, &listener.name),
                    server_header: config.server.server_header.clone(),
                    access_log: access_log.clone(),
                    unmatched: metrics.route(crate::metrics::UNMATCHED_ROUTE),
                    limits: crate::limits::RequestLimits::new(
                        &listener.limits,
                        metrics.request_limits(&listener.name),
                    ),
                }),
                slots: crate::limits::ConnectionSlots::new(
                    listener.limits.max_connections,
                    server_slots.clone(),
                ),
            },
        ));
    }

    let (drain, drained) = mpsc::channel(1);
    if let (Some(listener), Some(address)) = (admin, admin_address) {
        tracing::info!("admin: metrics at http://{address}/metrics");
        tokio::spawn(crate::admin::serve(
            listener,
            metrics.clone(),
            zones.clone(),
            shutdown_rx.clone(),
        ));
    }
    for (socket, task) in tasks {
        tokio::spawn(accept_loop(
            socket,
            task,
            shutdown_rx.clone(),
            drain.clone(),
        ));
    }
    for l in &bound {
        let scheme = if l.tls { "https" } else { "http" };
        tracing::info!(listener = %l.name, "listening on {scheme}://{}", l.address);
    }
    Ok(RunningServer {
        listeners: bound,
        admin_address,
        shutdown,
        drained,
    })
}

impl RunningServer {
    pub fn listeners(&self) -> &[BoundListener] {
        &self.listeners
    }

    /// The bound address of the admin listener, if configured.
    pub fn admin_address(&self) -> Option<SocketAddr> {
        self.admin_address
    }

    /// The bound address of the listener called `name`.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.address)
    }

    /// Stop accepting, let in-flight requests finish (up to `timeout`), then return. Returns
    /// `false` if some connections were still busy at the deadline.
    pub async fn shutdown(mut self, timeout: Duration) -> bool {
        let _ = self.shutdown.send(true);
        // Every accept loop and connection holds a sender; recv() yields None once all are gone.
        tokio::time::timeout(timeout, self.drained.recv())
            .await
            .is_ok()
    }
}
