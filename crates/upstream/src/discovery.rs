//! Upstream servers discovered by DNS: the group's `dns+a:NAME:PORT` and `dns+srv:NAME`
//! servers, looked up in the background by [`run`] and handed to [`Group::update`], which turns
//! them into peers. Requests never wait for DNS: they pick from the group's last snapshot.
//!
//! - **When.** Each name is looked up again when its answer's TTL runs out, never sooner than
//!   `min_ttl` nor later than `max_ttl`, plus up to 10% jitter so a fleet of instances does not
//!   query in step. A failed or empty lookup is retried after `min_ttl`, doubling up to 30 s.
//! - **Failures.** A lookup that fails (timeout, SERVFAIL, no server) or comes back empty keeps
//!   the name's last good set for `keep_last_good` (default 1 h, see docs/fleet.md for why),
//!   logged and counted; after that the name contributes no server until an answer comes.
//! - **Changes.** Addresses that stay keep their peers (pools, health); new ones join; gone
//!   ones leave the group at once, and their connector entries are removed once the last
//!   request on them has finished ("drained").
//! - **SRV.** Targets with their ports; the weight is the balancer's weight (0 read as 1,
//!   scaled down when the set's weights add up to more than 1000, keeping the ratios); the
//!   priority's rank is the backup level. Each target's A/AAAA records are looked up; every
//!   address of a target gets its weight.
//!
//! hickory-resolver does the DNS (UDP, TCP on truncation); it caches answers no longer than
//! their TTL, so a lookup at the TTL's end goes to the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use sluice_config::{DnsRecords, Resolver, UpstreamAddress};
use tokio::sync::watch;

use crate::client::UpstreamClient;
use crate::group::{Change, Group, Resolved};
use crate::peer::Peer;

/// The longest wait before retrying a failed lookup.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// SRV weights of one name are scaled down to add up to at most this (the round-robin
/// schedule is as long as the group's total weight; ratios are what matter).
const MAX_SRV_WEIGHT_SUM: u64 = 1000;

/// What one lookup of a name gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Records: the name's set is replaced.
    Ok,
    /// The lookup failed: the last good set is kept.
    Error,
    /// No records (NXDOMAIN, no data, or SRV targets without addresses): the last good set is
    /// kept.
    Empty,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Empty => "empty",
        }
    }
}

/// Told about lookups and changes (metrics).
pub trait Observer: Send + Sync {
    /// A lookup of `records` ended with `outcome`; `last_good_age` is the age of the set the
    /// name now contributes (`None`: none).
    fn refreshed(&self, records: &DnsRecords, outcome: Outcome, last_good_age: Option<Duration>);
    /// The group's peers changed.
    fn changed(&self, change: &Change);
}

/// A resolver built from `[resolver]`: its servers, or the system's (`/etc/resolv.conf`).
pub fn resolver(settings: &Resolver) -> Result<TokioResolver, String> {
    let (config, mut options) = if settings.servers.is_empty() {
        hickory_resolver::system_conf::read_system_conf()
            .map_err(|e| format!("reading the system's resolver configuration: {e}"))?
    } else {
        let mut config = ResolverConfig::new();
        for &server in &settings.servers {
            config.add_name_server(NameServerConfig::new(server, Protocol::Udp));
            config.add_name_server(NameServerConfig::new(server, Protocol::Tcp));
        }
        (config, ResolverOpts::default())
    };
    options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    if let Some(timeout) = settings.timeout {
        options.timeout = timeout;
    }
    if let Some(attempts) = settings.attempts {
        options.attempts = attempts as usize;
    }
    let builder = TokioResolver::builder_with_config(config, TokioConnectionProvider::default());
    Ok(builder.with_options(options).build())
}

/// Look `records` up once: the set and how long it is valid (`Ok(None)`: no records).
pub async fn lookup(
    resolver: &TokioResolver,
    records: &DnsRecords,
) -> Result<Option<(Vec<Resolved>, Instant)>, String> {
    match records {
        DnsRecords::Addresses { name, port } => {
            let Some((ips, valid_until)) = lookup_ip(resolver, name).await? else {
                return Ok(None);
            };
            let host = format!("{}:{port}", name.trim_end_matches('.'));
            let set = ips
                .into_iter()
                .map(|ip| Resolved {
                    address: SocketAddr::new(ip, *port),
                    host: host.clone(),
                    weight: None,
                    level: 0,
                })
                .collect();
            Ok(Some((set, valid_until)))
        }
        DnsRecords::Srv { name } => lookup_srv(resolver, name).await,
    }
}

