//! The connection to the engine behind a fleet's shared pieces (the shared cache tier, its
//! purge channel, the shared rate limits): one Redis (`redis://`, `redis+unix://`) or a Redis
//! Cluster (`redis+cluster://host1:port1,host2:port2`, seed nodes: the client learns the others
//! and the slot map from them, and follows MOVED and ASK redirections).
//!
//! The connection is made in the background, never on a request's path, and made again after
//! a loss; until it is up, callers get `None` and treat that as a miss (or `on_error`).
//! [`Conn`] runs commands on either kind; what differs in a cluster is said where it matters:
//! commands on keys of different slots ([`each`]), SCAN ([`Engine::masters`]) and pub/sub
//! ([`Engine::pubsub_nodes`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};

use super::Breaker;
use crate::lock::lock;

/// The scheme of a Cluster URL: `redis+cluster://[user:password@]host:port[,host:port...]`.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

/// How long connecting to one server may take (in the background).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

enum Target {
    Single(redis::Client),
    Cluster {
        /// Boxed: far larger than a single server's client.
        client: Box<ClusterClient>,
        /// One client per seed node, for pub/sub (a cluster forwards every PUBLISH to every
        /// node, so subscribing on any one node hears the whole cluster).
        seeds: Vec<redis::Client>,
        /// The seed nodes' `host:port`, asked for the slot map when no master known answers.
        seed_addrs: Vec<String>,
    },
}

/// One multiplexed connection (cheap to clone) to a Redis server or a Redis Cluster.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Run `cmds`, whose keys may be in different Cluster slots: one pipeline on a single server
/// (one round trip); concurrent commands on a cluster, where a pipeline must stay in one slot
/// (the client refuses a cross-slot pipeline, the server a cross-slot command).
pub async fn each<T: FromRedisValue + Send + 'static>(
    conn: &Conn,
    cmds: Vec<Cmd>,
) -> RedisResult<Vec<T>> {
    if cmds.is_empty() {
        return Ok(Vec::new());
    }
    match conn {
        Conn::Single(_) => {
            let mut pipe = redis::pipe();
            for cmd in cmds {
                pipe.add_command(cmd);
            }
            pipe.query_async(&mut conn.clone()).await
        }
        Conn::Cluster(_) => {
            futures_util::future::try_join_all(cmds.into_iter().map(|cmd| {
                let mut conn = conn.clone();
                async move { cmd.query_async::<T>(&mut conn).await }
            }))
            .await
        }
    }
}

/// Run `pipes` concurrently, each a pipeline on keys of one slot (on a single server the
/// multiplexed connection sends them back to back anyway).
pub async fn pipelines(conn: &Conn, pipes: Vec<Pipeline>) -> RedisResult<()> {
    futures_util::future::try_join_all(pipes.into_iter().map(|pipe| {
        let mut conn = conn.clone();
        async move { pipe.query_async::<()>(&mut conn).await }
    }))
    .await
    .map(drop)
}

/// A cluster's slot map: `(first slot, last slot, master "host:port")`, from `CLUSTER SLOTS`.
pub type SlotMap = Vec<(u16, u16, String)>;

/// How often a cluster's slot map is asked again (in the background, while in use).
const SLOT_MAP_REFRESH: Duration = Duration::from_secs(1);
/// The longest asking for it may take.
const SLOT_MAP_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest one node may take to give it.
const SLOT_MAP_NODE_TIMEOUT: Duration = Duration::from_millis(200);

/// A cluster's masters, as last known, and their breakers.
#[derive(Default)]
struct Nodes {
    map: SlotMap,
    breakers: HashMap<String, Arc<Breaker>>,
    refreshed: Option<Instant>,
}

/// The shared engine of one setting (a tier's or a rate limit's URL), with its circuit
/// breakers: one for a single server; on a cluster one per master (a stopped master makes its
/// own slots fail, then skipped, while keys in the other slots are still served) and one for
/// the calls that are not on one key.
pub struct Engine {
    url: String,
    target: Target,
    conn: Mutex<Option<Conn>>,
    connecting: AtomicBool,
    breaker: Arc<Breaker>,
    nodes: Mutex<Nodes>,
    refreshing: AtomicBool,
}

