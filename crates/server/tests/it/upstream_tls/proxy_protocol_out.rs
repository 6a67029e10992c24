//! `send_proxy_protocol = true`: each upstream connection starts with a PROXY v2 header naming
//! the client's connection (before TLS on a TLS group); connections are reused only by the
//! same client connection; health checks send `LOCAL`.

use std::net::SocketAddr;

use http_body_util::BodyExt;
use sluice_testkit::{TestServer, start_toml_in};

use super::{Pki, Seen, eventually, upstream};

async fn proxy(dir: &std::path::Path, group: &str) -> TestServer {
    let toml = format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nproxy = {{ upstream = \"backend\" }}\n[upstreams.backend]\nsend_proxy_protocol = true\n{group}\n"
    );
    start_toml_in(dir, &toml).await
}

/// One client connection to `server` (HTTP/1.1, kept alive): its local address and a sender.
async fn connection(
    server: &TestServer,
) -> (SocketAddr, hyper::client::conn::http1::SendRequest<String>) {
    let stream = tokio::net::TcpStream::connect(server.first_addr())
        .await
        .unwrap();
    let local = stream.local_addr().unwrap();
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    (local, sender)
}

/// GET `path` on `sender`; the `x-proxy-source` the upstream saw.
async fn source_seen(
    sender: &mut hyper::client::conn::http1::SendRequest<String>,
    path: &str,
) -> String {
    let request = http::Request::get(path)
        .header("host", "app.test")
        .body(String::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let source = response.headers()["x-proxy-source"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.into_body().collect().await.unwrap();
    source
}

fn relayed(seen: &Seen) -> Vec<(SocketAddr, SocketAddr)> {
    seen.proxy
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .copied()
        .collect()
}

#[tokio::test]
async fn each_client_connection_gets_its_own_upstream_connection_and_header() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, seen) = upstream(None, true).await;
    let server = proxy(dir.path(), &format!("servers = [\"{addr}\"]")).await;
    let (first_addr, mut first) = connection(&server).await;
    let (second_addr, mut second) = connection(&server).await;
    // Interleaved: were connections shared between clients, the sources would mix.
    for _ in 0..10 {
        assert_eq!(source_seen(&mut first, "/a").await, first_addr.to_string());
        assert_eq!(
            source_seen(&mut second, "/b").await,
            second_addr.to_string()
        );
    }
    let headers = relayed(&seen);
    let sluice = server.first_addr();
    for client in [first_addr, second_addr] {
        assert!(headers.contains(&(client, sluice)), "{client}: {headers:?}");
    }
    assert!(
        headers
            .iter()
            .all(|h| *h == (first_addr, sluice) || *h == (second_addr, sluice)),
        "{headers:?}"
    );
    // Connections are kept and reused for their own client (bounded loosely: a connection goes
    // back to the pool a moment after its response, so a quick next request may open another).
    assert!(
        headers.len() <= 6,
        "20 requests opened {} connections",
        headers.len()
    );
}

#[tokio::test]
async fn the_header_comes_before_tls() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (addr, seen) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), true).await;
    let server = proxy(
        dir.path(),
        &format!("servers = [\"https://{addr}\"]\ntls = {{ ca = \"ca.pem\" }}"),
    )
    .await;
    let (local, mut sender) = connection(&server).await;
    assert_eq!(source_seen(&mut sender, "/tls").await, local.to_string());
    assert_eq!(relayed(&seen), [(local, server.first_addr())]);
    assert_eq!(seen.sni.lock().unwrap().len(), 1, "and TLS after it");
}

#[tokio::test]
async fn health_checks_send_local() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, seen) = upstream(None, true).await;
    let _server = proxy(
        dir.path(),
        &format!(
            "servers = [\"{addr}\"]\nhealth_check = {{ path = \"/health\", interval = \"50ms\", timeout = \"40ms\" }}"
        ),
    )
    .await;
    eventually("a health check", || {
        seen.paths.lock().unwrap().iter().any(|p| p == "/health")
    })
    .await;
    let headers = seen.proxy.lock().unwrap().clone();
    assert!(
        headers.iter().all(Option::is_none),
        "LOCAL only: {headers:?}"
    );
}
