//! The `dictionaries` group (issue 22, RFC 9842): real versioned bundles ([`bundles`]: vue,
//! react-dom, jquery, two consecutive releases each, from `npm pack`) served by sluice from a
//! static route and from a cached proxy route, and by nginx with `gzip_static` (its best:
//! Debian's nginx has no brotli or zstd). Per bundle and coding: bytes per response and server
//! CPU µs per request, next to two references made here (brotli 11 of the new release, and the
//! `zstd` program's `-19 -D old new`), and the acceptance bounds checked on the run's own
//! numbers ([`bounds`]).
//!
//! Not a row of the scenario table: a scenario serves one fixture page with one setup, while
//! this group needs several files, a priming request (the browser's first visit, which makes
//! sluice keep the old release as a dictionary) and a delta-aware check. It reuses the lab's
//! parts: pinned processes, the built-in driver, the sampler, nginx's tuned config.
//!
//! Output: `dictionaries.md` and `dictionaries.json` in the run's directory.

pub mod bundles;

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::Method;
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::client::{self, Endpoint, TlsConnector};
use crate::model::Measurement;
use crate::scenario::{self, Algorithm, Compression, LoadSpec, Protocol};
use crate::target::process::{Address, Process, free_port};
use crate::target::{self, Context, Origins, StartError, TargetKind};
use crate::{RunArgs, driver, fixtures, sampler};
use bundles::{Bundle, Pair};

/// The group's name (`sluice bench run dictionaries`).
pub const GROUP: &str = "dictionaries";
/// What `sluice bench list` says about it.
pub const ABOUT: &str = "compression dictionaries (RFC 9842): dcb/dcz deltas of real releases \
(vue, react-dom, jquery from npm pack) against gzip/br/zstd and nginx's gzip_static, static and \
cached proxy";

/// The header before a `dcz` body (RFC 9842 §5: an 8-byte skippable frame and the SHA-256).
pub const DCZ_HEADER: u64 = 40;
/// What Chrome sends.
const CHROME_ACCEPT: &str = "gzip, deflate, br, zstd, dcb, dcz";

/// The whole group's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DictionaryReport {
    pub started_at: String,
    pub commit: Option<String>,
    pub quick: bool,
    pub runs: usize,
    pub bundles: Vec<BundleResult>,
}

/// One library's rows and bounds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BundleResult {
    pub bundle: String,
    pub old_version: String,
    pub new_version: String,
    pub file: String,
    /// The new release's size.
    pub identity_bytes: u64,
    /// brotli 11 of the new release, made here (the ratio's denominator).
    pub br11_bytes: u64,
    /// `zstd -19 -D old new` by the `zstd` program; None when it is not installed (the bound
    /// then uses the issue's figure, `issue_zstd_delta`).
    pub zstd_program_delta: Option<u64>,
    pub issue_zstd_delta: u64,
    pub issue_br11: u64,
    pub rows: Vec<Row>,
    pub bounds: Vec<BoundCheck>,
}

/// One server and coding.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Row {
    /// `sluice static`, `sluice cached proxy`, `nginx static`.
    pub server: String,
    /// `Content-Encoding` of the answer (`gzip`, `br`, `zstd`, `dcb`, `dcz`).
    pub coding: String,
    /// How it was made (`level 4, stored variant`, `gzip_static: .gz sidecar, level 9`).
    pub how: String,
    /// Empty: measured; otherwise why not (not supported, or the error).
    pub problem: String,
    /// Response body bytes (the check's response; the load's average is the same figure).
    pub bytes: Option<u64>,
    /// Median over the runs of the server's CPU µs per request (user + system).
    pub cpu_us_per_request: Option<f64>,
    /// Requests of the median run.
    pub requests: u64,
}

/// One acceptance bound on one bundle.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BoundCheck {
    pub what: String,
    pub limit: f64,
    /// None: a row it needs was not measured.
    pub measured: Option<f64>,
    pub holds: bool,
}

