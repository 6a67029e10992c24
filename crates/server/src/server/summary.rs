//! What a reload changed, for the log line `reloaded: ...` and for tests.

use std::fmt;

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
