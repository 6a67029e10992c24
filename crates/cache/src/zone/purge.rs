//! Purges of a zone beyond one key: by prefix, by surrogate key (tag), soft or hard, and
//! across a fleet through the shared tier ([`crate::storage::shared::bus`]).
//!
//! Surrogate keys: a response may name groups it belongs to in `Surrogate-Key` (Fastly:
//! space-separated), `Cache-Tag` (Cloudflare: comma-separated) or `xkey` (Varnish: space or
//! comma separated). They are stored with the response (its headers) and purged by
//! `PURGE /cache/ZONE?tag=T`. A soft purge (`&soft=1`) marks the responses stale instead of
//! removing them: within their stale windows (`stale-while-revalidate`, `use_stale`) they are
//! served while one request refreshes them.

use std::sync::Arc;
use std::time::Instant;

use http::HeaderMap;

pub use crate::storage::shared::Purge;
use crate::storage::shared::bus::PURGE_DEADLINE;

use super::Zone;

/// The response fields that carry surrogate keys.
pub const TAG_HEADERS: [&str; 3] = ["surrogate-key", "cache-tag", "xkey"];

/// Most tags read from one response: a response with thousands of tags would make every store
/// write as many sets.
const MAX_TAGS: usize = 64;

/// The surrogate keys of a response, deduplicated, in order of appearance.
pub fn tags_of(headers: &HeaderMap) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for name in TAG_HEADERS {
        for value in headers.get_all(name) {
            let Ok(text) = value.to_str() else { continue };
            for tag in text.split([' ', ',', '\t']).filter(|t| !t.is_empty()) {
                if tags.len() < MAX_TAGS && !tags.iter().any(|t| t == tag) {
                    tags.push(tag.to_string());
                }
            }
        }
    }
    tags
}

impl Zone {
    /// Remove (or with `soft`, mark stale) every stored response tagged `tag`, here and across
    /// the fleet. Returns how many were here.
    pub async fn purge_tag(&self, tag: &str, soft: bool) -> usize {
        let count = self.purge_tag_local(tag, soft).await;
        let purge = Purge::Tag {
            tag: tag.to_string(),
            soft,
        };
        self.purge_fleet(purge, true).await;
        count
    }

    async fn purge_tag_local(&self, tag: &str, soft: bool) -> usize {
        let tagged: Vec<_> = self
            .index
            .all_entries()
            .into_iter()
            .filter(|entry| tags_of(&entry.meta().headers).iter().any(|t| t == tag))
            .collect();
        if soft {
            for entry in &tagged {
                entry.set_soft_purged(true);
            }
            super::Stats::add(&self.stats.invalidated, tagged.len() as u64);
            return tagged.len();
        }
        let mut removed = 0;
        for entry in tagged {
            removed += self.invalidate_local(&entry.primary).await;
        }
        removed
    }

    /// Tell the shared tier and the other instances (nothing without a shared tier). `admin`:
    /// an operator's purge, allowed [`PURGE_DEADLINE`]; otherwise (an unsafe method's
    /// invalidation, on a request's path) the lookup deadline.
    pub(super) async fn purge_fleet(&self, purge: Purge, admin: bool) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let deadline = Instant::now()
            + if admin {
                PURGE_DEADLINE
            } else {
                shared.settings().deadline
            };
        if let Err(failure) = shared.purge(purge, deadline).await {
            tracing::warn!(zone = %self.settings.name, "shared cache tier: a purge could not reach it, kept to send again: {failure:?}");
        }
    }

    /// Apply the purges other instances send (and a flush after a gap) to the local tiers.
    pub(super) fn listen_for_purges(self: &Arc<Self>) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let weak = Arc::downgrade(self);
        shared.set_listener(Arc::new(move |purge: Purge| {
            let Some(zone) = weak.upgrade() else { return };
            tokio::spawn(async move {
                match purge {
                    Purge::Key(key) => drop(zone.invalidate_local(&key).await),
                    Purge::Prefix(prefix) => drop(zone.purge_prefix_local(&prefix).await),
                    Purge::Tag { tag, soft } => drop(zone.purge_tag_local(&tag, soft).await),
                    Purge::All => drop(zone.purge_prefix_local("").await),
                }
            });
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_from_every_vendor_field_deduplicated() {
        let mut headers = HeaderMap::new();
        headers.insert("surrogate-key", "a b  c".parse().unwrap());
        headers.append("cache-tag", "c,d, e".parse().unwrap());
        headers.append("xkey", "f a".parse().unwrap());
        assert_eq!(tags_of(&headers), ["a", "b", "c", "d", "e", "f"]);
        assert!(tags_of(&HeaderMap::new()).is_empty());
    }
}
