//! Upstream servers discovered by DNS (`dns+a:NAME:PORT`, `dns+srv:NAME`) and the `[resolver]`
//! that looks them up. See docs/fleet.md, "Upstreams discovered by DNS".

use std::net::SocketAddr;
use std::time::Duration;

/// The records a `dns+` server stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DnsRecords {
    /// `dns+a:NAME:PORT`: every A and AAAA record of `name`, each at `port`.
    Addresses { name: String, port: u16 },
    /// `dns+srv:NAME`: the SRV records of `name` (targets, ports, weights, priorities), each
    /// target's A/AAAA records.
    Srv { name: String },
}

impl DnsRecords {
    /// The name that is looked up.
    pub fn name(&self) -> &str {
        match self {
            Self::Addresses { name, .. } | Self::Srv { name } => name,
        }
    }
}

impl std::fmt::Display for DnsRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Addresses { name, port } => write!(f, "dns+a:{name}:{port}"),
            Self::Srv { name } => write!(f, "dns+srv:{name}"),
        }
    }
}

/// `[resolver]`: how `dns+` servers are looked up. Copied into every group that has one, so a
/// reload that changes it rebuilds those groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    /// Name servers (`ip:port`, port 53 when not written); empty: the system's
    /// (`/etc/resolv.conf`).
    pub servers: Vec<SocketAddr>,
    /// Per query; `None`: the system's (resolv.conf `options timeout`, 5 s).
    pub timeout: Option<Duration>,
    /// Tries per query and server; `None`: the system's (resolv.conf `options attempts`, 2).
    pub attempts: Option<u32>,
    /// The shortest time between two lookups of one name, whatever the TTL says.
    pub min_ttl: Duration,
    /// The longest time between two lookups of one name, whatever the TTL says.
    pub max_ttl: Duration,
    /// How long the last good answer is used while lookups fail or come back empty; after it,
    /// the name contributes no server until an answer comes.
    pub keep_last_good: Duration,
}

impl Default for Resolver {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            timeout: None,
            attempts: None,
            min_ttl: Duration::from_secs(1),
            max_ttl: Duration::from_secs(300),
            keep_last_good: Duration::from_secs(3600),
        }
    }
}
