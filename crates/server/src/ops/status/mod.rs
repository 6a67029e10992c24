//! The live status page of the admin listener: `GET /status` (one HTML page, inline CSS and
//! script, served with a strict Content-Security-Policy) and `GET /status.json` (the same data,
//! schema `sluice-status/1`, documented in `docs/status.md`).
//!
//! Nothing here counts anything. Counters, gauges and histograms are read back from the metrics
//! exposition ([`exposition`]: what Prometheus scrapes, at the same instant); upstream health
//! comes from the balancer's own peers (the state the `sluice_upstream_server_healthy` gauge
//! reads, split into its causes); certificates from the files the listeners loaded; the config's
//! load time and last reload from the running server. Rates are not computed here: a reader
//! takes two samples and divides (the page does, every second).

pub mod certs;
pub mod exposition;
mod snapshot;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::features::upstreams::Upstreams;
pub use certs::Certificate;
pub use snapshot::snapshot;

/// The `schema` field of `/status.json`; bumped when a field changes meaning or goes away
/// (adding fields does not bump it).
pub const SCHEMA: &str = "sluice-status/1";

/// A listener as the status page shows it.
#[derive(Debug, Clone)]
pub struct ListenerInfo {
    pub name: String,
    pub address: std::net::SocketAddr,
    pub tls: bool,
    /// ALPN-style names of what it speaks: `http/1.1`, `h2`, `h3`.
    pub protocols: Vec<&'static str>,
}

/// What the running config is made of, replaced whole when a config is put in force.
#[derive(Default)]
pub struct View {
    pub upstreams: Upstreams,
    pub listeners: Vec<ListenerInfo>,
    pub certificates: Vec<Certificate>,
    /// Cache zones with a shared (Redis) tier, by name.
    pub shared_zones: Vec<String>,
}

/// How the last reload ended.
#[derive(Debug, Clone)]
pub struct ReloadResult {
    pub at: SystemTime,
    /// `None`: it was put in force; `Some(why)`: refused, the previous config serves on.
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
struct ConfigInfo {
    source: Option<PathBuf>,
    loaded_at: SystemTime,
    last_reload: Option<ReloadResult>,
}

/// The state the status page reads besides the metrics; one per running server.
pub struct Status {
    started_at: SystemTime,
    view: ArcSwap<View>,
    config: Mutex<ConfigInfo>,
}

pub type SharedStatus = Arc<Status>;

impl Status {
    pub fn new() -> SharedStatus {
        let now = SystemTime::now();
        Arc::new(Status {
            started_at: now,
            view: ArcSwap::from_pointee(View::default()),
            config: Mutex::new(ConfigInfo {
                source: None,
                loaded_at: now,
                last_reload: None,
            }),
        })
    }

    /// A config was put in force (at start-up or by a reload).
    pub fn config_loaded(&self, view: View, reload: bool) {
        self.view.store(Arc::new(view));
        let now = SystemTime::now();
        let mut config = self.config();
        config.loaded_at = now;
        if reload {
            config.last_reload = Some(ReloadResult {
                at: now,
                error: None,
            });
        }
    }

    /// A reload was refused; the running config goes on serving.
    pub fn reload_refused(&self, why: &str) {
        self.config().last_reload = Some(ReloadResult {
            at: SystemTime::now(),
            error: Some(why.to_owned()),
        });
    }

    /// The file the config was read from (the serving commands know it; tests may not).
    pub fn set_source(&self, path: PathBuf) {
        self.config().source = Some(path);
    }

    fn config(&self) -> std::sync::MutexGuard<'_, ConfigInfo> {
        self.config.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Status").finish_non_exhaustive()
    }
}

/// Seconds since the Unix epoch, with milliseconds (what JavaScript's `Date` takes × 1000).
fn unix_seconds(t: SystemTime) -> f64 {
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    d as f64 / 1000.0
}

/// The page and the `Content-Security-Policy` it is served with: no source but itself for
/// `fetch`, and only its own inline style and script, named by hash (CSP Level 3 `'sha256-…'`),
/// so nothing injected into it could run. Built once.
pub fn page() -> &'static (String, String) {
    static PAGE: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| {
        const HTML: &str = include_str!("page.html");
        const STYLE: &str = include_str!("page.css");
        const SCRIPT: &str = include_str!("page.js");
        let hash = |text: &str| {
            use base64::Engine as _;
            use sha2::Digest as _;
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(text))
        };
        let html = HTML
            .replace("{{STYLE}}", STYLE)
            .replace("{{SCRIPT}}", SCRIPT);
        let csp = format!(
            "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; \
             connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
            hash(SCRIPT),
            hash(STYLE)
        );
        (html, csp)
    })
}
