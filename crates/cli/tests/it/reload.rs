//! Reload through the binary: `sluice serve` writes its pid file, SIGHUP and `sluice reload`
//! reload it, a bad file is refused with `sluice check`'s diagnostics in the log, and the pid
//! file goes at exit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sluice_testkit::{Offer, client};

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A running `sluice serve`, with every line it logs.
pub(crate) struct Serving {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    addr: std::net::SocketAddr,
}

impl Serving {
    fn start(config: &std::path::Path) -> Self {
        let mut command = sluice();
        command.args(["serve", "-c"]).arg(config);
        Self::spawn(command)
    }

    /// Run `command` (a `sluice serve`, perhaps another binary or as another user) and wait for
    /// its first listener's address in the log.
    pub(crate) fn spawn(mut command: Command) -> Self {
        let mut child = command
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut serving = Self {
            child: Some(child),
            lines,
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        let line = serving.wait_for("listening on http://");
        let addr = line.split("listening on http://").nth(1).unwrap();
        serving.addr = addr.split_whitespace().next().unwrap().parse().unwrap();
        serving
    }

    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// The first line (from now on) containing `text`, with the lines before it joined in.
    fn wait_for(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut seen = String::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return seen + &line,
                Ok(line) => seen = seen + &line + "\n",
                Err(_) => panic!("sluice did not log {text:?}; it logged:\n{seen}"),
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, and whether it exited successfully.
    pub(crate) fn stop(mut self) -> bool {
        let child = self.child.take().unwrap();
        crate::cli::terminate(child)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn config(body: &str) -> String {
    format!(
        "[server]\npid_file = \"sluice.pid\"\n[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nrespond = {{ body = \"{body}\" }}\n"
    )
}

async fn body(addr: std::net::SocketAddr) -> String {
    let resp = client(Offer::Http1)
        .get(format!("http://{addr}/"))
        .send()
        .await;
    resp.unwrap().text().await.unwrap()
}

fn reload_command(config: &std::path::Path) -> std::process::Output {
    sluice()
        .args(["reload", "-c"])
        .arg(config)
        .output()
        .unwrap()
}

#[tokio::test]
async fn sighup_and_sluice_reload_reload_the_file_and_a_bad_one_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("sluice.toml");
    let pid_file = temp.path().join("sluice.pid");
    std::fs::write(&path, config("one")).unwrap();
    let serving = Serving::start(&path);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, serving.pid());
    assert_eq!(body(serving.addr).await, "one");

    // SIGHUP.
    std::fs::write(&path, config("two")).unwrap();
    serving.signal("-HUP");
    let line = serving.wait_for("reloaded");
    assert!(
        line.contains("routes: 0 kept, 1 changed (route 1)"),
        "{line}"
    );
    assert_eq!(body(serving.addr).await, "two");

    // `sluice reload`.
    std::fs::write(&path, config("three")).unwrap();
    let out = reload_command(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.contains(&format!("sent SIGHUP to sluice (pid {pid})")),
        "{said}"
    );
    serving.wait_for("reloaded");
    assert_eq!(body(serving.addr).await, "three");

    // A bad file by SIGHUP: refused, logged as `sluice check` prints it, old config serves.
    let bad = config("four").replace("respond", "respnd");
    std::fs::write(&path, &bad).unwrap();
    let check = sluice().args(["check"]).arg(&path).output().unwrap();
    let diagnostics = String::from_utf8(check.stderr).unwrap();
    assert!(!check.status.success());
    serving.signal("-HUP");
    let line = serving.wait_for("reload refused");
    assert!(
        line.contains("the running config goes on serving"),
        "{line}"
    );
    // Every line `check` printed shows up in the log, in order.
    for expected in diagnostics.lines() {
        serving.wait_for(expected);
    }
    assert_eq!(body(serving.addr).await, "three");

    // `sluice reload` checks first: a bad file is not even sent.
    let out = reload_command(&path);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with(&diagnostics), "{stderr}");
    assert!(stderr.contains("not reloading"), "{stderr}");

    assert!(serving.stop(), "sluice exits cleanly after reloads");
    assert!(!pid_file.exists(), "the pid file is removed at exit");

    // No process any more: `sluice reload` says so (the pid file is gone).
    std::fs::write(&path, config("five")).unwrap();
    let out = reload_command(&path);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no pid file at"), "{stderr}");
    // A stale pid file: a process id nobody has.
    std::fs::write(&pid_file, "4194304\n").unwrap();
    let out = reload_command(&path);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no process 4194304"), "{stderr}");
}

#[test]
fn sluice_reload_without_a_pid_file_key_says_how_to_add_one() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("sluice.toml");
    std::fs::write(
        &path,
        config("x").replace("[server]\npid_file = \"sluice.pid\"\n", ""),
    )
    .unwrap();
    let out = reload_command(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("has no `[server] pid_file`"), "{stderr}");
}
