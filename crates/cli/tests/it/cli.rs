//! The `sluice` binary: `check`, `cert`, `file-server`, `origin`, `serve`, and SIGTERM handling.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::write_files;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Start `sluice args...` and wait for it to print `listening on http(s)://ADDR` on stdout or
/// stderr.
pub(crate) fn spawn_listening(args: &[&str]) -> (Child, SocketAddr) {
    let mut command = sluice();
    command.args(args);
    spawn_listening_as(command)
}

/// [`spawn_listening`] of a command of its own (a shell that runs sluice, say).
fn spawn_listening_as(mut command: Command) -> (Child, SocketAddr) {
    let mut child = command
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let addr = addr.split_whitespace().next().unwrap_or_default();
                    let addr = addr
                        .trim_start_matches("http://")
                        .trim_start_matches("https://");
                    if let Ok(addr) = addr.parse::<SocketAddr>() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
    }
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("sluice did not report its address");
    (child, addr)
}

/// Send SIGTERM and return whether the process exited successfully.
pub(crate) fn terminate(mut child: Child) -> bool {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.success();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn check_reports_every_mistake_with_line_and_column() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[listeners]]\naddress = \"127.0.0.1:8080\"\nheader_read_timeout = \"10 parsecs\"\n\n[[routes]]\npaht = \"/\"\nproxy = { upstream = \"nowhere\" }\n",
    )
    .unwrap();
    let out = sluice().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.matches("error:").count(), 3, "{stderr}");
    assert!(
        stderr.contains("bad.toml:3:"),
        "duration error at line 3: {stderr}"
    );
    assert!(
        stderr.contains("bad.toml:6:1"),
        "unknown key at 6:1: {stderr}"
    );
    assert!(
        stderr.contains("`path`"),
        "hint for the misspelt key: {stderr}"
    );
    assert!(
        stderr.contains("bad.toml:7:"),
        "unknown upstream at line 7: {stderr}"
    );
}

/// `sluice check` on the fleet example: valid without connecting to Redis, and it says what
/// each shared setting does when Redis is down (docs/fleet.md).
#[test]
fn check_says_what_each_shared_setting_does_when_redis_is_down() {
    let fleet = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/fleet/sluice.toml"
    );
    let out = sluice().arg("check").arg(fleet).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("cache zone `api`: shared tier redis://127.0.0.1:6379")
            && stdout.contains("lookups are local misses"),
        "{stdout}"
    );
    assert!(
        stdout.contains("route `api`: rate limit shared")
            && stdout.contains("allows its share, 100 per 1s / fleet_size 2"),
        "{stdout}"
    );
}

/// A Redis Cluster URL: `sluice check` names the seed nodes and what a master that is down does.
#[test]
fn check_says_what_a_redis_cluster_url_means() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    let url = "redis+cluster://10.0.0.1:7000,10.0.0.2:7000";
    std::fs::write(
        &file,
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[caches.api.shared]\nredis = \"{url}\"\n\
             [[routes]]\nname = \"api\"\npath = \"/\"\nrespond = {{}}\n\
             rate_limit = {{ requests = 10, per = \"1s\", shared = \"{url}\" }}\n"
        ),
    )
    .unwrap();
    let out = sluice().arg("check").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("a Redis Cluster: seed nodes 10.0.0.1:7000, 10.0.0.2:7000")
            && stdout.contains("its own slots are misses")
            && stdout.contains("the keys in its slots fall back"),
        "{stdout}"
    );
}

