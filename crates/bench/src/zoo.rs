//! The origin zoo: what stands behind the proxy (`--origin`). Besides sluice's own demo origin,
//! origins that write the way the apps people put behind proxies write: Go's net/http, Node.js's
//! `node:http`, and a Python ASGI app under uvicorn. Each serves the demo origin's endpoints with
//! the demo origin's bytes (the date JSON, `/hello`, the `/reqinfo` echo, the `/stream` chunked
//! JSON, the name POST), so the lab's correctness check holds for all of them, but each frames
//! and writes its responses in its own way (net/http: chunked for a large `Write` in 4 KiB
//! buffered pieces; Node.js: `Content-Length` and one `end`; uvicorn: what the ASGI app sends,
//! one `send` per chunk).
//!
//! The programs' sources are in `crates/bench/origins/<kind>/` and compiled into this binary,
//! so `sluice bench` can run anywhere: they are written into the run's work directory and
//! built (Go: `go build`, standard library only, nothing downloaded) or run from there. A
//! runtime that is not installed makes [`prepare`] fail with what to install; the runner then
//! reports that origin's rows as not supported and carries on.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::target::process::Address;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum OriginKind {
    /// sluice's demo origin (`sluice origin`): hyper, the whole body in one frame.
    Sluice,
    /// Go's net/http (`crates/bench/origins/go`).
    Go,
    /// Node.js `node:http` (`crates/bench/origins/node`).
    Node,
    /// A Python ASGI app under uvicorn (`crates/bench/origins/python`).
    Python,
}

impl OriginKind {
    pub fn name(self) -> &'static str {
        match self {
            OriginKind::Sluice => "sluice",
            OriginKind::Go => "go",
            OriginKind::Node => "node",
            OriginKind::Python => "python",
        }
    }
}

const GO_MOD: &str = include_str!("../origins/go/go.mod");
const GO_MAIN: &str = include_str!("../origins/go/main.go");
const NODE_MAIN: &str = include_str!("../origins/node/origin.mjs");
const PYTHON_MAIN: &str = include_str!("../origins/python/origin.py");

/// Where Go is when it is not on PATH (the official tarball's place).
const GO_FALLBACK: &str = "/usr/local/go/bin/go";

/// The environment variable naming the Python with uvicorn (a venv's `bin/python`); without
/// it, `target/bench-venv/bin/python` under the current directory.
pub const PYTHON_ENV: &str = "SLUICE_BENCH_PYTHON";
/// The default venv, relative to the directory the lab runs in (the workspace root).
pub const PYTHON_VENV: &str = "target/bench-venv";

/// A ready origin program: how to start one instance of it.
#[derive(Debug, Clone)]
pub struct OriginProgram {
    pub kind: OriginKind,
    pub program: PathBuf,
    /// Arguments before the instance's own (`--name N --listen A` or `--unix P`).
    pub leading_args: Vec<String>,
    /// Extra arguments after them.
    pub trailing_args: Vec<String>,
}

impl OriginProgram {
    /// sluice's demo origin: this binary's `origin` subcommand.
    pub fn sluice(exe: &Path) -> Self {
        Self {
            kind: OriginKind::Sluice,
            program: exe.to_path_buf(),
            leading_args: vec!["origin".into()],
            trailing_args: ["--workers", "1", "--log-level", "warn"]
                .map(String::from)
                .to_vec(),
        }
    }

    /// The arguments of the instance named `name` listening on `address`.
    pub fn args(&self, name: &str, address: &Address) -> Vec<String> {
        let mut args = self.leading_args.clone();
        args.extend(["--name".into(), name.into()]);
        match address {
            Address::Tcp(addr) => args.extend(["--listen".into(), addr.to_string()]),
            Address::Unix(path) => args.extend(["--unix".into(), path.display().to_string()]),
        }
        args.extend(self.trailing_args.iter().cloned());
        args
    }
}

