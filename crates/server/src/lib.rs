//! The sluice server: listeners, TLS, connection serving, routing and the request pipeline.
//! The `sluice` binary and its commands are the `sluice` crate (`crates/cli`).
//!
//! Four layers, each a folder, each importing only the ones below it (`tests/it/layers.rs` checks
//! the `use` lines; the crate README draws it):
//! - [`ops`]: the running server: start-up, reload and shutdown ([`ops::running::start`]), the
//!   process's lifecycle, the admin listener;
//! - [`net`]: connections, from the accepted socket to a request ([`net::conn`]);
//! - [`pipeline`]: one request, the only place that orders its phases ([`pipeline::Pipeline`]);
//! - [`features`]: what routes do: proxy, tunnels, cache, compression, rate limits;
//!
//! and [`shared`] beneath them all: the request's client, metrics, the CPU sampler, the upgrade
//! link.

pub mod features;
pub mod net;
pub mod ops;
pub mod pipeline;
pub mod shared;

pub use ops::running::{
    BoundListener, Changes, ReloadSummary, RunningServer, StartError, start, start_on,
};
