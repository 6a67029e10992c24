//! sluice's response cache (RFC 9111, <https://www.rfc-editor.org/rfc/rfc9111>).
//!
//! The pieces, each in its own module, with dependencies pointing one way (top uses bottom):
//!
//! - [`key`]: the primary cache key (scheme, host, path, query by default; configurable parts).
//! - [`vary`]: the secondary key from a response's `Vary`, with `Accept-Encoding` normalised to the
//!   coding sluice would serve.
//! - [`meta`]: what is stored beside a body (status, headers, request/response times), and its
//!   byte encoding for the storage tiers.
//! - [`policy`]: RFC 9111's rules: storable or not, freshness lifetime, age, what a request's
//!   directives allow, revalidation, invalidation. Pure functions over headers and times.
//! - [`lock`]: request collapsing: one upstream request per key, the others wait and read the body
//!   as it arrives.
//! - [`storage`]: where bytes live: the [`storage::Storage`] trait, the memory tier, the disk tier.
//!
//! This crate knows no sockets (but the Redis client of [`storage::shared`], a fleet's shared
//! tier), no config file format and no server: `sluice` (crates/server)
//! converts a route's `cache` option into the settings here and calls it from the pipeline.

pub mod key;
pub mod lock;
pub mod meta;
pub mod policy;
pub mod storage;
pub mod vary;
pub mod zone;

#[cfg(test)]
mod proptest_config;
