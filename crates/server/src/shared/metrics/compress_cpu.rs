//! The metrics of CPU-adaptive compression (`max_cpu`, `docs/performance.md`): the level each
//! algorithm compresses new responses at on such a route, and the process's CPU share the
//! sampler last measured (what `max_cpu` is compared with). Responses sent as identity because
//! of the CPU are counted by `sluice_compress_responses_total{decision="cpu"}`.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::RouteAlgorithmLabels;
use super::register;

pub const COMPRESS_LEVEL: &str = "sluice_compress_level";
pub const PROCESS_CPU_PERCENT: &str = "sluice_process_cpu_percent";

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct CompressCpuFamilies {
    pub(super) level: Family<RouteAlgorithmLabels, Gauge>,
    pub(super) cpu_percent: Gauge,
}

impl CompressCpuFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        let cpu_percent = Gauge::default();
        r.register(
            PROCESS_CPU_PERCENT,
            "CPU used by the process over the last sample, in percent of its worker threads (what max_cpu compares with; sampled only while a route has max_cpu)",
            cpu_percent.clone(),
        );
        Self {
            level: register(
                r,
                COMPRESS_LEVEL,
                "Level new on-the-fly responses are compressed at on routes with max_cpu, by algorithm; -1 while the CPU keeps them identity",
            ),
            cpu_percent,
        }
    }
}
