//! The process lifecycle of the commands that serve: diagnostics and the runtime, signals
//! (SIGTERM/SIGINT drain, a second one exits, SIGHUP reloads), the pid file, and reload: read
//! and validate the file exactly as `sluice check` does, then [`RunningServer::reload`]; a bad
//! file is refused with `check`'s diagnostics in the log and the old config goes on serving.
//!
//! `cli.rs` parses arguments and calls in here; `docs/operations.md` is the operator's view.

mod pid_file;
mod signals;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice_config::Config;

use crate::net::workers::{Runtimes, Workers};
use crate::ops::running::{ReloadSummary, RunningServer};
pub use pid_file::PidFile;
pub use signals::{Event, Signals};

/// Why a reload did not happen; the old config goes on serving.
#[derive(Debug)]
pub enum ReloadRefused {
    /// The file is not valid: `sluice check`'s diagnostics, as it prints them.
    Invalid(sluice_config::Diagnostics),
    /// Valid, but could not be put in force (a port in use, an unreadable certificate, ...).
    Failed(String),
}

impl std::fmt::Display for ReloadRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(diagnostics) => write!(f, "{diagnostics}"),
            Self::Failed(message) => f.write_str(message),
        }
    }
}

/// Read `path` as `sluice check` does and, if it is valid, put it in force on `server`.
/// Logs `reloaded ...` with what changed, or `reload refused ...` with why.
pub async fn reload(
    server: &RunningServer,
    path: &Path,
) -> Result<(Config, ReloadSummary), ReloadRefused> {
    let shown = path.display();
    let config = match sluice_config::check(path) {
        Ok((config, warnings)) => {
            if !warnings.is_empty() {
                tracing::warn!("{shown}: valid, with warnings\n{warnings}");
            }
            config
        }
        Err(diagnostics) => {
            tracing::error!(
                "reload refused: {shown} is not valid; the running config goes on serving\n{diagnostics}"
            );
            server
                .status()
                .reload_refused(&format!("{shown} is not valid:\n{diagnostics}"));
            return Err(ReloadRefused::Invalid(diagnostics));
        }
    };
    match server.reload(&config).await {
        Ok(summary) => {
            tracing::info!("reloaded {shown}: {summary}");
            Ok((config, summary))
        }
        Err(e) => {
            tracing::error!("reload refused: {e}; the running config goes on serving");
            Err(ReloadRefused::Failed(e.0))
        }
    }
}

/// `sluice reload`: check the file, then send SIGHUP to the process named in its
/// `[server] pid_file`.
pub fn request_reload(path: &Path) -> ExitCode {
    let config = match sluice_config::load(path) {
        Ok(config) => config,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            eprintln!("not reloading: the running server would refuse this file; fix it first");
            return ExitCode::from(1);
        }
    };
    let Some(pid_path) = config.server.pid_file else {
        return fail(&format!(
            "{} has no `[server] pid_file`, so the running process cannot be found: add \
             `pid_file = \"/run/sluice.pid\"` under [server] and restart, or send SIGHUP \
             yourself (kill -HUP PID)",
            path.display()
        ));
    };
    match pid_file::signal_reload(&pid_path) {
        Ok(pid) => {
            println!(
                "sent SIGHUP to sluice (pid {pid}); its log says `reloaded` or `reload refused`"
            );
            ExitCode::SUCCESS
        }
        Err(message) => fail(&message),
    }
}

/// Serve `config` until SIGTERM/SIGINT, then drain. `source` is the file it came from: SIGHUP
/// reads it again; without one (the quick commands) SIGHUP is logged and ignored.
pub fn serve(config: Config, source: Option<PathBuf>) -> ExitCode {
    let (level, workers) = (config.log.level.clone(), config.server.workers);
    // Each connection is a descriptor, and so is each file the static memory cache keeps open
    // for `sendfile` (`sluice_core::file_bytes` takes at most a quarter of the limit).
    let descriptors = sluice_core::open_files::raise_to_hard();
    with_runtime(&level, workers, |signals, workers| {
        match descriptors {
            Ok(Some((from, to))) => {
                tracing::debug!("open files limit raised from {from} to {to} (the hard limit)");
            }
            Ok(None) => {}
            Err(why) => tracing::warn!("{why}"),
        }
        run(config, source, signals, workers)
    })
}

