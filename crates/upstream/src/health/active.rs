//! Active health checks: every `interval`, each peer of a group gets `GET path`; `fall`
//! consecutive failures take it out, `rise` consecutive successes bring it back. Peers start
//! healthy, so a new group serves at once (as nginx does without `mandatory`).
//!
//! Checks go through the group's own pooled client, so they test the path real requests take.

use std::sync::Arc;

use http::{Method, Request, header};
use sluice_config::{HealthCheck, UpstreamAddress};
use sluice_core::Body;
use tokio::sync::watch;

use crate::client::UpstreamClient;
use crate::group::Group;

/// Told about every change of a peer's active health (peer index, healthy).
pub type HealthObserver = Arc<dyn Fn(usize, bool) + Send + Sync>;

/// Run checks for `group` until `shutdown` turns true.
pub async fn run(
    group: Arc<Group>,
    client: UpstreamClient,
    check: HealthCheck,
    observer: Option<HealthObserver>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Consecutive (successes, failures) by peer number; peers discovered by DNS come and go,
    // so they are counted from their first check and forgotten when they leave.
    let mut counts: std::collections::HashMap<usize, (u32, u32)> = Default::default();
    let mut ticker = tokio::time::interval(check.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        let peers = group.peers();
        let probes = peers.iter().map(|peer| probe(&client, peer, &check));
        let results = futures_util::future::join_all(probes).await;
        counts.retain(|i, _| peers.iter().any(|p| p.index() == *i));
        for (peer, ok) in peers.iter().zip(results) {
            let i = peer.index();
            let (up, down) = counts.entry(i).or_default();
            if ok {
                *up += 1;
                *down = 0;
            } else {
                *down += 1;
                *up = 0;
            }
            let change = if peer.is_healthy() && *down >= check.fall {
                Some(false)
            } else if !peer.is_healthy() && *up >= check.rise {
                Some(true)
            } else {
                None
            };
            if let Some(healthy) = change {
                peer.set_healthy(healthy);
                if healthy {
                    tracing::info!(upstream = group.name(), server = %address_label(peer.address()), "health check: server is back");
                } else {
                    tracing::warn!(upstream = group.name(), server = %address_label(peer.address()), "health check: server taken out after {} failures", check.fall);
                }
                if let Some(observe) = &observer {
                    observe(i, healthy);
                }
            }
        }
    }
}

/// One check: true when the peer answered with an expected status within the timeout.
async fn probe(client: &UpstreamClient, peer: &crate::Peer, check: &HealthCheck) -> bool {
    let index = peer.index();
    let host = match (peer.host(), peer.address()) {
        (Some(host), _) => host.to_owned(),
        (None, UpstreamAddress::Tcp(host_port)) => host_port.clone(),
        (None, UpstreamAddress::Unix(_) | UpstreamAddress::Dns(_)) => "localhost".to_string(),
    };
    let Ok(request) = Request::builder()
        .method(Method::GET)
        .uri(check.path.as_str())
        .header(header::HOST, host)
        .header(header::USER_AGENT, "sluice-health-check")
        .body(Body::Empty)
    else {
        return false;
    };
    let Ok(pending) = client.send(index, request) else {
        return false;
    };
    match tokio::time::timeout(check.timeout, pending).await {
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            // Drain the body so the connection can go back to the pool.
            let _ = tokio::time::timeout(
                check.timeout,
                http_body_util::BodyExt::collect(response.into_body()),
            )
            .await;
            check.expected_status.contains(&status)
        }
        _ => false,
    }
}

/// A peer address for logs.
pub fn address_label(address: &UpstreamAddress) -> String {
    match address {
        UpstreamAddress::Tcp(a) => a.clone(),
        UpstreamAddress::Unix(p) => format!("unix:{}", p.display()),
        UpstreamAddress::Dns(records) => records.to_string(),
    }
}
