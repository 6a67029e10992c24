//! Upstream faults (issue 11, item 6): scripted raw-TCP upstreams that refuse, black-hole, reset,
//! garble, truncate, stall or drop keep-alive connections. Each ends in the right client outcome
//! (a retry when safe, 502/504, or a response cut off and never passed off as complete), an
//! access log line and a metric. `docs/operations.md` ("What faults look like") lists them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::hostile::upstreams::{Scripted, read_head, reset};
use sluice_testkit::{Offer, TestServer, client, start_toml_in};

/// sluice in front of `servers` (TOML array items), JSON access log in `dir/access.log`, an
/// admin listener, short upstream timeouts; `extra` is appended to the route.
pub(crate) async fn proxy(dir: &std::path::Path, servers: &str, extra: &str) -> TestServer {
    start_toml_in(
        dir,
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [admin]
            address = "127.0.0.1:0"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            name = "app"
            proxy = {{ upstream = "backend" }}
            {extra}
            [caches.main]
            memory = "8MiB"
            [upstreams.backend]
            servers = [{servers}]
            [upstreams.backend.timeouts]
            connect = "500ms"
            response_header = "2s"
            idle = "500ms"
            "#
        ),
    )
    .await
}

/// `"a", "b"`: addresses as the items of a TOML array.
pub(crate) fn quoted(addrs: &[SocketAddr]) -> String {
    let items: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    items.join(", ")
}

