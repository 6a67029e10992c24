//! One upstream error never becomes an outage (issue 21, point 3): the only server of a group is
//! never taken out; when every server is out, panic routing tries the one out the longest; the
//! keep-alive race (a server closing an idle connection as a request goes out on it) is retried
//! once on a new connection and never counted as the server's failure, against scripted origins
//! and a real Node.js origin closing idle connections at its own timeout. (An app behind
//! `sluice reverse-proxy --to` killed and restarted under load: `crates/cli/tests/it/restart.rs`.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::hostile::upstreams::{Scripted, read_head, reset};
use crate::upstream_faults::{attempts, dead_address, proxy, quoted, sample};
use sluice_testkit::{Offer, client, external};

/// Answer every request on `stream` `200` with `body`, kept alive.
async fn answer_all(mut stream: tokio::net::TcpStream, body: &'static str) {
    while read_head(&mut stream).await.is_some() {
        let ok = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(ok.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn healthy(text: &str, server: SocketAddr) -> f64 {
    sample(
        text,
        "sluice_upstream_server_healthy",
        &[("server", server.to_string())],
    )
}

fn panic_picks(text: &str) -> f64 {
    sample(
        text,
        "sluice_upstream_panic_picks_total",
        &[("upstream", "backend".to_string())],
    )
}

fn retries(text: &str) -> f64 {
    sample(
        text,
        "sluice_upstream_retries_total",
        &[("upstream", "backend".to_string())],
    )
}

#[tokio::test]
async fn one_reset_never_takes_the_only_server_out() {
    let temp = tempfile::tempdir().unwrap();
    // The first connection is reset under its first request; every later one answers.
    let upstream = Scripted::start(|n, mut stream| async move {
        if n == 0 {
            let _ = read_head(&mut stream).await;
            reset(stream);
            return;
        }
        answer_all(stream, "ok").await;
    })
    .await;
    let server = proxy(temp.path(), &quoted(&[upstream.addr]), "").await;
    let http = client(Offer::Http1);
    let first = http.get(server.url("/a")).send().await.unwrap();
    assert_eq!(first.status(), 502, "nowhere else to go");
    // nginx ignores max_fails for the only server of a group: the next requests, on any URL,
    // go to it at once (they used to get `502 no server available` for fail_timeout, 10 s).
    for path in ["/a", "/b", "/c"] {
        let resp = http.get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(attempts(&text, upstream.addr, "reset"), 1.0, "{text}");
    assert_eq!(attempts(&text, upstream.addr, "ok"), 3.0, "{text}");
    assert_eq!(healthy(&text, upstream.addr), 1.0, "{text}");
    assert_eq!(panic_picks(&text), 0.0, "{text}");
}

#[tokio::test]
async fn with_every_server_out_the_next_request_goes_to_the_one_out_the_longest() {
    let temp = tempfile::tempdir().unwrap();
    let (a, b) = (dead_address(), dead_address());
    let server = proxy(temp.path(), &quoted(&[a, b]), "").await;
    let http = client(Offer::Http1);
    // Both refuse: the request tries a, then b (round robin's first ticket is a), and each
    // refusal takes its server out (max_fails 1, fail_timeout 10 s): a first, then b.
    let resp = http.get(server.url("/x")).send().await.unwrap();
    assert_eq!(resp.status(), 502);
    let text = crate::scrape_metrics(&server).await;
    assert_eq!((healthy(&text, a), healthy(&text, b)), (0.0, 0.0), "{text}");

    // Both come back on their ports.
    for (addr, name) in [(a, "a"), (b, "b")] {
        let listener = TcpListener::bind(addr).await.unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer_all(stream, name));
            }
        });
    }
    // Panic routing: the one out the longest, a, is tried instead of a 502 without a try.
    let resp = http.get(server.url("/x")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "a");
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(panic_picks(&text), 1.0, "{text}");
    // Its success ended its ejection: the next requests go to it without panic; b sits out
    // the rest of its fail_timeout.
    for _ in 0..4 {
        let resp = http.get(server.url("/y")).send().await.unwrap();
        assert_eq!(resp.text().await.unwrap(), "a");
    }
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(panic_picks(&text), 1.0, "{text}");
    assert_eq!((healthy(&text, a), healthy(&text, b)), (1.0, 0.0), "{text}");
}

