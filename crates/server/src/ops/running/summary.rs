//! What a reload changed, for the log line `reloaded: ...` and for tests.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use sluice_config::Config;

use super::sockets::{LiveListener, Slot, Sockets};
use super::state::State;

/// Names of one kind of thing (listeners, routes, ...) by what the reload did to them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// In the new config only: bound, compiled, built or opened.
    pub added: Vec<String>,
    /// In the old config only: drained, stopped, freed.
    pub removed: Vec<String>,
    /// In both, but changed: built anew (for an upstream group, a new pool and fresh health
    /// state; for a cache zone, new storage; for a route, its new settings).
    pub changed: Vec<String>,
    /// In both and carried over: a listener's socket, an upstream group's pool, health state
    /// and checks, a cache zone's storage and entries, a route's settings.
    pub kept: Vec<String>,
}

impl Changes {
    /// Sort `new` against `old` by name; `same(name)` tells whether a name in both was kept.
    pub(super) fn of<'a>(
        old: impl IntoIterator<Item = &'a str>,
        new: impl IntoIterator<Item = &'a str>,
        same: impl Fn(&str) -> bool,
    ) -> Self {
        let old: Vec<&str> = old.into_iter().collect();
        let new: Vec<&str> = new.into_iter().collect();
        let mut changes = Self::default();
        for name in &new {
            let list = if !old.contains(name) {
                &mut changes.added
            } else if same(name) {
                &mut changes.kept
            } else {
                &mut changes.changed
            };
            list.push((*name).to_owned());
        }
        for name in old.iter().filter(|name| !new.contains(name)) {
            changes.removed.push((*name).to_owned());
        }
        changes
    }
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} kept", self.kept.len())?;
        for (what, names) in [
            ("changed", &self.changed),
            ("added", &self.added),
            ("removed", &self.removed),
        ] {
            if !names.is_empty() {
                write!(f, ", {} {what} ({})", names.len(), names.join(", "))?;
            }
        }
        Ok(())
    }
}

/// What a reload did, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Kept: the socket stays bound and accepting. Changed is never used: a listener's new
    /// settings apply to its next connections, its socket is kept.
    pub listeners: Changes,
    pub routes: Changes,
    pub upstreams: Changes,
    pub cache_zones: Changes,
}

impl fmt::Display for ReloadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "listeners: {}; routes: {}; upstreams: {}; cache zones: {}",
            self.listeners, self.routes, self.upstreams, self.cache_zones
        )
    }
}

/// Compare the state in force (`old`, with its `live` listeners) with the one about to be.
pub(super) fn summarize(
    old: &State,
    live: &[LiveListener],
    new: &State,
    sockets: &Sockets,
) -> ReloadSummary {
    let (old_config, new_config) = (old.config.as_ref(), new.config.as_ref());
    // Routes have no equality of their own; their debug form says everything they hold.
    let routes = |c: Option<&Config>| -> HashMap<String, String> {
        c.iter()
            .flat_map(|c| c.routes.iter().map(|r| (r.name.clone(), format!("{r:?}"))))
            .collect()
    };
    let (old_routes, new_routes) = (routes(old_config), routes(new_config));
    ReloadSummary {
        listeners: listeners(live, new_config, sockets),
        routes: Changes::of(
            old_config
                .into_iter()
                .flat_map(|c| &c.routes)
                .map(|r| r.name.as_str()),
            new_config
                .into_iter()
                .flat_map(|c| &c.routes)
                .map(|r| r.name.as_str()),
            |name| old_routes.get(name) == new_routes.get(name),
        ),
        upstreams: Changes::of(
            old_config
                .into_iter()
                .flat_map(|c| &c.upstreams)
                .map(|u| u.name.as_str()),
            new_config
                .into_iter()
                .flat_map(|c| &c.upstreams)
                .map(|u| u.name.as_str()),
            |name| match (old.upstreams.get(name), new.upstreams.get(name)) {
                (Some(old), Some(new)) => Arc::ptr_eq(&old.group, &new.group),
                _ => false,
            },
        ),
        cache_zones: Changes::of(
            old_config
                .into_iter()
                .flat_map(|c| &c.caches)
                .map(|z| z.name.as_str()),
            new_config
                .into_iter()
                .flat_map(|c| &c.caches)
                .map(|z| z.name.as_str()),
            |name| match (old.zones.zone(name), new.zones.zone(name)) {
                (Some(old), Some(new)) => Arc::ptr_eq(old, new),
                _ => false,
            },
        ),
    }
}

/// Listeners are matched by address, not name: a kept socket is reported under its new name
/// (a rename is "kept"), a new socket is "added", a socket no new listener took is "removed".
fn listeners(live: &[LiveListener], new: Option<&Config>, sockets: &Sockets) -> Changes {
    let mut changes = Changes::default();
    let mut taken = vec![false; live.len()];
    let new = new.map(|c| c.listeners.as_slice()).unwrap_or_default();
    for (listener, slot) in new.iter().zip(&sockets.listeners) {
        match slot {
            Slot::Kept(index) => {
                if let Some(taken) = taken.get_mut(*index) {
                    *taken = true;
                }
                changes.kept.push(listener.name.clone());
            }
            Slot::New(..) => changes.added.push(listener.name.clone()),
        }
    }
    for (listener, taken) in live.iter().zip(taken) {
        if !taken {
            changes.removed.push(listener.bound.name.clone());
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_sort_names_by_what_happened_and_read_as_a_short_line() {
        let changes = Changes::of(["a", "b", "c"], ["b", "c", "d"], |name| name == "b");
        assert_eq!(changes.kept, ["b"]);
        assert_eq!(changes.changed, ["c"]);
        assert_eq!(changes.added, ["d"]);
        assert_eq!(changes.removed, ["a"]);
        assert_eq!(
            changes.to_string(),
            "1 kept, 1 changed (c), 1 added (d), 1 removed (a)"
        );
        assert_eq!(Changes::of([], [], |_| true).to_string(), "0 kept");
    }
}