#[test]
fn check_accepts_the_reference_config() {
    let reference = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sluice.toml");
    let out = sluice().arg("check").arg(reference).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
    // `-c FILE`, as `serve` takes it, works too.
    let out = sluice().args(["check", "-c", reference]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cert_writes_a_ca_and_a_certificate() {
    let temp = tempfile::tempdir().unwrap();
    let out = sluice()
        .args(["cert", "--host", "dev.test", "--host", "127.0.0.1", "--out"])
        .arg(temp.path().join("certs"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("curl --cacert"), "{stdout}");
    for file in ["ca.pem", "cert.pem", "key.pem"] {
        assert!(
            temp.path().join("certs").join(file).exists(),
            "{file} missing"
        );
    }
}

#[tokio::test]
async fn file_server_serves_and_exits_cleanly_on_sigterm() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("site/index.html", b"<p>quick</p>")]);
    let root = temp.path().join("site");
    let (child, addr) = spawn_listening(&[
        "file-server",
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]);
    let resp = sluice_testkit::client(sluice_testkit::Offer::Http1)
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "<p>quick</p>");
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn file_server_with_self_signed_tls_speaks_h2() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("index.html", b"tls")]);
    let (child, addr) = spawn_listening(&[
        "file-server",
        "--root",
        temp.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--tls",
        "self-signed",
    ]);
    let resp = sluice_testkit::tls_client(sluice_testkit::Offer::Both)
        .get(format!("https://localhost:{}/", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.text().await.unwrap(), "tls");
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn origin_command_serves_the_demo_apis() {
    let (child, addr) = spawn_listening(&["origin", "--listen", "127.0.0.1:0", "--name", "left"]);
    let resp = sluice_testkit::client(sluice_testkit::Offer::Http1)
        .get(format!("http://{addr}/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-origin"], "left");
    assert_eq!(resp.text().await.unwrap(), "Hello World!".repeat(10));
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn serve_runs_a_config_with_one_worker() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[server]\nworkers = 1\n[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nrespond = { body = \"one worker\" }\n",
    )
    .unwrap();
    let (child, addr) = spawn_listening(&["serve", "-c", config.to_str().unwrap()]);
    let resp = sluice_testkit::client(sluice_testkit::Offer::Http2)
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "one worker");
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

/// The `Max open files` soft and hard limits of process `pid`.
fn open_file_limits(pid: &str) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut fields = line.split_whitespace().skip(3);
    (fields.next().unwrap().into(), fields.next().unwrap().into())
}

/// Started with a soft limit of 256 open files, `serve` raises it to the hard limit (each
/// connection, and each file kept open for sendfile, is a descriptor).
#[tokio::test]
async fn serve_raises_the_open_file_limit_to_the_hard_one() {
    let (_, hard) = open_file_limits("self");
    assert!(
        hard.parse::<u64>().is_ok_and(|h| h > 256),
        "this test needs a hard open-file limit above 256, found {hard}"
    );
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nrespond = {}\n",
    )
    .unwrap();
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "ulimit -Sn 256 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_sluice"),
        "serve",
        "-c",
        config.to_str().unwrap(),
    ]);
    let (child, _) = spawn_listening_as(command);
    let (soft, child_hard) = open_file_limits(&child.id().to_string());
    assert_eq!(soft, child_hard, "soft limit not raised");
    assert_eq!(child_hard, hard);
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[test]
fn serve_with_a_bad_config_says_what_is_wrong() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("sluice.toml");
    std::fs::write(&config, "[[listeners]]\naddres = \"127.0.0.1:0\"\n").unwrap();
    let out = sluice()
        .args(["serve", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("sluice.toml:2:1"), "{stderr}");
}

#[tokio::test]
async fn demo_balances_two_origins_caches_the_date_api_and_serves_metrics() {
    let (child, addr) =
        spawn_listening(&["demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    let http = sluice_testkit::client(sluice_testkit::Offer::Http1);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        let resp = http
            .get(format!("http://{addr}/hello"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        seen.insert(resp.headers()["x-origin"].to_str().unwrap().to_string());
    }
    assert_eq!(seen.len(), 2, "round robin over both origins: {seen:?}");
    // The date API is cached (the origin allows 5 s): a miss, then hits from the one origin.
    let mut statuses = Vec::new();
    let mut origins = std::collections::HashSet::new();
    for _ in 0..3 {
        let resp = http
            .get(format!("http://{addr}/what-date-is-it"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        statuses.push(
            resp.headers()["x-cache-status"]
                .to_str()
                .unwrap()
                .to_string(),
        );
        origins.insert(resp.headers()["x-origin"].to_str().unwrap().to_string());
        let records: serde_json::Value =
            serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert_eq!(records.as_array().unwrap().len(), 10_000);
    }
    assert_eq!(statuses[0], "MISS");
    assert_eq!(statuses[1..], ["HIT", "HIT"], "{statuses:?}");
    assert_eq!(origins.len(), 1, "hits come from the stored response");
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn reverse_proxy_command_forwards_to_a_unix_socket() {
    let temp = tempfile::tempdir().unwrap();
    let sock = temp.path().join("app.sock");
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
        name: Some("u".into()),
    });
    tokio::spawn(origin.serve_unix(listener, std::future::pending()));
    let to = format!("unix:{}", sock.display());
    let (child, addr) = spawn_listening(&["reverse-proxy", "--listen", "127.0.0.1:0", "--to", &to]);
    let resp = sluice_testkit::client(sluice_testkit::Offer::Http2)
        .get(format!("http://{addr}/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-origin"], "u");
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn reverse_proxy_cache_flag_caches_what_the_origin_allows() {
    let origin = sluice_testkit::start_origin(Some("o")).await;
    let to = origin.addr.to_string();
    let (child, addr) = spawn_listening(&[
        "reverse-proxy",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &to,
        "--cache",
        "--compress",
    ]);
    let http = sluice_testkit::client(sluice_testkit::Offer::Http1);
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let resp = http
            .get(format!("http://{addr}/what-date-is-it"))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-encoding"], "gzip");
        statuses.push(
            resp.headers()["x-cache-status"]
                .to_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(statuses, ["MISS", "HIT"]);
    assert!(
        tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap()
    );
    let out = sluice()
        .args(["reverse-proxy", "--to", "127.0.0.1:1", "--cache", "lots"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--cache lots"), "{stderr}");
}

#[test]
fn reverse_proxy_rejects_a_bad_address() {
    let out = sluice()
        .args(["reverse-proxy", "--to", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected host:port"));
}

/// `sluice bench list | head`: a reader that went away ends the command quietly, by SIGPIPE as
/// every Unix tool, with no panic about a failed print. The pipe's read end is closed before
/// the command starts, so its first write already meets it.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = sluice()
        .args(["bench", "list"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE: {stderr}");
}
