//! A fleet's shared pieces, with real servers started and stopped by the tests: the
//! `redis-server` fixture (Debian's; scripts/test installs it) and the fleet-wide rate limit.
//! The shared cache tier's tests are with the cache's (`cache/shared.rs`).

pub mod cluster;
mod rate_limit;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Upper bound for readiness; only reached when a test fails.
const FAILURE_BOUND: Duration = Duration::from_secs(30);

/// Held by every test of a fleet's shared pieces (here and in `cache/shared*.rs`) for its
/// whole run: they check latency bounds of a few tens of milliseconds (the lookup deadline)
/// while others hammer several instances at once for seconds; on a 2-core machine two of them
/// at a time starve each other past those bounds. Other suites still run beside them.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// A redis-server of its own on a free loopback port, killed when dropped.
pub struct Redis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Option<Redis> {
        sluice_testkit::external::require("redis-server", "apt-get install redis-server")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Self::spawn(port, &dir);
        Some(Redis { child, port, dir })
    }

    fn spawn(port: u16, dir: &tempfile::TempDir) -> Child {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
        child
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(self.port, &self.dir);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll until something accepts on `addr` (bounded; a readiness check, not a sleep).
fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + FAILURE_BOUND;
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server never listened on {addr}"
        );
        std::thread::sleep(Duration::from_millis(5)); // poll interval
    }
}
