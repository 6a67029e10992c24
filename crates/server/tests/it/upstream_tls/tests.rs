//! The TLS cases. Each test runs sluice in front of one or more rustls upstreams, one group per
//! case, routed by path prefix (`/NAME/...` goes to `[upstreams.NAME]`).

use std::sync::atomic::Ordering;

use sluice_testkit::{Offer, TestServer, client, start_toml_in};

use super::{Logs, Pki, eventually, upstream};
use crate::{metric, scrape_metrics};

/// sluice with an admin listener and, for each `(name, body)`, a group `[upstreams.NAME]` with
/// `body` and a route `/NAME/` to it. The PKI's files are in the config's directory.
async fn proxy(dir: &std::path::Path, groups: &[(&str, String)]) -> TestServer {
    let mut toml = String::from(
        "[log]\naccess = \"off\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n",
    );
    for (name, _) in groups {
        toml.push_str(&format!(
            "[[routes]]\npath_prefix = \"/{name}/\"\nproxy = {{ upstream = \"{name}\" }}\n"
        ));
    }
    for (name, body) in groups {
        toml.push_str(&format!("[upstreams.{name}]\n{body}\n"));
    }
    start_toml_in(dir, &toml).await
}

async fn get(server: &TestServer, path: &str) -> (u16, String) {
    let resp = client(Offer::Http1)
        .get(server.url(path))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

#[tokio::test]
async fn reached_with_its_ca_and_refused_without_it() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (addr, seen) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    let server = proxy(
        dir.path(),
        &[
            (
                "trusted",
                format!("servers = [\"https://{addr}\"]\ntls = {{ ca = \"ca.pem\" }}"),
            ),
            // The system's roots do not know the test CA.
            ("system", format!("servers = [\"https://{addr}\"]")),
        ],
    )
    .await;

    assert_eq!(
        get(&server, "/trusted/a").await,
        (200, "HTTP/1.1 /trusted/a".into())
    );
    let (status, _) = get(&server, "/system/a").await;
    assert_eq!(status, 502);
    assert_eq!(seen.paths.lock().unwrap().as_slice(), ["/trusted/a"]);

    let log = logs.text();
    assert!(
        log.contains("upstream TLS handshake failed") && log.contains("UnknownIssuer"),
        "the log names the verification error:\n{log}"
    );
    let text = scrape_metrics(&server).await;
    let series = |upstream: &str, outcome: &str| {
        format!(
            "sluice_upstream_requests_total{{upstream=\"{upstream}\",server=\"{addr}\",outcome=\"{outcome}\"}}"
        )
    };
    assert_eq!(metric(&text, &series("system", "tls_error")), 1.0, "{text}");
    assert_eq!(metric(&text, &series("system", "connect_error")), 0.0);
    assert_eq!(metric(&text, &series("trusted", "ok")), 1.0);
}

#[tokio::test]
async fn sni_is_the_host_or_server_name_and_never_an_ip() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (addr, seen) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    let port = addr.port();
    let server = proxy(
        dir.path(),
        &[
            (
                "by_ip",
                format!("servers = [\"https://127.0.0.1:{port}\"]\ntls = {{ ca = \"ca.pem\" }}"),
            ),
            (
                "by_name",
                format!("servers = [\"https://localhost:{port}\"]\ntls = {{ ca = \"ca.pem\" }}"),
            ),
            (
                "configured",
                format!(
                    "servers = [\"127.0.0.1:{port}\"]\ntls = {{ ca = \"ca.pem\", server_name = \"api.internal\" }}"
                ),
            ),
            (
                "wrong_name",
                format!(
                    "servers = [\"127.0.0.1:{port}\"]\ntls = {{ ca = \"ca.pem\", server_name = \"other.internal\" }}"
                ),
            ),
        ],
    )
    .await;
    // RFC 6066 §3: no SNI for an IP address; it is verified against the IP SAN instead.
    assert_eq!(get(&server, "/by_ip/").await.0, 200);
    assert_eq!(get(&server, "/by_name/").await.0, 200);
    assert_eq!(get(&server, "/configured/").await.0, 200);
    // The certificate does not name other.internal.
    assert_eq!(get(&server, "/wrong_name/").await.0, 502);
    // The wrong name fails on sluice's side of the handshake, so the upstream records none.
    let sni = seen.sni.lock().unwrap().clone();
    assert_eq!(
        sni,
        [None, Some("localhost".into()), Some("api.internal".into())]
    );
}