/// The access log entry of the `n`-th request (from 1) for `uri`.
async fn log_entry(dir: &std::path::Path, uri: &str, n: usize) -> serde_json::Value {
    let path = dir.join("access.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let entries: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            // HTTP/2 requests log their absolute-form target.
            .filter(|e: &serde_json::Value| e["uri"].as_str().unwrap().ends_with(uri))
            .collect();
        if entries.len() >= n {
            return entries[n - 1].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no log line {n} for {uri}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // polling the writer thread's file
    }
}

/// The value of `name{...}` whose labels include every one of `labels` (0 when absent).
pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, String)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map_or(0.0, |l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

pub(crate) fn attempts(text: &str, server: SocketAddr, outcome: &str) -> f64 {
    sample(
        text,
        "sluice_upstream_requests_total",
        &[
            ("server", server.to_string()),
            ("outcome", outcome.to_string()),
        ],
    )
}

fn body_errors(text: &str, server: SocketAddr, outcome: &str) -> f64 {
    sample(
        text,
        "sluice_upstream_response_body_errors_total",
        &[
            ("server", server.to_string()),
            ("outcome", outcome.to_string()),
        ],
    )
}

/// An address nothing listens on.
pub(crate) fn dead_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A server that answers every request on a connection `200 ok` (kept alive).
async fn healthy() -> Scripted {
    Scripted::start(|_, mut stream| async move {
        while read_head(&mut stream).await.is_some() {
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if stream.write_all(ok).await.is_err() {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn connection_refused_fails_over_else_502() {
    let temp = tempfile::tempdir().unwrap();
    let dead = dead_address();
    let live = healthy().await;
    // Alone: 502 at once.
    let alone = proxy(temp.path(), &quoted(&[dead]), "").await;
    let resp = client(Offer::Http1)
        .get(alone.url("/alone"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let entry = log_entry(temp.path(), "/alone", 1).await;
    assert_eq!(entry["status"], 502);
    assert_eq!(entry["upstream_ms"], serde_json::Value::Null);
    let text = crate::scrape_metrics(&alone).await;
    assert_eq!(attempts(&text, dead, "connect_error"), 1.0);

    // With a live server beside it, a POST goes there too: nothing of it was sent.
    let temp = tempfile::tempdir().unwrap();
    let pair = proxy(temp.path(), &quoted(&[dead, live.addr]), "").await;
    let http = client(Offer::Http1);
    for _ in 0..4 {
        let resp = http.post(pair.url("/pair")).body("x").send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await.unwrap(), "ok");
    }
    assert_eq!(log_entry(temp.path(), "/pair", 4).await["status"], 200);
    let text = crate::scrape_metrics(&pair).await;
    assert!(attempts(&text, dead, "connect_error") >= 1.0, "{text}");
    assert!(sample(&text, "sluice_upstream_retries_total", &[]) >= 1.0);
}

/// A listening socket whose accept queue is full, so the kernel drops further SYNs and a
/// connect hangs as it would to a black-holed address (tests use loopback only, never a
/// non-routable address). Returns the address and what must stay alive to keep it full.
async fn black_hole() -> (SocketAddr, tokio::net::TcpListener, Vec<TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    // Backlog 0: Linux queues one connection that is never accepted, then drops SYNs.
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    loop {
        // A loopback connect completes in microseconds unless its SYN was dropped (the bound is
        // generous so a loaded machine is not mistaken for a full queue).
        match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => held.push(stream),
            Ok(Err(err)) => panic!("connect to the black hole failed: {err}"),
            Err(_) => break,
        }
        assert!(held.len() < 64, "the accept queue never filled");
    }
    assert!(!held.is_empty(), "not even one connection was queued");
    (addr, listener, held)
}

#[tokio::test]
async fn a_black_holed_connect_is_a_504_at_the_connect_timeout() {
    let temp = tempfile::tempdir().unwrap();
    let (hole, _listener, _held) = black_hole().await;
    let server = proxy(temp.path(), &quoted(&[hole]), "").await;
    let started = Instant::now();
    let resp = client(Offer::Http1)
        .get(server.url("/hole"))
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    // RFC 9110 §15.6.5: the gateway did not get a timely response from the upstream.
    assert_eq!(resp.status(), 504);
    assert!(took >= Duration::from_millis(500), "504 after {took:?}");
    assert!(took < Duration::from_secs(5), "504 after {took:?}");
    assert_eq!(log_entry(temp.path(), "/hole", 1).await["status"], 504);
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(attempts(&text, hole, "connect_error"), 1.0, "{text}");
}

/// A server that reads a request and answers `reply` then resets the connection.
async fn replies_then_resets(reply: &'static [u8]) -> Scripted {
    Scripted::start(move |_, mut stream| async move {
        if read_head(&mut stream).await.is_some() {
            let _ = stream.write_all(reply).await;
            let _ = stream.flush().await;
        }
        reset(stream);
    })
    .await
}

#[tokio::test]
async fn a_reset_mid_headers_is_a_502_and_a_get_goes_elsewhere() {
    let temp = tempfile::tempdir().unwrap();
    let resetting = replies_then_resets(b"HTTP/1.1 200 OK\r\nContent-Le").await;
    let server = proxy(temp.path(), &quoted(&[resetting.addr]), "").await;
    let resp = client(Offer::Http1)
        .get(server.url("/mid-head"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert_eq!(log_entry(temp.path(), "/mid-head", 1).await["status"], 502);
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(attempts(&text, resetting.addr, "reset"), 1.0, "{text}");

    // Nothing reached the client yet and GET is idempotent: the next server answers.
    let temp = tempfile::tempdir().unwrap();
    let live = healthy().await;
    let servers = format!(
        r#"{{ address = "{}", max_fails = 0 }}, "{}""#,
        resetting.addr, live.addr
    );
    let pair = proxy(temp.path(), &servers, "").await;
    let http = client(Offer::Http1);
    for _ in 0..4 {
        let resp = http.get(pair.url("/retried")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await.unwrap(), "ok");
    }
    let text = crate::scrape_metrics(&pair).await;
    assert!(attempts(&text, resetting.addr, "reset") >= 1.0, "{text}");
    assert!(sample(&text, "sluice_upstream_retries_total", &[]) >= 1.0);
}

#[tokio::test]
async fn a_garbage_status_line_is_a_502() {
    let temp = tempfile::tempdir().unwrap();
    let garbage = replies_then_resets(b"HTXP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok").await;
    let server = proxy(temp.path(), &quoted(&[garbage.addr]), "").await;
    let resp = client(Offer::Http1)
        .get(server.url("/garbage"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert!(!resp.text().await.unwrap().contains("ok"));
    assert_eq!(log_entry(temp.path(), "/garbage", 1).await["status"], 502);
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(attempts(&text, garbage.addr, "reset"), 1.0, "{text}");
}

/// Promises 100 000 bytes (by Content-Length, or chunked without the last chunk), sends 1 000,
/// then `end`s the connection: a reset, a FIN, or holding it open.
#[derive(Clone, Copy, Debug)]
enum End {
    Reset,
    Close,
    Stall,
}

async fn cut_short(chunked: bool, end: End) -> Scripted {
    Scripted::start(move |_, mut stream| async move {
        if read_head(&mut stream).await.is_none() {
            return;
        }
        let head: &[u8] = if chunked {
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n"
        } else {
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=60\r\nContent-Length: 100000\r\n\r\n"
        };
        let _ = stream.write_all(head).await;
        let _ = stream.write_all(&[b'x'; 1000]).await;
        let _ = stream.flush().await;
        match end {
            End::Reset => reset(stream),
            End::Close => drop(stream),
            End::Stall => {
                // Held until the proxy gives up on it (its idle timeout) and closes.
                let mut rest = Vec::new();
                let _ = stream.read_to_end(&mut rest).await;
            }
        }
    })
    .await
}

/// Fetch `path` with `offer`: the status, and the body or the error that cut it off.
async fn fetch(server: &TestServer, offer: Offer, path: &str) -> (u16, Result<usize, String>) {
    let resp = client(offer).get(server.url(path)).send().await.unwrap();
    let status = resp.status().as_u16();
    (
        status,
        resp.bytes()
            .await
            .map(|b| b.len())
            .map_err(|e| format!("{e:?}")),
    )
}

#[tokio::test]
async fn a_response_cut_short_upstream_is_cut_short_downstream_and_never_cached() {
    for (chunked, end) in [
        (false, End::Reset),
        (true, End::Reset),
        (false, End::Close),
        (true, End::Close),
        (false, End::Stall),
        (true, End::Stall),
    ] {
        let temp = tempfile::tempdir().unwrap();
        let upstream = cut_short(chunked, end).await;
        let server = proxy(
            temp.path(),
            &quoted(&[upstream.addr]),
            r#"cache = { zone = "main" }"#,
        )
        .await;
        let case = format!("chunked={chunked} {end:?}");
        // HTTP/1.1: the connection closes before the promised length or without the last
        // chunk (RFC 9112 §8); HTTP/2: the stream is reset (RFC 9113 §8.1). Either way the
        // client knows the response is incomplete. The second request must not be a cache hit.
        for (n, offer) in [(1, Offer::Http1), (2, Offer::Http2)] {
            let (status, body) = fetch(&server, offer, "/cut").await;
            assert_eq!(status, 200, "{case} {offer:?}");
            assert!(
                body.is_err(),
                "{case} {offer:?}: a cut-off body ended cleanly: {body:?}"
            );
            let entry = log_entry(temp.path(), "/cut", n).await;
            assert_eq!(entry["status"], 200, "{case}");
            assert_eq!(entry["complete"], false, "{case}: {entry}");
            assert_ne!(entry["cache"], "HIT", "{case}: {entry}");
        }
        assert_eq!(
            upstream.accepted(),
            2,
            "{case}: the second request was served from cache"
        );
        let text = crate::scrape_metrics(&server).await;
        let outcome = if matches!(end, End::Stall) {
            "timeout"
        } else {
            "reset"
        };
        assert_eq!(
            body_errors(&text, upstream.addr, outcome),
            2.0,
            "{case}\n{text}"
        );
        assert_eq!(
            sample(&text, "sluice_cache_stored_total", &[]),
            0.0,
            "{case}\n{text}"
        );
    }
}

#[tokio::test]
async fn a_stall_mid_response_is_cut_off_at_the_idle_timeout() {
    let temp = tempfile::tempdir().unwrap();
    let upstream = cut_short(false, End::Stall).await;
    let server = proxy(temp.path(), &quoted(&[upstream.addr]), "").await;
    let mut resp = client(Offer::Http1)
        .get(server.url("/stall"))
        .send()
        .await
        .unwrap();
    let mut received = 0;
    let started = Instant::now();
    let outcome = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => received += chunk.len(),
            other => break other,
        }
    };
    assert!(
        outcome.is_err(),
        "the stalled body ended cleanly: {outcome:?}"
    );
    assert_eq!(received, 1000);
    // idle = 500ms; the bound is only there to catch a hang.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(log_entry(temp.path(), "/stall", 1).await["complete"], false);
}

#[tokio::test]
async fn keep_alive_connections_closed_at_random_fail_no_get() {
    let temp = tempfile::tempdir().unwrap();
    // Connection n answers 1 to 3 requests (n % 3 + 1), then reads the next request and closes
    // without answering: the proxy's pooled connection died just as it was reused, the race
    // every keep-alive client meets (RFC 9112 §9.3.1).
    let upstream = Scripted::start(|n, mut stream| async move {
        for _ in 0..n % 3 + 1 {
            if read_head(&mut stream).await.is_none() {
                return;
            }
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if stream.write_all(ok).await.is_err() {
                return;
            }
        }
        let _ = read_head(&mut stream).await;
    })
    .await;
    // The retry is on a new connection to the same server, never on a pooled one.
    let server = proxy(temp.path(), &quoted(&[upstream.addr]), "").await;
    let http = client(Offer::Http1);
    for i in 0..200 {
        let resp = http.get(server.url("/ka")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "request {i}");
        assert_eq!(resp.text().await.unwrap(), "ok");
    }
    assert_eq!(log_entry(temp.path(), "/ka", 200).await["status"], 200);
    let text = crate::scrape_metrics(&server).await;
    // The lost attempts are counted as the race, not as resets, and retried once each.
    assert!(
        attempts(&text, upstream.addr, "keepalive_closed") >= 1.0,
        "{text}"
    );
    assert_eq!(attempts(&text, upstream.addr, "reset"), 0.0, "{text}");
    assert_eq!(attempts(&text, upstream.addr, "ok"), 200.0, "{text}");
    // Not a failure of the server: it stays in (max_fails = 1 by default).
    assert_eq!(
        sample(
            &text,
            "sluice_upstream_server_healthy",
            &[("server", upstream.addr.to_string())]
        ),
        1.0
    );
}

#[tokio::test]
async fn a_compressed_response_cut_short_upstream_is_not_finished_as_whole() {
    // The compressor must not close its stream (a valid gzip trailer, the last chunk) when the
    // upstream body breaks off: the client would take a truncated page for the whole one.
    for (chunked, end) in [(false, End::Reset), (true, End::Close), (false, End::Stall)] {
        let temp = tempfile::tempdir().unwrap();
        let upstream = cut_short(chunked, end).await;
        let server = proxy(temp.path(), &quoted(&[upstream.addr]), "compress = {}").await;
        let case = format!("chunked={chunked} {end:?}");
        for (n, offer) in [(1, Offer::Http1), (2, Offer::Http2)] {
            let resp = client(offer)
                .get(server.url("/gz"))
                .header("accept-encoding", "gzip")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{case}");
            assert_eq!(resp.headers()["content-encoding"], "gzip", "{case}");
            let body = resp.bytes().await;
            assert!(
                body.is_err(),
                "{case} {offer:?}: the compressed body ended cleanly"
            );
            let entry = log_entry(temp.path(), "/gz", n).await;
            assert_eq!(entry["complete"], false, "{case}: {entry}");
        }
    }
}