impl Engine {
    /// An engine for `url`; the URL is checked here, nothing is connected yet ([`Self::conn`]).
    pub fn new(url: &str) -> Result<Arc<Self>, String> {
        let target = if let Some(rest) = url.strip_prefix(CLUSTER_SCHEME) {
            let seeds = cluster_seeds(rest)?;
            let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                .connection_timeout(CONNECT_TIMEOUT)
                // A redirection or a reconnection is retried once; every call has a deadline
                // of its own above this, so retries never make a request slow.
                .retries(1)
                .min_retry_wait(5)
                .max_retry_wait(100)
                .build()
                .map_err(|e| format!("`{url}`: {e}"))?;
            let seed_addrs = seeds
                .iter()
                .map(|seed| {
                    let authority = seed.trim_start_matches("redis://");
                    authority
                        .rsplit('@')
                        .next()
                        .unwrap_or(authority)
                        .to_string()
                })
                .collect();
            let seeds = seeds
                .iter()
                .map(|seed| redis::Client::open(seed.as_str()))
                .collect::<RedisResult<Vec<_>>>()
                .map_err(|e| format!("`{url}`: {e}"))?;
            Target::Cluster {
                client: Box::new(client),
                seeds,
                seed_addrs,
            }
        } else {
            Target::Single(redis::Client::open(url).map_err(|e| format!("`{url}`: {e}"))?)
        };
        Ok(Arc::new(Self {
            url: url.to_string(),
            target,
            conn: Mutex::new(None),
            connecting: AtomicBool::new(false),
            breaker: Arc::default(),
            nodes: Mutex::default(),
            refreshing: AtomicBool::new(false),
        }))
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster { .. })
    }

    /// Whether a connection has been made (it may have failed since: breakers say that).
    pub fn connected(&self) -> bool {
        lock(&self.conn).is_some()
    }

    /// The connection, or `None` while it is being made (in the background: this never waits).
    pub fn conn(self: &Arc<Self>) -> Option<Conn> {
        let conn = lock(&self.conn).clone();
        if conn.is_none() {
            self.connect_in_background();
        }
        conn
    }

    fn connect_in_background(self: &Arc<Self>) {
        if self.connecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                let Some(engine) = weak.upgrade() else { return };
                let made = match &engine.target {
                    Target::Single(client) => {
                        let config = ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(CONNECT_TIMEOUT))
                            .set_number_of_retries(2)
                            .set_max_delay(Duration::from_millis(500));
                        client
                            .get_connection_manager_with_config(config)
                            .await
                            .map(Conn::Single)
                    }
                    Target::Cluster { client, .. } => {
                        let connecting = client.get_async_connection();
                        match tokio::time::timeout(CONNECT_TIMEOUT * 4, connecting).await {
                            Ok(made) => made.map(Conn::Cluster),
                            Err(_) => Err(redis::RedisError::from(std::io::Error::from(
                                std::io::ErrorKind::TimedOut,
                            ))),
                        }
                    }
                };
                match made {
                    Ok(conn) => {
                        // A cluster's masters are known (with their breakers) before the first
                        // call, so that one that is down never trips the engine's breaker.
                        if let Conn::Cluster(_) = conn {
                            engine.refresh_slots(conn.clone()).await;
                        }
                        *lock(&engine.conn) = Some(conn);
                        engine.connecting.store(false, Ordering::Release);
                        return;
                    }
                    Err(err) => {
                        tracing::debug!("{}: connecting failed: {err}", engine.url);
                        drop(engine);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(2));
                    }
                }
            }
        });
    }

    /// The breaker for a call on `key` (`None`: a call on several keys): on a cluster, its
    /// master's once the slot map is known; else the engine's. The slot map is asked again in
    /// the background at most once a [`SLOT_MAP_REFRESH`], so a failover or a resharding moves
    /// keys to their new master's breaker.
    pub fn breaker_for(self: &Arc<Self>, conn: &Conn, key: Option<&str>) -> Arc<Breaker> {
        let (Conn::Cluster(_), Some(key)) = (conn, key) else {
            return self.breaker.clone();
        };
        let mut nodes = lock(&self.nodes);
        let stale = nodes
            .refreshed
            .is_none_or(|at| at.elapsed() >= SLOT_MAP_REFRESH);
        if stale && !self.refreshing.swap(true, Ordering::AcqRel) {
            nodes.refreshed = Some(Instant::now());
            let engine = self.clone();
            let conn = conn.clone();
            tokio::spawn(async move {
                engine.refresh_slots(conn).await;
                engine.refreshing.store(false, Ordering::Release);
            });
        }
        match master_of(&nodes.map, key).map(str::to_string) {
            Some(addr) => nodes.breakers.entry(addr).or_default().clone(),
            None => self.breaker.clone(),
        }
    }

    /// Whether a breaker is open: the engine's, or (on a cluster) a master's.
    pub fn breaker_open(&self) -> bool {
        self.breaker.is_open() || lock(&self.nodes).breakers.values().any(|b| b.is_open())
    }

    /// Times a breaker opened (the engine's and every master's).
    pub fn breaker_trips(&self) -> u64 {
        let nodes: u64 = lock(&self.nodes)
            .breakers
            .values()
            .map(|b| b.trips.load(Ordering::Relaxed))
            .sum();
        self.breaker.trips.load(Ordering::Relaxed) + nodes
    }

    /// The masters of the cluster as last known (each with a breaker); 0 on one server.
    pub fn cluster_masters(&self) -> usize {
        lock(&self.nodes).breakers.len()
    }

    /// Clients for pub/sub, in the order to try them: the server, or a cluster's seed nodes.
    pub fn pubsub_nodes(&self) -> Vec<redis::Client> {
        match &self.target {
            Target::Single(client) => vec![client.clone()],
            Target::Cluster { seeds, .. } => seeds.clone(),
        }
    }

    /// Ask for the slot map and keep it (with a breaker per master), within
    /// [`SLOT_MAP_TIMEOUT`]; on failure the last one known stays.
    async fn refresh_slots(&self, mut conn: Conn) {
        let asked = tokio::time::timeout(SLOT_MAP_TIMEOUT, self.slot_map(&mut conn));
        if let Ok(Ok(map)) = asked.await
            && !map.is_empty()
        {
            let mut nodes = lock(&self.nodes);
            for (_, _, addr) in &map {
                nodes.breakers.entry(addr.clone()).or_default();
            }
            nodes.map = map;
        }
    }

    /// A cluster's slot map (`CLUSTER SLOTS`); empty for a single server. Asked of the masters
    /// last known whose breakers are closed, then of the seed nodes, one after the other
    /// ([`SLOT_MAP_NODE_TIMEOUT`] each): a node that is down (the client would pick one at
    /// random) costs one short wait, not the answer.
    pub async fn slot_map(&self, conn: &mut Conn) -> RedisResult<SlotMap> {
        let Target::Cluster { seed_addrs, .. } = &self.target else {
            return Ok(Vec::new());
        };
        let mut candidates: Vec<String> = {
            let nodes = lock(&self.nodes);
            let mut known: Vec<String> = nodes
                .map
                .iter()
                .map(|(_, _, addr)| addr.clone())
                .filter(|addr| nodes.breakers.get(addr).is_none_or(|b| !b.is_open()))
                .collect();
            known.sort_unstable();
            known.dedup();
            known
        };
        candidates.extend(seed_addrs.iter().cloned());
        let mut last = None;
        for addr in &candidates {
            let mut ask = redis::cmd("CLUSTER");
            ask.arg("SLOTS");
            let asked = tokio::time::timeout(
                SLOT_MAP_NODE_TIMEOUT,
                Engine::on_node::<Value>(conn, addr, ask),
            );
            match asked.await {
                Ok(Ok(value)) => {
                    let map = parse_slots(value);
                    if !map.is_empty() {
                        return Ok(map);
                    }
                }
                Ok(Err(err)) => last = Some(err),
                Err(_) => {}
            }
        }
        Err(last.unwrap_or_else(|| {
            redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no node gave the slot map",
            ))
        }))
    }

    /// Run `cmd` on the node `addr` ("host:port") of a cluster (SCAN, which sees one node's
    /// keys only); on a single server, on it.
    pub async fn on_node<T: FromRedisValue>(
        conn: &mut Conn,
        addr: &str,
        cmd: Cmd,
    ) -> RedisResult<T> {
        match conn {
            Conn::Single(_) => cmd.query_async(conn).await,
            Conn::Cluster(cluster) => {
                let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "6379"));
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                    port: port.parse().unwrap_or(6379),
                });
                let value = cluster.route_command(cmd, routing).await?;
                T::from_redis_value(value).map_err(Into::into)
            }
        }
    }
}

