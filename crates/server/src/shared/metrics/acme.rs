//! The metrics of automatic certificates (docs/acme.md): orders by result, and each
//! certificate's expiry. `docs/metrics.md` ("ACME") lists them with queries.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::register;

pub const ACME_ORDERS_TOTAL: &str = "sluice_acme_orders_total";
pub const ACME_CERTIFICATE_EXPIRY_SECONDS: &str = "sluice_acme_certificate_expiry_seconds";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OrderLabels {
    certificate: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    certificate: String,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct AcmeFamilies {
    orders: Family<OrderLabels, Counter>,
    expiry: Family<CertificateLabels, Gauge>,
}

impl AcmeFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            orders: register(
                r,
                ACME_ORDERS_TOTAL,
                "ACME orders by certificate (its first name) and result: issued, failed, or loaded (from the storage directory)",
            ),
            expiry: register(
                r,
                ACME_CERTIFICATE_EXPIRY_SECONDS,
                "Expiry of the certificate served (Unix time, seconds); 0 while the self-signed stand-in serves",
            ),
        }
    }

    pub(super) fn certificate(&self, certificate: &str) -> AcmeMetrics {
        let order = |result| {
            self.orders
                .get_or_create(&OrderLabels {
                    certificate: certificate.to_owned(),
                    result,
                })
                .clone()
        };
        AcmeMetrics {
            issued: order("issued"),
            failed: order("failed"),
            loaded: order("loaded"),
            expiry: self
                .expiry
                .get_or_create(&CertificateLabels {
                    certificate: certificate.to_owned(),
                })
                .clone(),
        }
    }
}

/// One certificate's series.
#[derive(Debug, Clone)]
pub struct AcmeMetrics {
    pub issued: Counter,
    pub failed: Counter,
    pub loaded: Counter,
    pub expiry: Gauge,
}
