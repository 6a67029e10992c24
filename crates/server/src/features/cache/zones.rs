//! The cache zones of a config (`[caches.NAME]`), opened at start-up: storage tiers, index
//! (rebuilt from the disk tier), counters. Held apart from the routes that use them, so that
//! state which must outlive a config (a reload) has one owner.
//!
//! On reload ([`Zones::reopen`]) a zone whose storage settings (`memory`, `max_object_size`,
//! `disk`) are unchanged keeps its storage and every entry in it; its policy settings
//! (`use_stale`, `store_set_cookie`, `heuristic`) take the new values. A zone whose storage
//! settings changed is opened anew: its memory tier starts empty, its disk tier re-indexes the
//! directory (entries on disk survive, trimmed to a lowered budget). Resizing a live tier in
//! place would need the storage to shrink under load; an operator who changes a size expects
//! the new size, and a cold memory tier is the cost.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_cache::policy::{Heuristic, Settings};
use sluice_cache::storage::Storage;
use sluice_cache::storage::disk::{DiskSettings, DiskStorage};
use sluice_cache::storage::memory::{MemorySettings, MemoryStorage};
use sluice_cache::storage::shared::{SharedSettings, SharedTier};
use sluice_cache::storage::tiered::TieredStorage;
use sluice_cache::zone::{Zone, ZoneSettings};
use sluice_config::{CacheZone, Config, UseStale};

/// The open zones, by name, with the policy settings that are the zone's (the route adds its
/// own).
#[derive(Default, Clone)]
pub struct Zones {
    zones: HashMap<String, OpenZone>,
}

#[derive(Clone)]
struct OpenZone {
    zone: Arc<Zone>,
    policy: Settings,
    use_stale: Vec<UseStale>,
    /// What the storage was opened with, to tell on reload whether it can be kept.
    config: CacheZone,
}

impl Zones {
    /// Open every zone of `config`; an unusable disk directory stops start-up with a message.
    pub async fn open(config: &Config) -> Result<Self, String> {
        Self::reopen(config, &Self::default()).await
    }

    /// The zones of `config`, keeping the storage of each zone of `previous` whose storage
    /// settings are unchanged, opening the others.
    pub async fn reopen(config: &Config, previous: &Self) -> Result<Self, String> {
        let mut zones = HashMap::new();
        for zone in &config.caches {
            let kept = previous
                .zones
                .get(&zone.name)
                .filter(|old| same_storage(&old.config, zone))
                .map(|old| old.zone.clone());
            let opened = match kept {
                Some(zone) => zone,
                None => open(zone)
                    .await
                    .map_err(|e| format!("cache zone `{}`: {e}", zone.name))?,
            };
            let open = OpenZone {
                zone: opened,
                policy: policy_settings(zone),
                use_stale: zone.use_stale.clone(),
                config: zone.clone(),
            };
            zones.insert(zone.name.clone(), open);
        }
        Ok(Self { zones })
    }

    /// The zone, its policy settings and its `use_stale` list.
    pub fn get(&self, name: &str) -> Option<(Arc<Zone>, Settings, Vec<UseStale>)> {
        self.zones
            .get(name)
            .map(|z| (z.zone.clone(), z.policy.clone(), z.use_stale.clone()))
    }

    pub fn zone(&self, name: &str) -> Option<&Arc<Zone>> {
        self.zones.get(name).map(|z| &z.zone)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.zones.values().map(|z| &z.zone)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.zones.keys().map(String::as_str)
    }
}

/// Whether a zone opened with `old` can serve as one configured `new`.
fn same_storage(old: &CacheZone, new: &CacheZone) -> bool {
    old.memory == new.memory
        && old.max_object_size == new.max_object_size
        && old.disk == new.disk
        && old.shared == new.shared
        && old.keep_tag_headers == new.keep_tag_headers
}

async fn open(config: &CacheZone) -> std::io::Result<Arc<Zone>> {
    let (index, evict) = Zone::evict_listener();
    let memory = MemorySettings {
        budget_bytes: config.memory,
        max_object_bytes: config.max_object_size.min(config.memory),
    };
    let storage: Arc<dyn Storage> = match &config.disk {
        None => Arc::new(MemoryStorage::new(memory, Some(evict))),
        Some(disk) => {
            let disk = DiskStorage::open(
                DiskSettings {
                    path: disk.path.clone(),
                    budget_bytes: disk.size,
                    max_object_bytes: config.max_object_size,
                },
                Some(evict),
            )
            .await?;
            Arc::new(TieredStorage::new(MemoryStorage::new(memory, None), disk))
        }
    };
    let settings = ZoneSettings {
        name: config.name.clone(),
        max_object_size: config.max_object_size,
        keep_tag_headers: config.keep_tag_headers,
    };
    let shared = match &config.shared {
        None => None,
        Some(shared) => Some(
            SharedTier::new(
                &config.name,
                SharedSettings {
                    url: shared.redis.clone(),
                    deadline: shared.deadline,
                    max_object_size: shared.max_object_size,
                    max_ttl: shared.max_ttl,
                },
            )
            .map_err(std::io::Error::other)?,
        ),
    };
    Zone::open_shared(settings, storage, index, shared).await
}

fn policy_settings(zone: &CacheZone) -> Settings {
    let failures = zone.use_stale.iter().any(|u| *u != UseStale::Updating);
    Settings {
        store_set_cookie: zone.store_set_cookie,
        heuristic: zone.heuristic.map(|max| Heuristic { fraction: 0.1, max }),
        use_stale: sluice_cache::policy::UseStale {
            updating: zone
                .use_stale
                .contains(&UseStale::Updating)
                .then_some(std::time::Duration::MAX),
            error: failures.then_some(std::time::Duration::MAX),
        },
        ..Settings::default()
    }
}
