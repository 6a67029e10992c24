//! `sluice check` and `sluice reverse-proxy` with TLS to upstreams.

use sluice_testkit::{Offer, client};

#[test]
fn check_warns_about_insecure_skip_verify_and_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(
        &path,
        "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[upstreams.lab]\nservers = [\"https://10.0.0.1\"]\ntls = { insecure_skip_verify = true }\n[[routes]]\nproxy = { upstream = \"lab\" }\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: the certificates of upstream `lab`'s servers are not verified"),
        "{stderr}"
    );
    assert!(stderr.contains("sluice.toml:5:"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
}

/// `sluice reverse-proxy --to https://...` reaches its server over TLS with the system's roots:
/// the test CA is not among them, so the request is a 502 and the log names the reason.
#[tokio::test]
async fn reverse_proxy_command_takes_https_servers() {
    use std::io::{BufRead, BufReader};
    // The upstream: sluice itself serving files over TLS with a certificate made at start-up,
    // whose issuer is in no system trust store.
    let root = tempfile::tempdir().unwrap();
    let (upstream, addr) = crate::cli::spawn_listening(&[
        "file-server",
        "--root",
        root.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--tls",
        "self-signed",
    ]);
    let to = format!("https://{addr}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reverse-proxy", "--listen", "127.0.0.1:0", "--to", &to])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |rx: &std::sync::mpsc::Receiver<String>, needle: &str| -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line with {needle}"));
            if line.contains(needle) {
                return line;
            }
        }
    };
    let line = wait_for(&rx, "listening on ");
    let listen = line.split("listening on ").nth(1).unwrap();
    let listen = listen
        .split_whitespace()
        .next()
        .unwrap()
        .trim_start_matches("http://");
    let resp = client(Offer::Http1)
        .get(format!("http://{listen}/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let rx = tokio::task::spawn_blocking(move || {
        let line = wait_for(&rx, "upstream TLS handshake failed");
        assert!(line.contains("UnknownIssuer"), "{line}");
    });
    rx.await.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(crate::cli::terminate(upstream));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "reverse-proxy",
            "--to",
            "https://a.test",
            "--to",
            "b.test:80",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("every server as https://"));
}