async fn run(
    mut config: Config,
    source: Option<PathBuf>,
    mut signals: Signals,
    workers: Workers,
) -> ExitCode {
    // Before the listeners: once sluice says it is listening, `sluice reload` finds it. Removed
    // again (dropped) if start-up fails.
    let mut pid = match write_pid_file(config.server.pid_file.as_deref()) {
        Ok(pid) => pid,
        Err(message) => return fail(&message),
    };
    let server = match crate::ops::running::start_on(&config, workers).await {
        Ok(server) => server,
        Err(e) => {
            drop(pid);
            return fail(&e.to_string());
        }
    };
    if let Some(path) = &source {
        server.status().set_source(path.clone());
    }
    while signals.next().await == Event::Reload {
        let Some(path) = &source else {
            tracing::warn!("SIGHUP ignored: started from command-line flags, no file to reload");
            continue;
        };
        if let Ok((new, _)) = reload(&server, path).await {
            if new.server.pid_file != config.server.pid_file {
                // The old file goes (when dropped) once the new one is written.
                match write_pid_file(new.server.pid_file.as_deref()) {
                    Ok(new_pid) => pid = new_pid,
                    Err(message) => tracing::warn!("{message}"),
                }
            }
            config = new;
        }
    }
    let timeout = config.server.shutdown_timeout;
    tracing::info!("shutting down: draining in-flight requests (up to {timeout:?})");
    let code = tokio::select! {
        drained = server.shutdown(timeout) => {
            if !drained {
                tracing::warn!("shutdown timeout reached with requests still in flight");
            }
            ExitCode::SUCCESS
        }
        _ = signals.stop("shutting down") => {
            tracing::warn!("second signal: exiting without waiting");
            ExitCode::from(130)
        }
    };
    drop(pid);
    code
}

fn write_pid_file(path: Option<&Path>) -> Result<Option<PidFile>, String> {
    path.map(|path| {
        PidFile::create(path).map_err(|e| format!("writing the pid file {}: {e}", path.display()))
    })
    .transpose()
}

pub fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Set up diagnostics and `workers` single-threaded runtimes (`workers.rs` says why), install
/// the signal handlers, and run `serve` on the first with them: the shared frame of every
/// command that serves until a signal. `serve` hands connections to the others through the
/// [`Workers`] it is given; the other threads stop once it returns.
pub fn with_runtime<F, Fut>(log_level: &str, workers: Option<usize>, serve: F) -> ExitCode
where
    F: FnOnce(Signals, Workers) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    init_tracing(log_level);
    let runtimes = match Runtimes::start(workers) {
        Ok(runtimes) => runtimes,
        Err(e) => return fail(&format!("starting the worker threads: {e}")),
    };
    let workers = runtimes.workers.clone();
    runtimes.main.block_on(async move {
        match Signals::install() {
            Ok(signals) => serve(signals, workers).await,
            Err(e) => fail(&format!("installing signal handlers: {e}")),
        }
    })
}

/// [`with_runtime`] on tokio's work-stealing runtime with `workers` threads, for commands
/// whose tasks do not come from sluice's accept loops (the demo origin).
pub fn with_pool_runtime<F, Fut>(log_level: &str, workers: Option<usize>, serve: F) -> ExitCode
where
    F: FnOnce(Signals) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    init_tracing(log_level);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(n.max(1));
    }
    let runtime = match builder.enable_all().thread_name("sluice-origin").build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("starting the runtime: {e}")),
    };
    runtime.block_on(async move {
        match Signals::install() {
            Ok(signals) => serve(signals).await,
            Err(e) => fail(&format!("installing signal handlers: {e}")),
        }
    })
}