/// The group's part of `sluice bench run`: load the bundles (a missing npm or network skips the
/// group with a message, like a missing peer), measure, write `dictionaries.md` and `.json`
/// into `out`. `Ok(None)`: skipped.
pub fn run(
    args: &RunArgs,
    ctx: &Context,
    out: &Path,
    started_at: String,
    commit: Option<String>,
) -> Result<Option<DictionaryReport>, String> {
    let cache = args
        .npm_cache
        .clone()
        .unwrap_or_else(bundles::default_cache);
    eprintln!("[{GROUP}] bundles from {}", cache.display());
    let pairs = match bundles::load(&cache) {
        Ok(p) => p,
        Err(why) => {
            eprintln!(
                "[{GROUP}] SKIPPED: the bundles are not available ({why}); \
                 a run with npm and the registry reachable caches them in {}",
                cache.display()
            );
            return Ok(None);
        }
    };
    let runs = if args.quick { 1 } else { args.runs.max(1) };
    let site = absolute(&ctx.work_dir.join("dictionaries-site"));
    write_site(&site, &pairs)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the check runtime: {e}"))?;
    let load = Loader { args, ctx, runs };
    let mut results: Vec<BundleResult> = pairs.iter().map(references).collect();

    let sluice = args.targets.contains(&TargetKind::Sluice);
    let nginx = args.targets.contains(&TargetKind::Nginx);
    if sluice {
        sluice_servers(&rt, &load, ctx, &site, &pairs, &mut results)?;
    }
    if nginx {
        nginx_server(&rt, &load, ctx, &site, &pairs, &mut results);
    }
    for result in &mut results {
        result.bounds = bounds(result);
    }
    let report = DictionaryReport {
        started_at,
        commit,
        quick: args.quick,
        runs,
        bundles: results,
    };
    let markdown = markdown(&report);
    eprint!("{markdown}");
    write(&out.join("dictionaries.md"), markdown.as_bytes())?;
    let json = serde_json::to_vec_pretty(&report).map_err(|e| format!("dictionaries.json: {e}"))?;
    write(&out.join("dictionaries.json"), &json)?;
    Ok(Some(report))
}

/// sluice's rows: a static route, then a cached proxy route in front of an (unmeasured) sluice
/// serving the same files.
fn sluice_servers(
    rt: &tokio::runtime::Runtime,
    load: &Loader<'_>,
    ctx: &Context,
    site: &Path,
    pairs: &[Pair],
    results: &mut [BundleResult],
) -> Result<(), String> {
    eprintln!("[{GROUP}] sluice static");
    let dir = work_dir(ctx, "sluice-static")?;
    match start_sluice(ctx, &dir, &static_config(ctx, site, pairs)) {
        Ok((process, endpoint)) => {
            for (pair, result) in pairs.iter().zip(results.iter_mut()) {
                let rows = sluice_rows(rt, load, &process, &endpoint, pair, "sluice static");
                result.rows.extend(rows);
            }
            process.stop();
        }
        Err(why) => add_failed(results, "sluice static", &why),
    }

    eprintln!("[{GROUP}] sluice cached proxy");
    let origin_dir = work_dir(ctx, "origin")?;
    match start_sluice(ctx, &origin_dir, &origin_config(site)) {
        Ok((origin, origin_endpoint)) => {
            let dir = work_dir(ctx, "sluice-proxy")?;
            let (config, refused) = proxy_config(ctx, &dir, origin_endpoint.addr, pairs);
            match start_sluice(ctx, &dir, &config) {
                Ok((process, endpoint)) => {
                    for (pair, result) in pairs.iter().zip(results.iter_mut()) {
                        let mut rows =
                            sluice_rows(rt, load, &process, &endpoint, pair, "sluice cached proxy");
                        if let Some(why) = &refused {
                            for row in rows.iter_mut().filter(|r| r.coding.starts_with("dc")) {
                                row.problem = format!("not supported: {why}");
                            }
                        }
                        result.rows.extend(rows);
                    }
                    process.stop();
                }
                Err(why) => add_failed(results, "sluice cached proxy", &why),
            }
            origin.stop();
        }
        Err(why) => add_failed(results, "sluice cached proxy", &format!("origin: {why}")),
    }
    Ok(())
}

