//! The run: prepare the fixtures once, then for each scenario start its origins, and for each
//! target start it, check it, load it N times with the sampler around each run, and stop it.
//! A failure in one scenario is recorded as its outcome and never stops the suite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;

use crate::check::{self, Expect};
use crate::client::Endpoint;
use crate::driver;
use crate::driver::DriverKind;
use crate::model::{Measurement, Outcome, Report, RunSettings, ScenarioResult};
use crate::scenario::{self, Scenario, Setup};
use crate::target::{self, Context, Origins, StartError, TargetKind};
use crate::zoo::{self, OriginKind, OriginProgram};
use crate::{RunArgs, fixtures};
use crate::{machine, report, sampler};

/// Run the selected scenarios and write the report into `args.out`; returns the report.
pub fn run(args: &RunArgs) -> Result<Report, String> {
    // The `dictionaries` group is not in the scenario table (dictionaries/mod.rs says why): it
    // runs after the scenarios, when named or when the whole suite runs.
    let (dictionaries_named, rest): (Vec<&String>, Vec<&String>) = args
        .selectors
        .iter()
        .partition(|s| s.as_str() == crate::dictionaries::GROUP);
    let rest: Vec<String> = rest.into_iter().cloned().collect();
    let with_dictionaries = !dictionaries_named.is_empty() || args.selectors.is_empty();
    let scenarios = if rest.is_empty() && with_dictionaries && !args.selectors.is_empty() {
        Vec::new()
    } else {
        select(&rest, args.quick)?
    };
    let most_connections = scenarios
        .iter()
        .map(|s| s.load.concurrency())
        .max()
        .unwrap_or(0);
    raise_open_files_limit(most_connections);
    let out = args.out.clone().unwrap_or_else(default_out);
    let work_dir = out.join("work");
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| format!("creating {}: {e}", work_dir.display()))?;
    let ctx = prepare(&work_dir, args)?;
    let runs = if args.quick { 1 } else { args.runs.max(1) };
    let mut report = Report {
        machine: machine::Machine::detect(),
        commit: commit(),
        tools: tools(&args.origins),
        started_at: now_rfc3339(),
        settings: RunSettings {
            quick: args.quick,
            runs,
            server_cpus: args.server_cpus.clone(),
            load_cpus: args.load_cpus.clone(),
            server_workers: args.workers,
        },
        results: Vec::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the check runtime: {e}"))?;
    let page = fixtures::page();
    let total = scenarios.len();
    let programs: Vec<(OriginKind, Result<OriginProgram, String>)> = args
        .origins
        .iter()
        .map(|&kind| (kind, zoo::prepare(kind, &ctx.exe, &work_dir)))
        .collect();
    for (kind, program) in &programs {
        if let Err(why) = program {
            eprintln!(
                "warning: the {} origin is not available ({why}); its rows are reported as \
                 not supported",
                kind.name()
            );
        }
    }
    let whole_run = Instant::now();
    for (i, scenario) in scenarios.iter().enumerate() {
        let started = Instant::now();
        eprintln!("[{}/{total}] {} ({})", i + 1, scenario.name, scenario.group);
        let mut results = Vec::new();
        if scenario.origins() == 0 {
            results.extend(run_scenario(
                scenario,
                args,
                &ctx,
                runs,
                &rt,
                &page,
                Ok(None),
            ));
        } else {
            for (kind, program) in &programs {
                let origin = match program {
                    Ok(p) => Ok(Some(p)),
                    Err(why) => Err((*kind, why.clone())),
                };
                results.extend(run_scenario(scenario, args, &ctx, runs, &rt, &page, origin));
            }
        }
        for r in &results {
            eprintln!("    {}", summary_line(r));
        }
        eprintln!("    ({:.1} s)", started.elapsed().as_secs_f64());
        report.results.extend(results);
    }
    report::write(&out, &report).map_err(|e| format!("writing the report: {e}"))?;
    if with_dictionaries {
        let started = Instant::now();
        crate::dictionaries::run(
            args,
            &ctx,
            &out,
            report.started_at.clone(),
            report.commit.clone(),
        )?;
        eprintln!(
            "    ({} group: {:.1} s)",
            crate::dictionaries::GROUP,
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "the whole run took {:.0} s",
        whole_run.elapsed().as_secs_f64()
    );
    eprintln!("report: {}", out.display());
    Ok(report)
}

/// The many-connections scenario opens 1,000 client sockets in this process, and each target
/// (which inherits the limit) as many again plus its upstream connections: raise the soft
/// RLIMIT_NOFILE to the hard limit, and say so when even that is short.
fn raise_open_files_limit(connections: usize) {
    // Client and server side of every connection, upstream connections, files, pipes.
    let wanted = 2 * connections as u64 + 256;
    if let Err(why) = sluice_core::open_files::raise_to_hard() {
        eprintln!("warning: {why}");
    }
    let Some((_, hard)) = sluice_core::open_files::limits() else {
        return;
    };
    if hard < wanted {
        eprintln!(
            "warning: the open files limit ({hard}) is below the {wanted} the scenarios need; \
             raise it (ulimit -n) or expect connection errors"
        );
    }
}

/// The scenarios picked by names or groups (all when none), in table order.
pub fn select(selectors: &[String], quick: bool) -> Result<Vec<Scenario>, String> {
    let all = scenario::all(quick);
    for sel in selectors {
        if !all.iter().any(|s| s.matches(sel)) {
            return Err(format!(
                "no scenario or group named {sel:?} (see `sluice bench list`)"
            ));
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| selectors.is_empty() || selectors.iter().any(|sel| s.matches(sel)))
        .collect())
}

/// One scenario behind one origin program (`None`: a scenario without origins), on every
/// target and with every driver.
#[allow(clippy::too_many_arguments)]
fn run_scenario(
    scenario: &Scenario,
    args: &RunArgs,
    ctx: &Context,
    runs: usize,
    rt: &tokio::runtime::Runtime,
    page: &Bytes,
    origin: Result<Option<&OriginProgram>, (OriginKind, String)>,
) -> Vec<ScenarioResult> {
    // A direct scenario measures the origin alone: one row, whatever the targets.
    let targets: Vec<Option<TargetKind>> = if scenario.setup == Setup::Direct {
        vec![None]
    } else {
        args.targets.iter().copied().map(Some).collect()
    };
    let origin_name = match &origin {
        Ok(Some(p)) => p.kind.name(),
        Ok(None) => "-",
        Err((kind, _)) => kind.name(),
    };
    let result = |target: Option<TargetKind>,
                  driver: DriverKind,
                  outcome: Outcome,
                  runs: Vec<Measurement>| ScenarioResult {
        scenario: scenario.name.clone(),
        group: scenario.group.into(),
        labels: scenario.labels.clone(),
        target: target.map_or("origin", TargetKind::name).into(),
        driver: driver.name().into(),
        origin: origin_name.into(),
        outcome,
        runs,
    };
    // Every (target, driver) pair gets the same outcome.
    let all_rows = |outcome: Outcome| -> Vec<ScenarioResult> {
        targets
            .iter()
            .flat_map(|t| args.driver.iter().map(move |d| (*t, *d)))
            .map(|(t, d)| result(t, d, outcome.clone(), Vec::new()))
            .collect()
    };
    let program = match origin {
        Ok(program) => program,
        Err((kind, why)) => {
            return all_rows(Outcome::NotSupported(format!(
                "the {} origin is not available: {why}",
                kind.name()
            )));
        }
    };
    let identity = match rt.block_on(crate::expected::identity_body(scenario, page)) {
        Ok(body) => body,
        Err(e) => return all_rows(Outcome::Error(e)),
    };
    let sluice_origin = OriginProgram::sluice(&ctx.exe);
    let origins = match Origins::start(scenario, ctx, program.unwrap_or(&sluice_origin)) {
        Ok(o) => o,
        Err(e) => return all_rows(Outcome::Error(format!("starting the origins: {e}"))),
    };
    let mut results = Vec::new();
    for target in targets {
        let measured = match target {
            Some(kind) => on_target(kind, scenario, args, ctx, &origins, runs, rt, &identity),
            None => on_origin(scenario, args, ctx, &origins, runs, rt, &identity),
        };
        for (driver, outcome, runs) in measured {
            results.push(result(target, driver, outcome, runs));
        }
    }
    origins.stop();
    results
}

/// What one target gave with each driver.
type PerDriver = Vec<(DriverKind, Outcome, Vec<Measurement>)>;

#[allow(clippy::too_many_arguments)]
fn on_target(
    kind: TargetKind,
    scenario: &Scenario,
    args: &RunArgs,
    ctx: &Context,
    origins: &Origins,
    runs: usize,
    rt: &tokio::runtime::Runtime,
    identity: &Bytes,
) -> PerDriver {
    let every_driver = |outcome: Outcome| -> PerDriver {
        args.driver
            .iter()
            .map(|d| (*d, outcome.clone(), Vec::new()))
            .collect()
    };
    let running = match target::start(kind, scenario, ctx, origins) {
        Ok(r) => r,
        Err(StartError::NotSupported(why)) => return every_driver(Outcome::NotSupported(why)),
        Err(StartError::Drift(why)) => return every_driver(Outcome::CheckFailed(why)),
        Err(StartError::Failed(why)) => return every_driver(Outcome::Error(why)),
    };
    let expect = Expect {
        balancing: kind != TargetKind::Baseline,
        caching: kind != TargetKind::Baseline,
    };
    let pid = running.pid();
    let result = measure(
        scenario,
        args,
        ctx,
        &running.endpoint,
        pid,
        expect,
        runs,
        rt,
        identity,
    );
    running.process.stop();
    result
}

fn on_origin(
    scenario: &Scenario,
    args: &RunArgs,
    ctx: &Context,
    origins: &Origins,
    runs: usize,
    rt: &tokio::runtime::Runtime,
    identity: &Bytes,
) -> PerDriver {
    let (Some(pid), Some(target::process::Address::Tcp(addr))) =
        (origins.first_pid(), origins.addresses.first())
    else {
        return args
            .driver
            .iter()
            .map(|d| {
                (
                    *d,
                    Outcome::Error("the scenario has no TCP origin".into()),
                    Vec::new(),
                )
            })
            .collect();
    };
    let endpoint = Endpoint {
        addr: *addr,
        tls: false,
    };
    let expect = Expect {
        balancing: false,
        caching: false,
    };
    measure(
        scenario, args, ctx, &endpoint, pid, expect, runs, rt, identity,
    )
}

/// Check once, then with each driver: an unmeasured warm-up and `runs` load runs with the
/// sampler around each; then, with `--syscalls` on a proxied row, the side run under strace.
#[allow(clippy::too_many_arguments)]
fn measure(
    scenario: &Scenario,
    args: &RunArgs,
    ctx: &Context,
    endpoint: &Endpoint,
    pid: u32,
    expect: Expect,
    runs: usize,
    rt: &tokio::runtime::Runtime,
    identity: &Bytes,
) -> PerDriver {
    if let Err(why) = rt.block_on(check::run(scenario, endpoint, identity, expect)) {
        return args
            .driver
            .iter()
            .map(|d| (*d, Outcome::CheckFailed(why.clone()), Vec::new()))
            .collect();
    }
    let mut load = scenario.load.clone();
    // A full run's time limit; a --quick run keeps its (already small) counts, so it still
    // sends at least its tenth of the requests however slow the server.
    load.max_secs = (!args.quick && args.run_secs > 0.0).then_some(args.run_secs);
    let mut per_driver = Vec::new();
    for &driver in &args.driver {
        let (outcome, mut measured) =
            measure_with(driver, scenario, &load, ctx, endpoint, pid, runs, identity);
        if args.syscalls
            && outcome == Outcome::Ok
            && matches!(scenario.setup, Setup::Proxy(_))
            && let Some(first) = measured.first_mut()
        {
            // The side run's counts ride on the first run's record (the report reads them
            // from there); the side run's own speed is strace's, not the server's.
            match crate::syscalls::side_run(driver, &load, ctx, endpoint, pid) {
                Ok(counts) => first.syscalls = Some(counts),
                Err(e) => eprintln!("    syscall side run failed: {e}"),
            }
        }
        per_driver.push((driver, outcome, measured));
    }
    per_driver
}

/// One driver's warm-up and runs.
#[allow(clippy::too_many_arguments)]
fn measure_with(
    driver: DriverKind,
    scenario: &Scenario,
    load: &scenario::LoadSpec,
    ctx: &Context,
    endpoint: &Endpoint,
    pid: u32,
    runs: usize,
    identity: &Bytes,
) -> (Outcome, Vec<Measurement>) {
    // Unmeasured, so the first run does not pay for cold caches, lazily grown buffers and
    // pools, the upstream's first connections, or the CPU ramping its clock up. A stream row
    // has none: its check just sent a whole stream through the same connections' path.
    let warm_up = warm_up_load(load);
    let warm = if scenario.throughput {
        Ok(Measurement::default())
    } else {
        driver::run(driver, &warm_up, endpoint, &ctx.load_cpus, &ctx.work_dir)
    };
    match warm {
        Ok(m) => {
            if let Some(why) = driver::builtin::describe_failures(&m) {
                return (
                    Outcome::Error(format!("during the warm-up: {why}")),
                    Vec::new(),
                );
            }
        }
        Err(e) => {
            return (
                Outcome::Error(format!("during the warm-up: {e}")),
                Vec::new(),
            );
        }
    }
    let mut measured = Vec::with_capacity(runs);
    for _ in 0..runs {
        let sampler = sampler::Sampler::start(pid);
        let run = driver::run(driver, load, endpoint, &ctx.load_cpus, &ctx.work_dir);
        let usage = sampler.stop();
        let mut m = match run {
            Ok(m) => m,
            Err(e) => return (Outcome::Error(e), measured),
        };
        m.server_cpu_percent = usage.cpu_secs / usage.wall_secs.max(1e-9) * 100.0;
        m.server_cpu_us_per_request = usage.cpu_secs * 1e6 / (m.requests.max(1) as f64);
        m.server_kernel_us_per_request = usage.system_cpu_secs * 1e6 / (m.requests.max(1) as f64);
        m.server_peak_rss_bytes = usage.peak_rss_bytes;
        if scenario.throughput {
            // Seed 004's MB/s is of the data delivered (decoded), so a compressing server is
            // not credited for sending fewer bytes.
            m.body_mb_per_sec =
                identity.len() as f64 * m.requests as f64 / 1e6 / m.elapsed_secs.max(1e-9);
        }
        if scenario.check.encoding.is_some() && m.body_bytes > 0 {
            m.compression_ratio =
                Some(identity.len() as f64 * m.requests as f64 / m.body_bytes as f64);
        }
        let failed = driver::builtin::describe_failures(&m);
        measured.push(m);
        if let Some(why) = failed {
            return (Outcome::Error(why), measured);
        }
    }
    (Outcome::Ok, measured)
}

/// The warm-up: a tenth of a run, and at least one request per connection (so the server
/// has accepted as many connections as a run opens and the upstream pool is full), at most a
/// whole run.
pub fn warm_up_load(load: &scenario::LoadSpec) -> scenario::LoadSpec {
    let mut warm_up = load.clone();
    warm_up.requests = (load.requests / 10)
        .max(load.concurrency() as u64)
        .min(load.requests);
    warm_up.max_secs = load.max_secs.map(|s| s / 5.0);
    warm_up
}

/// Fixtures and the certificate, written once per run.
fn prepare(work_dir: &Path, args: &RunArgs) -> Result<Context, String> {
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    let mkdir = |path: &Path| {
        std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))
    };
    let page = fixtures::page();
    let page_dir = work_dir.join("site");
    let precompressed_dir = work_dir.join("site-precompressed");
    mkdir(&page_dir)?;
    mkdir(&precompressed_dir)?;
    write(&page_dir.join(fixtures::PAGE_NAME), &page)?;
    write(
        &page_dir.join(fixtures::DOWNLOAD_NAME),
        &fixtures::download(),
    )?;
    let original = precompressed_dir.join(fixtures::PAGE_NAME);
    write(&original, &page)?;
    // Sidecars at the maximum levels, as `sluice precompress` and the seed's `gzip -9` write.
    for (algorithm, level, ext) in [
        (scenario::Algorithm::Gzip, 9, "gz"),
        (scenario::Algorithm::Br, 11, "br"),
        (scenario::Algorithm::Zstd, 19, "zst"),
    ] {
        let encoded = fixtures::compress(&page, scenario::Compression { algorithm, level });
        write(
            &precompressed_dir.join(format!("{}.{ext}", fixtures::PAGE_NAME)),
            &encoded,
        )?;
    }
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| format!("making the certificate: {e}"))?;
    let cert_path = work_dir.join("cert.pem");
    let key_path = work_dir.join("key.pem");
    write(&cert_path, cert.cert.pem().as_bytes())?;
    write(&key_path, cert.signing_key.serialize_pem().as_bytes())?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    Ok(Context {
        work_dir: work_dir.to_path_buf(),
        exe,
        server_cpus: args.server_cpus.clone(),
        load_cpus: args.load_cpus.clone(),
        workers: args.workers.max(1),
        page_dir: absolute(&page_dir),
        precompressed_dir: absolute(&precompressed_dir),
        cert: absolute(&cert_path),
        key: absolute(&key_path),
    })
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `target/bench/<UTC timestamp>`.
fn default_out() -> PathBuf {
    let stamp: String = now_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == 'T')
        .collect();
    PathBuf::from("target").join("bench").join(stamp)
}

