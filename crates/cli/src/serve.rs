//! `sluice serve`, `sluice check`: a configuration file, validated as `sluice check` reads it,
//! then run until SIGTERM/SIGINT (SIGHUP reloads it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice_config::Config;
use sluice_server::ops::lifecycle;

/// Errors fail the check (exit 1); warnings are printed and pass.
pub fn check(path: &Path) -> ExitCode {
    match sluice_config::check(path) {
        Ok((config, warnings)) => {
            if !warnings.is_empty() {
                eprintln!("{warnings}\n");
            }
            println!(
                "{}: ok ({} listener(s), {} route(s), {} upstream(s))",
                path.display(),
                config.listeners.len(),
                config.routes.len(),
                config.upstreams.len()
            );
            for note in crate::fleet_notes::notes(&config) {
                println!("  {note}");
            }
            ExitCode::SUCCESS
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            ExitCode::from(1)
        }
    }
}

/// Run a server until SIGTERM/SIGINT, then drain; SIGHUP reloads `source` when there is one.
pub fn run(config: Config, source: Option<PathBuf>) -> ExitCode {
    lifecycle::serve(config, source)
}