/// nginx's row: `gzip_static`, its best on Debian (no brotli, no zstd, no dictionaries).
fn nginx_server(
    rt: &tokio::runtime::Runtime,
    load: &Loader<'_>,
    ctx: &Context,
    site: &Path,
    pairs: &[Pair],
    results: &mut [BundleResult],
) {
    eprintln!("[{GROUP}] nginx static");
    match start_nginx(ctx, site) {
        Ok(running) => {
            for (pair, result) in pairs.iter().zip(results.iter_mut()) {
                let row = measure_row(
                    rt,
                    load,
                    running.pid(),
                    &running.endpoint,
                    pair,
                    "nginx static",
                    "gzip",
                    "gzip_static: .gz sidecar, level 9",
                );
                result.rows.push(row);
            }
            running.process.stop();
        }
        Err(why) => add_failed(results, "nginx static", &why),
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn work_dir(ctx: &Context, name: &str) -> Result<PathBuf, String> {
    let dir = absolute(&ctx.work_dir.join(format!("{GROUP}-{name}")));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

/// `SITE/<bundle>/<version>/<file>` for both releases, each with the `.gz` sidecar at level 9
/// that nginx's `gzip_static` serves (as `gzip -9` writes it).
fn write_site(site: &Path, pairs: &[Pair]) -> Result<(), String> {
    for pair in pairs {
        for (version, bytes) in [(pair.bundle.old, &pair.old), (pair.bundle.new, &pair.new)] {
            let path = site.join(&pair.bundle.path(version)[1..]);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("creating {}: {e}", parent.display()))?;
            }
            write(&path, bytes)?;
            let mut gz = path.clone().into_os_string();
            gz.push(".gz");
            write(Path::new(&gz), &fixtures::gzip(bytes, 9))?;
        }
    }
    Ok(())
}

/// The references made here: brotli 11 of the new release and the `zstd` program's delta.
fn references(pair: &Pair) -> BundleResult {
    let b = &pair.bundle;
    let br11 = fixtures::compress(
        &pair.new,
        Compression {
            algorithm: Algorithm::Br,
            level: 11,
        },
    );
    BundleResult {
        bundle: b.name.into(),
        old_version: b.old.into(),
        new_version: b.new.into(),
        file: b.file.into(),
        identity_bytes: pair.new.len() as u64,
        br11_bytes: br11.len() as u64,
        zstd_program_delta: zstd_program_delta(&pair.old, &pair.new),
        issue_zstd_delta: b.issue_zstd_delta,
        issue_br11: b.issue_br11,
        rows: Vec::new(),
        bounds: Vec::new(),
    }
}

/// `zstd -19 -D old new`'s size, as the issue measured it; None without the program.
pub fn zstd_program_delta(old: &[u8], new: &[u8]) -> Option<u64> {
    let dir = tempfile_dir()?;
    let (old_path, new_path) = (dir.join("old"), dir.join("new"));
    std::fs::write(&old_path, old).ok()?;
    std::fs::write(&new_path, new).ok()?;
    let out = std::process::Command::new("zstd")
        .args(["-19", "-q", "-c", "-D"])
        .arg(&old_path)
        .arg(&new_path)
        .output()
        .ok();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    out.status.success().then_some(out.stdout.len() as u64)
}

/// A fresh scratch directory under the system's temporary directory.
fn tempfile_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-bench-zstd-{}-{}",
        std::process::id(),
        time::OffsetDateTime::now_utc().unix_timestamp_nanos()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

fn add_failed(results: &mut [BundleResult], server: &str, why: &str) {
    eprintln!("    {server}: {why}");
    for r in results {
        r.rows.push(Row {
            server: server.into(),
            coding: "-".into(),
            problem: why.into(),
            ..Row::default()
        });
    }
}

const SERVER_HEADER: &str = "[server]\nworkers = {workers}\nshutdown_timeout = \"1s\"\n\n[log]\naccess = \"off\"\nlevel = \"warn\"\n\n";

fn head(ctx: &Context) -> String {
    SERVER_HEADER.replace("{workers}", &ctx.workers.to_string())
}

/// The managed `match` pattern of a bundle: every release of its file (RFC 9842 §2.1.1).
fn match_pattern(b: &Bundle) -> String {
    format!("/{}/*/{}", b.name, b.base_name())
}

/// A static route per bundle with `compress = {}` (stored variants at the default levels) and a
/// managed dictionary over its releases; immutable lifetimes, as content-versioned files get.
pub fn static_config(ctx: &Context, site: &Path, pairs: &[Pair]) -> String {
    let mut toml = head(ctx);
    toml.push_str("[[listeners]]\naddress = \"{addr}\"\n\n");
    for pair in pairs {
        let b = &pair.bundle;
        let _ = writeln!(
            toml,
            "[[routes]]\nname = {:?}\npath_prefix = \"/{}/\"\n\
             static = {{ root = {:?}, max_age = \"immutable\" }}\ncompress = {{}}\n\
             dictionary = {{ match = {:?} }}\n",
            b.name,
            b.name,
            site.display().to_string(),
            match_pattern(b)
        );
    }
    toml
}

/// The unmeasured origin behind the proxy: the same files, uncompressed, cacheable.
fn origin_config(site: &Path) -> String {
    format!(
        "[server]\nworkers = 1\nshutdown_timeout = \"1s\"\n\n[log]\naccess = \"off\"\nlevel = \"warn\"\n\n\
         [[listeners]]\naddress = \"{{addr}}\"\n\n[[routes]]\npath_prefix = \"/\"\n\
         static = {{ root = {:?}, max_age = \"immutable\" }}\n",
        site.display().to_string()
    )
}

/// A cached route per bundle in front of the origin, `compress = {}` (stored variants at the
/// cache's levels). With `dictionary` when `sluice check` accepts it on a proxy route; when it
/// refuses, without, and the reason is returned (the delta rows say it).
fn proxy_config(
    ctx: &Context,
    dir: &Path,
    origin: std::net::SocketAddr,
    pairs: &[Pair],
) -> (String, Option<String>) {
    let render = |dictionary: bool| {
        let mut toml = head(ctx);
        toml.push_str("[[listeners]]\naddress = \"{addr}\"\n\n");
        let _ = writeln!(
            toml,
            "[upstreams.origin]\nservers = [{{ address = \"{origin}\" }}]\n\
             keepalive = {{ max_idle = 100 }}\n\n[caches.bench]\nmemory = \"64MiB\"\n"
        );
        for pair in pairs {
            let b = &pair.bundle;
            let _ = writeln!(
                toml,
                "[[routes]]\nname = {:?}\npath_prefix = \"/{}/\"\n\
                 cache = {{ zone = \"bench\", valid = {{ \"200\" = \"1m\" }} }}\ncompress = {{}}",
                b.name, b.name
            );
            if dictionary {
                let _ = writeln!(toml, "dictionary = {{ match = {:?} }}", match_pattern(b));
            }
            let _ = writeln!(toml, "[routes.proxy]\nupstream = \"origin\"\n");
        }
        toml
    };
    let with = render(true);
    match check_config(ctx, dir, &with.replace("{addr}", "127.0.0.1:1")) {
        Ok(()) => (with, None),
        Err(why) => (render(false), Some(why)),
    }
}

/// `sluice check` on a config; the first line of its refusal.
fn check_config(ctx: &Context, dir: &Path, toml: &str) -> Result<(), String> {
    let path = dir.join("check.toml");
    write(&path, toml.as_bytes())?;
    let out = std::process::Command::new(&ctx.exe)
        .arg("check")
        .arg(&path)
        .output()
        .map_err(|e| format!("running sluice check: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let first = text.lines().next().unwrap_or("").trim();
    Err(format!(
        "sluice check refused `dictionary` on a proxy route: {}",
        first.strip_prefix("error: ").unwrap_or(first)
    ))
}

/// Write `toml` (with `{addr}` filled) into `dir`, check it, start sluice pinned, wait.
fn start_sluice(ctx: &Context, dir: &Path, toml: &str) -> Result<(Process, Endpoint), String> {
    let addr = free_port()?;
    let toml = toml.replace("{addr}", &addr.to_string());
    let mut process = target::sluice::start_toml(&toml, ctx, dir).map_err(|e| match e {
        StartError::NotSupported(why) | StartError::Drift(why) | StartError::Failed(why) => why,
    })?;
    process.wait_ready(&Address::Tcp(addr))?;
    Ok((process, Endpoint { addr, tls: false }))
}

/// nginx with the lab's tuned `gzip_static` config (the `static-precompressed` scenario's) over
/// the site.
fn start_nginx(ctx: &Context, site: &Path) -> Result<target::Running, String> {
    let mut scenario = scenario::all(true)
        .into_iter()
        .find(|s| s.setup == scenario::Setup::Precompressed)
        .ok_or("no precompressed scenario to borrow nginx's config from")?;
    scenario.name = format!("{GROUP}-nginx");
    let mut ctx = ctx.clone();
    ctx.precompressed_dir = site.to_path_buf();
    target::start(TargetKind::Nginx, &scenario, &ctx, &Origins::none()).map_err(|e| match e {
        StartError::NotSupported(why) => format!("not supported: {why}"),
        StartError::Drift(why) | StartError::Failed(why) => why,
    })
}

/// How rows are measured.
struct Loader<'a> {
    args: &'a RunArgs,
    ctx: &'a Context,
    runs: usize,
}

/// Connections of the load (a page's worth of browsers at once).
const CLIENTS: usize = 10;
/// Requests of one run (a tenth with --quick); `--run-secs` caps a full run's time.
const REQUESTS: u64 = 3_000;

impl Loader<'_> {
    fn spec(&self, path: &str, headers: &[(String, String)], requests: u64) -> LoadSpec {
        LoadSpec {
            protocol: Protocol::H1,
            tls: false,
            method: Method::GET,
            path: path.into(),
            headers: headers.to_vec(),
            body: None,
            clients: CLIENTS,
            streams: 1,
            requests,
            max_secs: (!self.args.quick && self.args.run_secs > 0.0).then_some(self.args.run_secs),
        }
    }

    /// An unmeasured warm-up, then the runs with the sampler; the median run by CPU.
    fn measure(
        &self,
        endpoint: &Endpoint,
        pid: u32,
        path: &str,
        headers: &[(String, String)],
    ) -> Result<Measurement, String> {
        let requests = if self.args.quick {
            REQUESTS / 10
        } else {
            REQUESTS
        };
        let mut warm = self.spec(path, headers, requests / 10);
        warm.max_secs = None;
        let m = driver::builtin::run(&warm, endpoint, &self.ctx.load_cpus)?;
        if let Some(why) = driver::builtin::describe_failures(&m) {
            return Err(format!("during the warm-up: {why}"));
        }
        let spec = self.spec(path, headers, requests);
        let mut measured = Vec::with_capacity(self.runs);
        for _ in 0..self.runs {
            let sampler = sampler::Sampler::start(pid);
            let run = driver::builtin::run(&spec, endpoint, &self.ctx.load_cpus);
            let usage = sampler.stop();
            let mut m = run?;
            if let Some(why) = driver::builtin::describe_failures(&m) {
                return Err(why);
            }
            m.server_cpu_us_per_request = usage.cpu_secs * 1e6 / (m.requests.max(1) as f64);
            measured.push(m);
        }
        measured.sort_by(|a, b| {
            a.server_cpu_us_per_request
                .total_cmp(&b.server_cpu_us_per_request)
        });
        measured
            .get(measured.len() / 2)
            .cloned()
            .ok_or_else(|| "no run".to_string())
    }
}

/// The request headers that ask for `coding` of `pair`'s new release (a delta names the old
/// release's hash; a client listing only the coding and its fallback, so the row measures
/// that coding and no other).
fn request_headers(pair: &Pair, coding: &str) -> Vec<(String, String)> {
    let accept = match coding {
        "dcb" => "br, dcb",
        "dcz" => "zstd, dcz",
        other => other,
    };
    let mut headers = vec![("accept-encoding".to_string(), accept.to_string())];
    if coding.starts_with("dc") {
        headers.push((
            "available-dictionary".into(),
            available_dictionary(&pair.old),
        ));
    }
    headers
}

/// `Available-Dictionary` for `content` (RFC 9842 §2.2: a structured-field byte sequence of
/// the SHA-256).
pub fn available_dictionary(content: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        ":{}:",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(content))
    )
}

