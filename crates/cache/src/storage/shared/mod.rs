//! The shared tier (L2): a zone's responses in Redis, or any server speaking its protocol
//! (Valkey, KeyDB, Dragonfly), so that what one instance of a fleet stored another can serve.
//! It sits behind the memory and disk tiers: a local miss asks it, a hit is copied into the
//! local tiers, and what an instance stores locally it writes here too, after the response.
//!
//! It is not a [`super::Storage`]: the zone's index is what makes a local lookup cheap, and it
//! cannot know what other instances stored. The shared tier has an index of its own per
//! primary key ([`record`]), read in one round trip, then the body's chunks in a second.
//!
//! The promise: a down, slow or refusing Redis never fails a request and never delays it past
//! the lookup deadline. Every call runs under a deadline; an error or a timeout counts as a
//! miss and towards the [`breaker`]; an open breaker skips the tier without a round trip.
//! Writes run in their own tasks after the response and are dropped on error, counted.
//! The connection is made in the background (never on a request's path), again after a loss.

pub mod breaker;
pub mod bus;
pub mod engine;
pub mod record;
mod stats;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub use breaker::Breaker;
pub use bus::{Purge, PurgeListener};
pub use engine::{Conn, Engine};
pub use record::{Field, Keys, Record};
pub use stats::{LATENCY_BUCKETS, SharedStats};

/// `[caches.NAME.shared]`, converted by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedSettings {
    /// `redis://host:port/db`, `redis+unix:///path`, `redis+cluster://host:port,host:port`.
    pub url: String,
    /// The most a lookup (index and body) may take before it counts as a miss.
    pub deadline: Duration,
    /// Larger responses are kept in the local tiers only.
    pub max_object_size: u64,
    /// The longest an object is kept, whatever its freshness and stale windows.
    pub max_ttl: Duration,
}

impl SharedSettings {
    pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(20);
    pub const DEFAULT_MAX_OBJECT_SIZE: u64 = 1024 * 1024;
    pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
}

/// One object to write ([`SharedTier::write`]).
pub struct Write {
    pub keys: Keys,
    pub primary: String,
    /// Its field in the index record ([`record::source_field`], [`record::variant_field`]).
    pub field: String,
    pub record: Record,
    pub body: Bytes,
    /// Surrogate keys of a source, for tag purges.
    pub tags: Vec<String>,
}

/// Why a call to the tier gave nothing.
#[derive(Debug)]
pub enum Failure {
    /// The breaker is open, or no connection is up yet: not tried.
    Skipped,
    Timeout,
    Error(redis::RedisError),
}

/// A zone's connection to its shared tier.
pub struct SharedTier {
    zone: String,
    /// This process's id on the purge channel (its own messages are skipped).
    instance: u64,
    listener: Mutex<Option<PurgeListener>>,
    pending: Mutex<bus::Pending>,
    has_pending: AtomicBool,
    settings: SharedSettings,
    /// The connection and its breakers (one per master of a cluster).
    engine: Arc<Engine>,
    stats: SharedStats,
    generation: AtomicU64,
}

impl SharedTier {
    /// A tier for `settings`; the URL is checked here, the connection is made in the background.
    pub fn new(zone: &str, settings: SharedSettings) -> Result<Arc<Self>, String> {
        let engine = Engine::new(&settings.url).map_err(|e| format!("shared tier {e}"))?;
        let seed = {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one(now_ms())
        };
        let tier = Arc::new(Self {
            zone: zone.to_string(),
            instance: seed.rotate_left(17) ^ u64::from(std::process::id()),
            listener: Mutex::new(None),
            pending: Mutex::default(),
            has_pending: AtomicBool::new(false),
            settings,
            engine,
            stats: SharedStats::default(),
            generation: AtomicU64::new(seed),
        });
        tier.engine.conn();
        Ok(tier)
    }

    pub fn settings(&self) -> &SharedSettings {
        &self.settings
    }

    pub fn stats(&self) -> &SharedStats {
        &self.stats
    }

    /// Whether a breaker is open: the tier's, or (on a cluster) a master's.
    pub fn breaker_open(&self) -> bool {
        self.engine.breaker_open()
    }

    /// Times a breaker opened (the tier's and every master's).
    pub fn breaker_trips(&self) -> u64 {
        self.engine.breaker_trips()
    }

    /// The masters of the Redis Cluster as last known (each with a breaker); 0 on one server.
    pub fn cluster_masters(&self) -> usize {
        self.engine.cluster_masters()
    }

    /// Whether a connection has been made (it may have failed since: the breakers say that).
    pub fn connected(&self) -> bool {
        self.engine.connected()
    }

    /// A body generation no other write uses: a per-process random start (RandomState's seed),
    /// stepped by an odd constant, so two instances' sequences do not meet in practice.
    pub fn next_generation(&self) -> u64 {
        self.generation
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .max(1)
    }

