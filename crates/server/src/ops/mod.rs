//! Operations: the running server as a whole. Start-up, reload and shutdown (`running/`), the
//! process around it (`lifecycle/`: runtimes, signals, the pid file, reload from the file) and
//! the admin listener (`admin.rs`: metrics, purge).
//!
//! The top layer: it may import `net`, `pipeline`, `features` and `shared`; no layer imports it
//! (`tests/it/layers.rs` checks both).

pub mod acme;
pub mod admin;
pub mod lifecycle;
pub mod running;
pub mod status;
