//! `sluice origin`: the demo origin (seed 003's JSON APIs, a request echo, a chunked stream) on
//! TCP and/or a unix socket.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sluice_server::ops::lifecycle::{fail, with_pool_runtime};

use crate::CommonArgs;

#[derive(Args)]
pub struct OriginArgs {
    /// TCP address to listen on.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Unix socket path to listen on (removed first if it is a stale socket).
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Adds `X-Origin: NAME` to every response, to see which origin answered.
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: OriginArgs) -> ExitCode {
    if args.listen.is_none() && args.unix.is_none() {
        return fail("give --listen ADDR and/or --unix PATH");
    }
    let (level, workers) = (args.common.log_level.clone(), args.common.workers);
    // The lab's stand-in application, not the server under test: tokio's work-stealing pool,
    // so `--workers N` origins use N cores without a hand-over of their own.
    with_pool_runtime(&level, workers, |mut signals| async move {
        let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions { name: args.name });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        if let Some(addr) = args.listen {
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => return fail(&format!("--listen {addr}: {e}")),
            };
            println!(
                "origin listening on http://{}",
                listener.local_addr().unwrap_or(addr)
            );
            tasks.push(tokio::spawn(
                origin
                    .clone()
                    .serve_tcp(listener, signalled(stopped.clone())),
            ));
        }
        if let Some(path) = args.unix {
            let listener = match bind_unix(&path) {
                Ok(l) => l,
                Err(e) => return fail(&format!("--unix {}: {e}", path.display())),
            };
            println!("origin listening on unix:{}", path.display());
            tasks.push(tokio::spawn(
                origin
                    .clone()
                    .serve_unix(listener, signalled(stopped.clone())),
            ));
        }
        signals
            .stop("the origin has no config file to reload")
            .await;
        let _ = stop.send(true);
        for task in tasks {
            let _ = task.await;
        }
        ExitCode::SUCCESS
    })
}

pub async fn signalled(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Bind a unix socket, replacing a stale socket file (but never another kind of file).
fn bind_unix(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_socket()
    {
        std::fs::remove_file(path)?;
    }
    tokio::net::UnixListener::bind(path)
}
