//! Purges across a fleet: every instance of a zone with a shared tier subscribes to one Redis
//! pub/sub channel; a purge on one instance removes the keys from the tier and is published
//! there, and the others apply it to their own tiers.
//!
//! Pub/sub delivers at most once, to whoever is connected: a purge sent while an instance is
//! cut off is lost for it. So an instance that may have missed messages (its subscription
//! dropped and came back, or the tier failed and recovered) flushes its local copy of the zone:
//! whatever it may no longer serve is gone, and the shared tier refills it (purged keys are
//! gone from there). A purge that could not reach Redis at all is kept (bounded) and sent again
//! when Redis is back, so an entry purged during an outage does not come back from a Redis that
//! kept its data.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::{Failure, SharedStats, SharedTier};
use crate::lock::lock;

/// What a purge removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    /// One primary key.
    Key(String),
    /// Every key starting with this.
    Prefix(String),
    /// Every response carrying this surrogate key; `soft`: marked stale instead.
    Tag { tag: String, soft: bool },
    /// The whole zone (also what an instance does to itself after it may have missed purges).
    All,
}

impl Purge {
    fn encode(&self, instance: u64) -> String {
        let (kind, arg) = match self {
            Purge::Key(key) => ("key", key.as_str()),
            Purge::Prefix(prefix) => ("prefix", prefix.as_str()),
            Purge::Tag { tag, soft: false } => ("tag", tag.as_str()),
            Purge::Tag { tag, soft: true } => ("soft-tag", tag.as_str()),
            Purge::All => ("all", ""),
        };
        format!("{instance:016x} {kind} {arg}")
    }

    /// `(sender, purge)`; `None` for anything else on the channel.
    fn decode(message: &str) -> Option<(u64, Purge)> {
        let (sender, rest) = message.split_once(' ')?;
        let sender = u64::from_str_radix(sender, 16).ok()?;
        let (kind, arg) = rest.split_once(' ').unwrap_or((rest, ""));
        let purge = match kind {
            "key" if !arg.is_empty() => Purge::Key(arg.into()),
            "prefix" => Purge::Prefix(arg.into()),
            "tag" if !arg.is_empty() => Purge::Tag {
                tag: arg.into(),
                soft: false,
            },
            "soft-tag" if !arg.is_empty() => Purge::Tag {
                tag: arg.into(),
                soft: true,
            },
            "all" => Purge::All,
            _ => return None,
        };
        Some((sender, purge))
    }
}

/// Applies a purge received from another instance (or [`Purge::All`] after a gap) to the
/// local tiers only.
pub type PurgeListener = Arc<dyn Fn(Purge) + Send + Sync>;

/// Purges kept while Redis is unreachable; past this, the zone is purged whole instead.
pub const PENDING_MAX: usize = 1024;

/// How often the purge subscription checks that its server still answers (a PING), and the
/// longest subscribing may take.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// The longest a fleet purge (removal and publication) may take on an admin call.
pub const PURGE_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Default)]
pub(super) struct Pending {
    pub purges: VecDeque<Purge>,
    pub overflowed: bool,
}

impl SharedTier {
    pub(super) fn channel(&self) -> String {
        format!("sluice:purge:{}", hex::encode(self.zone.as_bytes()))
    }

    /// Remove what `purge` names from the tier and tell the other instances, within
    /// `deadline`. When Redis cannot be reached the purge is kept and sent when it is back.
    pub async fn purge(self: &Arc<Self>, purge: Purge, deadline: Instant) -> Result<(), Failure> {
        let result = self.purge_now(&purge, deadline).await;
        if result.is_err() {
            let mut pending = lock(&self.pending);
            if pending.purges.len() >= PENDING_MAX {
                pending.overflowed = true;
                pending.purges.clear();
            } else {
                pending.purges.push_back(purge);
            }
            self.has_pending.store(true, Ordering::Release);
        }
        result
    }

    async fn purge_now(self: &Arc<Self>, purge: &Purge, deadline: Instant) -> Result<(), Failure> {
        self.remove_matching(purge, deadline).await?;
        let channel = self.channel();
        let message = purge.encode(self.instance);
        // On a cluster PUBLISH goes to any node, which forwards it to every other.
        self.call(None, deadline, async move |mut conn| {
            redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(&message)
                .query_async::<()>(&mut conn)
                .await
        })
        .await?;
        SharedStats::add(&self.stats.purges_sent, 1);
        Ok(())
    }