/// sluice's five rows of one bundle: gzip, br, zstd, then (after the old release was fetched
/// once, as a browser's first visit, so sluice keeps it as the dictionary) dcb and dcz.
fn sluice_rows(
    rt: &tokio::runtime::Runtime,
    load: &Loader<'_>,
    process: &Process,
    endpoint: &Endpoint,
    pair: &Pair,
    server: &str,
) -> Vec<Row> {
    let how = |coding: &str| -> String {
        let proxy = server.contains("proxy");
        match (coding, proxy) {
            ("gzip", false) => "level 2, stored variant".into(),
            ("br", false) => "level 4, stored variant".into(),
            ("zstd", false) => "level 3, stored variant".into(),
            ("gzip", true) => "level 6, stored in the cache".into(),
            ("br", true) => "level 9, stored in the cache".into(),
            ("zstd", true) => "level 12, stored in the cache".into(),
            ("dcb", _) => "brotli 11 against the old release, made once".into(),
            _ => "zstd 19 against the old release, made once".into(),
        }
    };
    let mut rows = Vec::new();
    for coding in ["gzip", "br", "zstd"] {
        rows.push(measure_row(
            rt,
            load,
            process.pid(),
            endpoint,
            pair,
            server,
            coding,
            &how(coding),
        ));
    }
    let primed = rt.block_on(prime(endpoint, pair));
    for coding in ["dcb", "dcz"] {
        let row = match &primed {
            Ok(()) => measure_row(
                rt,
                load,
                process.pid(),
                endpoint,
                pair,
                server,
                coding,
                &how(coding),
            ),
            Err(why) => Row {
                server: server.into(),
                coding: coding.into(),
                how: how(coding),
                problem: why.clone(),
                ..Row::default()
            },
        };
        rows.push(row);
    }
    rows
}

