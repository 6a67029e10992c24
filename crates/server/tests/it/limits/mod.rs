//! Limits on what a client controls, each at its boundary (just below passes, just above gets
//! the status), and the connection timeouts. `docs/operations.md` ("Limits", "Timeouts") lists
//! them.

mod connections;
mod h2;
mod requests;
mod timeouts;
mod upstream;

use std::net::SocketAddr;
use std::time::Duration;

/// The admin page's value of `name` with exactly these labels (in any order), if present.
pub(crate) fn metric(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            if metric != name {
                return None;
            }
            let rest = rest.strip_suffix('}')?;
            let mut found: Vec<(&str, &str)> = rest
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k, v.trim_matches('"')))
                })
                .collect();
            let mut wanted = labels.to_vec();
            found.sort();
            wanted.sort();
            (found == wanted).then(|| value.parse().ok()).flatten()
        })
}

/// Poll the admin page until `name{labels}` reaches at least `at_least` (bounded).
pub(crate) async fn wait_for_metric(
    admin: SocketAddr,
    name: &str,
    labels: &[(&str, &str)],
    at_least: f64,
) {
    let http = sluice_testkit::client(sluice_testkit::Offer::Http1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let page = http
            .get(format!("http://{admin}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metric(&page, name, labels).is_some_and(|v| v >= at_least) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}{labels:?} never reached {at_least}:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Read one HTTP/1.1 response (head and a `Content-Length` body) from `stream`; `None` when the
/// server closed the connection first.
pub(crate) async fn read_response(stream: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if out.len() >= end + 4 + length {
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}
