//! The acceptance test of reload: 50 clients (HTTP/1.1 and HTTP/2, cleartext and TLS) and 10
//! HTTP/3 clients keep requesting while 20 reloads add and remove a route, change an upstream's
//! servers and rotate the certificate (over TCP and QUIC), and a bad config is sent in the
//! middle: zero failed requests.
//!
//! 15 s by default so the suite stays quick on 2 cores; `SLUICE_RELOAD_LOAD_SECS=60` runs the
//! full minute (docs/operations.md records a run). Each client paces itself (one request per
//! `PACE` at most) so the test measures correctness, not how much CPU it can take from the
//! tests running beside it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_testkit::http3::H3Client;
use sluice_testkit::{Offer, client, start_origin, start_toml_in, tls_client};
use tokio::time::Instant;

const CLIENTS: usize = 50;
/// HTTP/3 clients besides them, on the TLS listener's UDP side.
const H3_CLIENTS: usize = 10;
const RELOADS: u32 = 20;
/// Requests a client sends on one connection before it opens a new one (and so, on TLS, makes
/// a new handshake that sees the rotated certificate).
const REQUESTS_PER_CONNECTION: u32 = 25;
const PACE: Duration = Duration::from_millis(20);

fn duration() -> Duration {
    let secs = std::env::var("SLUICE_RELOAD_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    Duration::from_secs(secs)
}

/// Version `i` of the config: `/fixed` says `v{i}`, odd versions add the route `/extra`, and
/// the upstream's servers go round [a], [a, b], [b].
fn version(i: u32, a: std::net::SocketAddr, b: std::net::SocketAddr) -> String {
    let servers = match i % 3 {
        0 => format!("\"{a}\""),
        1 => format!("\"{a}\", \"{b}\""),
        _ => format!("\"{b}\""),
    };
    let extra = if i % 2 == 1 {
        "[[routes]]\nname = \"extra\"\npath = \"/extra\"\nrespond = { body = \"extra\" }\n"
    } else {
        ""
    };
    format!(
        r#"
[log]
access = "off"
[admin]
address = "127.0.0.1:0"
[[listeners]]
name = "plain"
address = "127.0.0.1:0"
[[listeners]]
name = "tls"
address = "127.0.0.1:0"
tls = {{ cert = "tls/cert.pem", key = "tls/key.pem" }}
protocols = ["http/1.1", "h2", "h3"]
{extra}
[[routes]]
name = "fixed"
path = "/fixed"
respond = {{ body = "v{i}" }}
[[routes]]
name = "hello"
proxy = {{ upstream = "backend" }}
[upstreams.backend]
servers = [{servers}]
"#
    )
}

/// Write certificate `n` (of two) as the listener's files; returns its DER leaf.
fn rotate(dir: &Path, certs: &[sluice_server::net::cert::DevCertificate; 2], n: usize) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    let cert = &certs[n % 2];
    sluice_server::net::cert::write_files(cert, &dir.join("tls")).unwrap();
    rustls_pki_types::CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    first_failures: std::sync::Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_failures.lock().unwrap();
        if first.len() < 10 {
            first.push(what);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_reloads_under_load_fail_no_request() {
    let run_for = duration();
    let a = start_origin(Some("a")).await;
    let b = start_origin(Some("b")).await;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().to_path_buf();
    let certs =
        ["one.test", "two.test"].map(|h| sluice_server::net::cert::generate(&[h.into()]).unwrap());
    rotate(&dir, &certs, 0);
    let server = Arc::new(start_toml_in(&dir, &version(0, a.addr, b.addr)).await);
    let (plain, tls) = (server.addr("plain"), server.addr("tls"));

    let tally = Arc::new(Tally::default());
    let deadline = Instant::now() + run_for;
    let mut clients = Vec::with_capacity(CLIENTS);
    for n in 0..CLIENTS {
        let tally = tally.clone();
        let (offer, base) = match n % 4 {
            0 => (Offer::Http1, format!("http://{plain}")),
            1 => (Offer::Http2, format!("http://{plain}")),
            2 => (Offer::Http1, format!("https://localhost:{}", tls.port())),
            _ => (Offer::Http2, format!("https://localhost:{}", tls.port())),
        };
        let is_tls = n % 4 >= 2;
        clients.push(tokio::spawn(async move {
            let mut sent = 0u32;
            let mut pace = tokio::time::interval(PACE);
            while Instant::now() < deadline {
                // A new client is a new connection (and TLS handshake).
                let http = if is_tls {
                    tls_client(offer)
                } else {
                    client(offer)
                };
                for _ in 0..REQUESTS_PER_CONNECTION {
                    pace.tick().await;
                    let path = if sent.is_multiple_of(2) {
                        "/hello"
                    } else {
                        "/fixed"
                    };
                    sent += 1;
                    match http.get(format!("{base}{path}")).send().await {
                        Ok(resp) => {
                            let status = resp.status();
                            let origin = resp.headers().get("x-origin").cloned();
                            match resp.text().await {
                                Ok(body) if status == 200 => {
                                    let fine = match path {
                                        "/fixed" => body.starts_with('v'),
                                        _ => origin.is_some() && !body.is_empty(),
                                    };
                                    if fine {
                                        tally.ok.fetch_add(1, Ordering::Relaxed);
                                    } else {
                                        tally.fail(format!("{path}: unexpected body {body:?}"));
                                    }
                                }
                                Ok(body) => tally.fail(format!("{path}: {status} {body:?}")),
                                Err(e) => tally.fail(format!("{path}: body: {e:?}")),
                            }
                        }
                        Err(e) => tally.fail(format!("{path} ({offer:?}, tls {is_tls}): {e:?}")),
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                }
            }
            sent
        }));
    }

    for _ in 0..H3_CLIENTS {
        let tally = tally.clone();
        clients.push(tokio::spawn(async move {
            let mut sent = 0u32;
            let mut pace = tokio::time::interval(PACE);
            while Instant::now() < deadline {
                // A new connection (and QUIC handshake) every REQUESTS_PER_CONNECTION.
                let h3 = match H3Client::try_connect(tls).await {
                    Ok(h3) => h3,
                    Err(e) => {
                        tally.fail(format!("h3 connect: {e}"));
                        continue;
                    }
                };
                for _ in 0..REQUESTS_PER_CONNECTION {
                    pace.tick().await;
                    let path = if sent.is_multiple_of(2) {
                        "/hello"
                    } else {
                        "/fixed"
                    };
                    sent += 1;
                    let req = http::Request::get(h3.url(path)).body(()).unwrap();
                    match h3.request(req, None, None).await {
                        Ok(resp) if resp.status() == 200 => {
                            let fine = match path {
                                "/fixed" => resp.body.starts_with(b"v"),
                                _ => resp.header("x-origin").is_some() && !resp.body.is_empty(),
                            };
                            if fine {
                                tally.ok.fetch_add(1, Ordering::Relaxed);
                            } else {
                                tally.fail(format!("h3 {path}: unexpected body {:?}", resp.body));
                            }
                        }
                        Ok(resp) => tally.fail(format!("h3 {path}: {}", resp.status())),
                        Err(e) => tally.fail(format!("h3 {path}: {e}")),
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                }
            }
            sent
        }));
    }

    // 20 reloads spread over the run, a bad config after the tenth.
    let start = Instant::now();
    let step = run_for / (RELOADS + 1);
    let http = client(Offer::Http1);
    for i in 1..=RELOADS {
        tokio::time::sleep_until(start + step * i).await;
        let leaf = rotate(&dir, &certs, i as usize);
        let summary = server
            .reload_toml(&version(i, a.addr, b.addr))
            .await
            .unwrap_or_else(|e| panic!("reload {i} refused: {e}"));
        assert_eq!(summary.upstreams.changed, ["backend"], "reload {i}");
        let extra = http
            .get(format!("http://{plain}/extra"))
            .send()
            .await
            .unwrap();
        let expected = if i % 2 == 1 { 200 } else { 404 };
        assert_eq!(extra.status(), expected, "/extra after reload {i}");
        let presented = crate::tls::peer_certificate(tls, "localhost").await;
        assert_eq!(presented, leaf, "the certificate after reload {i}");
        // The QUIC side's new handshakes too, on the UDP socket kept across the reload.
        let over_quic = H3Client::connect(tls).await.peer_certificate();
        assert_eq!(
            over_quic, leaf,
            "the certificate over QUIC after reload {i}"
        );
        if i == RELOADS / 2 {
            let refused = server
                .reload_toml("[[listeners]]\naddres = \"127.0.0.1:0\"\n")
                .await;
            assert!(refused.is_err(), "a bad config was accepted");
            // Put the good file back for the next reload's sake (the test writes it anyway).
            std::fs::write(dir.join("sluice.toml"), version(i, a.addr, b.addr)).unwrap();
        }
    }
    let mut sent = Vec::with_capacity(CLIENTS + H3_CLIENTS);
    for client in clients {
        sent.push(client.await.unwrap());
    }
    let (ok, failed) = (
        tally.ok.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    eprintln!(
        "reload under load: {}s, {CLIENTS} + {H3_CLIENTS} h3 clients, {RELOADS} reloads + 1 refused: {ok} requests ok, {failed} failed",
        run_for.as_secs()
    );
    assert_eq!(
        failed,
        0,
        "failed requests: {:?}",
        tally.first_failures.lock().unwrap()
    );
    assert!(sent.iter().all(|&n| n > 0), "every client sent requests");
    let server = Arc::into_inner(server).unwrap();
    assert!(server.shutdown(Duration::from_secs(10)).await);
}
