//! What `sluice check` says about a config's shared pieces (docs/fleet.md): each one, and what
//! it does when Redis is down. Checking never connects: these are what the settings mean.

use sluice_config::{Config, OnError};

/// One line per shared piece.
pub fn notes(config: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    for zone in &config.caches {
        if let Some(shared) = &zone.shared {
            notes.push(format!(
                "cache zone `{}`: shared tier {}{} (responses up to {} bytes, kept at most {}s); \
                 when it is down or slower than {}ms, lookups are local misses (no request fails), \
                 writes are dropped and purges are sent once it is back",
                zone.name,
                shared.redis,
                engine(
                    &shared.redis,
                    "its own slots are misses, the others' are served"
                ),
                shared.max_object_size,
                shared.max_ttl.as_secs(),
                shared.deadline.as_millis()
            ));
        }
    }
    for route in &config.routes {
        let Some(limit) = &route.rate_limit else {
            continue;
        };
        let Some(shared) = &limit.shared else {
            continue;
        };
        let fallback = match shared.on_error {
            OnError::Local => format!(
                "this instance allows its share, {} per {}s / fleet_size {}",
                limit.requests,
                limit.per.as_secs_f64(),
                shared.fleet_size
            ),
            OnError::Allow => "every request is let through".into(),
            OnError::Deny => "every request is refused with 429".into(),
        };
        notes.push(format!(
            "route `{}`: rate limit shared at {}{}; when it is down or slower than {}ms, {fallback}",
            route.name,
            shared.redis,
            engine(&shared.redis, "the keys in its slots fall back"),
            shared.deadline.as_millis()
        ));
    }
    for listener in &config.listeners {
        if let Some(keys) = &listener.session_ticket_keys {
            notes.push(format!(
                "listener `{}`: TLS session tickets sealed with {} (every instance must read the \
                 same file to resume each other's sessions)",
                listener.name,
                keys.display()
            ));
        }
    }
    notes
}

/// What kind of engine `url` names, when it is not one server: a Redis Cluster's seed nodes
/// (`redis+cluster://`), and what a master that is down means for `what`.
fn engine(url: &str, master_down: &str) -> String {
    let Some(rest) = url.strip_prefix("redis+cluster://") else {
        return String::new();
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let hosts = authority.rsplit('@').next().unwrap_or_default();
    let seeds: Vec<&str> = hosts.split(',').map(str::trim).collect();
    format!(
        " (a Redis Cluster: seed nodes {}; the other nodes and the slot map are learned from \
         them; when one master is down, {master_down})",
        seeds.join(", ")
    )
}