/// A browser's first visit: the old release, which must come with `Use-As-Dictionary`.
async fn prime(endpoint: &Endpoint, pair: &Pair) -> Result<(), String> {
    let headers = [("accept-encoding".to_string(), CHROME_ACCEPT.to_string())];
    let resp = get(endpoint, &pair.bundle.path(pair.bundle.old), &headers).await?;
    if resp.status != 200 {
        return Err(format!("the old release answered {}", resp.status));
    }
    if resp.use_as_dictionary.is_none() {
        return Err(
            "not supported: the old release came without Use-As-Dictionary (sluice offers no \
             dictionary on this route)"
                .into(),
        );
    }
    Ok(())
}

/// Check that `coding` of the new release decodes to its bytes, then load it.
#[allow(clippy::too_many_arguments)]
fn measure_row(
    rt: &tokio::runtime::Runtime,
    load: &Loader<'_>,
    pid: u32,
    endpoint: &Endpoint,
    pair: &Pair,
    server: &str,
    coding: &str,
    how: &str,
) -> Row {
    let mut row = Row {
        server: server.into(),
        coding: coding.into(),
        how: how.into(),
        ..Row::default()
    };
    let path = pair.bundle.path(pair.bundle.new);
    let headers = request_headers(pair, coding);
    match rt.block_on(check(endpoint, pair, &path, &headers, coding)) {
        Ok(bytes) => row.bytes = Some(bytes),
        Err(why) => {
            row.problem = why;
            eprintln!(
                "    {} {server} {coding}: {}",
                pair.bundle.name, row.problem
            );
            return row;
        }
    }
    match load.measure(endpoint, pid, &path, &headers) {
        Ok(m) => {
            row.cpu_us_per_request = Some(m.server_cpu_us_per_request);
            row.requests = m.requests;
            let per_response = m.body_bytes / m.requests.max(1);
            if Some(per_response) != row.bytes {
                row.problem = format!(
                    "the load got {per_response} B per response, the check {} B",
                    row.bytes.unwrap_or(0)
                );
            }
        }
        Err(why) => row.problem = why,
    }
    eprintln!(
        "    {} {server} {coding}: {} B, {:.1} µs/request {}",
        pair.bundle.name,
        row.bytes.unwrap_or(0),
        row.cpu_us_per_request.unwrap_or(0.0),
        row.problem
    );
    row
}

