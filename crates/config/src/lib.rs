//! sluice's configuration: one TOML file, parsed into raw serde types ([`raw`]), then validated
//! into the typed [`Config`] ([`model`]). Validation collects *every* error, each with its file,
//! line, column and a hint, so `sluice check` can print them all at once.

pub mod model;

pub use model::*;
