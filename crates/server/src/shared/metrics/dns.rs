//! The metrics of upstream servers discovered by DNS (`dns+a:`, `dns+srv:`): lookups by
//! result, peers added and removed, and the age of the set each name contributes.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::register;

pub const UPSTREAM_DNS_REFRESHES_TOTAL: &str = "sluice_upstream_dns_refreshes_total";
pub const UPSTREAM_DNS_CHANGES_TOTAL: &str = "sluice_upstream_dns_changes_total";
pub const UPSTREAM_DNS_LAST_GOOD_AGE: &str = "sluice_upstream_dns_last_good_age_seconds";

/// Every name of this file, for [`super::ALL_NAMES`].
pub const NAMES: [&str; 3] = [
    UPSTREAM_DNS_REFRESHES_TOTAL,
    UPSTREAM_DNS_CHANGES_TOTAL,
    UPSTREAM_DNS_LAST_GOOD_AGE,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameResultLabels {
    upstream: String,
    name: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    upstream: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabels {
    upstream: String,
    change: &'static str,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct DnsFamilies {
    refreshes: Family<NameResultLabels, Counter>,
    changes: Family<ChangeLabels, Counter>,
    last_good_age: Family<NameLabels, Gauge>,
}

impl DnsFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            refreshes: register(
                r,
                UPSTREAM_DNS_REFRESHES_TOTAL,
                "DNS lookups of dns+ upstream servers, by upstream, server (dns+a:NAME:PORT or dns+srv:NAME) and result (ok, error, empty)",
            ),
            changes: register(
                r,
                UPSTREAM_DNS_CHANGES_TOTAL,
                "Peers of an upstream group added or removed because DNS answers changed",
            ),
            last_good_age: register(
                r,
                UPSTREAM_DNS_LAST_GOOD_AGE,
                "Age of the DNS answer a dns+ server's peers come from, at its last lookup (0 after a good one; grows while lookups fail); -1 when it has none",
            ),
        }
    }

    /// Handles for one `dns+` server of a group. Every result exists from the start.
    pub(super) fn handles(&self, upstream: &str, name: &str) -> DnsMetrics {
        let refreshes = ["ok", "error", "empty"].map(|result| {
            self.refreshes.get_or_create_owned(&NameResultLabels {
                upstream: upstream.to_owned(),
                name: name.to_owned(),
                result,
            })
        });
        let change = |change| {
            self.changes.get_or_create_owned(&ChangeLabels {
                upstream: upstream.to_owned(),
                change,
            })
        };
        DnsMetrics {
            refreshes,
            added: change("added"),
            removed: change("removed"),
            last_good_age: self.last_good_age.get_or_create_owned(&NameLabels {
                upstream: upstream.to_owned(),
                name: name.to_owned(),
            }),
        }
    }
}

/// Handles for one `dns+` server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DnsMetrics {
    /// ok, error, empty.
    refreshes: [Counter; 3],
    added: Counter,
    removed: Counter,
    last_good_age: Gauge,
}

impl DnsMetrics {
    /// A lookup ended with `result` (`ok`, `error` or `empty`); the name's set is
    /// `last_good_age` old (`None`: it has none).
    pub fn refreshed(&self, result: &str, last_good_age: Option<std::time::Duration>) {
        let index = match result {
            "ok" => 0,
            "error" => 1,
            _ => 2,
        };
        self.refreshes[index].inc();
        let age = last_good_age.map_or(-1, |age| i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
        self.last_good_age.set(age);
    }

    /// Peers added and removed by one change of the group.
    pub fn changed(&self, added: usize, removed: usize) {
        self.added.inc_by(added as u64);
        self.removed.inc_by(removed as u64);
    }
}
