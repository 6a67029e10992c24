//! A server process started pinned (`taskset -c CPUS program args`: taskset execs, so the PID
//! is the server's own), its output in a log file, readiness by polling connect with a
//! deadline, and a clean stop (SIGTERM, then SIGKILL if it does not exit in time).

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a server may take to accept connections (the baseline computes 130 MB of
/// compressed stream first).
pub const START_DEADLINE: Duration = Duration::from_secs(60);
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Between readiness probes: a bounded poll, not a synchronisation sleep.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);

pub struct Process {
    child: Option<Child>,
    pid: u32,
    name: String,
    log: PathBuf,
}

/// Where a process accepts connections.
#[derive(Debug, Clone)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Process {
    /// Start `program args` pinned to `cpus`, stdout and stderr into `log`.
    pub fn spawn_pinned(
        name: &str,
        cpus: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Self, String> {
        Self::spawn_pinned_with_env(name, cpus, program, args, &[], log)
    }

    /// [`Process::spawn_pinned`] with extra environment variables (`GOMAXPROCS` for Caddy).
    pub fn spawn_pinned_with_env(
        name: &str,
        cpus: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        log: &Path,
    ) -> Result<Self, String> {
        let out = File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("opening {}: {e}", log.display()))?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpus)
            .arg(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                format!(
                    "starting {name} (taskset -c {cpus} {}): {e}",
                    program.display()
                )
            })?;
        Ok(Self {
            pid: child.id(),
            child: Some(child),
            name: name.into(),
            log: log.into(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Wait until `address` accepts a connection, or fail if the process exits or the
    /// deadline passes (with the end of its log, which says why).
    pub fn wait_ready(&mut self, address: &Address) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let up = match address {
                Address::Tcp(addr) => TcpStream::connect(addr).is_ok(),
                Address::Unix(path) => std::os::unix::net::UnixStream::connect(path).is_ok(),
            };
            if up {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "{} exited ({status}) before accepting connections: {}",
                    self.name,
                    self.log_tail()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not accept connections on {address:?} within {START_DEADLINE:?}: {}",
                    self.name,
                    self.log_tail()
                ));
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    }

    /// The last lines of the process's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        if tail.is_empty() {
            "(no output)".into()
        } else {
            tail.join(" | ")
        }
    }

    /// SIGTERM and wait for the exit; SIGKILL after `STOP_DEADLINE`.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = Pid::from_raw(i32::try_from(self.pid).unwrap_or(0));
        let _ = kill(pid, Signal::SIGTERM);
        let (done, wait) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = child.wait();
            let _ = done.send(());
        });
        if wait.recv_timeout(STOP_DEADLINE).is_err() {
            let _ = kill(pid, Signal::SIGKILL);
        }
        let _ = waiter.join();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// A free TCP port on 127.0.0.1 (bound and released: another process could take it in
/// between, which the readiness wait would then report).
/// A peer's binary: `name` on PATH (it answers `version_flag`), else Debian's `sbin` path, which
/// is outside a non-root user's PATH.
pub fn find_binary(name: &str, version_flag: &str, sbin: &str) -> Option<PathBuf> {
    let on_path = PathBuf::from(name);
    if Command::new(&on_path).arg(version_flag).output().is_ok() {
        return Some(on_path);
    }
    let sbin = PathBuf::from(sbin);
    sbin.exists().then_some(sbin)
}

pub fn free_port() -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener
        .local_addr()
        .map_err(|e| format!("finding a free port: {e}"))
}