fn now_rfc3339() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn tools(origins: &[OriginKind]) -> BTreeMap<String, String> {
    let mut tools = BTreeMap::new();
    tools.insert("sluice".into(), env!("CARGO_PKG_VERSION").into());
    if let Some(v) = target::nginx::version() {
        tools.insert("nginx".into(), v);
    }
    if let Some(v) = target::varnish::version() {
        tools.insert("varnish".into(), v);
    }
    if let Some(v) = target::haproxy::version() {
        tools.insert("haproxy".into(), v);
    }
    if let Some(v) = target::caddy::version() {
        tools.insert("caddy".into(), v);
    }
    for kind in origins {
        if let Some(v) = zoo::version(*kind) {
            tools.insert(format!("{} origin", kind.name()), v);
        }
    }
    tools
}

/// One line per result for the progress output.
pub fn summary_line(r: &ScenarioResult) -> String {
    let mut head = format!("{:<9}", r.target);
    if r.origin != "sluice" && r.origin != "-" {
        head.push_str(&format!(" ({} origin)", r.origin));
    }
    if r.driver != "builtin" {
        head.push_str(&format!(" [{}]", r.driver));
    }
    match (&r.outcome, r.median()) {
        (Outcome::Ok, Some(m)) => {
            let rate = if m.body_mb_per_sec > 0.0 && r.group == "seed-004" {
                format!("{:>9.1} MB/s", m.body_mb_per_sec)
            } else {
                format!("{:>9.0} req/s", m.requests_per_sec)
            };
            let spread = if m.latency_sd_us > 0.0 && r.group == "many-conns" {
                format!(
                    "  sd {:>7.0} µs  max {:>7.0} µs",
                    m.latency_sd_us, m.latency_max_us
                )
            } else {
                String::new()
            };
            format!(
                "{head} {rate}  p50 {:>7.0} µs  p99 {:>7.0} µs{spread}  cpu {:>5.0}%  {:>6.1} µs/req (kernel {:>5.1})  {:>7.0} B/resp{}",
                m.latency_p50_us,
                m.latency_p99_us,
                m.server_cpu_percent,
                m.server_cpu_us_per_request,
                m.server_kernel_us_per_request,
                m.body_bytes as f64 / m.requests.max(1) as f64,
                m.compression_ratio
                    .map_or(String::new(), |c| format!("  ratio {c:.2}"))
            )
        }
        (Outcome::Ok, None) => format!("{head} ok (no runs)"),
        (Outcome::NotSupported(why), _) => format!("{head} not supported: {why}"),
        (Outcome::CheckFailed(why), _) => format!("{head} CHECK FAILED: {why}"),
        (Outcome::Error(why), _) => format!("{head} ERROR: {why}"),
    }
}
