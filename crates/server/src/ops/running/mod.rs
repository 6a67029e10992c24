//! Start-up, reload and shutdown: turn a validated [`Config`] into bound listeners and running
//! accept loops, swap in a new config without closing a socket, and drain on request.
//!
//! Both start-up and reload are two steps: build the request state from the config
//! (`state.rs`, no sockets or tasks) and bind what is missing (`sockets.rs`); only when both
//! succeeded is the result committed, which cannot fail. So a broken config never half-starts,
//! and a refused reload leaves the old config serving untouched.

mod sockets;
mod state;
mod summary;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use sluice_config::Config;
use tokio::sync::{mpsc, watch};

use crate::features::cache::zones::Zones;
use crate::features::upstreams::{self, HealthChecks};
use crate::net::conn::{ListenerState, accept_loop};
use crate::net::workers::Workers;
use crate::ops::admin::SharedZones;
use crate::ops::status::{self, SharedStatus, Status};
use crate::shared::cpu::CpuLoad;
use crate::shared::metrics::Metrics;
use sockets::{AdminSlot, LiveAdmin, LiveListener, LiveQuic, Slot, Sockets};
use state::State;
pub use summary::{Changes, ReloadSummary};

/// Why the server could not start, or a reload was refused.
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

/// A running server. Call [`RunningServer::shutdown`] to drain it; dropping it stops accepting
/// and tells connections to close, without waiting for them.
pub struct RunningServer {
    /// Held for the whole of a reload, so reloads run one at a time.
    running: tokio::sync::Mutex<Running>,
    /// What the accessors report, updated when a reload commits.
    view: Mutex<View>,
    drained: mpsc::Receiver<()>,
    /// The CPU sampler of `max_cpu` routes, also held by [`Running`]; here for the test hook.
    cpu: CpuLoad,
    /// What the status page reads besides the metrics, also held by [`Running`].
    status: SharedStatus,
}

#[derive(Clone, Default)]
struct View {
    listeners: Vec<BoundListener>,
    admin_address: Option<SocketAddr>,
}

/// Everything a reload replaces or carries over.
struct Running {
    /// One for the process lifetime: series survive reloads.
    metrics: Arc<Metrics>,
    /// One for the server's lifetime, like the metrics: routes with `max_cpu` watch it.
    cpu: CpuLoad,
    state: State,
    /// Active health checks of the running groups, by group name.
    health: HashMap<String, HealthChecks>,
    listeners: Vec<LiveListener>,
    admin: Option<LiveAdmin>,
    /// The zones purge requests reach.
    admin_zones: SharedZones,
    /// The status page's view of the running config (`/status`).
    status: SharedStatus,
    /// Cloned into every accept loop and connection; shutdown waits until all are dropped.
    drain: mpsc::Sender<()>,
    /// Where the accept loops hand their connections.
    workers: Workers,
    /// The ACME tasks (docs/acme.md), one per certificate.
    acme: crate::ops::acme::Manager,
}

/// Bind every listener and start serving, every connection on the calling runtime.
pub async fn start(config: &Config) -> Result<RunningServer, StartError> {
    start_on(config, Workers::here()).await
}

/// Bind every listener and start serving; accepted connections go to `workers`.
pub async fn start_on(config: &Config, workers: Workers) -> Result<RunningServer, StartError> {
    let metrics = Metrics::new();
    let cpu = CpuLoad::new(metrics.process_cpu_percent(), workers.threads());
    let (new_state, listeners) = state::build(config, &metrics, &cpu, &State::default()).await?;
    let sockets = sockets::bind(config, &[], None).await?;
    let (drain, drained) = mpsc::channel(1);
    let mut running = Running {
        metrics,
        cpu: cpu.clone(),
        state: State::default(),
        health: HashMap::new(),
        listeners: Vec::new(),
        admin: None,
        admin_zones: Arc::new(ArcSwap::from_pointee(Zones::default())),
        status: Status::new(),
        drain,
        workers,
        acme: crate::ops::acme::Manager::default(),
    };
    running.commit(new_state, listeners, sockets);
    Ok(RunningServer {
        view: Mutex::new(running.view()),
        status: running.status.clone(),
        running: tokio::sync::Mutex::new(running),
        drained,
        cpu,
    })
}