struct Answer {
    status: u16,
    encoding: Option<String>,
    use_as_dictionary: Option<String>,
    body: Bytes,
}

async fn get(
    endpoint: &Endpoint,
    path: &str,
    headers: &[(String, String)],
) -> Result<Answer, String> {
    let tls = TlsConnector::new()?;
    let mut conn = client::connect(endpoint, Protocol::H1, &tls).await?;
    let spec = LoadSpec {
        protocol: Protocol::H1,
        tls: false,
        method: Method::GET,
        path: path.into(),
        headers: headers.to_vec(),
        body: None,
        clients: 1,
        streams: 1,
        requests: 1,
        max_secs: None,
    };
    let template = client::RequestTemplate::new(&spec, endpoint)?;
    let resp = conn
        .sender
        .send(template.build())
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (status, encoding, use_as_dictionary) = (
        resp.status().as_u16(),
        header("content-encoding"),
        header("use-as-dictionary"),
    );
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("GET {path}: body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        encoding,
        use_as_dictionary,
        body,
    })
}

/// One request: `200`, the coding asked for, and a body that decodes to the new release
/// exactly (a delta with the old release as the dictionary, after checking its header names
/// that release's hash). The body's size.
async fn check(
    endpoint: &Endpoint,
    pair: &Pair,
    path: &str,
    headers: &[(String, String)],
    coding: &str,
) -> Result<u64, String> {
    let resp = get(endpoint, path, headers).await?;
    if resp.status != 200 {
        return Err(format!("GET {path} answered {}", resp.status));
    }
    let got = resp.encoding.as_deref().unwrap_or("identity");
    if got != coding {
        let why = format!("answered Content-Encoding {got}, not {coding}");
        return Err(if coding.starts_with("dc") {
            format!("not supported: {why}")
        } else {
            why
        });
    }
    let decoded = decode(coding, &resp.body, &pair.old)?;
    if decoded != pair.new {
        return Err(format!(
            "the {coding} body decodes to {} bytes that are not the new release ({} bytes)",
            decoded.len(),
            pair.new.len()
        ));
    }
    Ok(resp.body.len() as u64)
}