    /// Run one call under `deadline`, through the breaker of `key` (`None`: a call on
    /// several keys, the tier's breaker), counting the outcome.
    async fn call<T>(
        self: &Arc<Self>,
        key: Option<&str>,
        deadline: Instant,
        op: impl AsyncFnOnce(Conn) -> redis::RedisResult<T>,
    ) -> Result<T, Failure> {
        let Some(conn) = self.engine.conn() else {
            return Err(Failure::Skipped);
        };
        let breaker = self.engine.breaker_for(&conn, key);
        if !breaker.allow() {
            return Err(Failure::Skipped);
        }
        match tokio::time::timeout_at(deadline.into(), op(conn)).await {
            Ok(Ok(value)) => {
                if breaker.success() {
                    self.recovered();
                } else if self.has_pending.swap(false, Ordering::AcqRel) {
                    // Redis answers again (the breaker never opened): send the kept purges.
                    tokio::spawn(self.clone().replay());
                }
                Ok(value)
            }
            Ok(Err(err)) => {
                breaker.failure();
                tracing::debug!("shared cache tier: {err}");
                Err(Failure::Error(err))
            }
            Err(_) => {
                breaker.failure();
                Err(Failure::Timeout)
            }
        }
    }

    /// The index record of `keys`: field -> value. Empty when nothing is stored.
    pub async fn read_index(
        self: &Arc<Self>,
        keys: &Keys,
        deadline: Instant,
    ) -> Result<HashMap<Vec<u8>, Vec<u8>>, Failure> {
        let key = keys.index();
        self.call(Some(&key), deadline, async |mut conn| {
            redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await
        })
        .await
    }

