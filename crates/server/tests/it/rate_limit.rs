//! Per-client rate limits: a burst of concurrent requests from one client gets the bucket's
//! burst (plus what refills while it runs) and 429s with `Retry-After` for the rest, counted in
//! `sluice_rate_limited_total`; tokens come back at the rate; a header key keeps two clients
//! behind one address apart.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use sluice_testkit::{Offer, TestServer, client, start_toml};

const CONFIG: &str = r#"
[log]
access = "off"
[admin]
address = "127.0.0.1:0"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "limited"
path = "/limited"
respond = { body = "ok" }
rate_limit = { requests = 10, per = "1s", burst = 5 }

[[routes]]
name = "by-header"
path = "/by-header"
respond = { body = "ok" }
rate_limit = { requests = 1, per = "1h", burst = 2, key = "header:x-client" }
"#;

/// Status and `Retry-After` (in seconds) of one GET, with `x-client` when given.
async fn get(
    http: &reqwest::Client,
    server: &TestServer,
    path: &str,
    who: Option<&str>,
) -> (u16, Option<u64>) {
    let mut req = http.get(server.url(path));
    if let Some(who) = who {
        req = req.header("x-client", who);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let _ = resp.bytes().await.unwrap();
    (status, retry_after)
}

/// Tokens of a 10 r/s bucket that can come back in `elapsed`, rounded up.
fn refilled(elapsed: Duration) -> usize {
    (elapsed.as_millis() / 100) as usize + 1
}

#[tokio::test]
async fn a_burst_of_one_client_gets_the_burst_and_429s_with_retry_after() {
    let server = start_toml(CONFIG).await;
    let http = client(Offer::Http1);
    let start = Instant::now();
    let answers = join_all((0..100).map(|_| get(&http, &server, "/limited", None))).await;
    let elapsed = start.elapsed();
    let passed = answers.iter().filter(|(status, _)| *status == 200).count();
    let limited: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == 429)
        .collect();
    assert_eq!(passed + limited.len(), 100, "{answers:?}");
    // The bucket starts full: the burst passes; then only what refilled while the burst ran.
    assert!(
        (5..=5 + refilled(elapsed)).contains(&passed),
        "{passed} passed in {elapsed:?}"
    );
    for (_, retry_after) in &limited {
        assert!(retry_after.is_some_and(|s| s >= 1), "{retry_after:?}");
    }
    let text = crate::scrape_metrics(&server).await;
    let counted = crate::metric(&text, "sluice_rate_limited_total{route=\"limited\"}");
    assert_eq!(counted, limited.len() as f64);
    assert_eq!(
        crate::metric(
            &text,
            "sluice_requests_total{route=\"limited\",code=\"4xx\"}"
        ),
        limited.len() as f64
    );

    // Tokens come back at 10 r/s: empty the bucket, let 200ms pass (two tokens), count.
    while get(&http, &server, "/limited", None).await.0 == 200 {}
    let emptied = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut passed = 0;
    while get(&http, &server, "/limited", None).await.0 == 200 {
        passed += 1;
    }
    let elapsed = emptied.elapsed();
    assert!(
        (1..=refilled(elapsed)).contains(&passed),
        "{passed} passed {elapsed:?} after the bucket was emptied"
    );
}

#[tokio::test]
async fn a_header_key_keeps_two_clients_apart_and_the_ip_stands_in_without_it() {
    let server = start_toml(CONFIG).await;
    let http = client(Offer::Http1);
    for who in [Some("alice"), Some("bob"), None] {
        let mut statuses = Vec::new();
        for _ in 0..4 {
            statuses.push(get(&http, &server, "/by-header", who).await);
        }
        // One token an hour: the third waits about that long.
        let hour = Some(3600);
        assert_eq!(
            statuses,
            [(200, None), (200, None), (429, hour), (429, hour)],
            "{who:?}"
        );
    }
}
