//! The running upstream groups: each group's peers and balancer, its pooled client and its
//! metrics, built once at start-up from the config and shared by every route that proxies to it.
//!
//! Start-up (`server.rs`) builds them; routes (`router.rs`) look them up by name; the proxy
//! (`proxy/`) forwards through one. A module of its own so that those three import it, and it
//! imports none of them.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::Config;
use sluice_upstream::Group;
use sluice_upstream::client::UpstreamClient;
use sluice_upstream::connect::ConnectObserver;
use sluice_upstream::health::active::address_label;
use tokio::sync::watch;

use crate::metrics::{Metrics, ServerState, UpstreamMetrics, UpstreamServerMetrics};

/// A running upstream group: its peers and balancer, its pooled client, its metrics.
pub struct RunningUpstream {
    pub group: Arc<Group>,
    pub client: UpstreamClient,
    pub metrics: UpstreamMetrics,
    /// Per peer, in peer order.
    pub server_metrics: Arc<[UpstreamServerMetrics]>,
}

/// The running upstreams, by name.
pub type Upstreams = HashMap<String, RunningUpstream>;

/// Build each upstream group with its client and metrics, and start its active health checks
/// (they run until `shutdown` flips). Fails when a group's TLS cannot be set up.
pub fn start(
    config: &Config,
    metrics: &Arc<Metrics>,
    shutdown: &watch::Receiver<bool>,
) -> Result<Upstreams, String> {
    let mut upstreams = HashMap::with_capacity(config.upstreams.len());
    for upstream in &config.upstreams {
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
        let client = UpstreamClient::new(upstream, Some(observer))
            .map_err(|e| format!("upstream `{}`: TLS: {e}", upstream.name))?;
        for peer in group.peers() {
            let (watched, pool) = (peer.clone(), client.clone());
            // Read when Prometheus scrapes: passive health recovers by the clock, with no event
            // to update a gauge from, and the counts already live in the peer and the connector.
            let read = move || ServerState {
                healthy: watched.is_available(std::time::Instant::now()),
                in_flight: watched.in_flight() as i64,
                connections: pool.open_connections(watched.index()) as i64,
            };
            metrics.watch_upstream_server(&upstream.name, &address_label(peer.address()), read);
        }
        if let Some(check) = &upstream.health_check {
            tokio::spawn(sluice_upstream::health::active::run(
                group.clone(),
                client.clone(),
                check.clone(),
                None,
                shutdown.clone(),
            ));
        }
        let running = RunningUpstream {
            group,
            client,
            metrics: metrics.upstream(&upstream.name),
            server_metrics,
        };
        upstreams.insert(upstream.name.clone(), running);
    }
    Ok(upstreams)
}
