//! Load drivers: the built-in hyper client ([`builtin`]) and h2load ([`h2load`]) when it is
//! installed. Both take a scenario's [`LoadSpec`] and return a [`Measurement`] without the
//! server-side figures (the runner adds those from the sampler).

pub mod builtin;
pub mod h2load;

use std::path::Path;

use crate::client::Endpoint;
use crate::model::Measurement;
use crate::scenario::{LoadSpec, Protocol};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverKind {
    Builtin,
    H2load,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Builtin => "builtin",
            DriverKind::H2load => "h2load",
        }
    }
}

/// One load run of `spec` against `endpoint`; `work_dir` holds the request body file h2load
/// reads.
pub fn run(
    kind: DriverKind,
    spec: &LoadSpec,
    endpoint: &Endpoint,
    load_cpus: &str,
    work_dir: &Path,
) -> Result<Measurement, String> {
    match kind {
        DriverKind::Builtin => builtin::run(spec, endpoint, load_cpus),
        DriverKind::H2load => {
            let args = h2load_args(spec, work_dir)?;
            h2load::run(&args, &endpoint.base_url(), load_cpus)
        }
    }
}

/// The h2load options for `spec`; a request body is written to a file (h2load's `-d`).
pub fn h2load_args(spec: &LoadSpec, work_dir: &Path) -> Result<h2load::H2loadArgs, String> {
    let body_file = match &spec.body {
        Some(body) => {
            let path = work_dir.join("request-body.bin");
            std::fs::write(&path, body).map_err(|e| format!("writing {}: {e}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    Ok(h2load::H2loadArgs {
        protocol: match spec.protocol {
            Protocol::H1 => h2load::Protocol::Http1,
            Protocol::H2 => h2load::Protocol::Http2,
            Protocol::H3 => return Err("h2load has no HTTP/3: use the built-in driver".into()),
        },
        tls: spec.tls,
        method: spec.method.to_string(),
        path: spec.path.clone(),
        headers: spec.headers.clone(),
        body_file,
        clients: spec.clients,
        streams_per_client: spec.streams,
        requests: spec.requests,
        duration: None,
    })
}
