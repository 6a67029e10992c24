//! Start-up and shutdown: turn a validated [`Config`] into bound listeners and running accept
//! loops, and drain them on request.
//!
//! Start-up does every check that can fail (binding, certificates, static roots) before the first
//! connection is accepted, so a broken config never half-starts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_config::Config;
use sluice_upstream::Group;
use sluice_upstream::client::UpstreamClient;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::access_log::AccessLogger;
use crate::conn::{ListenerTask, accept_loop};
use crate::pipeline::Pipeline;
use crate::router::{CompiledRoute, Router};
use crate::tls;

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
    shutdown: watch::Sender<bool>,
    drained: mpsc::Receiver<()>,
}

/// The running group and pooled client of each upstream, by name.
pub type Upstreams = HashMap<String, (Arc<Group>, UpstreamClient)>;

/// Bind every listener and start serving.
pub async fn start(config: &Config) -> Result<RunningServer, StartError> {
    let (shutdown, shutdown_rx) = watch::channel(false);
    let upstreams = start_upstreams(config, &shutdown_rx);
    let routes = config
        .routes
        .iter()
        .map(|route| {
            CompiledRoute::compile(route, &upstreams)
                .map(Arc::new)
                .map_err(|e| StartError(format!("route `{}`: {e}", route.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let access_log = AccessLogger::open(&config.log.access, config.log.format).map_err(|e| {
        StartError(format!(
            "opening the access log {:?}: {e}",
            config.log.access
        ))
    })?;

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
        tasks.push(ListenerTask {
            name: listener.name.clone(),
            listener: socket,
            tls: acceptor,
            protocols: listener.protocols,
            limits: listener.limits.clone(),
            pipeline: Arc::new(Pipeline {
                router: Router::for_listener(&routes, &listener.name),
                server_header: config.server.server_header.clone(),
                access_log: access_log.clone(),
            }),
        });
    }

    let (drain, drained) = mpsc::channel(1);
    for task in tasks {
        tokio::spawn(accept_loop(task, shutdown_rx.clone(), drain.clone()));
    }
    for l in &bound {
        let scheme = if l.tls { "https" } else { "http" };
        tracing::info!(listener = %l.name, "listening on {scheme}://{}", l.address);
    }
    Ok(RunningServer {
        listeners: bound,
        shutdown,
        drained,
    })
}

/// Build each upstream group with its client, and start its active health checks.
fn start_upstreams(config: &Config, shutdown: &watch::Receiver<bool>) -> Upstreams {
    let mut upstreams = HashMap::with_capacity(config.upstreams.len());
    for upstream in &config.upstreams {
        let group = Arc::new(Group::new(upstream));
        let client = UpstreamClient::new(upstream, None);
        if let Some(check) = &upstream.health_check {
            tokio::spawn(sluice_upstream::health::active::run(
                group.clone(),
                client.clone(),
                check.clone(),
                None,
                shutdown.clone(),
            ));
        }
        upstreams.insert(upstream.name.clone(), (group, client));
    }
    upstreams
}

impl RunningServer {
    pub fn listeners(&self) -> &[BoundListener] {
        &self.listeners
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