    /// The chunks named, in order (`None` for one that is gone), one GET each in one pipeline:
    /// no single command on a large reply (see [`record::CHUNK`]).
    pub async fn read_chunks(
        self: &Arc<Self>,
        chunk_keys: Vec<String>,
        deadline: Instant,
    ) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        if chunk_keys.is_empty() {
            return Ok(Vec::new());
        }
        let routed = chunk_keys[0].clone();
        let chunks: Vec<Option<Vec<u8>>> = self
            .call(Some(&routed), deadline, async move |mut conn| {
                let mut pipe = redis::pipe();
                for key in &chunk_keys {
                    pipe.cmd("GET").arg(key);
                }
                pipe.query_async(&mut conn).await
            })
            .await?;
        let bytes: usize = chunks.iter().flatten().map(Vec::len).sum();
        SharedStats::add(&self.stats.bytes_read, bytes as u64);
        Ok(chunks)
    }

    /// Write one object: its chunks under `record.generation`, then (only when every chunk was
    /// written) its field in the index record, which lives as long as its longest object.
    /// `still_wanted` is asked between the two (an invalidation meanwhile: nothing is indexed).
    /// Errors drop the write and are counted; never retried.
    pub async fn write(self: &Arc<Self>, write: Write, still_wanted: impl FnOnce() -> bool) {
        let Write {
            keys,
            primary,
            field,
            record,
            body,
            tags,
        } = write;
        let ttl_ms = record.expires_ms.saturating_sub(now_ms());
        if ttl_ms == 0 {
            return;
        }
        // Writes are not on a request's path: a generous deadline, still bounded, so that a
        // hung server does not pile up tasks.
        let deadline = Instant::now() + self.settings.deadline.max(Duration::from_millis(500)) * 4;
        let chunks = record::split(&body);
        let chunk_keys = keys.chunks(&record);
        let index = keys.index();
        let written = self
            .call(Some(&index), deadline, async move |mut conn| {
                let mut pipe = redis::pipe();
                for (key, chunk) in chunk_keys.iter().zip(chunks.iter()) {
                    pipe.cmd("SET")
                        .arg(key)
                        .arg(chunk.as_ref())
                        .arg("PX")
                        .arg(ttl_ms)
                        .ignore();
                }
                pipe.query_async::<()>(&mut conn).await
            })
            .await;
        if let Err(failure) = written {
            self.write_dropped(&failure);
            return;
        }
        if !still_wanted() {
            return;
        }
        let value = record.encode();
        let zone = self.zone.clone();
        // NX then GT: a key lives as long as its longest-lived member (GT alone never sets an
        // expiry on a key that has none). Tag sets first: a tag purge must find every key that
        // a reader can find. Each tag set is in a slot of its own (one pipeline each).
        if !tags.is_empty() {
            let tagged = self
                .call(None, deadline, async |conn| {
                    let pipes = tags.iter().map(|surrogate| {
                        let set = Keys::tag_set(&zone, surrogate);
                        let mut pipe = redis::pipe();
                        pipe.cmd("SADD").arg(&set).arg(&primary).ignore();
                        pipe.cmd("PEXPIRE").arg(&set).arg(ttl_ms).arg("NX").ignore();
                        pipe.cmd("PEXPIRE").arg(&set).arg(ttl_ms).arg("GT").ignore();
                        pipe
                    });
                    engine::pipelines(&conn, pipes.collect()).await
                })
                .await;
            if let Err(failure) = tagged {
                self.write_dropped(&failure);
                return;
            }
        }
        let indexed = self
            .call(Some(&index), deadline, async |mut conn| {
                let mut pipe = redis::pipe();
                pipe.cmd("HSET")
                    .arg(&index)
                    .arg(&field)
                    .arg(value.as_ref())
                    .arg(record::PRIMARY_FIELD)
                    .arg(&primary)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&index)
                    .arg(ttl_ms)
                    .arg("NX")
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&index)
                    .arg(ttl_ms)
                    .arg("GT")
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            })
            .await;
        match indexed {
            Ok(()) => {
                SharedStats::add(&self.stats.writes, 1);
                SharedStats::add(&self.stats.bytes_written, body.len() as u64);
            }
            Err(failure) => self.write_dropped(&failure),
        }
    }

    fn write_dropped(&self, failure: &Failure) {
        SharedStats::add(&self.stats.writes_dropped, 1);
        tracing::debug!("shared cache tier: a write was dropped: {failure:?}");
    }

    /// Remove what `purge` names from the tier: index records (the chunks expire on their own:
    /// nothing finds them once no index names them). A key is one UNLINK; a tag reads its set;
    /// a prefix or the whole zone SCANs the zone's index records (an admin call, bounded by
    /// its deadline; SCAN never blocks the server for long).
    pub(super) async fn remove_matching(
        self: &Arc<Self>,
        purge: &Purge,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let zone = self.zone.clone();
        match purge {
            Purge::Key(primary) => {
                let index = Keys::of(&zone, primary).index();
                self.call(Some(&index), deadline, async |mut conn| {
                    redis::cmd("UNLINK")
                        .arg(&index)
                        .query_async::<()>(&mut conn)
                        .await
                })
                .await
            }
            Purge::Tag { tag, .. } => {
                let set = Keys::tag_set(&zone, tag);
                let primaries: Vec<String> = self
                    .call(Some(&set), deadline, async |mut conn| {
                        redis::cmd("SMEMBERS")
                            .arg(&set)
                            .query_async(&mut conn)
                            .await
                    })
                    .await?;
                self.call(None, deadline, async move |conn| {
                    // One UNLINK per key: they live in different slots.
                    let mut unlinks: Vec<redis::Cmd> = primaries
                        .iter()
                        .map(|primary| {
                            redis::cmd("UNLINK")
                                .arg(Keys::of(&zone, primary).index())
                                .clone()
                        })
                        .collect();
                    unlinks.push(redis::cmd("UNLINK").arg(&set).clone());
                    engine::each::<redis::Value>(&conn, unlinks).await.map(drop)
                })
                .await
            }
            Purge::Prefix(prefix) => self.scan_remove(Some(prefix.clone()), deadline).await,
            Purge::All => self.scan_remove(None, deadline).await,
        }
    }

    /// Remove the zone's index records (whose primary key starts with `prefix`), SCANning
    /// every master of a cluster (a SCAN sees one node's keys only), or the one server.
    async fn scan_remove(
        self: &Arc<Self>,
        prefix: Option<String>,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let masters: Vec<String> = self
            .call(None, deadline, async |mut conn| {
                let mut masters: Vec<String> = self
                    .engine
                    .slot_map(&mut conn)
                    .await?
                    .into_iter()
                    .map(|(_, _, addr)| addr)
                    .collect();
                masters.sort();
                masters.dedup();
                if masters.is_empty() && matches!(conn, Conn::Cluster(_)) {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
                        "no slot is served",
                    )));
                }
                Ok(masters)
            })
            .await?;
        // A single server: one pass on it (its address is not needed).
        let masters = if masters.is_empty() {
            vec![String::new()]
        } else {
            masters
        };
        for master in &masters {
            self.scan_remove_on(master, prefix.as_deref(), deadline)
                .await?;
        }
        Ok(())
    }

    async fn scan_remove_on(
        self: &Arc<Self>,
        master: &str,
        prefix: Option<&str>,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let pattern = Keys::index_pattern(&self.zone);
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = self
                .call(None, deadline, async |mut conn| {
                    let mut scan = redis::cmd("SCAN");
                    scan.arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000);
                    Engine::on_node(&mut conn, master, scan).await
                })
                .await?;
            if !keys.is_empty() {
                self.call(None, deadline, async move |conn| {
                    let doomed: Vec<String> = match prefix {
                        None => keys,
                        Some(prefix) => {
                            let gets = keys
                                .iter()
                                .map(|key| {
                                    redis::cmd("HGET")
                                        .arg(key)
                                        .arg(record::PRIMARY_FIELD)
                                        .clone()
                                })
                                .collect();
                            let primaries: Vec<Option<String>> = engine::each(&conn, gets).await?;
                            keys.into_iter()
                                .zip(primaries)
                                .filter(|(_, p)| p.as_ref().is_some_and(|p| p.starts_with(prefix)))
                                .map(|(k, _)| k)
                                .collect()
                        }
                    };
                    let unlinks = doomed
                        .iter()
                        .map(|key| redis::cmd("UNLINK").arg(key).clone())
                        .collect();
                    engine::each::<redis::Value>(&conn, unlinks).await.map(drop)
                })
                .await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

/// Milliseconds since the Unix epoch (the records' expiry times, comparable across instances
/// whose clocks agree to well under a second, as NTP keeps them).
pub fn now_ms() -> u64 {
    ms_of(SystemTime::now())
}

pub fn ms_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
