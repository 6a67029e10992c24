//! The metrics of the HTTP versions: requests by listener and protocol (HTTP/1.x, HTTP/2,
//! HTTP/3: the front ends count them, nothing above the connection layer knows which it was)
//! and QUIC's address validations (Retry packets sent under a handshake flood).

use http::Version;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::labels::ListenerLabels;
use super::register;

pub const PROTOCOL_REQUESTS_TOTAL: &str = "sluice_protocol_requests_total";
pub const QUIC_RETRIES_TOTAL: &str = "sluice_quic_retries_total";

/// Every name of this file, for [`super::ALL_NAMES`].
pub const NAMES: [&str; 2] = [PROTOCOL_REQUESTS_TOTAL, QUIC_RETRIES_TOTAL];

/// The `protocol` label values: ALPN names, as `protocols = [...]` spells them; HTTP/1.0 is
/// counted with HTTP/1.1.
const PROTOCOLS: [&str; 3] = ["http/1.1", "h2", "h3"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerProtocolLabels {
    listener: String,
    protocol: &'static str,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct ProtocolFamilies {
    requests: Family<ListenerProtocolLabels, Counter>,
    quic_retries: Family<ListenerLabels, Counter>,
}

impl ProtocolFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            requests: register(
                r,
                PROTOCOL_REQUESTS_TOTAL,
                "Requests received, by listener and HTTP version (ALPN name)",
            ),
            quic_retries: register(
                r,
                QUIC_RETRIES_TOTAL,
                "QUIC Retry packets sent to validate a client's address (under a handshake flood)",
            ),
        }
    }

    pub(super) fn listener(&self, listener: &str) -> ProtocolMetrics {
        ProtocolMetrics {
            requests: PROTOCOLS.map(|protocol| {
                self.requests.get_or_create_owned(&ListenerProtocolLabels {
                    listener: listener.to_owned(),
                    protocol,
                })
            }),
            quic_retries: self.quic_retries.get_or_create_owned(&ListenerLabels {
                listener: listener.to_owned(),
            }),
        }
    }
}

/// One listener's handles.
#[derive(Clone, Debug)]
pub struct ProtocolMetrics {
    requests: [Counter; 3],
    quic_retries: Counter,
}

impl ProtocolMetrics {
    /// A request arrived in `version`.
    pub fn request(&self, version: Version) {
        let index = match version {
            Version::HTTP_2 => 1,
            Version::HTTP_3 => 2,
            _ => 0,
        };
        self.requests[index].inc();
    }

    /// A Retry was sent.
    pub fn quic_retry(&self) {
        self.quic_retries.inc();
    }
}
