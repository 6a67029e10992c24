//! The metrics of compression dictionaries (RFC 9842) per route: responses offered as a
//! dictionary, dictionaries kept and evicted, deltas made, responses served as a delta and the
//! bytes that saved against the coding the client would have got otherwise.
//! `docs/metrics.md` ("Dictionaries") lists them with queries.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sluice_core::DictionaryCoding;

use super::labels::RouteLabels;
use super::register;

pub const DICTIONARY_OFFERED_TOTAL: &str = "sluice_dictionary_offered_total";
pub const DICTIONARY_STORED_TOTAL: &str = "sluice_dictionary_stored_total";
pub const DICTIONARY_EVICTED_TOTAL: &str = "sluice_dictionary_evicted_total";
pub const DICTIONARY_DELTAS_MADE_TOTAL: &str = "sluice_dictionary_deltas_made_total";
pub const DICTIONARY_HITS_TOTAL: &str = "sluice_dictionary_hits_total";
pub const DICTIONARY_SAVED_BYTES_TOTAL: &str = "sluice_dictionary_saved_bytes_total";

/// Every name of this file, for [`super::ALL_NAMES`].
pub const NAMES: [&str; 6] = [
    DICTIONARY_OFFERED_TOTAL,
    DICTIONARY_STORED_TOTAL,
    DICTIONARY_EVICTED_TOTAL,
    DICTIONARY_DELTAS_MADE_TOTAL,
    DICTIONARY_HITS_TOTAL,
    DICTIONARY_SAVED_BYTES_TOTAL,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteCodingLabels {
    route: String,
    coding: &'static str,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct DictionaryFamilies {
    offered: Family<RouteLabels, Counter>,
    stored: Family<RouteLabels, Counter>,
    evicted: Family<RouteLabels, Counter>,
    deltas_made: Family<RouteCodingLabels, Counter>,
    hits: Family<RouteCodingLabels, Counter>,
    saved: Family<RouteLabels, Counter>,
}

impl DictionaryFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            offered: register(
                r,
                DICTIONARY_OFFERED_TOTAL,
                "Responses sent with Use-As-Dictionary, by route",
            ),
            stored: register(
                r,
                DICTIONARY_STORED_TOTAL,
                "Dictionaries kept to compress later responses, by route",
            ),
            evicted: register(
                r,
                DICTIONARY_EVICTED_TOTAL,
                "Dictionaries and deltas dropped to stay within the route's dictionary memory",
            ),
            deltas_made: register(
                r,
                DICTIONARY_DELTAS_MADE_TOTAL,
                "Responses compressed with a dictionary (dcb/dcz deltas made), by route and coding",
            ),
            hits: register(
                r,
                DICTIONARY_HITS_TOTAL,
                "Responses sent as a dcb/dcz delta, by route and coding",
            ),
            saved: register(
                r,
                DICTIONARY_SAVED_BYTES_TOTAL,
                "Bytes not sent thanks to dictionaries: the coding the client would have got otherwise, minus the delta",
            ),
        }
    }

    pub(super) fn route(&self, route: &str) -> DictionaryMetrics {
        let labels = RouteLabels {
            route: route.to_owned(),
        };
        let by_coding = |family: &Family<RouteCodingLabels, Counter>| {
            DictionaryCoding::ALL.map(|coding| {
                (
                    coding,
                    family.get_or_create_owned(&RouteCodingLabels {
                        route: route.to_owned(),
                        coding: coding.as_str(),
                    }),
                )
            })
        };
        DictionaryMetrics {
            offered: self.offered.get_or_create_owned(&labels),
            stored: self.stored.get_or_create_owned(&labels),
            evicted: self.evicted.get_or_create_owned(&labels),
            deltas_made: by_coding(&self.deltas_made),
            hits: by_coding(&self.hits),
            saved: self.saved.get_or_create_owned(&labels),
        }
    }
}

/// Handles for one route's dictionaries. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DictionaryMetrics {
    pub offered: Counter,
    pub stored: Counter,
    pub evicted: Counter,
    deltas_made: [(DictionaryCoding, Counter); 2],
    hits: [(DictionaryCoding, Counter); 2],
    pub saved: Counter,
}

impl DictionaryMetrics {
    pub fn delta_made(&self, coding: DictionaryCoding) {
        Self::of(&self.deltas_made, coding).inc();
    }

    pub fn hit(&self, coding: DictionaryCoding) {
        Self::of(&self.hits, coding).inc();
    }

    fn of(counters: &[(DictionaryCoding, Counter); 2], coding: DictionaryCoding) -> &Counter {
        // Both codings are always there (built from `DictionaryCoding::ALL`).
        &counters[usize::from(counters[0].0 != coding)].1
    }
}
