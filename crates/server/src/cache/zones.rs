//! The cache zones of a config (`[caches.NAME]`), opened at start-up: storage tiers, index
//! (rebuilt from the disk tier), counters. Held apart from the routes that use them, so that
//! state which must outlive a config (a later reload) has one owner.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_cache::policy::{Heuristic, Settings};
use sluice_cache::storage::Storage;
use sluice_cache::storage::disk::{DiskSettings, DiskStorage};
use sluice_cache::storage::memory::{MemorySettings, MemoryStorage};
use sluice_cache::storage::tiered::TieredStorage;
use sluice_cache::zone::{Zone, ZoneSettings};
use sluice_config::{CacheZone, Config, UseStale};

/// The open zones, by name, with the policy settings that are the zone's (the route adds its
/// own).
#[derive(Default, Clone)]
pub struct Zones {
    zones: HashMap<String, (Arc<Zone>, Settings, Vec<UseStale>)>,
}

impl Zones {
    /// Open every zone of `config`; an unusable disk directory stops start-up with a message.
    pub async fn open(config: &Config) -> Result<Self, String> {
        let mut zones = HashMap::new();
        for zone in &config.caches {
            let opened = open(zone)
                .await
                .map_err(|e| format!("cache zone `{}`: {e}", zone.name))?;
            zones.insert(
                zone.name.clone(),
                (opened, policy_settings(zone), zone.use_stale.clone()),
            );
        }
        Ok(Self { zones })
    }

    /// The zone, its policy settings and its `use_stale` list.
    pub fn get(&self, name: &str) -> Option<(Arc<Zone>, Settings, Vec<UseStale>)> {
        self.zones.get(name).cloned()
    }

    pub fn zone(&self, name: &str) -> Option<&Arc<Zone>> {
        self.zones.get(name).map(|(zone, _, _)| zone)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.zones.values().map(|(zone, _, _)| zone)
    }
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
    };
    Zone::open(settings, storage, index).await
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
