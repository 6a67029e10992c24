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
//!
//! A group with `dns+` servers also runs its DNS discovery ([`sluice_upstream::discovery`])
//! beside its health checks, started and stopped with them. A group rebuilt by a reload starts
//! from the sets the group it replaces had resolved ([`build_after`]), so its `dns+` servers
//! have peers from its first request; discovered peers get their metric handles and
//! scrape-time readers as they join ([`ServerMetricsTable`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use sluice_config::{Upstream, UpstreamAddress};
use sluice_upstream::Group;
use sluice_upstream::client::UpstreamClient;
use sluice_upstream::connect::ConnectObserver;
use sluice_upstream::discovery::{self, Outcome};
use sluice_upstream::health::active::address_label;
use sluice_upstream::{Change, Peer};
use tokio::sync::watch;

use crate::shared::metrics::dns::DnsMetrics;
use crate::shared::metrics::{Metrics, ServerState, UpstreamMetrics, UpstreamServerMetrics};

/// Per-server metric handles of a group, by peer number: configured servers' made once;
/// those of peers discovered by DNS added and removed as the peers come and go.
#[derive(Clone, Default)]
pub struct ServerMetricsTable {
    /// By configuration position (`None` at a `dns+` server's).
    configured: Arc<[Option<UpstreamServerMetrics>]>,
    discovered: Arc<ArcSwap<HashMap<usize, UpstreamServerMetrics>>>,
}

impl ServerMetricsTable {
    /// Peer `index`'s handles.
    pub fn get(&self, index: usize) -> Option<Cow<'_, UpstreamServerMetrics>> {
        match self.configured.get(index) {
            Some(configured) => configured.as_ref().map(Cow::Borrowed),
            None => self.discovered.load().get(&index).cloned().map(Cow::Owned),
        }
    }

    fn set_discovered(&self, update: impl FnOnce(&mut HashMap<usize, UpstreamServerMetrics>)) {
        let mut next = HashMap::clone(&self.discovered.load());
        update(&mut next);
        self.discovered.store(Arc::new(next));
    }
}

/// A running upstream group: its peers and balancer, its pooled client, its metrics. Cloning
/// shares all of them.
#[derive(Clone)]
pub struct RunningUpstream {
    pub group: Arc<Group>,
    pub client: UpstreamClient,
    pub metrics: UpstreamMetrics,
    /// Per peer, by peer number.
    pub server_metrics: ServerMetricsTable,
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
    build_after(upstream, metrics, None)
}

/// [`build`], for a reload that replaces `previous`: the new group's `dns+` servers start with
/// the sets `previous` resolved for the same names, so they have peers before their first
/// lookup.
pub fn build_after(
    upstream: &Upstream,
    metrics: &Metrics,
    previous: Option<&RunningUpstream>,
) -> Result<RunningUpstream, String> {
    let group = Arc::new(Group::new(upstream));
    let configured: Arc<[Option<UpstreamServerMetrics>]> = upstream
        .servers
        .iter()
        .map(|server| match &server.address {
            UpstreamAddress::Dns(_) => None,
            address => Some(metrics.upstream_server(&upstream.name, &address_label(address))),
        })
        .collect();
    let server_metrics = ServerMetricsTable {
        configured,
        discovered: Arc::default(),
    };
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
    let running = RunningUpstream {
        tls_files,
        group,
        client,
        metrics: metrics.upstream(&upstream.name),
        server_metrics,
    };
    if let Some(previous) = previous {
        seed(&running, previous, metrics);
    }
    Ok(running)
}

/// Give `running`'s `dns+` servers the sets `previous` resolved for the same records.
fn seed(running: &RunningUpstream, previous: &RunningUpstream, metrics: &Metrics) {
    let old_servers = &previous.group.config().servers;
    let old_sets = previous.group.resolved();
    let sets: HashMap<usize, Vec<sluice_upstream::Resolved>> = running
        .group
        .config()
        .servers
        .iter()
        .enumerate()
        .filter_map(|(position, server)| {
            let UpstreamAddress::Dns(records) = &server.address else {
                return None;
            };
            let old = old_servers
                .iter()
                .position(|s| matches!(&s.address, UpstreamAddress::Dns(r) if r == records))?;
            Some((position, old_sets.get(&old)?.clone()))
        })
        .collect();
    if sets.is_empty() {
        return;
    }
    let change = running.group.update(sets);
    joined(running, &change, metrics);
}