/// A server whose every connection answers one request and then reads the next one and closes
/// without an answer: every reuse of a pooled connection meets the keep-alive race. Counts the
/// requests it dropped so.
async fn answers_once() -> (Scripted, Arc<AtomicUsize>) {
    let dropped = Arc::new(AtomicUsize::new(0));
    let count = dropped.clone();
    let scripted = Scripted::start(move |_, mut stream| {
        let count = count.clone();
        async move {
            if read_head(&mut stream).await.is_none() {
                return;
            }
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if stream.write_all(ok).await.is_err() {
                return;
            }
            if read_head(&mut stream).await.is_some() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
    .await;
    (scripted, dropped)
}

#[tokio::test]
async fn the_keep_alive_race_is_retried_on_a_new_connection_never_a_pooled_one() {
    let temp = tempfile::tempdir().unwrap();
    // Two servers, so passive health is on (max_fails 1): a race counted as a failure would
    // take a server out. Each round sends 8 requests at once, which leaves up to 8 idle
    // connections in the pools, every one dead to its server, then 4 one after the other: each
    // of those meets the race on a pooled connection, and a retry on the pool's next idle
    // connection would meet it again (and then fail: a 502), a retry on a new one cannot.
    let (one, dropped_one) = answers_once().await;
    let (two, dropped_two) = answers_once().await;
    let server = proxy(temp.path(), &quoted(&[one.addr, two.addr]), "").await;
    let http = client(Offer::Http1);
    let get = |path: String| {
        let http = http.clone();
        let url = server.url(&path);
        async move {
            let resp = http.get(url).send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    for round in 0..25 {
        let burst = (0..8).map(|i| get(format!("/race/{round}/{i}")));
        for (status, body) in futures_util::future::join_all(burst).await {
            assert_eq!((status, body.as_str()), (200, "ok"), "round {round}");
        }
        for i in 8..12 {
            let (status, body) = get(format!("/race/{round}/{i}")).await;
            assert_eq!(
                (status, body.as_str()),
                (200, "ok"),
                "round {round} request {i}"
            );
        }
    }
    let dropped = dropped_one.load(Ordering::SeqCst) + dropped_two.load(Ordering::SeqCst);
    let text = crate::scrape_metrics(&server).await;
    let races: f64 = [one.addr, two.addr]
        .iter()
        .map(|&s| attempts(&text, s, "keepalive_closed"))
        .sum();
    // The pools reuse connections as soon as hyper-util has put them back (in a task of its
    // own, so not every request finds one): 300 requests reuse some.
    assert!(dropped >= 1, "no request reused a connection: {text}");
    assert_eq!(races, dropped as f64, "each race counted once: {text}");
    assert_eq!(retries(&text), dropped as f64, "and retried once: {text}");
    for s in [one.addr, two.addr] {
        assert_eq!(attempts(&text, s, "reset"), 0.0, "not a failure: {text}");
        assert_eq!(healthy(&text, s), 1.0, "never taken out: {text}");
    }
    assert_eq!(panic_picks(&text), 0.0, "{text}");
}

/// A Node.js `http` server per port, each closing idle keep-alive connections after
/// `keep_alive` (Node's `server.keepAliveTimeout`, 5 s by default): the origin most apps behind
/// a proxy are. `None` (the test is skipped) without node.
struct NodeOrigins {
    child: std::process::Child,
    addrs: Vec<SocketAddr>,
}

impl NodeOrigins {
    fn start(servers: usize, keep_alive: Duration) -> Option<Self> {
        use std::io::BufRead;
        let node = external::require("node", "apt-get install nodejs")?;
        const SCRIPT: &str = r#"
            const http = require('http');
            const [servers, keepAlive] = process.argv.slice(1).map(Number);
            let listening = [];
            for (let i = 0; i < servers; i++) {
                const s = http.createServer((req, res) => res.end('ok'));
                s.keepAliveTimeout = keepAlive;
                s.listen(0, '127.0.0.1', () => {
                    listening.push(s.address().port);
                    if (listening.length === servers) console.log(listening.join(' '));
                });
            }
        "#;
        let mut child = std::process::Command::new(node)
            .args(["-e", SCRIPT])
            .arg(servers.to_string())
            .arg(keep_alive.as_millis().to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addrs = line
            .split_whitespace()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port.parse().unwrap())))
            .collect();
        Some(Self { child, addrs })
    }
}

impl Drop for NodeOrigins {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bursts of `per_burst` concurrent requests through sluice to two Node origins whose idle
/// timeout is `keep_alive`, the pause between bursts stepping from 2 % under to 2 % over it
/// (4.9 s to 5.1 s for Node's 5 s): some requests go out on pooled connections just as Node
/// closes them. Every one must succeed, and no server may be counted as failing.
async fn bursts_around_the_keep_alive_timeout(keep_alive: Duration, bursts: u32, per_burst: usize) {
    let Some(origins) = NodeOrigins::start(2, keep_alive) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let server = proxy(temp.path(), &quoted(&origins.addrs), "").await;
    let http = client(Offer::Http1);
    let mut failed = Vec::new();
    let started = Instant::now();
    for burst in 0..=bursts {
        if burst > 0 {
            // The load's shape, not a synchronisation: the pause whose end races Node's timer.
            let share = f64::from(burst - 1) / f64::from(bursts.max(2) - 1);
            tokio::time::sleep(keep_alive.mul_f64(0.98 + 0.04 * share)).await;
        }
        let requests = (0..per_burst).map(|i| {
            let http = http.clone();
            let url = server.url(&format!("/burst/{burst}/{i}"));
            async move {
                match http.get(url).send().await {
                    Ok(resp) => resp.status().as_u16(),
                    Err(_) => 0,
                }
            }
        });
        for (i, status) in futures_util::future::join_all(requests)
            .await
            .into_iter()
            .enumerate()
        {
            if status != 200 {
                failed.push(format!("burst {burst} request {i}: {status}"));
            }
        }
    }
    let text = crate::scrape_metrics(&server).await;
    let count = |outcome: &str| -> f64 {
        origins
            .addrs
            .iter()
            .map(|&s| attempts(&text, s, outcome))
            .sum()
    };
    let requests = (bursts as usize + 1) * per_burst;
    eprintln!(
        "keep-alive {keep_alive:?}: {requests} requests in {} bursts over {:.1?}: {} failed; \
         races retried on a new connection {}; attempts reset {}, connect_error {}; retries {}",
        bursts + 1,
        started.elapsed(),
        failed.len(),
        count("keepalive_closed"),
        count("reset"),
        count("connect_error"),
        retries(&text),
    );
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(count("ok"), requests as f64, "{text}");
    assert_eq!(count("reset") + count("connect_error"), 0.0, "{text}");
    for &s in &origins.addrs {
        assert_eq!(healthy(&text, s), 1.0, "{text}");
    }
}

#[tokio::test]
async fn node_origin_closing_idle_connections_at_1s_bursts_around_it_fail_nothing() {
    bursts_around_the_keep_alive_timeout(Duration::from_secs(1), 10, 16).await;
}

/// The acceptance's full size: Node's default 5 s, bursts 4.9 s to 5.1 s apart. Two minutes;
/// run by hand: `cargo test -p sluice --test it node_origin_closing -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "two minutes; the 1 s version runs in CI"]
async fn node_origin_closing_idle_connections_at_5s_bursts_around_it_fail_nothing() {
    bursts_around_the_keep_alive_timeout(Duration::from_secs(5), 20, 32).await;
}