/// A name's addresses, sorted, and when they expire; `None`: no records.
async fn lookup_ip(
    resolver: &TokioResolver,
    name: &str,
) -> Result<Option<(Vec<std::net::IpAddr>, Instant)>, String> {
    match resolver.lookup_ip(name).await {
        Ok(found) => {
            let mut ips: Vec<_> = found.iter().collect();
            ips.sort_unstable();
            ips.dedup();
            Ok((!ips.is_empty()).then(|| (ips, found.valid_until())))
        }
        Err(e) if e.is_no_records_found() => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

async fn lookup_srv(
    resolver: &TokioResolver,
    name: &str,
) -> Result<Option<(Vec<Resolved>, Instant)>, String> {
    let found = match resolver.srv_lookup(name).await {
        Ok(found) => found,
        Err(e) if e.is_no_records_found() => return Ok(None),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let mut valid_until = found.as_lookup().valid_until();
    let mut records: Vec<(u16, u16, u16, String)> = found
        .iter()
        .map(|srv| {
            let target = srv.target().to_utf8();
            (srv.priority(), srv.weight(), srv.port(), target)
        })
        // RFC 2782: a target of "." means the service is decidedly not available here.
        .filter(|(_, _, _, target)| target != ".")
        .collect();
    records.sort();
    records.dedup();
    let mut priorities: Vec<u16> = records.iter().map(|r| r.0).collect();
    priorities.sort_unstable();
    priorities.dedup();
    let sum: u64 = records.iter().map(|r| u64::from(r.1.max(1))).sum();
    let lookups = records
        .iter()
        .map(|(_, _, _, target)| lookup_ip(resolver, target));
    let addresses = futures_util::future::join_all(lookups).await;
    let mut set = Vec::new();
    for ((priority, weight, port, target), ips) in records.iter().zip(addresses) {
        let Some((ips, until)) = ips? else { continue };
        valid_until = valid_until.min(until);
        let weight = u64::from((*weight).max(1));
        let weight = if sum > MAX_SRV_WEIGHT_SUM {
            (weight * MAX_SRV_WEIGHT_SUM / sum).max(1)
        } else {
            weight
        };
        let level = priorities.iter().position(|p| p == priority).unwrap_or(0);
        let host = format!("{}:{port}", target.trim_end_matches('.'));
        for ip in ips {
            set.push(Resolved {
                address: SocketAddr::new(ip, *port),
                host: host.clone(),
                weight: Some(u32::try_from(weight).unwrap_or(1)),
                level: u32::try_from(level).unwrap_or(u32::MAX),
            });
        }
    }
    Ok((!set.is_empty()).then_some((set, valid_until)))
}

/// One `dns+` server of the group and what is known of it.
struct Source {
    position: usize,
    records: DnsRecords,
    next: Instant,
    failures: u32,
    last_good: Option<(Instant, Vec<Resolved>)>,
}

/// Look the group's `dns+` servers up and keep its peers up to date until `shutdown` turns
/// true (the group is replaced by a reload, or the server stops).
pub async fn run(
    group: Arc<Group>,
    client: UpstreamClient,
    observer: Arc<dyn Observer>,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = group.config().resolver.clone().unwrap_or_default();
    let resolver = match resolver(&settings) {
        Ok(resolver) => Some(resolver),
        Err(e) => {
            tracing::error!(upstream = group.name(), "DNS discovery cannot start: {e}");
            None
        }
    };
    let started = Instant::now();
    // A set handed over from the group this one replaced (a reload) counts as good now.
    let seeded = group.resolved();
    let mut sources: Vec<Source> = group
        .config()
        .servers
        .iter()
        .enumerate()
        .filter_map(|(position, server)| match &server.address {
            UpstreamAddress::Dns(records) => Some(Source {
                position,
                records: records.clone(),
                next: started,
                failures: 0,
                last_good: seeded.get(&position).map(|set| (started, set.clone())),
            }),
            _ => None,
        })
        .collect();
    let mut draining: Vec<Weak<Peer>> = Vec::new();
    loop {
        let now = Instant::now();
        for source in sources.iter_mut().filter(|s| s.next <= now) {
            let result = match &resolver {
                Some(resolver) => lookup(resolver, &source.records).await,
                None => Err("no resolver".to_owned()),
            };
            let done = Instant::now();
            let outcome = match result {
                Ok(Some((set, valid_until))) => {
                    source.failures = 0;
                    let ttl = valid_until.saturating_duration_since(done);
                    let wait = ttl.clamp(settings.min_ttl, settings.max_ttl.max(settings.min_ttl));
                    source.next = done + jitter(wait);
                    source.last_good = Some((done, set));
                    Outcome::Ok
                }
                other => {
                    let outcome = match other {
                        Err(e) => {
                            tracing::warn!(upstream = group.name(), server = %source.records, "DNS lookup failed, keeping the last good set: {e}");
                            Outcome::Error
                        }
                        _ => {
                            tracing::warn!(upstream = group.name(), server = %source.records, "DNS lookup found no records, keeping the last good set");
                            Outcome::Empty
                        }
                    };
                    let backoff = settings
                        .min_ttl
                        .saturating_mul(1 << source.failures.min(16))
                        .min(MAX_BACKOFF)
                        .max(settings.min_ttl);
                    source.failures = source.failures.saturating_add(1);
                    source.next = done + jitter(backoff);
                    if let Some((at, _)) = &source.last_good
                        && done.duration_since(*at) > settings.keep_last_good
                    {
                        tracing::error!(upstream = group.name(), server = %source.records, "no good DNS answer for longer than keep_last_good ({:?}): its servers leave the group", settings.keep_last_good);
                        source.last_good = None;
                    }
                    outcome
                }
            };
            let age = source
                .last_good
                .as_ref()
                .map(|(at, _)| done.duration_since(*at));
            observer.refreshed(&source.records, outcome, age);
        }
        let wanted: HashMap<usize, Vec<Resolved>> = sources
            .iter()
            .filter_map(|s| Some((s.position, s.last_good.as_ref()?.1.clone())))
            .collect();
        if wanted != group.resolved() {
            let change = group.update(wanted);
            apply(&group, &client, &change, &mut draining);
            if !change.is_empty() {
                observer.changed(&change);
            }
        }
        drain(&group, &client, &mut draining);
        let mut wake = sources
            .iter()
            .map(|s| s.next)
            .min()
            .unwrap_or_else(|| Instant::now() + settings.max_ttl);
        if !draining.is_empty() {
            // Gone peers are checked for their last request every second.
            wake = wake.min(Instant::now() + Duration::from_secs(1));
        }
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The connector learns the added peers; removed ones wait in `draining`.
fn apply(group: &Group, client: &UpstreamClient, change: &Change, draining: &mut Vec<Weak<Peer>>) {
    for peer in &change.added {
        client.add_peer(peer.index(), peer.address().clone());
        tracing::info!(upstream = group.name(), server = %crate::health::active::address_label(peer.address()), host = peer.host().unwrap_or(""), "DNS: server joins");
    }
    for peer in &change.removed {
        tracing::info!(upstream = group.name(), server = %crate::health::active::address_label(peer.address()), in_flight = peer.in_flight(), "DNS: server leaves (its requests in flight finish)");
        draining.push(Arc::downgrade(peer));
    }
}

/// Forget, in the connector, the gone peers no request holds any more (unless their number is
/// back in the group).
fn drain(group: &Group, client: &UpstreamClient, draining: &mut Vec<Weak<Peer>>) {
    if draining.is_empty() {
        return;
    }
    draining.retain(|weak| weak.strong_count() > 0);
    let held: Vec<usize> = draining
        .iter()
        .filter_map(|weak| weak.upgrade().map(|p| p.index()))
        .collect();
    let peers = group.peers();
    client.retain_peers(|index| held.contains(&index) || peers.iter().any(|p| p.index() == index));
}

/// `wait` plus up to 10% more, so instances do not query in step.
fn jitter(wait: Duration) -> Duration {
    wait + wait.mul_f64(fastrand::f64() * 0.1)
}