    /// Send the purges kept during an outage (or purge the zone whole if too many were).
    /// Boxed: it runs `purge`, whose calls may start another replay (a future of its own
    /// type inside itself).
    pub(super) fn replay(self: Arc<Self>) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let (purges, overflowed) = {
                let mut pending = lock(&self.pending);
                let overflowed = std::mem::take(&mut pending.overflowed);
                (std::mem::take(&mut pending.purges), overflowed)
            };
            let purges: Vec<Purge> = if overflowed {
                vec![Purge::All]
            } else {
                purges.into()
            };
            for purge in purges {
                let _ = self.purge(purge, Instant::now() + PURGE_DEADLINE).await;
            }
        })
    }

    /// Subscribe to the zone's purge channel for as long as the tier lives, applying what
    /// other instances send through `listener`, and `Purge::All` after every gap. On a cluster
    /// any node hears every publication: the seed nodes are tried in turn, the next one when
    /// the subscribed node goes away. A node that stops answering without closing (a stopped
    /// process, a cut network) is found by a PING every [`HEARTBEAT`].
    pub fn subscribe(self: &Arc<Self>, listener: PurgeListener) {
        let weak = Arc::downgrade(self);
        let nodes = self.engine.pubsub_nodes();
        let channel = self.channel();
        tokio::spawn(async move {
            let mut first = true;
            let mut pause = Duration::from_millis(100);
            for node in nodes.iter().cycle() {
                let subscribed = async {
                    let mut pubsub = node.get_async_pubsub().await?;
                    pubsub.subscribe(&channel).await?;
                    Ok::<_, redis::RedisError>(pubsub)
                };
                let pubsub = tokio::time::timeout(HEARTBEAT, subscribed).await;
                let Some(tier) = weak.upgrade() else { return };
                let Ok(Ok(pubsub)) = pubsub else {
                    drop(tier);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    continue;
                };
                pause = Duration::from_millis(100);
                if !std::mem::take(&mut first) {
                    // Purges sent while this instance was not subscribed were lost for it.
                    SharedStats::add(&tier.stats.gap_flushes, 1);
                    listener(Purge::All);
                }
                tier.clone().replay().await;
                let instance = tier.instance;
                drop(tier);
                let (mut sink, mut messages) = pubsub.split();
                let mut heartbeat = tokio::time::interval(HEARTBEAT);
                heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    let message = tokio::select! {
                        message = messages.next() => message,
                        _ = heartbeat.tick() => {
                            let pong = tokio::time::timeout(HEARTBEAT, sink.ping::<()>()).await;
                            if matches!(pong, Ok(Ok(()))) {
                                continue;
                            }
                            None
                        }
                    };
                    // The subscription ended (the node is gone or hung): subscribe again.
                    let Some(message) = message else { break };
                    let Ok(payload) = message.get_payload::<String>() else {
                        continue;
                    };
                    let Some((sender, purge)) = Purge::decode(&payload) else {
                        continue;
                    };
                    if sender == instance {
                        continue;
                    }
                    if let Some(tier) = weak.upgrade() {
                        SharedStats::add(&tier.stats.purges_received, 1);
                    }
                    listener(purge);
                }
                if weak.strong_count() == 0 {
                    return;
                }
            }
        });
    }

    /// After the tier failed and recovered (the breaker closed again): purges may have been
    /// missed (the subscription may have stayed up on a stopped server) and kept purges are
    /// due.
    pub(super) fn recovered(self: &Arc<Self>) {
        let listener = self.listener.lock().ok().and_then(|l| l.clone());
        if let Some(listener) = listener {
            SharedStats::add(&self.stats.gap_flushes, 1);
            listener(Purge::All);
        }
        tokio::spawn(self.clone().replay());
    }

    pub fn set_listener(self: &Arc<Self>, listener: PurgeListener) {
        if let Ok(mut slot) = self.listener.lock() {
            *slot = Some(listener.clone());
        }
        self.subscribe(listener);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purges_round_trip_and_other_messages_are_ignored() {
        for purge in [
            Purge::Key("http://a/x y".into()),
            Purge::Prefix("http://a/".into()),
            Purge::Prefix(String::new()),
            Purge::Tag {
                tag: "t1".into(),
                soft: true,
            },
            Purge::Tag {
                tag: "t1".into(),
                soft: false,
            },
            Purge::All,
        ] {
            assert_eq!(Purge::decode(&purge.encode(42)), Some((42, purge)));
        }
        assert_eq!(Purge::decode("zz key x"), None);
        assert_eq!(Purge::decode("00000001 nope x"), None);
        assert_eq!(Purge::decode("00000001 key "), None);
    }
}