impl RunningServer {
    /// The listeners accepting now.
    pub fn listeners(&self) -> Vec<BoundListener> {
        self.view().listeners
    }

    /// The bound address of the admin listener, if configured.
    pub fn admin_address(&self) -> Option<SocketAddr> {
        self.view().admin_address
    }

    /// The bound address of the listener called `name`.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        self.view()
            .listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.address)
    }

    /// The ACME certificates managed now (docs/acme.md), each with its names, the certificate
    /// served and [`crate::shared::acme::AcmeCert::renewal`], the renewal state the status page
    /// shows. Empty without `tls = "acme"` listeners.
    pub async fn acme_certificates(&self) -> Vec<Arc<crate::shared::acme::AcmeCert>> {
        self.running.lock().await.acme.certificates()
    }

    /// Test hook of CPU-adaptive compression: take `percent` (of the workers' CPU) as one CPU
    /// sample now, and ignore real samples from then on (see [`CpuLoad::sample_for_tests`]).
    #[doc(hidden)]
    pub fn sample_cpu_for_tests(&self, percent: u32) {
        self.cpu.sample_for_tests(percent);
    }

    /// What the status page shows besides the metrics: the lifecycle records the config's
    /// source file and refused reloads here.
    pub fn status(&self) -> &SharedStatus {
        &self.status
    }

    fn view(&self) -> View {
        self.view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Switch to `config` without closing a listening socket or dropping a request: each
    /// request that starts from now on (the next one on an open keep-alive or HTTP/2
    /// connection included) runs on the new config; requests in flight finish on the old one.
    /// On error nothing has changed and the old config goes on serving.
    pub async fn reload(&self, config: &Config) -> Result<ReloadSummary, StartError> {
        let mut running = self.running.lock().await;
        let refused = |e: StartError| {
            self.status.reload_refused(&e.0);
            e
        };
        let (new_state, listeners) =
            state::build(config, &running.metrics, &running.cpu, &running.state)
                .await
                .map_err(refused)?;
        let sockets = sockets::bind(config, &running.listeners, running.admin.as_ref())
            .await
            .map_err(refused)?;
        let summary = running.commit(new_state, listeners, sockets);
        *self.view.lock().unwrap_or_else(PoisonError::into_inner) = running.view();
        Ok(summary)
    }

    /// Stop accepting, let in-flight requests finish (up to `timeout`), then return. Returns
    /// `false` if some connections were still busy at the deadline.
    pub async fn shutdown(mut self, timeout: Duration) -> bool {
        let running = self.running.into_inner();
        for listener in &running.listeners {
            let _ = listener.stop.send(true);
            if let Some(quic) = &listener.quic {
                let _ = quic.stop.send(true);
            }
        }
        if let Some(admin) = &running.admin {
            let _ = admin.stop.send(true);
        }
        // Drops the health checks, the stop senders (already sent) and our drain sender.
        drop(running);
        // Every accept loop and connection holds a sender; recv() yields None once all are gone.
        tokio::time::timeout(timeout, self.drained.recv())
            .await
            .is_ok()
    }
}

impl Running {
    fn view(&self) -> View {
        View {
            listeners: self.listeners.iter().map(|l| l.bound.clone()).collect(),
            admin_address: self.admin.as_ref().map(|a| a.address),
        }
    }