/// Decode a body of any of the five codings; a delta's header must name `dictionary`.
pub fn decode(coding: &str, body: &[u8], dictionary: &[u8]) -> Result<Vec<u8>, String> {
    let hash = Sha256::digest(dictionary);
    match coding {
        // RFC 9842 §5: a skippable frame (magic 0x184D2A5E, length 32) holding the hash.
        "dcz" => {
            if body.len() < 40
                || body[..8] != [0x5e, 0x2a, 0x4d, 0x18, 0x20, 0, 0, 0]
                || body[8..40] != hash[..]
            {
                return Err("the dcz header is not the skippable frame with the hash".into());
            }
            let mut dctx = zstd::zstd_safe::DCtx::create();
            dctx.ref_prefix(dictionary)
                .map_err(|code| format!("zstd prefix: error {code}"))?;
            let mut out = Vec::with_capacity(8 << 20);
            dctx.decompress(&mut out, &body[40..])
                .map_err(|code| format!("the dcz body does not decode: zstd error {code}"))?;
            Ok(out)
        }
        // RFC 9842 §4: the magic 0xFF 0x44 0x43 0x42 and the hash.
        "dcb" => {
            if body.len() < 36 || body[..4] != [0xff, 0x44, 0x43, 0x42] || body[4..36] != hash[..] {
                return Err("the dcb header is not the magic with the hash".into());
            }
            let mut out = Vec::new();
            brotli::Decompressor::new_with_custom_dict(
                &body[36..],
                4096,
                dictionary.to_vec().into(),
            )
            .read_to_end(&mut out)
            .map_err(|e| format!("the dcb body does not decode: {e}"))?;
            Ok(out)
        }
        other => fixtures::decode(Some(other), body),
    }
}

