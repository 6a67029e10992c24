//! Limits on what a client controls: connections (`connections.rs`, used by the accept loop)
//! and, in the pipeline's request phase, the request itself.

mod connections;

pub use connections::{ConnectionPermit, ConnectionSlots};
