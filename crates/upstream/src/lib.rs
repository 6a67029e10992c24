//! The upstream side of the proxy: a [`Group`] of [`Peer`]s with their health, the balancing
//! policies that pick one per request, and the connectors (TCP, unix; TLS in [`tls`], PROXY
//! protocol headers in [`proxy_protocol`]) and keep-alive pool that reach them.
//!
//! Start reading at [`group`] (what the proxy calls), then [`peer`] and [`balance`].

pub mod balance;
pub mod client;
pub mod connect;
pub mod discovery;
pub mod group;
pub mod health;
pub mod limit;
pub mod peer;
pub mod proxy_protocol;
pub mod tls;

pub use group::{Change, Group, PickContext, Picked, Resolved};
pub use limit::{ConnLimit, ConnSlot, QueueRefusal};
pub use peer::{InFlight, Peer};