/// The acceptance bounds of issue 22 on one bundle's rows (never loosened: a bound that does
/// not hold is reported with by how much).
pub fn bounds(r: &BundleResult) -> Vec<BoundCheck> {
    let find = |server: &str, coding: &str| {
        r.rows
            .iter()
            .find(|row| row.server == server && row.coding == coding && row.problem.is_empty())
    };
    let mut out = Vec::new();
    let zstd_ref = r.zstd_program_delta.unwrap_or(r.issue_zstd_delta);
    let dcz = find("sluice static", "dcz");
    let limit = (zstd_ref + DCZ_HEADER) as f64;
    let measured = dcz.and_then(|row| row.bytes).map(|b| b as f64);
    out.push(BoundCheck {
        what: format!(
            "dcz bytes ≤ zstd -19 -D ({}) + {DCZ_HEADER}",
            if r.zstd_program_delta.is_some() {
                "the zstd program, this run"
            } else {
                "the issue's figure: zstd program missing"
            }
        ),
        limit,
        measured,
        holds: measured.is_some_and(|m| m <= limit),
    });
    if r.old_version
        .split('.')
        .take(2)
        .eq(r.new_version.split('.').take(2))
    {
        let limit = r.br11_bytes as f64 / 10.0;
        let measured = find("sluice static", "dcb")
            .and_then(|row| row.bytes)
            .map(|b| b as f64);
        out.push(BoundCheck {
            what: "dcb bytes ≤ br-11 bytes / 10 (a patch release)".into(),
            limit,
            measured,
            holds: measured.is_some_and(|m| m <= limit),
        });
    }
    let br = find("sluice static", "br").and_then(|row| row.cpu_us_per_request);
    for coding in ["dcb", "dcz"] {
        let measured = find("sluice static", coding).and_then(|row| row.cpu_us_per_request);
        out.push(BoundCheck {
            what: format!("{coding} CPU µs/request ≤ a stored br hit's (sluice static, same run)"),
            limit: br.unwrap_or(0.0),
            measured,
            holds: matches!((measured, br), (Some(m), Some(b)) if m <= b),
        });
    }
    out
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `dictionaries.md`: a table per bundle, then the bounds.
pub fn markdown(report: &DictionaryReport) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Compression dictionaries (RFC 9842): real releases\n\n\
         Started {}, commit {}, {} run(s) per row (median by CPU), {CLIENTS} connections, \
         HTTP/1.1.\n",
        report.started_at,
        report.commit.as_deref().unwrap_or("unknown"),
        report.runs
    );
    for b in &report.bundles {
        let _ = writeln!(
            md,
            "## {} {} → {} (`{}`, {} B)\n\nbrotli 11 of the new release: {} B (issue: {}); \
             `zstd -19 -D old new`: {} (issue: {} B).\n",
            b.bundle,
            b.old_version,
            b.new_version,
            b.file,
            thousands(b.identity_bytes),
            thousands(b.br11_bytes),
            thousands(b.issue_br11),
            b.zstd_program_delta
                .map_or("zstd program missing".into(), |d| format!(
                    "{} B",
                    thousands(d)
                )),
            thousands(b.issue_zstd_delta),
        );
        md.push_str(
            "| server | coding | made | bytes / response | ÷ br-11 | CPU µs / request |\n\
             |---|---|---|---:|---:|---:|\n",
        );
        for row in &b.rows {
            let (bytes, ratio, cpu) = if row.problem.is_empty() {
                (
                    row.bytes.map_or("-".into(), thousands),
                    row.bytes.map_or("-".into(), |x| {
                        format!("{:.3}", x as f64 / b.br11_bytes.max(1) as f64)
                    }),
                    row.cpu_us_per_request
                        .map_or("-".into(), |c| format!("{c:.1}")),
                )
            } else {
                (row.problem.clone(), String::new(), String::new())
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {bytes} | {ratio} | {cpu} |",
                row.server, row.coding, row.how
            );
        }
        md.push_str("\n| bound | limit | measured | holds |\n|---|---:|---:|---|\n");
        for bound in &b.bounds {
            let _ = writeln!(
                md,
                "| {} | {:.1} | {} | {} |",
                bound.what,
                bound.limit,
                bound
                    .measured
                    .map_or("not measured".into(), |m| format!("{m:.1}")),
                if bound.holds { "yes" } else { "**NO**" }
            );
        }
        md.push('\n');
    }
    md
}