    /// Put a built state and its sockets in force. Cannot fail: everything that could was done
    /// while building and binding.
    fn commit(
        &mut self,
        new: State,
        listeners: Vec<ListenerState>,
        sockets: Sockets,
    ) -> ReloadSummary {
        let summary = summary::summarize(&self.state, &self.listeners, &new, &sockets);
        self.commit_upstreams(&new);
        for zone in new.zones.iter() {
            self.metrics.watch_cache_zone(zone.clone());
        }
        self.metrics
            .retain_cache_zones(|name| new.zones.zone(name).is_some());
        self.admin_zones.store(Arc::new(new.zones.clone()));
        let reload = self.state.config.is_some();
        if let Some(config) = &new.config {
            self.commit_listeners(config, listeners, sockets.listeners, sockets.quic);
            self.commit_admin(config, sockets.admin);
            // After the listeners: an order's challenges are answered by them.
            self.acme.sync(
                config.acme.as_ref(),
                &new.acme_certs,
                &new.acme_tokens,
                &self.metrics,
            );
            self.status
                .config_loaded(self.status_view(config, &new), reload);
        }
        // The old state goes here; what in-flight requests still hold of it goes with them.
        self.state = new;
        summary
    }

    /// The status page's view of `config` as just put in force.
    fn status_view(&self, config: &Config, new: &State) -> status::View {
        let listeners = self
            .listeners
            .iter()
            .map(|live| {
                let protocols = config
                    .listeners
                    .iter()
                    .find(|l| l.name == live.bound.name)
                    .map(|l| {
                        [
                            (l.protocols.http1, "http/1.1"),
                            (l.protocols.http2, "h2"),
                            (l.protocols.http3, "h3"),
                        ]
                        .into_iter()
                        .filter_map(|(on, name)| on.then_some(name))
                        .collect()
                    })
                    .unwrap_or_default();
                status::ListenerInfo {
                    name: live.bound.name.clone(),
                    address: live.bound.address,
                    tls: live.bound.tls,
                    protocols,
                }
            })
            .collect();
        status::View {
            upstreams: new.upstreams.clone(),
            listeners,
            certificates: status::certs::of_config(config, &new.acme_certs),
            shared_zones: config
                .caches
                .iter()
                .filter(|zone| zone.shared.is_some())
                .map(|zone| zone.name.clone())
                .collect(),
        }
    }

    /// Kept groups keep their health checks; new and changed ones start theirs and have their
    /// servers read at scrape time; the checks of changed and removed groups stop (their
    /// [`HealthChecks`] are dropped with the old map) and their servers are no longer read.
    fn commit_upstreams(&mut self, new: &State) {
        let mut old_health = std::mem::take(&mut self.health);
        for (name, running) in &new.upstreams {
            let kept = self
                .state
                .upstreams
                .get(name)
                .is_some_and(|old| Arc::ptr_eq(&old.group, &running.group));
            let checks = if kept {
                old_health.remove(name)
            } else {
                upstreams::watch(running, &self.metrics);
                upstreams::start_health_checks(running, &self.metrics)
            };
            if let Some(checks) = checks {
                self.health.insert(name.clone(), checks);
            }
        }
        drop(old_health);
        let live: Vec<(String, String)> = new
            .config
            .iter()
            .flat_map(|c| c.upstreams.iter())
            .filter_map(|u| new.upstreams.get(&u.name))
            .flat_map(upstreams::server_labels)
            .collect();
        self.metrics.retain_upstream_servers(|upstream, server| {
            live.iter().any(|(u, s)| u == upstream && s == server)
        });
    }

