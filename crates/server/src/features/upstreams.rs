//! The running upstream groups: each group's peers and balancer, its pooled client and its
//! metrics, built from the config and shared by every route that proxies to it.
//!
//! Start-up and reload (`server/`) build them; routes (`router.rs`) look them up by name; the
//! proxy (`proxy/`) forwards through one. A module of its own so that those three import it,
//! and it imports none of them.
//!
//! Building a group ([`build`]) has no effect outside it, so a reload can build groups and still
//! be refused; what runs or shows outside the group (health checks, [`start_health_checks`];
//! scrape-time gauges, [`watch()`]) starts only once the reload is committed. A group a reload
//! keeps (its config unchanged) keeps its pool, peers' health and its health-check task; a
//! changed or removed one has its checks stopped by dropping its [`HealthChecks`].

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::Upstream;
use sluice_upstream::Group;
use sluice_upstream::client::UpstreamClient;
use sluice_upstream::connect::ConnectObserver;
use sluice_upstream::health::active::address_label;
use tokio::sync::watch;

use crate::shared::metrics::{Metrics, ServerState, UpstreamMetrics, UpstreamServerMetrics};

/// A running upstream group: its peers and balancer, its pooled client, its metrics. Cloning
/// shares all of them.
#[derive(Clone)]
pub struct RunningUpstream {
    pub group: Arc<Group>,
    pub client: UpstreamClient,
    pub metrics: UpstreamMetrics,
    /// Per peer, in peer order.
    pub server_metrics: Arc<[UpstreamServerMetrics]>,
    /// The group's TLS files (`ca`, client certificate and key) as they were when its client
    /// was built: a reload keeps an unchanged group only while these are unchanged too, so a
    /// rotated CA or client certificate is read again.
    tls_files: Arc<[FileStamp]>,
}

/// A file's identity for "has it changed": its path, modification time and length (`None`:
/// could not be read).
#[derive(Debug, PartialEq, Eq)]
struct FileStamp(std::path::PathBuf, Option<(std::time::SystemTime, u64)>);

impl FileStamp {
    fn of(path: &std::path::Path) -> Self {
        let meta = std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        Self(path.to_path_buf(), meta)
    }
}

/// The stamps of `upstream`'s TLS files, in a fixed order.
fn tls_files(upstream: &Upstream) -> Arc<[FileStamp]> {
    let Some(tls) = &upstream.tls else {
        return Arc::new([]);
    };
    let client = tls.client_cert.iter().flat_map(|c| [&c.cert, &c.key]);
    tls.ca
        .iter()
        .chain(client)
        .map(|path| FileStamp::of(path))
        .collect()
}

impl RunningUpstream {
    /// This running group can serve `upstream` after a reload: the same config, and its TLS
    /// files unchanged on disk.
    pub fn serves(&self, upstream: &Upstream) -> bool {
        self.group.config() == upstream && self.tls_files == tls_files(upstream)
    }
}

/// The running upstreams, by name.
pub type Upstreams = HashMap<String, RunningUpstream>;

/// Build one group with its client and metric handles. Nothing runs yet. Fails when the
/// group's TLS cannot be set up.
pub fn build(upstream: &Upstream, metrics: &Metrics) -> Result<RunningUpstream, String> {
    let group = Arc::new(Group::new(upstream));
    let server_metrics: Arc<[UpstreamServerMetrics]> = group
        .peers()
        .iter()
        .map(|peer| metrics.upstream_server(&upstream.name, &address_label(peer.address())))
        .collect();
    let observed = server_metrics.clone();
    let observer: ConnectObserver = Arc::new(move |index, took| {
        if let Some(server) = observed.get(index) {
            server.connect_time(took);
        }
    });
    // Stamped before the client reads them: a file replaced in between is read again next time.
    let tls_files = tls_files(upstream);
    let client = UpstreamClient::new(upstream, Some(observer))
        .map_err(|e| format!("upstream `{}`: TLS: {e}", upstream.name))?;
    Ok(RunningUpstream {
        tls_files,
        group,
        client,
        metrics: metrics.upstream(&upstream.name),
        server_metrics,
    })
}

/// Read the group's servers' health, in-flight requests and open connections at every scrape
/// (replacing the readers of a group of the same name built before).
pub fn watch(running: &RunningUpstream, metrics: &Metrics) {
    let name = &running.group.config().name;
    for peer in running.group.peers() {
        let (watched, pool) = (peer.clone(), running.client.clone());
        // Read when Prometheus scrapes: passive health recovers by the clock, with no event
        // to update a gauge from, and the counts already live in the peer and the connector.
        let read = move || ServerState {
            healthy: watched.is_available(std::time::Instant::now()),
            in_flight: watched.in_flight() as i64,
            connections: pool.open_connections(watched.index()) as i64,
        };
        metrics.watch_upstream_server(name, &address_label(peer.address()), read);
    }
}

/// The `(upstream, server)` labels of a group's servers, as [`watch()`] registers them.
pub fn server_labels(upstream: &Upstream) -> Vec<(String, String)> {
    upstream
        .servers
        .iter()
        .map(|server| (upstream.name.clone(), address_label(&server.address)))
        .collect()
}

/// A group's active health checks; they stop when this is dropped.
pub struct HealthChecks {
    _stop: watch::Sender<bool>,
}

/// Start the group's active health checks, if it has any.
pub fn start_health_checks(running: &RunningUpstream) -> Option<HealthChecks> {
    let check = running.group.config().health_check.clone()?;
    // A cancel token per group, not the process's shutdown: a reload stops one group's checks.
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(sluice_upstream::health::active::run(
        running.group.clone(),
        running.client.clone(),
        check,
        None,
        stopped,
    ));
    Some(HealthChecks { _stop: stop })
}
