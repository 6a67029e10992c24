//! The `sluice` binary: see `sluice --help`. One file per command; each parses its own
//! arguments (clap) and hands the library (`sluice_server`) a typed config or a task.
//!
//! Command names are a contract with users and docs: `serve`, `check`, `reload`, `file-server`,
//! `origin`, `cert`, `reverse-proxy`, `demo`, `precompress`, `bench`, `import`, `completions`,
//! `man`. The process lifecycle (runtime, signals, drain, reload, pid file) is the library's
//! `ops::lifecycle`.
//!
//! The allocator is mimalloc rather than glibc's malloc. A proxied 340 KB response passes
//! through buffers of up to a few hundred KB that are freed as soon as the client has them;
//! glibc gave that memory back to the kernel (heap trimming) and faulted it in again, zeroed, for
//! the next response: 13 page faults per request, and the copies from the kernel went to cold
//! pages. mimalloc keeps freed pages for reuse: 0.7 page faults per request and 15–20% less CPU
//! per proxied response (docs/performance.md, "Allocator"). Built with `no_thp`: mimalloc
//! otherwise asks for transparent huge pages on its arenas, and the idle process then held
//! 15 MB instead of 9 MB. The library and its tests keep the system allocator; only the binary
//! sets this. The `system-alloc` feature leaves it out, for heap profilers that watch `malloc`
//! (heaptrack: `docs/performance.md`, "Memory").

mod cert;
mod demo;
mod fleet_notes;
mod import;
mod origin;
mod package;
mod precompress;
mod quick;
mod serve;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use sluice_server::ops::lifecycle::fail;

#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A reverse proxy and web server that makes compression, HTTP/2, caching and load balancing fast"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server from a configuration file.
    Serve {
        /// The TOML configuration file.
        #[arg(short, long, default_value = "sluice.toml")]
        config: std::path::PathBuf,
    },
    /// Validate a configuration file and print every error with its line and column.
    Check {
        /// The TOML configuration file.
        #[arg(value_name = "FILE", default_value = "sluice.toml")]
        config: std::path::PathBuf,
        /// The same file given as `serve` takes it (`sluice check -c FILE` works too).
        #[arg(
            short = 'c',
            long = "config",
            value_name = "FILE",
            conflicts_with = "config"
        )]
        config_flag: Option<std::path::PathBuf>,
    },
    /// Reload a running `sluice serve` without dropping a connection: checks the file, then sends
    /// SIGHUP to the process named in its `[server] pid_file`.
    Reload {
        /// The TOML configuration file the server runs (`serve -c FILE`).
        #[arg(short, long, default_value = "sluice.toml")]
        config: std::path::PathBuf,
    },
    /// Serve a directory, no configuration file needed.
    FileServer(quick::FileServerArgs),
    /// Run the demo origin (JSON APIs, request echo, chunked stream) on TCP and/or a unix socket.
    Origin(origin::OriginArgs),
    /// Write a development CA and a certificate for some host names.
    Cert(cert::CertArgs),
    /// Proxy to one or more upstream servers, no configuration file needed.
    ReverseProxy(quick::ReverseProxyArgs),
    /// Start two demo origins and a balancing proxy in front of them, and print what to try.
    Demo(demo::DemoArgs),
    /// The lab: run the seeds' experiments against sluice, nginx and a bare hyper baseline.
    Bench(sluice_bench::BenchCommand),
    /// Write .gz/.br/.zst files beside the compressible files of a directory, for static
    /// routes with `precompressed` on.
    Precompress(precompress::PrecompressArgs),
    /// Translate an nginx configuration into a commented sluice configuration.
    ///
    /// Every directive that is not translated is listed with its file and line, on stderr and
    /// at the top of the output (docs/import.md). Exit status: 0 all translated, 1 some
    /// directives left out, 2 the nginx configuration cannot be read (nothing written), 3 the
    /// output was written but does not pass `sluice check`.
    Import(import::ImportArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(package::CompletionsArgs),
    /// Print the manual page (troff), or write one page per command with `--out-dir`.
    Man(package::ManArgs),
}

#[derive(Args, Clone)]
/// Flags every serving command takes.
pub struct CommonArgs {
    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Diagnostics filter, e.g. `info` or `sluice=debug`.
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

impl Command {
    /// Whether the command writes its output and exits (rather than serving or driving load).
    fn prints_and_exits(&self) -> bool {
        use sluice_bench::BenchSubcommand;
        match self {
            Command::Check { .. } | Command::Reload { .. } | Command::Cert(_) => true,
            Command::Precompress(_) | Command::Import(_) => true,
            Command::Completions(_) | Command::Man(_) => true,
            Command::Bench(bench) => matches!(
                bench.command,
                BenchSubcommand::List | BenchSubcommand::Report { .. }
            ),
            Command::Serve { .. }
            | Command::FileServer(_)
            | Command::Origin(_)
            | Command::ReverseProxy(_)
            | Command::Demo(_) => false,
        }
    }
}

/// Parse the command line and run it.
fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.prints_and_exits() {
        // Its reader may go away first (`sluice bench list | head`): end quietly, by SIGPIPE, as
        // every Unix tool does, instead of panicking on the failed print. Only these commands:
        // in a server a write to a socket whose peer has gone is an error to handle, not the
        // end of the process (Rust ignores SIGPIPE for that reason).
        sigpipe::reset();
    }
    match cli.command {
        Command::Serve { config: path } => match sluice_config::check(&path) {
            Ok((config, warnings)) => {
                if !warnings.is_empty() {
                    eprintln!("{warnings}");
                }
                serve::run(config, Some(path))
            }
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                ExitCode::from(2)
            }
        },
        Command::Check {
            config,
            config_flag,
        } => serve::check(&config_flag.unwrap_or(config)),
        Command::Reload { config } => sluice_server::ops::lifecycle::request_reload(&config),
        Command::FileServer(args) => match quick::file_server_config(args) {
            Ok(config) => serve::run(config, None),
            Err(message) => fail(&message),
        },
        Command::Origin(args) => origin::run(args),
        Command::Cert(args) => cert::write(&args),
        Command::ReverseProxy(args) => match quick::reverse_proxy_config(args) {
            Ok(config) => serve::run(config, None),
            Err(message) => fail(&message),
        },
        Command::Demo(args) => demo::run(args),
        Command::Bench(cmd) => sluice_bench::main(cmd),
        Command::Precompress(args) => precompress::run(args),
        Command::Import(args) => import::run(&args),
        Command::Completions(args) => package::completions(&args, Cli::command()),
        Command::Man(args) => package::man(&args, Cli::command()),
    }
}
