//! The baseline as a target: `sluice bench baseline-server` (the same binary, so it is pinned
//! and measured like the others), told the scenario by name; see [`crate::baseline`].

use std::net::SocketAddr;
use std::path::Path;

use super::process::Process;
use super::{Context, StartError};
use crate::scenario::{Scenario, Setup};

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    if scenario.setup == Setup::Direct {
        return Err(StartError::Failed(
            "a direct scenario has no server in front of the origin".into(),
        ));
    }
    let mut args = vec![
        "bench".to_string(),
        "baseline-server".into(),
        "--listen".into(),
        addr.to_string(),
        "--scenario".into(),
        scenario.name.clone(),
        "--workers".into(),
        ctx.workers.to_string(),
    ];
    if scenario.load.tls {
        args.extend([
            "--cert".into(),
            ctx.cert.display().to_string(),
            "--key".into(),
            ctx.key.display().to_string(),
        ]);
    }
    Process::spawn_pinned(
        "baseline",
        &ctx.server_cpus,
        &ctx.exe,
        &args,
        &dir.join("baseline.log"),
    )
    .map_err(StartError::Failed)
}
