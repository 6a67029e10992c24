//! `sluice bench`: the lab that reproduces the seeds' tables (DESIGN.md capability 18).
//!
//! A run is: for each selected [`scenario`], for each target (sluice, nginx, HAProxy, Caddy,
//! Varnish, baseline), start the target pinned to the server CPUs with a config generated for
//! the scenario, run the scenario's correctness check, then its load (built-in driver or
//! h2load) N times while sampling the server's CPU and memory from /proc, and record a [`model::ScenarioResult`]. The report
//! renders every result as tables shaped like the seeds' own, SVG charts and `results.json`.
//!
//! - [`model`]: the data every part shares (scenario descriptions, measurements, the report).
//! - [`scenario`]: the experiments as data; [`fixtures`]: the bytes they move;
//!   [`expected`]: what a correct server answers; [`check`]: the check before the load.
//! - [`target`]: sluice, nginx, HAProxy, Caddy, Varnish and the [`baseline`] as processes; [`driver`]: the load;
//!   [`client`]: HTTP connections; [`pin`]: CPU pinning.
//! - [`runner`]: the loop over scenarios and targets; [`sampler`]: CPU and memory of the
//!   server's process tree from /proc; [`machine`]: the report header's machine;
//!   [`report`]: `results.json`, `report.md` and SVG charts.

pub mod baseline;
pub mod check;
pub mod client;
pub mod dictionaries;
pub mod driver;
pub mod expected;
pub mod fixtures;
pub mod machine;
pub mod model;
pub mod pin;
pub mod report;
pub mod runner;
pub mod sampler;
pub mod scenario;
pub mod syscalls;
pub mod target;
pub mod zoo;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::driver::DriverKind;
use crate::target::TargetKind;

/// `sluice bench ...`.
#[derive(Debug, Args)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub command: BenchSubcommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchSubcommand {
    /// List the scenarios and their groups.
    List,
    /// Run scenarios against the targets and write the report.
    Run(RunArgs),
    /// Re-render the report of an earlier run from its results.json.
    Report {
        /// The run's output directory.
        dir: PathBuf,
    },
    /// The baseline server (started by `bench run`).
    #[command(hide = true)]
    BaselineServer(baseline::BaselineArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Scenario names or groups (`sluice bench list`); all when none.
    #[arg(value_name = "SCENARIO|GROUP")]
    pub selectors: Vec<String>,
    /// Servers to measure, comma-separated (a peer that is not installed, or cannot do what a
    /// scenario needs, gets a "not supported" row).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sluice,nginx,haproxy,caddy,varnish,baseline"
    )]
    pub targets: Vec<TargetKind>,
    /// Load generators, comma-separated: each measures every row in turn (h2load as a second
    /// client beside the built-in one, so no verdict rests on one client).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "builtin")]
    pub driver: Vec<DriverKind>,
    /// Origins behind the proxy, comma-separated: sluice's demo origin, Go's net/http, Node.js,
    /// a Python ASGI app (uvicorn). Each proxied row runs once per origin; an origin whose
    /// runtime is missing gets "not supported" rows saying what to install.
    #[arg(
        long = "origin",
        value_enum,
        value_delimiter = ',',
        default_value = "sluice"
    )]
    pub origins: Vec<zoo::OriginKind>,
    /// Longest load run in seconds: a run stops at its request count or at this, whichever
    /// comes first (the built-in driver; h2load runs its count), so slow rows cost no more
    /// than fast ones and the full run stays within minutes. Not applied with --quick.
    #[arg(long, default_value_t = 0.3)]
    pub run_secs: f64,
    /// After the measured runs of each proxied row, one more run with `strace -c -f` attached
    /// to the server (sluice and the peers), for system calls per request. Slow: strace stops
    /// the server on every call, so the run's own figures are not kept.
    #[arg(long)]
    pub syscalls: bool,
    /// A tenth of the requests and one run per measurement (the suite in a few minutes).
    #[arg(long)]
    pub quick: bool,
    /// Load runs per measurement (the report shows the median); 1 with --quick.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Output directory (default: `target/bench/<UTC timestamp>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// CPUs the server under test is pinned to (taskset list).
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// CPUs of the load generator and the demo origins.
    #[arg(long, default_value = "1")]
    pub load_cpus: String,
    /// Where the `dictionaries` group keeps the npm tarballs it fetches (default
    /// `target/bench-npm`): a second run reads them and needs no network.
    #[arg(long, value_name = "DIR")]
    pub npm_cache: Option<PathBuf>,
    /// Worker threads (sluice, baseline, HAProxy's nbthread, Caddy's GOMAXPROCS) or processes
    /// (nginx) of the server (Varnish: one thread pool, a thread per connection).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
}

/// Run a `sluice bench` command.
pub fn main(cmd: BenchCommand) -> ExitCode {
    match cmd.command {
        BenchSubcommand::List => {
            list();
            ExitCode::SUCCESS
        }
        BenchSubcommand::Run(args) => {
            if args.driver.contains(&DriverKind::H2load) && !driver::h2load::available() {
                return fail(
                    "--driver h2load: h2load is not installed (apt-get install nghttp2-client)",
                );
            }
            match runner::run(&args) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(&e),
            }
        }
        BenchSubcommand::Report { dir } => {
            match report::read(&dir).and_then(|report| report::write(&dir, &report)) {
                Ok(()) => {
                    eprintln!("report: {}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&format!("{}: {e}", dir.display())),
            }
        }
        BenchSubcommand::BaselineServer(args) => baseline::serve(args),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn list() {
    let all = scenario::all(false);
    for (group, what) in scenario::GROUPS {
        println!("{group}: {what}");
        for s in all.iter().filter(|s| s.group == *group) {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "  {:<22} {} {} c={} n={}  {}",
                s.name,
                s.load.method,
                s.load.path,
                s.load.concurrency(),
                s.load.requests,
                labels.join(" ")
            );
        }
    }
    println!("{}: {}", dictionaries::GROUP, dictionaries::ABOUT);
    for b in dictionaries::bundles::BUNDLES {
        println!(
            "  {:<22} GET {} then {}",
            b.name,
            b.path(b.old),
            b.path(b.new)
        );
    }
}
