//! Listeners across a reload: sockets stay bound, new ones are bound, removed ones stop
//! accepting and drain; certificates are read again for new handshakes.

use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sluice_testkit::{Offer, client, start_toml_in};

use super::KeepAlive;

/// One TLS listener on the certificate in `tls/` of the server's directory, answering `ok`.
const TLS_CONFIG: &str = r#"
    [log]
    access = "off"
    [[listeners]]
    address = "127.0.0.1:0"
    tls = { cert = "tls/cert.pem", key = "tls/key.pem" }
    [[routes]]
    respond = { body = "ok" }
"#;

fn leaf_of(pem_file: &std::path::Path) -> Vec<u8> {
    let pem = std::fs::read(pem_file).unwrap();
    CertificateDer::pem_slice_iter(&pem)
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

#[tokio::test]
async fn a_reload_rotates_the_certificate_for_new_handshakes() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let write = |host: &str| {
        let cert = sluice_server::net::cert::generate(&[host.to_string()]).unwrap();
        sluice_server::net::cert::write_files(&cert, &dir.join("tls")).unwrap();
        leaf_of(&dir.join("tls/cert.pem"))
    };
    let first = write("first.test");
    let toml = TLS_CONFIG;
    let server = start_toml_in(dir, toml).await;
    let addr = server.first_addr();
    assert_eq!(
        crate::tls::peer_certificate(addr, "first.test").await,
        first
    );

    // Renewed in place, as certbot and friends do; nothing changes until the reload.
    let second = write("second.test");
    assert_ne!(first, second);
    assert_eq!(crate::tls::peer_certificate(addr, "x.test").await, first);
    server.reload_toml(toml).await.unwrap();
    assert_eq!(crate::tls::peer_certificate(addr, "x.test").await, second);
    assert_eq!(server.first_addr(), addr, "the socket was kept");
}

#[tokio::test]
async fn an_unreadable_certificate_refuses_the_reload_and_the_old_one_serves() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let cert = sluice_server::net::cert::generate(&["one.test".to_string()]).unwrap();
    sluice_server::net::cert::write_files(&cert, &dir.join("tls")).unwrap();
    let toml = TLS_CONFIG;
    let server = start_toml_in(dir, toml).await;
    let addr = server.first_addr();
    let good = leaf_of(&dir.join("tls/cert.pem"));
    std::fs::write(dir.join("tls/cert.pem"), "not a certificate").unwrap();
    let refused = server.reload_toml(toml).await.unwrap_err().to_string();
    assert!(refused.contains("listener `127.0.0.1:0`"), "{refused}");
    assert_eq!(crate::tls::peer_certificate(addr, "one.test").await, good);
}

#[tokio::test]
async fn listeners_added_are_bound_and_removed_ones_stop_accepting_and_drain() {
    let temp = tempfile::tempdir().unwrap();
    let one = r#"
        [log]
        access = "off"
        [[listeners]]
        name = "first"
        address = "127.0.0.1:0"
        [[routes]]
        respond = { body = "hi" }
    "#;
    let two = format!("{one}\n[[listeners]]\nname = \"second\"\naddress = \"127.0.0.1:0\"\n");
    let server = start_toml_in(temp.path(), one).await;
    let first = server.addr("first");

    let summary = server.reload_toml(&two).await.unwrap();
    assert_eq!(summary.listeners.added, ["second"]);
    assert_eq!(summary.listeners.kept, ["first"]);
    assert_eq!(
        server.addr("first"),
        first,
        "kept listeners keep their socket"
    );
    let second = server.addr("second");
    let http = client(Offer::Http1);
    let resp = http.get(format!("http://{second}/")).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "hi");

    // A connection open on the listener about to go: it finishes its exchange and is closed.
    let mut open = KeepAlive::connect(second).await;
    assert_eq!(open.get("/").await, (200, "hi".into()));
    let summary = server.reload_toml(one).await.unwrap();
    assert_eq!(summary.listeners.removed, ["second"]);
    assert!(server.running().address("second").is_none());
    wait_until_refused(second).await;
    // The first listener never stopped.
    let resp = http.get(format!("http://{first}/")).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "hi");
    // And shutdown does not wait on the removed listener: its connection was told to close.
    assert!(server.shutdown(Duration::from_secs(10)).await);
}

/// Poll until connecting to `addr` is refused (the accept loop drops its socket once told).
async fn wait_until_refused(addr: std::net::SocketAddr) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{addr} still accepts"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
