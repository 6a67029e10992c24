//! sluice's configuration: one TOML file, parsed into raw serde types (`raw`), then validated
//! into the typed [`Config`] ([`model`]). Validation collects *every* error, each with its file,
//! line, column and a hint, so `sluice check` can print them all at once.
//!
//! Start at [`load`] / [`parse_str`]; the pipeline is in `parse.rs`, the checks in `validate/`.
//! This crate reads files and nothing else: no sockets, no runtime, no TLS library.

pub mod diagnostic;
pub mod model;
mod parse;
mod path;
mod raw;
mod report;
mod schema;
mod source;
mod units;
mod validate;

use std::path::Path;

pub use diagnostic::{Diagnostic, Diagnostics, Severity, Snippet};
pub use model::*;
pub use units::{parse_duration, parse_size};

/// Reads and validates the configuration file at `path`.
pub fn load(path: &Path) -> Result<Config, Diagnostics> {
    check(path).map(|(config, _warnings)| config)
}

/// [`load`], with the warnings of a valid file: settings that work but should not run in
/// production (`sluice check` prints them; `serve` logs them).
pub fn check(path: &Path) -> Result<(Config, Diagnostics), Diagnostics> {
    match std::fs::read_to_string(path) {
        Ok(source) => parse::parse(&source, path),
        Err(error) => {
            let hint = match error.kind() {
                std::io::ErrorKind::NotFound => Some(
                    "check the path; examples/sluice.toml is a documented starting point".into(),
                ),
                std::io::ErrorKind::PermissionDenied => Some("check the file's permissions".into()),
                std::io::ErrorKind::InvalidData => Some("the file must be UTF-8 text".into()),
                std::io::ErrorKind::IsADirectory => {
                    Some("name the TOML file, not its directory".into())
                }
                _ => None,
            };
            let message = format!("cannot read the config file: {error}");
            Err(Diagnostic::whole_file(path, message, hint).into())
        }
    }
}

/// Validates configuration text. `file` is only used in diagnostics and, through its directory,
/// as the base of relative paths (the current directory when it has none).
pub fn parse_str(source: &str, file: &Path) -> Result<Config, Diagnostics> {
    parse::parse(source, file).map(|(config, _warnings)| config)
}

#[cfg(test)]
mod proptest;