    fn commit_listeners(
        &mut self,
        config: &Config,
        states: Vec<ListenerState>,
        slots: Vec<Slot>,
        quic: Vec<Option<crate::net::h3::Endpoint>>,
    ) {
        let mut old: Vec<Option<LiveListener>> = self.listeners.drain(..).map(Some).collect();
        for (((listener, state), slot), new_quic) in
            config.listeners.iter().zip(states).zip(slots).zip(quic)
        {
            let task = state.task.clone();
            let task = &task;
            let bound = |address| BoundListener {
                name: task.name.clone(),
                address,
                tls: task.tls.is_some(),
            };
            let running = match slot {
                Slot::Kept(index) => old.get_mut(index).and_then(Option::take),
                Slot::New(..) => None,
            };
            let live = match (running, slot) {
                (Some(mut live), _) => {
                    live.bound = bound(live.bound.address);
                    live.state.store(Arc::new(state));
                    live
                }
                (None, Slot::New(socket, address)) => {
                    let scheme = if task.tls.is_some() { "https" } else { "http" };
                    tracing::info!(listener = %task.name, "listening on {scheme}://{address}");
                    let bound = bound(address);
                    let shared = Arc::new(ArcSwap::from_pointee(state));
                    let (stop, stopped) = watch::channel(false);
                    tokio::spawn(accept_loop(
                        socket,
                        shared.clone(),
                        stopped,
                        self.drain.clone(),
                        self.workers.clone(),
                    ));
                    LiveListener {
                        configured: listener.address,
                        bound,
                        state: shared,
                        stop,
                        quic: None,
                    }
                }
                // A kept slot always names a running listener (bind matched it by index).
                (None, Slot::Kept(_)) => continue,
            };
            let mut live = live;
            self.commit_quic(&mut live, task.h3.as_ref(), new_quic);
            self.listeners.push(live);
        }
        for removed in old.into_iter().flatten() {
            tracing::info!(
                listener = %removed.bound.name,
                "stopped listening on {} (removed from the config); its connections drain",
                removed.bound.address
            );
            let _ = removed.stop.send(true);
            if let Some(quic) = &removed.quic {
                let _ = quic.stop.send(true);
            }
        }
    }

    /// A listener's QUIC side after a commit: the running endpoint takes the new settings
    /// (certificates and limits for new handshakes; the socket stays), a newly bound one starts
    /// accepting, and one whose listener no longer has `h3` stops (its connections drain).
    fn commit_quic(
        &self,
        live: &mut LiveListener,
        settings: Option<&crate::net::h3::Settings>,
        new: Option<crate::net::h3::Endpoint>,
    ) {
        let Some(settings) = settings else {
            if let Some(old) = live.quic.take() {
                tracing::info!(listener = %live.bound.name, "HTTP/3 off: its connections drain");
                let _ = old.stop.send(true);
            }
            return;
        };
        if let Some(running) = &live.quic {
            running.endpoint.reconfigure(settings);
            return;
        }
        let Some(endpoint) = new else { return };
        endpoint.reconfigure(settings);
        tracing::info!(
            listener = %live.bound.name,
            "HTTP/3 on udp://{}",
            endpoint.local_addr().unwrap_or(live.bound.address)
        );
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(crate::net::h3::accept_loop(
            endpoint.clone(),
            live.state.clone(),
            stopped,
            self.drain.clone(),
        ));
        live.quic = Some(LiveQuic { endpoint, stop });
    }

    fn commit_admin(&mut self, config: &Config, slot: AdminSlot) {
        match slot {
            AdminSlot::Kept => {}
            AdminSlot::Off => {
                if let Some(old) = self.admin.take() {
                    let _ = old.stop.send(true);
                }
            }
            AdminSlot::New(socket, address) => {
                if let Some(old) = self.admin.take() {
                    let _ = old.stop.send(true);
                }
                tracing::info!("admin: metrics at http://{address}/metrics");
                let (stop, stopped) = watch::channel(false);
                tokio::spawn(crate::ops::admin::serve(
                    socket,
                    crate::ops::admin::Sources {
                        metrics: self.metrics.clone(),
                        zones: self.admin_zones.clone(),
                        status: self.status.clone(),
                    },
                    stopped,
                ));
                self.admin = Some(LiveAdmin {
                    configured: config.admin.as_ref().map_or(address, |a| a.address),
                    address,
                    stop,
                });
            }
        }
    }
}
