//! What every layer reads or writes, so that none of them imports another to get it: the
//! request's client (`client.rs`: made by the connection, read by the pipeline and the proxy),
//! metrics (`metrics/`: each layer counts its own events), the process's CPU share
//! (`cpu.rs`: sampled by `ops`, read by compression's `max_cpu`) and what an upgraded request
//! knows of its connection (`upgrade.rs`: set by the connection, used by the tunnel).
//!
//! The bottom layer: it imports no other folder of the crate (`tests/it/layers.rs`).

pub mod acme;
pub mod client;
pub mod cpu;
mod error_page;
pub mod metrics;
pub mod request;
pub mod upgrade;

pub use error_page::error_page;