#[tokio::test]
async fn h2_is_negotiated_by_alpn_and_required_when_asked() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let both = pki.server_config(&[b"h2", b"http/1.1"], false);
    let (h2_addr, _) = upstream(Some(both), false).await;
    let (h1_addr, _) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    let server = proxy(
        dir.path(),
        &[
            (
                "h2",
                format!(
                    "servers = [\"https://{h2_addr}\"]\nhttp2 = true\ntls = {{ ca = \"ca.pem\" }}"
                ),
            ),
            (
                "h1",
                format!("servers = [\"https://{h2_addr}\"]\ntls = {{ ca = \"ca.pem\" }}"),
            ),
            (
                "h2_refused",
                format!(
                    "servers = [\"https://{h1_addr}\"]\nhttp2 = true\ntls = {{ ca = \"ca.pem\" }}"
                ),
            ),
        ],
    )
    .await;
    assert_eq!(get(&server, "/h2/x").await, (200, "HTTP/2.0 /h2/x".into()));
    // Without http2 only http/1.1 is offered, even to a server that would speak h2.
    assert_eq!(get(&server, "/h1/x").await, (200, "HTTP/1.1 /h1/x".into()));
    // An upstream that does not agree to h2 is not spoken h2 to (RFC 9113 §3.3).
    assert_eq!(get(&server, "/h2_refused/x").await.0, 502);
}

#[tokio::test]
async fn a_client_certificate_is_presented_when_configured() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (addr, seen) = upstream(Some(pki.server_config(&[b"http/1.1"], true)), false).await;
    let server = proxy(
        dir.path(),
        &[
            (
                "mtls",
                format!(
                    "servers = [\"https://{addr}\"]\ntls = {{ ca = \"ca.pem\", client_cert = \"client.pem\", client_key = \"client-key.pem\" }}"
                ),
            ),
            (
                "anonymous",
                format!("servers = [\"https://{addr}\"]\ntls = {{ ca = \"ca.pem\" }}"),
            ),
        ],
    )
    .await;
    assert_eq!(get(&server, "/mtls/a").await.0, 200);
    assert_eq!(get(&server, "/anonymous/a").await.0, 502);
    assert_eq!(seen.paths.lock().unwrap().as_slice(), ["/mtls/a"]);
}

#[tokio::test]
async fn new_connections_resume_the_groups_tls_session() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (addr, seen) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    // No idle connections kept: every request opens (and handshakes) a new connection.
    let body = format!(
        "servers = [\"https://{addr}\"]\ntls = {{ ca = \"ca.pem\" }}\nkeepalive = {{ max_idle = 0 }}"
    );
    let server = proxy(dir.path(), &[("api", body)]).await;
    for i in 0..4 {
        assert_eq!(get(&server, &format!("/api/{i}")).await.0, 200);
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 4);
    // The first handshake is full; the ones after it resume (TLS 1.3 tickets).
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn insecure_skip_verify_reaches_an_untrusted_server() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (addr, _) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    let body = format!("servers = [\"https://{addr}\"]\ntls = {{ insecure_skip_verify = true }}");
    let server = proxy(dir.path(), &[("lab", body)]).await;
    assert_eq!(
        get(&server, "/lab/a").await,
        (200, "HTTP/1.1 /lab/a".into())
    );
}

#[tokio::test]
async fn health_checks_use_tls_too() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let (good, good_seen) = upstream(Some(pki.server_config(&[b"http/1.1"], false)), false).await;
    let body = format!(
        "servers = [\"https://{good}\"]\ntls = {{ ca = \"ca.pem\" }}\nhealth_check = {{ path = \"/health\", interval = \"50ms\", timeout = \"40ms\" }}"
    );
    let _server = proxy(dir.path(), &[("api", body)]).await;
    eventually("a health check over TLS", || {
        good_seen
            .paths
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/health")
    })
    .await;
    assert!(
        !good_seen.sni.lock().unwrap().is_empty(),
        "checks went over TLS"
    );
}