/// `host:port,host:port` (after the scheme, with optional `user:password@` and `/?...`) as
/// one `redis://` URL per seed node.
fn cluster_seeds(rest: &str) -> Result<Vec<String>, String> {
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|host| format!("redis://{userinfo}{host}"))
        .collect();
    if seeds.is_empty() {
        return Err("a redis+cluster:// URL names no node".into());
    }
    Ok(seeds)
}

fn parse_slots(value: Value) -> SlotMap {
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let Value::Array(ranges) = value else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let (start, end) = (int(fields.first()?)?, int(fields.get(1)?)?);
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = text(master.first()?)?;
            let port = int(master.get(1)?)?;
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            Some((start, end, format!("{host}:{port}")))
        })
        .collect()
}

/// A key's Cluster slot: CRC16 (XMODEM) of its hash tag (the part between the first `{` and
/// the next `}`, when not empty), else of the whole key, modulo 16384 (the Redis Cluster
/// specification, "Keys distribution model"). The redis crate computes it too, but does not
/// expose the number.
pub fn slot_of(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|b| *b == b'}')?;
        let tag = &key[open + 1..open + 1 + close];
        (!tag.is_empty()).then_some(tag)
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % 16384
}

/// The master of `key`'s slot in `map`.
pub fn master_of<'m>(map: &'m SlotMap, key: &str) -> Option<&'m str> {
    let slot = slot_of(key.as_bytes());
    map.iter()
        .find(|(start, end, _)| (*start..=*end).contains(&slot))
        .map(|(_, _, addr)| addr.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_name_their_seed_nodes() {
        assert_eq!(
            cluster_seeds("127.0.0.1:7000, 127.0.0.1:7001").unwrap(),
            ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]
        );
        assert_eq!(
            cluster_seeds("u:p@[::1]:7000,h:7001/?x=1").unwrap(),
            ["redis://u:p@[::1]:7000", "redis://u:p@h:7001"]
        );
        assert!(cluster_seeds("/").is_err());
    }

    #[test]
    fn slot_maps_are_read_from_cluster_slots() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(7000), bulk("id")]),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                Value::Array(vec![bulk("::1"), Value::Int(7001)]),
            ]),
            Value::Int(3),
        ]);
        let map = parse_slots(reply);
        assert_eq!(
            map,
            vec![
                (0, 5460, "127.0.0.1:7000".to_string()),
                (5461, 16383, "[::1]:7001".to_string())
            ]
        );
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"foo{bar}{zap}"), slot_of(b"bar"));
        assert_ne!(
            slot_of(b"foo{}{bar}"),
            slot_of(b"bar"),
            "an empty tag: the whole key"
        );
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
        // "foo" is in slot 12182 (the Redis Cluster specification's example key).
        assert_eq!(master_of(&map, "{foo}x"), Some("[::1]:7001"));
    }
}
