//! The real versioned bundles of the `dictionaries` group: two consecutive releases of three
//! popular libraries' minified builds, fetched with `npm pack` (the registry's own tarballs,
//! checked by npm against the registry's integrity hash) and kept under a cache directory
//! (`--npm-cache`, default `target/bench-npm`) so that a second run needs no network.
//!
//! The file is taken out of the tarball with the `tar` program (always on Debian): a tarball
//! reader crate would be one more dependency for one call.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// One library: its package, the two releases and the file measured.
#[derive(Debug, Clone, Copy)]
pub struct Bundle {
    /// Short name (the URL's first segment and the report's row).
    pub name: &'static str,
    pub package: &'static str,
    pub old: &'static str,
    pub new: &'static str,
    /// The file inside the package (under `package/` in the tarball).
    pub file: &'static str,
    /// A patch release (`x.y.z` → `x.y.z+1`): the `dcb` ≤ br-11 / 10 bound applies.
    pub patch: bool,
    /// What the issue measured with the `zstd` program (`-19 -D old new`) and brotli 11:
    /// shown beside this run's figures, never used as a bound when the program is present.
    pub issue_zstd_delta: u64,
    pub issue_br11: u64,
}

impl Bundle {
    /// The file's base name (`vue.global.prod.js`).
    pub fn base_name(&self) -> &'static str {
        self.file.rsplit('/').next().unwrap_or(self.file)
    }

    /// The URL path of a release on the lab's servers: `/vue/3.5.13/vue.global.prod.js`.
    pub fn path(&self, version: &str) -> String {
        format!("/{}/{version}/{}", self.name, self.base_name())
    }

    /// The tarball `npm pack` writes for `version`.
    pub fn tarball(&self, version: &str) -> String {
        format!("{}-{version}.tgz", self.package)
    }
}

/// vue 3.5.12 → 3.5.13, react-dom 18.2.0 → 18.3.1, jquery 3.7.0 → 3.7.1 (issue 22).
pub const BUNDLES: [Bundle; 3] = [
    Bundle {
        name: "vue",
        package: "vue",
        old: "3.5.12",
        new: "3.5.13",
        file: "dist/vue.global.prod.js",
        patch: true,
        issue_zstd_delta: 2_040,
        issue_br11: 51_424,
    },
    Bundle {
        name: "react-dom",
        package: "react-dom",
        old: "18.2.0",
        new: "18.3.1",
        file: "umd/react-dom.production.min.js",
        patch: false,
        issue_zstd_delta: 3_130,
        issue_br11: 37_180,
    },
    Bundle {
        name: "jquery",
        package: "jquery",
        old: "3.7.0",
        new: "3.7.1",
        file: "dist/jquery.min.js",
        patch: true,
        issue_zstd_delta: 308,
        issue_br11: 27_446,
    },
];

/// The two releases' bytes.
#[derive(Debug, Clone)]
pub struct Pair {
    pub bundle: Bundle,
    pub old: Bytes,
    pub new: Bytes,
}

/// The default cache of tarballs, relative to the directory the lab runs in (the workspace).
pub fn default_cache() -> PathBuf {
    PathBuf::from("target").join("bench-npm")
}

/// How long one `npm pack` may take (a registry that does not answer must not hang the lab).
const NPM_DEADLINE: Duration = Duration::from_secs(120);
/// Between polls of a running `npm pack`: a bounded wait for a process, not synchronisation.
const POLL: Duration = Duration::from_millis(50);

/// Every tarball the group needs is already in `cache` (a run needs no network).
pub fn all_cached(cache: &Path) -> bool {
    BUNDLES.iter().all(|b| {
        [b.old, b.new]
            .iter()
            .all(|v| cache.join(b.tarball(v)).is_file())
    })
}

/// The three pairs, fetching a tarball with `npm pack` only when it is not in `cache`. An
/// error says what is missing (npm, the network) so the group can be skipped with it.
pub fn load(cache: &Path) -> Result<Vec<Pair>, String> {
    std::fs::create_dir_all(cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    BUNDLES
        .iter()
        .map(|b| {
            Ok(Pair {
                bundle: *b,
                old: release(cache, b, b.old)?,
                new: release(cache, b, b.new)?,
            })
        })
        .collect()
}

fn release(cache: &Path, bundle: &Bundle, version: &str) -> Result<Bytes, String> {
    let tarball = cache.join(bundle.tarball(version));
    if !tarball.is_file() {
        npm_pack(cache, bundle.package, version)?;
    }
    extract(&tarball, bundle.file)
}

/// `npm pack PACKAGE@VERSION --pack-destination CACHE`, bounded in time. npm writes the
/// tarball under a temporary name first, so an interrupted fetch leaves no half tarball
/// behind under the final name.
fn npm_pack(cache: &Path, package: &str, version: &str) -> Result<(), String> {
    let spec = format!("{package}@{version}");
    let mut child = Command::new("npm")
        .args(["pack", &spec, "--silent", "--pack-destination"])
        .arg(cache)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("npm is not available ({e}); apt-get install npm"))?;
    let deadline = Instant::now() + NPM_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "npm pack {spec} did not finish within {NPM_DEADLINE:?} (no network?)"
                ));
            }
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => return Err(format!("waiting for npm pack {spec}: {e}")),
        }
    };
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            use std::io::Read as _;
            let _ = err.read_to_string(&mut stderr);
        }
        let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!(
            "npm pack {spec} failed ({status}; no network or registry?): {first}"
        ));
    }
    Ok(())
}

/// One file out of an npm tarball (`package/FILE`).
fn extract(tarball: &Path, file: &str) -> Result<Bytes, String> {
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(tarball)
        .arg(format!("package/{file}"))
        .output()
        .map_err(|e| format!("running tar: {e}"))?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(format!(
            "{} has no package/{file}: {}",
            tarball.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Bytes::from(out.stdout))
}
