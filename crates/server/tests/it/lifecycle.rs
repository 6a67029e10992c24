//! Lifecycle: graceful shutdown lets in-flight requests finish and stops accepting; the access
//! log records what was sent.

use std::time::Duration;

use sluice_testkit::{Offer, client, start_toml_in};

use crate::write_files;

#[tokio::test]
async fn shutdown_drains_a_request_in_flight() {
    let temp = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..32 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    write_files(temp.path(), &[("public/big.bin", &big)]);
    let server = crate::static_server(temp.path()).await;
    let addr = server.first_addr();

    let mut resp = client(Offer::Http1)
        .get(server.url("/big.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut received = resp.chunk().await.unwrap().unwrap().to_vec();

    // Shut down while most of the body is still to be sent.
    let shutdown = tokio::spawn(server.shutdown(Duration::from_secs(30)));
    while let Some(chunk) = resp.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
    }
    assert_eq!(received.len(), big.len());
    assert!(received == big, "body corrupted during shutdown");
    assert!(
        shutdown.await.unwrap(),
        "shutdown should finish once the request is done"
    );
    // No longer accepting.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn access_log_writes_json_and_combined_lines() {
    for (format, check) in [
        ("json", check_json as fn(&str)),
        ("combined", check_combined),
    ] {
        let temp = tempfile::tempdir().unwrap();
        write_files(temp.path(), &[("public/a.txt", b"0123456789")]);
        let server = start_toml_in(
            temp.path(),
            &format!(
                r#"
                [log]
                access = "access.log"
                format = "{format}"
                [[listeners]]
                address = "127.0.0.1:0"
                [[routes]]
                name = "files"
                static = {{ root = "public" }}
                "#
            ),
        )
        .await;
        let http = client(Offer::Http1);
        let ok = http
            .get(server.url("/a.txt"))
            .header("user-agent", "tester/1")
            .send()
            .await
            .unwrap();
        assert_eq!(ok.bytes().await.unwrap().len(), 10);
        let missing = http.get(server.url("/missing")).send().await.unwrap();
        assert_eq!(missing.status(), 404);
        let _ = missing.bytes().await.unwrap();

        let lines = wait_for_lines(&temp.path().join("access.log"), 2).await;
        check(&lines);
    }
}

fn check_json(lines: &str) {
    let entries: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ok = entries.iter().find(|e| e["uri"] == "/a.txt").unwrap();
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["bytes_sent"], 10);
    assert_eq!(ok["user_agent"], "tester/1");
    assert_eq!(ok["route"], "files");
    assert!(
        entries
            .iter()
            .any(|e| e["uri"] == "/missing" && e["status"] == 404)
    );
}

fn check_combined(lines: &str) {
    let ok = lines.lines().find(|l| l.contains("/a.txt")).unwrap();
    assert!(ok.starts_with("127.0.0.1 - - ["), "{ok}");
    assert!(
        ok.ends_with("\"GET /a.txt HTTP/1.1\" 200 10 \"-\" \"tester/1\""),
        "{ok}"
    );
}

/// Poll the log file until it has `n` lines (the writer thread flushes asynchronously).
pub(crate) async fn wait_for_lines(path: &std::path::Path, n: usize) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "access log has {text:?}, wanted {n} lines"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