/// Make `kind` ready to start under `work_dir` (`work_dir/origins/<kind>/`), or say what is
/// missing.
pub fn prepare(kind: OriginKind, exe: &Path, work_dir: &Path) -> Result<OriginProgram, String> {
    let dir = work_dir.join("origins").join(kind.name());
    let write = |name: &str, text: &str| {
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(name), text))
            .map_err(|e| format!("writing {}: {e}", dir.join(name).display()))
    };
    let dir = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
    match kind {
        OriginKind::Sluice => Ok(OriginProgram::sluice(exe)),
        OriginKind::Go => {
            let go = go_binary().ok_or(
                "Go is not installed (no `go` on PATH nor /usr/local/go/bin/go; see go.dev/dl)",
            )?;
            write("go.mod", GO_MOD)?;
            write("main.go", GO_MAIN)?;
            let binary = dir.join("origin-go");
            // Standard library only: nothing to download, and the toolchain never switches.
            let out = Command::new(&go)
                .args(["build", "-o"])
                .arg(&binary)
                .arg(".")
                .current_dir(&dir)
                .env("GOTOOLCHAIN", "local")
                .env("GOPROXY", "off")
                .env("GOFLAGS", "-mod=mod")
                .env("CGO_ENABLED", "0")
                .output()
                .map_err(|e| format!("running {} build: {e}", go.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "go build failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(OriginProgram {
                kind,
                program: binary,
                leading_args: Vec::new(),
                trailing_args: Vec::new(),
            })
        }
        OriginKind::Node => {
            let node = PathBuf::from("node");
            let version = Command::new(&node)
                .arg("--version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .ok_or("Node.js is not installed (apt-get install nodejs)")?;
            let _ = version;
            write("origin.mjs", NODE_MAIN)?;
            Ok(OriginProgram {
                kind,
                program: node,
                leading_args: vec![dir.join("origin.mjs").display().to_string()],
                trailing_args: Vec::new(),
            })
        }
        OriginKind::Python => {
            let python = python_binary().ok_or_else(|| {
                format!(
                    "no Python with uvicorn: set {PYTHON_ENV} to one, or make the venv with \
                     `python3 -m venv {PYTHON_VENV} && {PYTHON_VENV}/bin/pip install \
                     'uvicorn[standard]'`"
                )
            })?;
            write("origin.py", PYTHON_MAIN)?;
            Ok(OriginProgram {
                kind,
                program: python,
                leading_args: vec![dir.join("origin.py").display().to_string()],
                trailing_args: Vec::new(),
            })
        }
    }
}

/// `go` on PATH, else the official tarball's place.
pub fn go_binary() -> Option<PathBuf> {
    let runs = |p: &Path| {
        Command::new(p)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    [PathBuf::from("go"), PathBuf::from(GO_FALLBACK)]
        .into_iter()
        .find(|p| runs(p))
}

/// A Python that imports uvicorn: `$SLUICE_BENCH_PYTHON`, else the default venv's under the
/// current directory, else under the workspace this binary was built from.
pub fn python_binary() -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os(PYTHON_ENV) {
        Some(python) => vec![PathBuf::from(python)],
        None => vec![
            Path::new(PYTHON_VENV).join("bin/python"),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(PYTHON_VENV)
                .join("bin/python"),
        ],
    };
    candidates.into_iter().find_map(|candidate| {
        let candidate = std::path::absolute(&candidate).ok()?;
        Command::new(&candidate)
            .args(["-c", "import uvicorn"])
            .output()
            .is_ok_and(|o| o.status.success())
            .then_some(candidate)
    })
}

/// The runtime's version line for the report's tools (`go version`, `node --version`,
/// uvicorn's version).
pub fn version(kind: OriginKind) -> Option<String> {
    let (program, args): (PathBuf, Vec<&str>) = match kind {
        OriginKind::Sluice => return None,
        OriginKind::Go => (go_binary()?, vec!["version"]),
        OriginKind::Node => ("node".into(), vec!["--version"]),
        OriginKind::Python => (
            python_binary()?,
            vec![
                "-c",
                "import sys, uvicorn; print('uvicorn', uvicorn.__version__, 'python', \
                 sys.version.split()[0])",
            ],
        ),
    };
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then(|| match kind {
        OriginKind::Node => format!("node {text}"),
        _ => text,
    })
}
