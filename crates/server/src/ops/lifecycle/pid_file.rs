//! The pid file (`[server] pid_file`): `serve` writes its process id there and removes it at
//! exit; `sluice reload` reads it to find the process to send SIGHUP.

use std::io::Write;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A pid file this process wrote; removed when dropped (if it still names this process).
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// Write this process's id to `path`, replacing what is there. Written to a temporary file
    /// beside it and renamed, so a reader never sees a half-written number.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if let Ok(other) = read(path)
            && other != own_pid()
            && alive(other)
        {
            tracing::warn!(
                "pid file {}: process {other} is running and named there; replacing it with {}",
                path.display(),
                own_pid()
            );
        }
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        writeln!(temp, "{}", own_pid())?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(Self {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Another sluice started since with the same pid file owns it now; leave it.
        if read(&self.path).is_ok_and(|pid| pid == own_pid()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn own_pid() -> i32 {
    i32::try_from(std::process::id()).unwrap_or(i32::MAX)
}

/// The process id in the pid file at `path`.
pub fn read(path: &Path) -> Result<i32, String> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "no pid file at {}: is `sluice serve` running with this config?",
            path.display()
        ),
        _ => format!("reading the pid file {}: {e}", path.display()),
    })?;
    match text.trim().parse::<i32>() {
        // 0 and negative ids name process groups to kill(2), never one process.
        Ok(pid) if pid > 1 => Ok(pid),
        _ => Err(format!(
            "the pid file {} does not hold a process id (it has {:?})",
            path.display(),
            text.trim()
        )),
    }
}

fn alive(pid: i32) -> bool {
    // Signal 0 checks that the process exists (and may be signalled) without sending anything.
    kill(Pid::from_raw(pid), None).is_ok()
}

/// Send SIGHUP to the process named in the pid file at `path`; returns its id.
pub fn signal_reload(path: &Path) -> Result<i32, String> {
    let pid = read(path)?;
    match kill(Pid::from_raw(pid), Signal::SIGHUP) {
        Ok(()) => Ok(pid),
        Err(Errno::ESRCH) => Err(format!(
            "no process {pid} (named in {}): sluice is not running, or the pid file is stale",
            path.display()
        )),
        Err(Errno::EPERM) => Err(format!(
            "not allowed to signal process {pid} (named in {}): run as the user sluice runs as",
            path.display()
        )),
        Err(e) => Err(format!("signalling process {pid}: {e}")),
    }
}