/// The client and the metrics learn the peers `change` added, and forget the metric handles
/// of those it removed (the connector forgets them once they have drained).
fn joined(running: &RunningUpstream, change: &Change, metrics: &Metrics) {
    let name = running.group.name();
    for peer in &change.added {
        running
            .client
            .add_peer(peer.index(), peer.address().clone());
    }
    running.server_metrics.set_discovered(|table| {
        for peer in &change.removed {
            table.remove(&peer.index());
        }
        for peer in &change.added {
            let handles = metrics.upstream_server(name, &address_label(peer.address()));
            table.insert(peer.index(), handles);
        }
    });
}

/// Read one peer's health, in-flight requests and open connections at every scrape.
fn watch_peer(name: &str, peer: &Arc<Peer>, pool: &UpstreamClient, metrics: &Metrics) {
    let (watched, pool) = (Arc::downgrade(peer), pool.clone());
    let index = peer.index();
    // Read when Prometheus scrapes: passive health recovers by the clock, with no event
    // to update a gauge from, and the counts already live in the peer and the connector.
    // A weak reference: a peer discovered by DNS that has left is freed once drained.
    let read = move || match watched.upgrade() {
        Some(peer) => ServerState {
            healthy: peer.is_available(std::time::Instant::now()),
            in_flight: peer.in_flight() as i64,
            connections: pool.open_connections(index) as i64,
        },
        None => ServerState {
            healthy: false,
            in_flight: 0,
            connections: pool.open_connections(index) as i64,
        },
    };
    metrics.watch_upstream_server(name, &address_label(peer.address()), read);
}

/// Read the group's servers' health, in-flight requests and open connections at every scrape
/// (replacing the readers of a group of the same name built before).
pub fn watch(running: &RunningUpstream, metrics: &Metrics) {
    let name = &running.group.config().name;
    for peer in running.group.peers().iter() {
        watch_peer(name, peer, &running.client, metrics);
    }
}

/// The `(upstream, server)` labels of a group's servers now, as [`watch()`] registers them.
pub fn server_labels(running: &RunningUpstream) -> Vec<(String, String)> {
    let name = running.group.name();
    running
        .group
        .peers()
        .iter()
        .map(|peer| (name.to_owned(), address_label(peer.address())))
        .collect()
}

/// A group's active health checks; they stop when this is dropped.
pub struct HealthChecks {
    _stop: watch::Sender<bool>,
}

/// Start the group's active health checks and its DNS discovery, if it has any.
pub fn start_health_checks(
    running: &RunningUpstream,
    metrics: &Arc<Metrics>,
) -> Option<HealthChecks> {
    let config = running.group.config();
    let dns = config.resolver.is_some();
    if config.health_check.is_none() && !dns {
        return None;
    }
    // A cancel token per group, not the process's shutdown: a reload stops one group's checks.
    let (stop, stopped) = watch::channel(false);
    if let Some(check) = config.health_check.clone() {
        tokio::spawn(sluice_upstream::health::active::run(
            running.group.clone(),
            running.client.clone(),
            check,
            None,
            stopped.clone(),
        ));
    }
    if dns {
        let names = config
            .servers
            .iter()
            .filter_map(|s| match &s.address {
                UpstreamAddress::Dns(records) => {
                    let name = records.to_string();
                    Some((name.clone(), metrics.upstream_dns(&config.name, &name)))
                }
                _ => None,
            })
            .collect();
        let observer = Arc::new(DiscoveryObserver {
            running: running.clone(),
            metrics: Arc::clone(metrics),
            names,
            lock: Mutex::new(()),
        });
        tokio::spawn(discovery::run(
            running.group.clone(),
            running.client.clone(),
            observer,
            stopped,
        ));
    }
    Some(HealthChecks { _stop: stop })
}

/// Counts a group's DNS lookups and changes, and gives joining peers their metrics.
struct DiscoveryObserver {
    running: RunningUpstream,
    metrics: Arc<Metrics>,
    /// By `dns+…` server as written.
    names: HashMap<String, DnsMetrics>,
    /// Changes are applied one at a time.
    lock: Mutex<()>,
}

impl discovery::Observer for DiscoveryObserver {
    fn refreshed(
        &self,
        records: &sluice_config::DnsRecords,
        outcome: Outcome,
        last_good_age: Option<std::time::Duration>,
    ) {
        if let Some(handles) = self.names.get(&records.to_string()) {
            handles.refreshed(outcome.as_str(), last_good_age);
        }
    }

    fn changed(&self, change: &Change) {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        joined(&self.running, change, &self.metrics);
        let name = self.running.group.name();
        for peer in &change.added {
            watch_peer(name, peer, &self.running.client, &self.metrics);
        }
        let live = server_labels(&self.running);
        self.metrics.retain_upstream_servers(|upstream, server| {
            upstream != name || live.iter().any(|(_, s)| s == server)
        });
        if let Some(handles) = self.names.values().next() {
            handles.changed(change.added.len(), change.removed.len());
        }
    }
}
